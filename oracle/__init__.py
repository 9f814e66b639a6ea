"""How other implementations use the oracle: golden-vector suites on disk, comparison
with typed tolerances, hypothesis strategies, conformance checks and the CLI."""
from oracle._version import __version__

__all__ = ["__version__"]
