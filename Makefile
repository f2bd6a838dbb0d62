# On a fresh Debian machine: `make lab`, `make test` and `make html` do everything.
VENV     := .venv
PY       := $(VENV)/bin/python
STAMP    := $(VENV)/.installed
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PORT     ?= 8888
# Jupyter refuses to run as root unless told; a fresh Debian machine often is root.
ROOT_OK  := $(if $(SUDO),,--allow-root)
# Tests must not litter the real $$HOME: Jupyter, IPython and Chromium write here instead.
# Property tests replay the derandomized `ci` profile (tests/conftest.py) here and in CI alike.
TEST_HOME := $(CURDIR)/.test-home
TEST_ENV := HOME=$(TEST_HOME) JUPYTER_CONFIG_DIR=$(TEST_HOME)/jupyter-config \
            JUPYTER_DATA_DIR=$(TEST_HOME)/jupyter-data JUPYTER_RUNTIME_DIR=$(TEST_HOME)/jupyter-runtime \
            IPYTHONDIR=$(TEST_HOME)/ipython MPLCONFIGDIR=$(TEST_HOME)/mpl PYDEVD_DISABLE_FILE_VALIDATION=1 \
            HYPOTHESIS_PROFILE=ci

# `make lab` serves a working copy of the lessons: autosave never rewrites the committed ones.
LAB_DIR  := lab-work
# JupyterLab reads overrides.json from the environment's app settings: no news prompt, no update
# check over the first lesson (binder/postBuild installs the same file).
LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings/overrides.json
TOKEN    := $(shell python3 -c 'import secrets; print(secrets.token_hex(16))')

.PHONY: lab test lint venv debs-lab debs-test html

# keras-hub (test-only: tests/library_models.py) goes in without its requirements: it requires
# tensorflow-text, and so all of tensorflow, for tokenizer preprocessing that its models never
# use. The requirements its models do use are in the dev extra (pyproject.toml).
KERAS_HUB := keras-hub==0.32.0

$(STAMP): pyproject.toml Makefile
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	$(PY) -m pip install --quiet --no-deps $(KERAS_HUB)
	touch $(STAMP)

venv: $(STAMP)

debs-lab:
	@command -v dot >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq graphviz; }

debs-test: debs-lab
	@command -v chromium >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium; }

$(LAB_SETTINGS): binder/overrides.json
	mkdir -p $(@D) && cp $< $@

lab: $(STAMP) $(LAB_SETTINGS) debs-lab
	@mkdir -p $(LAB_DIR) && for f in notebooks/*.ipynb; do \
		[ -e $(LAB_DIR)/$${f##*/} ] || cp $$f $(LAB_DIR)/; done  # new lessons join; edits stay
	@echo "Lessons: a working copy in $(LAB_DIR)/ (delete a file there to get the committed one back)"
	@echo "Open http://127.0.0.1:$(PORT)/lab/tree/01_sharding.ipynb?token=$(TOKEN)"
	$(VENV)/bin/jupyter lab --no-browser --ip=127.0.0.1 --port=$(PORT) $(ROOT_OK) \
		--ServerApp.port_retries=0 --IdentityProvider.token=$(TOKEN) --notebook-dir=$(LAB_DIR)

# Every lesson as a self-contained page (reads offline) in build/html, rebuilt each run.
html: $(STAMP)
	rm -rf build/html
	$(PY) -m gspmd_viz.viz.export notebooks build/html

lint: $(STAMP)
	$(VENV)/bin/ruff check gspmd_viz tests benchmarks notebooks/conftest.py
	$(VENV)/bin/ruff format --check gspmd_viz tests benchmarks notebooks/conftest.py

# Two workers, one test file or lesson each at a time (a lesson's cells share a kernel). The
# lessons, the longest files, go first so that the short ones fill in around them at the end.
# The slowest tests are listed at the end of the run, so a session sees where the time goes.
test: $(STAMP) debs-test lint
	rm -rf $(TEST_HOME) && mkdir -p $(TEST_HOME)
	$(TEST_ENV) $(VENV)/bin/pytest -n 2 --dist loadfile notebooks tests --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg --durations=20
