"""Hypothesis profiles shared by the whole suite: the ones the package ships,
registered with one call (``oracle.strategies.PROFILES``):

- ``ci``: derandomized, no deadline, no example database, prints the reproduction blob;
  loaded automatically when the ``CI`` environment variable is set.
- ``dev``: the default for local runs.
- ``thorough``: many examples; select with ``HYPOTHESIS_PROFILE=thorough``.
"""
from __future__ import annotations

from oracle.strategies import register_profiles

register_profiles()
