"""Tensor maps for the tensor memory accelerator: a host API with the arguments of the
CUDA driver's ``cuTensorMapEncodeTiled`` (CUDA Driver API, "Tensor Map Object
Management") and this interpreter's 128-byte encoding of the map.

:func:`encode_tiled` validates its arguments as the driver documents and returns the
128 bytes (a ``numpy.uint8`` array), which a kernel takes as a ``.param .align 64 .b8
name[128]`` argument (pass the array) or reads from global memory (copy it there,
64-byte aligned). The PTX ISA leaves the object opaque; this encoding (little endian)::

    bytes  0-7    global address (u64)
    bytes  8-11   magic 0x50414D54 ("TMAP")
    byte   12     rank (1-5)            byte 13  data type (DTYPES index)
    byte   14     interleave (0-2)      byte 15  swizzle (0 none, 1 32 B, 2 64 B, 3 128 B)
    byte   16     L2 promotion (0-3)    byte 17  out-of-bounds fill (0 zeros, 1 NaN)
    byte   18     1 for a map built on the device from zeroed bytes (see below)
    bytes 20-39   global dims, 5 x u32 (dimension 0 first)
    bytes 40-71   global strides in bytes of dims 1-4, 4 x u64
    bytes 72-81   box dims, 5 x u16
    bytes 82-86   element strides, 5 x u8
    other bytes   zero

Dimension 0 is the innermost (contiguous) one, as in the driver API.

A kernel may also build a map itself with ``tensormap.replace`` (PTX ISA 9.7.9.28),
starting from a copy of a map or, on sm_90a, from 128 zeroed bytes (CUDA C++
Programming Guide, "Device-side Encoding and Modification of a Tensor Map"), as Triton's
``tl.make_tensor_descriptor`` does: the first replace on zeroed bytes marks them as a map
built on the device (byte 18), whose fields a kernel must all set before using it
(:func:`decode` names the one it did not set). Every map is checked when it is used as
:func:`encode_tiled` checks its arguments.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

__all__ = ["DTYPES", "SWIZZLES", "TensorMap", "TensorMapError", "encode_tiled", "decode",
           "MAGIC", "SIZE", "ISA_ELEMTYPES", "DEVICE_BUILT"]

SIZE = 128
MAGIC = 0x50414D54
#: the data types of CUtensorMapDataType, in the driver's order, and their sizes
DTYPES = (("uint8", 1), ("uint16", 2), ("uint32", 4), ("int32", 4), ("uint64", 8),
          ("int64", 8), ("float16", 2), ("float32", 4), ("float64", 8), ("bfloat16", 2),
          ("float32_ftz", 4), ("tfloat32", 4), ("tfloat32_ftz", 4))
_DTYPE_INDEX = {name: i for i, (name, _) in enumerate(DTYPES)}
#: tensormap.replace.tile.elemtype's new_val numbering (PTX ISA 9.7.9.28, table "Tensormap
#: new_val validity"), which differs from the driver's from 8 on; 13-15 (packed 4- and
#: 6-bit types) are not modelled
ISA_ELEMTYPES = ("uint8", "uint16", "uint32", "int32", "uint64", "int64", "float16",
                 "float32", "float32_ftz", "float64", "bfloat16", "tfloat32", "tfloat32_ftz")
#: byte 18: the map was built on the device from zeroed bytes
DEVICE_BUILT = 18
INTERLEAVES = ("none", "16B", "32B")
#: swizzle modes and their span in bytes
SWIZZLES = {"none": 0, "32B": 32, "64B": 64, "128B": 128}
_SWIZZLE_CODE = {"none": 0, "32B": 1, "64B": 2, "128B": 3}
L2_PROMOTIONS = ("none", "64B", "128B", "256B")
OOB_FILLS = ("none", "nan_request_zero_fma")


class TensorMapError(ValueError):
    """Arguments ``cuTensorMapEncodeTiled`` would refuse (CUDA_ERROR_INVALID_VALUE), or
    bytes that are not a tensor map of this encoding."""


@dataclass(frozen=True)
class TensorMap:
    """A decoded tensor map (see the module docstring)."""

    address: int
    rank: int
    dtype: str
    interleave: str
    swizzle: str
    l2_promotion: str
    oob_fill: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]    # bytes, of dims 1..rank-1
    box: tuple[int, ...]
    element_strides: tuple[int, ...]

    @property
    def element_size(self) -> int:
        return DTYPES[_DTYPE_INDEX[self.dtype]][1]

    @property
    def box_counts(self) -> tuple[int, ...]:
        """Elements per dimension of the box in shared memory (ceil(box / stride))."""
        return tuple(-(-b // e) for b, e in zip(self.box, self.element_strides))

    @property
    def box_bytes(self) -> int:
        return int(np.prod(self.box_counts)) * self.element_size


def _ints(name: str, v: Any, n: int) -> tuple[int, ...]:
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if not isinstance(v, (list, tuple)) or len(v) != n:
        raise TensorMapError(f"{name} must be a sequence of {n} integers, got {v!r}")
    out = []
    for i, x in enumerate(v):
        if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
            raise TensorMapError(f"{name}[{i}] must be an integer, got {x!r}")
        out.append(int(x))
    return tuple(out)


def _choice(name: str, v: Any, options: Sequence[str]) -> str:
    if v not in options:
        raise TensorMapError(f"{name} must be one of {list(options)}, got {v!r}")
    return v


def encode_tiled(dtype: str, rank: int, global_address: int, global_dim: Sequence[int],
                 global_strides: Sequence[int], box_dim: Sequence[int],
                 element_strides: Sequence[int], interleave: str = "none",
                 swizzle: str = "none", l2_promotion: str = "none",
                 oob_fill: str = "none") -> np.ndarray:
    """The 128-byte tensor map of a tiled tensor (``cuTensorMapEncodeTiled``).

    Args (as the driver's, dimension 0 innermost): ``dtype`` a name of :data:`DTYPES`;
    ``rank`` 1-5 (at least 3 with interleave); ``global_address`` 16-byte aligned (32
    with 32 B interleave); ``global_dim`` ``rank`` sizes in 1..2^32; ``global_strides``
    ``rank - 1`` byte strides of dims 1.., multiples of 16 (32 with 32 B interleave)
    below 2^40; ``box_dim`` ``rank`` sizes in 1..256 whose innermost takes a multiple of
    16 bytes (no interleave) and at most the swizzle span; ``element_strides`` 1..8;
    ``interleave`` "none"/"16B"/"32B"; ``swizzle`` "none"/"32B"/"64B"/"128B" (32 B with
    32 B interleave); ``l2_promotion`` "none"/"64B"/"128B"/"256B"; ``oob_fill``
    "none" (zeros) or "nan_request_zero_fma".

    Raises:
        TensorMapError naming the argument.
    """
    _choice("dtype", dtype, list(_DTYPE_INDEX))
    if isinstance(rank, bool) or not isinstance(rank, (int, np.integer)) or not 1 <= rank <= 5:
        raise TensorMapError(f"rank must be 1 to 5, got {rank!r}")
    rank = int(rank)
    _choice("interleave", interleave, INTERLEAVES)
    _choice("swizzle", swizzle, list(SWIZZLES))
    _choice("l2_promotion", l2_promotion, L2_PROMOTIONS)
    _choice("oob_fill", oob_fill, OOB_FILLS)
    if interleave != "none" and rank < 3:
        raise TensorMapError(f"rank must be at least 3 with interleave {interleave}")
    esize = DTYPES[_DTYPE_INDEX[dtype]][1]
    align = 32 if interleave == "32B" else 16
    if isinstance(global_address, bool) or not isinstance(global_address, (int, np.integer)) \
            or global_address <= 0 or global_address % align or global_address >= 1 << 64:
        raise TensorMapError(f"global_address must be a {align}-byte aligned address, got "
                             f"{global_address!r}")
    dims = _ints("global_dim", global_dim, rank)
    strides = _ints("global_strides", global_strides, rank - 1)
    box = _ints("box_dim", box_dim, rank)
    es = _ints("element_strides", element_strides, rank)
    for i, d in enumerate(dims):
        if not 1 <= d <= 1 << 32:
            raise TensorMapError(f"global_dim[{i}] = {d} outside 1..2^32")
    for i, s in enumerate(strides):
        # 0 is a multiple of 16: the driver takes it (a dimension every coordinate of
        # which addresses the same elements; CUTLASS 3 passes it for a batch of one)
        if s < 0 or s % align or s >= 1 << 40:
            raise TensorMapError(f"global_strides[{i}] = {s} must be a multiple of "
                                 f"{align} (0 included) below 2^40")
    for i, b in enumerate(box):
        if not 1 <= b <= 256:
            raise TensorMapError(f"box_dim[{i}] = {b} outside 1..256")
    for i, e in enumerate(es):
        if not 1 <= e <= 8:
            raise TensorMapError(f"element_strides[{i}] = {e} outside 1..8")
    inner = box[0] * esize
    if interleave == "none":
        if inner % 16:
            raise TensorMapError(f"box_dim[0] * element size = {inner} bytes is not a "
                                 "multiple of 16")
        span = SWIZZLES[swizzle]
        if span and inner > span:
            raise TensorMapError(f"box_dim[0] * element size = {inner} bytes exceeds the "
                                 f"{swizzle} swizzle span")
    elif interleave == "32B" and swizzle != "32B":
        raise TensorMapError("interleave 32B needs swizzle 32B")
    raw = bytearray(SIZE)
    struct.pack_into("<QI4B2B", raw, 0, int(global_address), MAGIC, rank, _DTYPE_INDEX[dtype],
                     INTERLEAVES.index(interleave), _SWIZZLE_CODE[swizzle],
                     L2_PROMOTIONS.index(l2_promotion), OOB_FILLS.index(oob_fill))
    struct.pack_into("<5I", raw, 20, *(list(d % (1 << 32) for d in dims) + [0] * (5 - rank)))
    struct.pack_into("<4Q", raw, 40, *(list(strides) + [0] * (4 - len(strides))))
    struct.pack_into("<5H", raw, 72, *(list(b % 256 for b in box) + [0] * (5 - rank)))
    struct.pack_into("<5B", raw, 82, *(list(es) + [0] * (5 - rank)))
    return np.frombuffer(bytes(raw), dtype=np.uint8).copy()


def decode(raw: bytes | np.ndarray) -> TensorMap:
    """The :class:`TensorMap` of 128 bytes made by :func:`encode_tiled` or built on the
    device with tensormap.replace, checked as :func:`encode_tiled` checks its arguments
    (TensorMapError if they are not a map, if a map built on the device left a field of
    its rank unset, or if a field is invalid)."""
    b = bytes(np.asarray(raw, dtype=np.uint8).tobytes()) if not isinstance(raw, bytes) else raw
    if len(b) != SIZE:
        raise TensorMapError(f"a tensor map has {SIZE} bytes, got {len(b)}")
    return _decode(b)


@lru_cache(maxsize=256)
def _decode(b: bytes) -> TensorMap:
    """:func:`decode` of 128 bytes, remembered: every TMA copy of a launch decodes (and
    checks) its map, most of them the same few maps."""
    addr, magic, rank, dt, il, sw, l2, oob = struct.unpack_from("<QI4B2B", b, 0)
    device = b[DEVICE_BUILT] == 1
    if magic != MAGIC:
        raise TensorMapError("the bytes are not a tensor map (made by encode_tiled or "
                             "tensormap.replace)")
    if device and rank == 0:
        raise TensorMapError("tensor map built on the device: its rank was never set")
    if not 1 <= rank <= 5 or dt >= len(DTYPES) or il > 2 or sw > 3 or l2 > 3 or oob > 1:
        raise TensorMapError("the bytes are not a tensor map (made by encode_tiled or "
                             "tensormap.replace)")
    dims = struct.unpack_from("<5I", b, 20)[:rank]
    strides = struct.unpack_from("<4Q", b, 40)[:rank - 1]
    box = struct.unpack_from("<5H", b, 72)[:rank]
    es = struct.unpack_from("<5B", b, 82)[:rank]
    if device:
        for name, vals in (("global_dim", dims), ("box_dim", box), ("element_stride", es)):
            unset = [i for i, v in enumerate(vals) if v == 0]
            if unset:
                raise TensorMapError(f"tensor map built on the device: {name} {unset[0]} "
                                     f"of its rank {rank} was never set")
        if addr == 0:
            raise TensorMapError("tensor map built on the device: its global_address was "
                                 "never set")
    swz = {v: k for k, v in _SWIZZLE_CODE.items()}[sw]
    tm = TensorMap(addr, rank, DTYPES[dt][0], INTERLEAVES[il], swz, L2_PROMOTIONS[l2],
                   OOB_FILLS[oob], tuple(d if d else 1 << 32 for d in dims),
                   tuple(strides), tuple(x if x else 256 for x in box), tuple(es))
    # checked as the host API checks: tensormap.replace may have changed any field
    try:
        encode_tiled(tm.dtype, tm.rank, tm.address, tm.dims, tm.strides, tm.box,
                     tm.element_strides, tm.interleave, tm.swizzle, tm.l2_promotion,
                     tm.oob_fill)
    except TensorMapError as e:
        raise TensorMapError(f"invalid tensor map: {e}") from None
    return tm
