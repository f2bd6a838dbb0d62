"""Test session set-up: 8 simulated CPU devices and a fixed hypothesis profile."""

import os

from hypothesis import HealthCheck, settings

import gspmd_viz as gv

# Must run before any jax computation in this process.
gv.use_cpu_devices(8)

# `make test` and CI replay exactly: derandomized examples, no deadline (2-core machines are
# noisy). pytest run by hand draws afresh (`dev`), which is how new failures are found.
settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile(
    "dev", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
