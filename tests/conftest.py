"""Hypothesis profiles shared by the whole suite.

- ``ci``: derandomized, no deadline, no example database, prints the reproduction blob;
  loaded automatically when the ``CI`` environment variable is set.
- ``dev``: the default for local runs.
- ``thorough``: many examples; select with ``HYPOTHESIS_PROFILE=thorough``.
"""
from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    max_examples=50,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev",
    deadline=None,
    max_examples=50,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    deadline=None,
    max_examples=2000,
    suppress_health_check=[HealthCheck.too_slow],
)

_default = "ci" if os.environ.get("CI") else "dev"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", _default))
