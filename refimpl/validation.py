"""Argument checks shared by every public entry point: flags, counts, indices and the
conversion of user numbers to floating point.

Special-value policy first: nothing here rounds. An integer that the working precision
cannot hold exactly (``2**53 + 1`` in float64, ``2**24 + 1`` in float32, the extremes of
int64 and uint64) is refused with the index of the first one, never rounded to a
neighbour; a boolean flag is a ``bool`` or ``numpy.bool_``, never a truthy string or
number (``causal="false"`` would otherwise turn masking on); a count or index is an int
or NumPy integer, never a bool or a float.

Wider floating-point inputs (``numpy.longdouble``, float128) are accepted only when
every value is a value of the working dtype, and are then converted to it; otherwise
the first value that would change is refused, as for a float64 value that is not a
float32 value where float32 values are required (:func:`exact_astype`,
:func:`as_float32`).

Size limits: an entry point whose allocations grow with an argument (an array's
element count, a pool's block count, a number of parts) checks the size against
:data:`MAX_ARRAY_BYTES` before it allocates anything (:func:`check_array_bytes`), so
that a huge or broadcast input is refused in milliseconds rather than after minutes
or a ``MemoryError``.

Errors: ``TypeError`` for a wrong type, ``ValueError`` for a wrong value; the message
names the argument, the first bad index and what was expected.
"""
from __future__ import annotations

import operator
from typing import Any, Optional

import numpy as np

__all__ = [
    "check_bool",
    "check_int",
    "check_positive_int",
    "check_positive_ints",
    "check_index",
    "check_axis",
    "as_float_array",
    "as_float64",
    "as_float",
    "as_float32",
    "exact_astype",
    "first_index",
    "MAX_ARRAY_BYTES",
    "check_array_bytes",
    "check_count",
    "check_elements",
]

#: the largest array, in bytes, that one entry point allocates for a result or a
#: working copy (4 GiB): larger requests are refused before any allocation
MAX_ARRAY_BYTES = 2**32

#: the working precisions an integer may be checked against, by dtype name
_PRECISIONS = {"float64": np.float64, "float32": np.float32, "float16": np.float16}


def _at(name: str, idx: tuple[int, ...]) -> str:
    """``name[i, j]``, or ``name`` alone for a scalar."""
    return f"{name}{list(idx)}" if idx else name


def first_index(bad: np.ndarray) -> tuple[int, ...]:
    """The multi-index (plain ints) of the first True element of ``bad`` in C order."""
    flat = int(np.argmax(bad.ravel()))
    return tuple(int(i) for i in np.unravel_index(flat, bad.shape)) if bad.shape else ()


def check_bool(name: str, value: object) -> bool:
    """``value`` as a plain bool.

    Raises:
        TypeError: ``value`` is not a ``bool`` or ``numpy.bool_`` (a string such as
            ``"false"``, an int, None).
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_int(name: str, value: object, *, minimum: Optional[int] = None,
              maximum: Optional[int] = None) -> int:
    """``value`` as a plain int, ``minimum <= value <= maximum`` (bounds optional).

    NumPy integers are accepted and converted; bools and floats (even integral ones) are
    not integers here.

    Raises:
        TypeError: not an int or NumPy integer.
        ValueError: outside the bounds.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {value!r}")
    v = operator.index(value)
    if minimum is not None and v < minimum:
        if minimum == 1:
            raise ValueError(f"{name} must be a positive int, got {v}")
        if minimum == 0:
            raise ValueError(f"{name} must be a non-negative int, got {v}")
        raise ValueError(f"{name} must be >= {minimum}, got {v}")
    if maximum is not None and v > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {v}")
    return v


def check_positive_int(name: str, value: object) -> int:
    """``value`` as a plain int >= 1 (see :func:`check_int`)."""
    return check_int(name, value, minimum=1)


def check_positive_ints(**values: object) -> tuple[int, ...]:
    """Each keyword's value as a plain int >= 1 (:func:`check_positive_int`, in the
    order given, the first bad one named): ``n, d = check_positive_ints(n=n, d=d)``."""
    return tuple(check_positive_int(name, v) for name, v in values.items())


def check_count(name: str, value: object, *, minimum: int = 0,
                maximum: Optional[int] = None) -> int:
    """A count (``num_blocks``, ``n``) as a plain int: an int or NumPy integer only,
    never a float (``0.5`` blocks is not a count), a bool or a string (see
    :func:`check_int`)."""
    return check_int(name, value, minimum=minimum, maximum=maximum)


def check_array_bytes(name: str, elements: int, itemsize: int, *,
                      what: str = "the result") -> int:
    """``elements`` (a plain int, possibly huge) when ``elements * itemsize`` bytes fit
    :data:`MAX_ARRAY_BYTES`; call it before allocating.

    Raises:
        ValueError: the allocation would exceed the limit (the message names ``name``,
            the size asked for and the limit).
    """
    n = int(elements)
    if n * int(itemsize) > MAX_ARRAY_BYTES:
        raise ValueError(
            f"{name}: {what} would take {n} elements x {itemsize} bytes = "
            f"{n * itemsize} bytes, over the limit of {MAX_ARRAY_BYTES} bytes "
            "(refimpl.validation.MAX_ARRAY_BYTES)"
        )
    return n


