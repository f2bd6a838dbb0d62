# Two commands do everything on a fresh Debian machine: `make lab` and `make test`.
VENV     := .venv
PY       := $(VENV)/bin/python
STAMP    := $(VENV)/.installed
SUDO     := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PORT     ?= 8888
# Jupyter refuses to run as root unless told; a fresh Debian machine often is root.
ROOT_OK  := $(if $(SUDO),,--allow-root)
# Tests must not litter the real $$HOME: Jupyter, IPython and Chromium write here instead.
TEST_HOME := $(CURDIR)/.test-home
TEST_ENV := HOME=$(TEST_HOME) JUPYTER_CONFIG_DIR=$(TEST_HOME)/jupyter-config \
            JUPYTER_DATA_DIR=$(TEST_HOME)/jupyter-data JUPYTER_RUNTIME_DIR=$(TEST_HOME)/jupyter-runtime \
            IPYTHONDIR=$(TEST_HOME)/ipython MPLCONFIGDIR=$(TEST_HOME)/mpl PYDEVD_DISABLE_FILE_VALIDATION=1

.PHONY: lab test lint venv debs-lab debs-test

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

venv: $(STAMP)

debs-lab:
	@command -v dot >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq graphviz; }

debs-test: debs-lab
	@command -v chromium >/dev/null || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium; }

lab: $(STAMP) debs-lab
	@echo "Open http://127.0.0.1:$(PORT)/lab/tree/01_sharding.ipynb (the URL with its token is printed below)"
	$(VENV)/bin/jupyter lab --no-browser --ip=127.0.0.1 --port=$(PORT) $(ROOT_OK) --notebook-dir=notebooks

lint: $(STAMP)
	$(VENV)/bin/ruff check gspmd_viz tests benchmarks
	$(VENV)/bin/ruff format --check gspmd_viz tests benchmarks

test: $(STAMP) debs-test lint
	rm -rf $(TEST_HOME) && mkdir -p $(TEST_HOME)
	$(TEST_ENV) $(VENV)/bin/pytest tests notebooks --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg
