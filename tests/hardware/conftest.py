"""Fixtures of the hardware tests: the per-lane PTX harness (:mod:`simt_harness`)."""
from __future__ import annotations

import pytest
from simt_harness import run_lanes


@pytest.fixture(scope="session")
def simt_lanes():
    """:func:`simt_harness.run_lanes`: every lane loads its operand registers from global
    memory, executes one instruction and stores its results (modules cached by text)."""
    return run_lanes
