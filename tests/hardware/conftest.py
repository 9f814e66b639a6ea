"""Fixtures of the hardware tests: the PTX harness of :mod:`ptx_harness`."""
from __future__ import annotations

import pytest

from ptx_harness import run_lanes


@pytest.fixture
def simt_lanes():
    """The :func:`ptx_harness.run_lanes` harness."""
    return run_lanes
