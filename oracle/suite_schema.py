"""The vocabulary of golden-vector suites (:mod:`oracle.suite`): the schema name and
version, file names, dtypes and the id patterns a manifest may use, its size limits,
the parameter and rounding names of older suites, and the checks of the arguments of
the library calls (generate, merge, load, verify, check, select)."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping


SCHEMA = "gpu-numerics-oracle/suite"
SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
TEXT_FILE = "vectors.txt"

#: dtypes an array in a suite may have (no objects, no extension types)
DTYPES = frozenset({"bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16",
                    "int32", "int64", "float16", "float32", "float64"})
_SHA = re.compile(r"^[0-9a-f]{64}$")
#: a case id is one file-name-safe path component: no separator, no ``..``, nothing
#: after the last character (``\\Z``, not ``$``, which would accept a trailing newline)
CASE_ID = re.compile(r"^(?!.*\.\.)[a-z0-9][a-z0-9._=+-]{0,150}\Z")
ARRAY_NAME = re.compile(r"^[a-z][a-z0-9_]{0,40}\Z")

#: the largest file of a suite or results folder that is read (bytes); the manifest's
#: own limit is smaller. Checked against the file's size before anything is read.
MAX_ARRAY_BYTES = 256 * 2 ** 20
MAX_MANIFEST_BYTES = 64 * 2 ** 20
#: JSON nesting deeper than this is refused (the schema needs six levels)
MAX_JSON_DEPTH = 32


#: parameter names of suites written before the parameters had one vocabulary: old
#: name -> current name (a format is ``fmt`` in every case type). Read, never written.
OLD_PARAM_NAMES = {"format": "fmt", "elem": "fmt"}
#: rounding names of suites written before: old name -> canonical name
#: (``refimpl.rounding_modes``; E8M0's ``up``, ties toward +Inf, is ``nearest_away`` for
#: the unsigned format)
OLD_ROUNDING_NAMES = {"up": "nearest_away"}


def current_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """A case's parameters in the current vocabulary: a suite written before it stored
    ``format`` or ``elem`` for ``fmt`` and ``rounding: "up"`` for ``nearest_away``
    (:data:`OLD_PARAM_NAMES`, :data:`OLD_ROUNDING_NAMES`); current parameters come back
    unchanged (as a new dict).

    Raises:
        SuiteError: an old name beside its current one (``format`` and ``fmt``), which
            cannot be read as one parameter.
    """
    out: dict[str, Any] = {}
    for name, value in params.items():
        key = OLD_PARAM_NAMES.get(name, name)
        if key in out or (key != name and key in params):
            raise SuiteError(f"params hold both {name!r} and {key!r} (one parameter)")
        if key == "rounding" and isinstance(value, str):
            value = OLD_ROUNDING_NAMES.get(value, value)
        out[key] = value
    return out


def variant_pairs(variant: Any) -> list[tuple[str, str]]:
    """The (choice, option) pairs of a case's variant field: none for ``None``, one for
    ``{"choice", "option"}``, one per item for a list of such objects."""
    if variant is None:
        return []
    items = [variant] if isinstance(variant, Mapping) else list(variant)
    return [(str(v["choice"]), str(v["option"])) for v in items]


def valid_variant(v: Any) -> bool:
    """Whether ``v`` is a well-formed manifest ``variant``: None, one ``{"choice",
    "option"}`` mapping of strings, or a list of two or more such mappings with distinct
    choices."""
    def one(x: Any) -> bool:
        return (isinstance(x, dict) and set(x) == {"choice", "option"}
                and all(isinstance(y, str) for y in x.values()))
    if v is None or one(v):
        return True
    return (isinstance(v, list) and len(v) > 1 and all(one(x) for x in v)
            and len({x["choice"] for x in v}) == len(v))


class SuiteError(Exception):
    """A suite that cannot be trusted: the message names the file and the problem."""


class MissingFile(SuiteError):
    """A file named by a manifest or expected in a results folder does not exist."""


# ---------------------------------------------------------------------------------
# arguments of the library calls (generate, merge, load, verify, check, select)


def as_path(name: str, value: object) -> Path:
    """``value`` (a str or os.PathLike naming a text path) as a Path.

    Raises:
        TypeError: anything else, naming the argument."""
    if isinstance(value, (str, os.PathLike)):
        try:
            path = os.fspath(value)
        except TypeError:
            path = None
        if isinstance(path, str):
            return Path(path)
    raise TypeError(f"{name} must be a path (str or os.PathLike), got "
                    f"{type(value).__name__}")


def check_pattern(name: str, value: object) -> str | None:
    """A case-id pattern (str) or None; TypeError naming the argument otherwise."""
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"{name} must be a case-id pattern (str) or None, got "
                    f"{type(value).__name__}")


def check_variants(name: str, value: object) -> Mapping[str, str] | None:
    """A mapping of choice -> option (strings) or None; TypeError otherwise."""
    if value is None:
        return None
    if isinstance(value, Mapping) and all(isinstance(k, str) and isinstance(v, str)
                                          for k, v in value.items()):
        return value
    raise TypeError(f"{name} must map choice names to option names (str -> str), got "
                    f"{value!r}")
