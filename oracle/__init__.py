"""How other implementations use the oracle: golden-vector suites on disk, comparison
with typed tolerances, hypothesis strategies, conformance checks and the CLI.

Tour::

    import oracle
    oracle.generate("golden")                      # = python -m oracle generate --out golden
    assert oracle.verify("golden").ok              # schema, hashes, recomputation
    suite = oracle.load("golden")                  # sha256-checked, no pickles
    for case in suite:
        got = my_impl(case.operation, case.params, **case.inputs)
        case.assert_matches(got)                   # typed tolerance per output
    oracle.assert_matches(actual, expected, oracle.ulp(1, "bf16"))
    report = oracle.check("golden", "my_results")  # = python -m oracle check
    report = oracle.run("golden", {"formats.encode": my_encode})   # = python -m oracle run

``oracle.strategies`` (hypothesis strategies) and ``oracle.conformance`` (ready property
tests) use hypothesis (a runtime dependency, imported only when they are used), so they
are imported on their own.
"""
from oracle._version import __version__
from oracle.generation import SuiteWriteError, generate
from oracle.suite import Case, Suite, SuiteError, load
from oracle.tolerance import (
    AllClose,
    ExactTolerance,
    ExactNaNClass,
    ExactUnlessNaNScale,
    Interval,
    RelativeToNaive,
    Tolerance,
    Ulp,
    allclose,
    assert_matches,
    exact,
    exact_nan_class,
    exact_unless_nan_scale,
    interval,
    relative_to_naive,
    ulp,
)
from oracle.verification import check, verify
from oracle.runner import RunReport, run
from refimpl.deprecation import deprecated_names

__all__ = [
    "__version__", "generate", "verify", "check", "load", "Suite", "Case", "SuiteError", "assert_matches", "Tolerance",
    "ExactTolerance", "ExactNaNClass", "Ulp", "Interval", "AllClose", "RelativeToNaive", "exact",
    "exact_nan_class", "ulp", "interval", "allclose", "relative_to_naive",
    "ExactUnlessNaNScale", "exact_unless_nan_scale", "run", "RunReport", "SuiteWriteError",
]

__getattr__ = deprecated_names(__name__, {"Exact": ("ExactTolerance", ExactTolerance)})