#: bytes per element of the working copies an elementwise entry point makes (float64)
WORKING_ITEMSIZE = 8


def check_elements(name: str, arr: np.ndarray) -> int:
    """``arr.size`` when a float64 working copy of ``arr`` fits :data:`MAX_ARRAY_BYTES`
    (at most 2^29 elements): the entry points that convert, copy or encode an input
    array call it first, so a broadcast view of 2^31 elements (which costs nothing
    itself) is refused before any allocation.

    Raises:
        ValueError: too many elements (naming ``name`` and the limit).
    """
    return check_array_bytes(name, arr.size, WORKING_ITEMSIZE,
                             what=f"the working copies of an array of shape {arr.shape}")


def check_index(name: str, value: object, size: int) -> int:
    """``value`` as an index into ``size`` items: ``0 <= value < size``. Negative
    indices are refused rather than counted from the end.

    Raises:
        TypeError: not an int or NumPy integer.
        ValueError: outside ``[0, size)``.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {value!r}")
    v = operator.index(value)
    if not 0 <= v < size:
        raise ValueError(f"{name} {v} out of range [0, {size})")
    return v


def check_axis(name: str, axis: object, ndim: int) -> int:
    """``axis`` of an array of ``ndim`` dimensions as a non-negative int (negative axes
    count from the end, as in NumPy).

    Raises:
        TypeError: not an int or NumPy integer.
        ValueError: outside ``[-ndim, ndim)``.
    """
    a = check_int(name, axis)
    if not -ndim <= a < ndim:
        raise ValueError(f"{name}: {a} is out of range for an array of {ndim} dimensions")
    return a % ndim


def _precision(precision: Any) -> type:
    dt = np.dtype(precision)
    if dt.name not in _PRECISIONS:
        raise ValueError(f"precision must be one of {sorted(_PRECISIONS)}, got {precision!r}")
    return _PRECISIONS[dt.name]


def _integers_as_float(arr: np.ndarray, name: str, prec: type) -> np.ndarray:
    """An int/uint array as float64 values, refusing any that ``prec`` cannot hold."""
    out = arr.astype(np.float64)
    if arr.dtype.itemsize >= 8:
        # float64 rounds above 2^53; compare in the integer type, never casting a value
        # at or beyond 2^63 (2^64 unsigned) back, which has no defined result
        limit = 2.0 ** (64 if arr.dtype.kind == "u" else 63)
        fits = out < limit
        back = np.where(fits, out, 0).astype(arr.dtype)
        ok = fits & (back == arr)
    else:
        ok = np.ones(arr.shape, dtype=bool)
    if prec is not np.float64:
        with np.errstate(over="ignore"):
            ok &= out.astype(prec).astype(np.float64) == out
    if not ok.all():
        idx = first_index(~ok)
        raise ValueError(
            f"{_at(name, idx)} = {int(arr[idx])} is an integer that "
            f"{np.dtype(prec).name} cannot represent exactly"
        )
    return out


def _exact_int(label: str, i: int, prec: type) -> float:
    """``float(i)`` when ``prec`` holds the integer ``i`` exactly."""
    try:
        f = float(i)
    except OverflowError:
        f = float("nan")
    # Python compares an int and a float exactly
    if not (f == i and (prec is np.float64 or float(prec(f)) == f)):
        raise ValueError(
            f"{label} = {i} is an integer that {np.dtype(prec).name} cannot represent exactly"
        )
    return f


#: elementwise "is a Python or NumPy integer (not a bool)" over an object array
_is_int = np.frompyfunc(lambda e: isinstance(e, (int, np.integer))
                        and not isinstance(e, (bool, np.bool_)), 1, 1)


def _objects_as_float(arr: np.ndarray, name: str, prec: type) -> np.ndarray:
    """An object array of Python/NumPy reals as float64, integers exactly or refused."""
    out = np.empty(arr.shape, dtype=np.float64)
    for idx in np.ndindex(arr.shape):
        e = arr[idx]
        if isinstance(e, (bool, np.bool_)) or not isinstance(
                e, (int, float, np.integer, np.floating)):
            raise ValueError(
                f"{_at(name, idx)} = {e!r} ({type(e).__name__}) is not a real number; "
                "expected ints or floats"
            )
        if isinstance(e, np.floating) and np.dtype(type(e)).itemsize > 8 and not (
                float(e) == e or np.isnan(e)):
            raise ValueError(f"{_at(name, idx)} = {e!r} ({type(e).__name__}) is not a "
                             "float64 value; round it first")
        if isinstance(e, (int, np.integer)):
            out[idx] = _exact_int(_at(name, idx), int(e), prec)
        else:
            out[idx] = float(e)
    return out


def exact_astype(arr: np.ndarray, dtype: Any, name: str = "x", *,
                 hint: str = "round it first, e.g. with refimpl.formats.round_to"
                 ) -> np.ndarray:
    """A real floating-point ``arr`` as ``dtype`` when no value changes.

    Special values: NaN stays NaN (any payload), infinities and signed zeros are kept; a
    finite value that ``dtype`` cannot hold exactly (rounded, or overflowing to Inf) is
    refused with the index of the first one. Narrower inputs are widened exactly; an
    array already of ``dtype`` is returned without a copy.

    Raises:
        ValueError: a value ``dtype`` cannot represent (naming the first index).
    """
    target = np.dtype(dtype)
    if arr.dtype == target:
        return arr
    with np.errstate(over="ignore", invalid="ignore"):
        out = arr.astype(target)
    if arr.dtype.itemsize > target.itemsize:
        with np.errstate(invalid="ignore"):
            bad = ~((out.astype(arr.dtype) == arr) | np.isnan(arr))
        if bad.any():
            idx = first_index(bad)
            raise ValueError(
                f"{name} holds a value that is not a {target.name} value at index "
                f"{idx}: {arr[idx]!r} ({hint})"
            )
    return out


def as_float32(x: Any, name: str = "x", *,
               hint: str = "round it first, e.g. with refimpl.formats.round_to"
               ) -> np.ndarray:
    """``x`` as float32 without changing any value: for the rules defined in float32.

    float16 is widened exactly; float64 and wider floats are accepted only when every
    value is a float32 value; integers (and object arrays of ints) only when float32
    holds each exactly. Bool, complex, string and other arrays are refused
    (:func:`as_float_array`).

    Raises:
        ValueError: a value float32 cannot hold or a dtype that is not real numbers,
            naming the argument and the first index.
    """
    wide = np.asarray(x)
    if wide.dtype.kind == "f" and wide.dtype.itemsize > 8:
        # longdouble: checked against float32 itself (the message names float32)
        check_elements(name, wide)
        return exact_astype(wide, np.float32, name, hint=hint)
    arr = as_float_array(x, name, precision=np.float32)
    return exact_astype(arr, np.float32, name, hint=hint)


def as_float_array(x: Any, name: str = "x", *, precision: Any = np.float64) -> np.ndarray:
    """``x`` as a float16/float32/float64 array without changing any value.

    Special values: floating-point arrays are returned as they are (NaN, Inf and every
    value kept; non-native byte order such as ``">f4"`` converted to native order, so
    callers may reinterpret the bits). Integer arrays (and Python int lists) become
    float64 when every value is exactly representable in ``precision``; an object
    array (Python ints beyond 64 bits, mixed numbers) is converted element by element
    under the same rule. A float wider than float64 (``numpy.longdouble``) becomes
    float64 when every value is a float64 value, and is refused otherwise. Bool,
    complex, string and other arrays are refused.

    Args:
        x: array-like of real numbers.
        name: the argument's name in error messages.
        precision: the working precision integers must fit exactly: ``np.float64``
            (default), ``np.float32`` or ``np.float16``.

    Returns:
        the array (floating inputs unchanged in dtype; integers as float64).

    Raises:
        ValueError: a dtype that is not real floating point or integer, an integer
            the working precision cannot hold, or a wide float that float64 cannot
            hold (naming the first index); more elements than :func:`check_elements`
            allows (checked before any conversion).
    """
    prec = _precision(precision)
    arr = np.asarray(x)
    check_elements(name, arr)
    kind = arr.dtype.kind
    if kind == "f":
        if arr.dtype.itemsize > 8:
            return exact_astype(arr, np.float64, name)
        if not arr.dtype.isnative:
            arr = arr.astype(arr.dtype.newbyteorder("="))
        if isinstance(x, (list, tuple)) and arr.size:
            # NumPy turns [2**63, -1] into float64, rounding the int: check the ints
            obj = np.empty(arr.shape, dtype=object)
            obj[...] = x
            ints = _is_int(obj).astype(bool)
            if ints.any():
                _objects_as_float(np.where(ints, obj, 0), name, prec)
        return arr
    if kind in "iu":
        return _integers_as_float(arr, name, prec)
    if kind == "O":
        return _objects_as_float(arr, name, prec)
    raise ValueError(f"{name} has dtype {arr.dtype}; expected a real floating-point array")


def as_float64(x: Any, name: str = "x") -> np.ndarray:
    """:func:`as_float_array` widened to float64 (no copy for a float64 array): for the
    functions that compute in float64."""
    return as_float_array(x, name).astype(np.float64, copy=False)


def as_float(name: str, value: object, *, precision: Any = np.float64) -> float:
    """A real scalar (``scale=``, ``atol=``) as a Python float, without rounding.

    Ints and NumPy integers must be exactly representable in ``precision``; floats and
    NumPy floats are taken as they are; bools, strings, None and arrays are refused.

    Raises:
        TypeError: not a real number.
        ValueError: an integer ``precision`` cannot hold exactly.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    if isinstance(value, (int, np.integer)):
        return _exact_int(name, int(value), _precision(precision))
    return float(value)
