"""Global-memory coalescing (burst segments) and shared-memory banks.

Two models of how one warp-level memory instruction is served, each in a plain version
that reads like its definition and a vectorised version used by the SIMT interpreter
(one call per executed warp instruction), plus the tile-load and traversal examples
built on them.

Global memory (CUDA C Programming Guide, "Device Memory Accesses" and compute
capability 6.0+ global memory; CUDA C++ Best Practices Guide, "Coalesced Access to
Global Memory"): an access is served
in aligned segments of ``segment_bytes`` (32-byte *sectors* by default; 128-byte
*lines*). The sectors of one instruction are the distinct ``addr // segment_bytes``
over every byte touched by an active lane. One warp instruction with at least one active
lane is one *request*.

Shared memory (CUDA C Programming Guide, "Shared Memory", compute capability 5.x and
later): 32 banks of 4 bytes, ``bank = (addr // 4) % 32``. Lanes that read the same
4-byte word are served together (broadcast); a bank that must serve ``k`` distinct words
needs ``k`` wavefronts.

The statistics are named after the Nsight Compute metrics they model
(``l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum`` and friends, see
:meth:`CoalesceReport.metrics` and :meth:`BankReport.metrics`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from refimpl.validation import check_positive_int, check_positive_ints

__all__ = [
    "CoalesceReport",
    "BankReport",
    "coalesce",
    "coalesce_warps",
    "coalesce_reference",
    "bank_conflicts",
    "bank_conflicts_reference",
    "TileLoad",
    "tile_load_segments",
    "padded_leading_dim",
    "Traversal",
    "traversal_sectors",
]

#: access widths of the PTX ld/st family (.b8 ... .v4.b32 / .v2.b64)
ACCESS_WIDTHS = (1, 2, 4, 8, 16)

# Sort key for inactive lanes: above every accepted address, with room for + width.
_SENTINEL = 2**62

_KINDS = ("ld", "st")

# Largest accepted address: keeps address + access width and key encodings in int64.
_MAX_ADDRESS = 2**60 - 1


# --------------------------------------------------------------------------- reports


@dataclass(frozen=True)
class CoalesceReport:
    """Global-memory traffic of one or more warp instructions.

    Attributes:
        requests: warp instructions with at least one active lane
            (``l1tex__t_requests_pipe_lsu_mem_global_op_{ld,st}.sum``).
        sectors: distinct ``segment_bytes`` segments touched, summed over requests
            (``l1tex__t_sectors_pipe_lsu_mem_global_op_{ld,st}.sum`` for 32-byte segments).
        lines: distinct ``line_bytes`` lines touched, summed over requests.
        bytes_requested: ``active lanes * access_bytes`` summed over requests; lanes that
            read the same bytes each count (what the threads asked for).
        bytes_touched: distinct bytes touched, summed over requests (at most
            ``bytes_requested``; smaller when lanes overlap).
        active_lanes: active lanes summed over requests (thread-level accesses).
        segment_bytes, line_bytes: the model's granularities.
    """

    requests: int
    sectors: int
    lines: int
    bytes_requested: int
    bytes_touched: int
    active_lanes: int
    segment_bytes: int = 32
    line_bytes: int = 128

    @property
    def bytes_transferred(self) -> int:
        """Bytes moved at segment granularity: ``segment_bytes * sectors``."""
        return self.segment_bytes * self.sectors

    @property
    def efficiency(self) -> float:
        """``bytes_requested / (segment_bytes * sectors)``.

        1.0 for a perfectly coalesced access; below 1 when whole segments are fetched
        for a few bytes; *above* 1 when several lanes read the same bytes (a broadcast
        is requested by every lane but fetched once). 0.0 when nothing was accessed
        (no NaN, so reports stay summable and printable).
        """
        if self.sectors == 0:
            return 0.0
        return self.bytes_requested / (self.segment_bytes * self.sectors)

    @property
    def sectors_per_request(self) -> float:
        """Sectors per request (ideal: 4 for 32-bit loads, 16 for 128-bit); 0.0 if none."""
        return self.sectors / self.requests if self.requests else 0.0

    def metrics(self, kind: str = "ld") -> dict[str, float]:
        """The report under Nsight Compute metric names; ``kind`` is "ld" or "st"."""
        if kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")
        base = f"pipe_lsu_mem_global_op_{kind}"
        return {
            f"l1tex__t_requests_{base}.sum": self.requests,
            f"l1tex__t_sectors_{base}.sum": self.sectors,
            f"l1tex__average_t_sectors_per_request_{base}.ratio": self.sectors_per_request,
            f"smsp__sass_thread_inst_executed_op_global_{kind}.sum": self.active_lanes,
        }

    def __add__(self, other: object) -> "CoalesceReport":
        if isinstance(other, int) and other == 0:  # lets sum() start from 0
            return self
        if not isinstance(other, CoalesceReport):
            return NotImplemented
        if (other.segment_bytes, other.line_bytes) != (self.segment_bytes, self.line_bytes):
            raise ValueError(
                "cannot add CoalesceReports with different segment/line sizes: "
                f"{(self.segment_bytes, self.line_bytes)} vs "
                f"{(other.segment_bytes, other.line_bytes)}"
            )
        return CoalesceReport(
            self.requests + other.requests,
            self.sectors + other.sectors,
            self.lines + other.lines,
            self.bytes_requested + other.bytes_requested,
            self.bytes_touched + other.bytes_touched,
            self.active_lanes + other.active_lanes,
            self.segment_bytes,
            self.line_bytes,
        )

    __radd__ = __add__


@dataclass(frozen=True)
class BankReport:
    """Shared-memory bank behaviour of one or more warp instructions.

    Model (CUDA C Programming Guide, shared memory for compute capability 5.x+; the
    half-/quarter-warp split of wide accesses as observed with Nsight Compute): the
    lanes of an instruction are served in *phases* of ``banks * bank_bytes`` bytes:
    32 lanes per phase for accesses of up to 4 bytes, 16 lanes (two half-warps) for
    8-byte accesses, 8 lanes (four quarter-warps) for 16-byte accesses; phase ``p`` holds
    lanes ``p*n .. p*n+n-1`` by position in the address array. Within a phase every
    lane touches the 4-byte words covering its bytes; lanes touching the same word share
    it (broadcast); the phase needs as many wavefronts as the largest number of distinct
    words any one bank must serve. A phase with no active lane costs nothing.

    Attributes:
        requests: instructions with at least one active lane.
        wavefronts: wavefronts summed over phases
            (``l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st}.sum``).
        ideal_wavefronts: phases with an active lane, the least any layout could need
            (1 for a 32-bit access by a full warp, 2 for 64-bit, 4 for 128-bit).
        conflicts: ``wavefronts - ideal_wavefronts``
            (``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum``); for
            accesses of up to 4 bytes this is ``wavefronts - 1``; 0 when no lane is
            active (then ``wavefronts`` is 0 too).
    """

    requests: int
    wavefronts: int
    ideal_wavefronts: int

    @property
    def conflicts(self) -> int:
        return self.wavefronts - self.ideal_wavefronts

    @property
    def ways(self) -> int:
        """Worst serialisation of a phase: 1 conflict-free, 32 for a 32-way conflict."""
        return 0 if self.ideal_wavefronts == 0 else -(-self.wavefronts // self.ideal_wavefronts)

    def metrics(self, kind: str = "ld") -> dict[str, int]:
        """The report under Nsight Compute metric names; ``kind`` is "ld" or "st"."""
        if kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}, got {kind!r}")
        return {
            f"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{kind}.sum": self.wavefronts,
            f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{kind}.sum": self.conflicts,
        }

    def __add__(self, other: object) -> "BankReport":
        if isinstance(other, int) and other == 0:
            return self
        if not isinstance(other, BankReport):
            return NotImplemented
        return BankReport(
            self.requests + other.requests,
            self.wavefronts + other.wavefronts,
            self.ideal_wavefronts + other.ideal_wavefronts,
        )

    __radd__ = __add__


# --------------------------------------------------------------------------- checks


def _lanes(addresses: object, active: object, ndim: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate and return (int64 addresses, bool mask) of the given rank."""
    a = np.asarray(addresses)
    if a.ndim != ndim:
        what = "one address per lane" if ndim == 1 else "shape (warps, lanes)"
        raise ValueError(f"addresses must be {ndim}-D ({what}), got shape {a.shape}")
    if a.dtype.kind not in "iu":
        if a.size == 0:
            a = a.astype(np.int64)
        else:
            raise TypeError(f"addresses must be integers, got dtype {a.dtype}")
    a = a.astype(np.int64, copy=False)  # uint64 beyond 2**63 wraps negative: refused
    if active is None:
        m = np.ones(a.shape, dtype=bool)
    else:
        m = np.asarray(active)
        if m.dtype != np.bool_:
            raise TypeError(f"active must be a bool mask, got dtype {m.dtype}")
        if m.shape != a.shape:
            raise ValueError(f"active has shape {m.shape}, addresses have shape {a.shape}")
    # inactive lanes may hold anything; only active addresses are checked
    if a.size and (int(a.min()) < 0 or int(a.max()) > _MAX_ADDRESS):
        bad = np.flatnonzero(((a < 0) | (a > _MAX_ADDRESS)).ravel() & m.ravel())
        if bad.size:
            idx = np.unravel_index(int(bad[0]), a.shape)
            lane = idx[0] if len(idx) == 1 else idx
            raise ValueError(
                f"addresses must be in [0, 2**60); lane {lane} has {int(a[idx])}"
            )
    return a, m


def _active_sorted(addresses: object, active: object) -> np.ndarray:
    """Sorted int64 addresses of the active lanes of one warp, validated.

    The per-instruction fast path: the sort that the counts need anyway also gives the
    smallest and largest active address, so the range check costs nothing extra; any
    problem is re-diagnosed by :func:`_lanes` for a precise message.
    """
    a = np.asarray(addresses)
    if a.ndim != 1 or a.dtype.kind not in "iu" or (
            active is not None and (not isinstance(active, np.ndarray)
                                    or active.dtype != np.bool_ or active.shape != a.shape)):
        a, m = _lanes(addresses, active, 1)  # raises, or normalises lists and dtypes
        active = m
    s = np.sort(a if active is None else a[active]).astype(np.int64, copy=False)
    if s.shape[0] and (s[0] < 0 or s[-1] > _MAX_ADDRESS):
        _lanes(a, active, 1)  # raises with the offending lane
    return s


def _access_bytes(access_bytes: object) -> int:
    w = check_positive_int("access_bytes", access_bytes)
    if w not in ACCESS_WIDTHS:
        raise ValueError(f"access_bytes must be one of {ACCESS_WIDTHS}, got {w}")
    return w


def _plain_lanes(addresses: Sequence[int], access_bytes: object,
                 active: Sequence[bool] | None) -> tuple[int, list[int], list[bool]]:
    """The access width and each lane's address and activity as Python values, for the
    plain (reference) versions of the memory models."""
    w = _access_bytes(access_bytes)
    addrs = [int(x) for x in addresses]
    return w, addrs, [True] * len(addrs) if active is None else [bool(x) for x in active]


# --------------------------------------------------------------------------- coalescing


def _union_count(starts: np.ndarray, width: int, granule: int) -> np.ndarray:
    """Per row, the number of distinct ``granule``-sized blocks touched.

    ``starts`` has shape (rows, lanes), each row sorted ascending, with inactive lanes
    set to ``_SENTINEL`` (so they sort last). Lane ``i`` touches bytes
    ``[s_i, s_i + width)``, i.e. blocks ``first_i .. last_i``. Because every access has
    the same width, ``first`` and ``last`` are both non-decreasing along a sorted row,
    so the blocks lane ``i`` adds to those of lanes ``< i`` are exactly
    ``max(first_i, last_{i-1} + 1) .. last_i``: one sort, then O(lanes).
    """
    valid = starts != _SENTINEL
    first = starts // granule
    last = (starts + (width - 1)) // granule
    prev = np.empty_like(last)
    prev[:, 0] = -1
    prev[:, 1:] = last[:, :-1]
    new = last - np.maximum(first, prev + 1) + 1
    return np.where(valid & (new > 0), new, 0).sum(axis=1)


def _blocks_sorted(s: np.ndarray, width: int, granule: int) -> int:
    """:func:`_union_count` for one sorted, non-empty row of active starts (fast path)."""
    first = s // granule
    last = (s + (width - 1)) // granule
    if np.array_equal(first, last):  # every access inside one block: count distinct
        return 1 + int(np.count_nonzero(first[1:] != first[:-1]))
    new = last[1:] - np.maximum(first[1:], last[:-1] + 1) + 1
    return int(last[0] - first[0] + 1 + np.maximum(new, 0).sum())


def _coalesce_rows(
    a: np.ndarray, m: np.ndarray, width: int, segment_bytes: int, line_bytes: int
) -> CoalesceReport:
    lanes = m.sum(axis=1)
    n_active = int(lanes.sum())
    if n_active == 0:
        return CoalesceReport(0, 0, 0, 0, 0, 0, segment_bytes, line_bytes)
    s = np.sort(np.where(m, a, _SENTINEL), axis=1)
    return CoalesceReport(
        requests=int(np.count_nonzero(lanes)),
        sectors=int(_union_count(s, width, segment_bytes).sum()),
        lines=int(_union_count(s, width, line_bytes).sum()),
        bytes_requested=n_active * width,
        bytes_touched=int(_union_count(s, width, 1).sum()),
        active_lanes=n_active,
        segment_bytes=segment_bytes,
        line_bytes=line_bytes,
    )


def coalesce(
    addresses: Sequence[int] | np.ndarray,
    access_bytes: int,
    active: Sequence[bool] | np.ndarray | None = None,
    *,
    segment_bytes: int = 32,
    line_bytes: int = 128,
) -> CoalesceReport:
    """Sectors, lines and requests of ONE warp-level global load or store.

    CUDA C Programming Guide, global memory accesses (compute capability 6.0+): the
    sectors are the distinct ``addr // segment_bytes`` over every byte
    ``[address, address + access_bytes)`` of every active lane, so an access that
    straddles a segment boundary counts both segments. (Hardware requires naturally
    aligned addresses; the model accepts any address so that misaligned layouts and
    segment sizes below the access width can be studied.)

    Args:
        addresses: byte address per lane, 1-D integer array (normally 32 lanes).
        access_bytes: bytes per lane: 1, 2, 4, 8 or 16 (``ld.global.v4.f32`` is 16).
        active: bool mask per lane; None means every lane is active. Inactive lanes'
            addresses are ignored (they may hold anything).
        segment_bytes: burst segment (sector) size, default 32.
        line_bytes: cache-line size, default 128.

    Returns:
        CoalesceReport; ``requests`` is 1 if any lane is active, else 0 (and every
        count is 0).

    Raises:
        ValueError/TypeError: addresses not 1-D integers, a negative active address,
            mask of the wrong shape or dtype, unsupported access width, non-positive
            segment or line size.
    """
    w = _access_bytes(access_bytes)
    seg, line = check_positive_ints(segment_bytes=segment_bytes, line_bytes=line_bytes)
    s = _active_sorted(addresses, active)
    n = int(s.shape[0])
    if n == 0:
        return CoalesceReport(0, 0, 0, 0, 0, 0, seg, line)
    # Same width for every lane: the union of [s_i, s_i + w) over sorted starts adds
    # min(gap, w) bytes per lane after the first.
    touched = w + int(np.minimum(s[1:] - s[:-1], w).sum())
    return CoalesceReport(
        requests=1,
        sectors=_blocks_sorted(s, w, seg),
        lines=_blocks_sorted(s, w, line),
        bytes_requested=n * w,
        bytes_touched=touched,
        active_lanes=n,
        segment_bytes=seg,
        line_bytes=line,
    )


def coalesce_warps(
    addresses: np.ndarray,
    access_bytes: int,
    active: np.ndarray | None = None,
    *,
    segment_bytes: int = 32,
    line_bytes: int = 128,
) -> CoalesceReport:
    """:func:`coalesce` for many warp instructions at once, summed.

    ``addresses`` and ``active`` have shape (instructions, lanes): row ``i`` is one warp
    instruction. Equal to ``sum(coalesce(addresses[i], ...) for i ...)``, in one
    vectorised pass.
    """
    w = _access_bytes(access_bytes)
    seg, line = check_positive_ints(segment_bytes=segment_bytes, line_bytes=line_bytes)
    a, m = _lanes(addresses, active, 2)
    if a.shape[0] == 0 or a.shape[1] == 0:
        return CoalesceReport(0, 0, 0, 0, 0, 0, seg, line)
    return _coalesce_rows(a, m, w, seg, line)


def coalesce_reference(
    addresses: Sequence[int],
    access_bytes: int,
    active: Sequence[bool] | None = None,
    *,
    segment_bytes: int = 32,
    line_bytes: int = 128,
) -> CoalesceReport:
    """Plain version of :func:`coalesce`: enumerate every byte, collect sets."""
    w, addrs, act = _plain_lanes(addresses, access_bytes, active)
    touched: set[int] = set()
    n_active = 0
    for addr, on in zip(addrs, act):
        if on:
            n_active += 1
            touched.update(range(addr, addr + w))
    return CoalesceReport(
        requests=1 if n_active else 0,
        sectors=len({b // segment_bytes for b in touched}),
        lines=len({b // line_bytes for b in touched}),
        bytes_requested=n_active * w,
        bytes_touched=len(touched),
        active_lanes=n_active,
        segment_bytes=segment_bytes,
        line_bytes=line_bytes,
    )


# --------------------------------------------------------------------------- banks


def _lanes_per_phase(access_bytes: int, banks: int, bank_bytes: int) -> int:
    # One phase moves at most banks * bank_bytes bytes (128 B by default).
    return max(1, (banks * bank_bytes) // max(access_bytes, bank_bytes))


def bank_conflicts(
    addresses: Sequence[int] | np.ndarray,
    access_bytes: int = 4,
    active: Sequence[bool] | np.ndarray | None = None,
    banks: int = 32,
    *,
    bank_bytes: int = 4,
) -> BankReport:
    """Wavefronts and bank conflicts of ONE warp-level shared-memory access.

    CUDA C Programming Guide, shared memory (compute capability 5.x and later):
    ``bank = (addr // bank_bytes) % banks``; lanes reading the same word are served by
    one broadcast; wavefronts are the most distinct words one bank must serve. Accesses
    wider than a bank are split into phases of ``banks * bank_bytes`` bytes (half-warps
    for 8 bytes, quarter-warps for 16); see :class:`BankReport` for the full model.

    Examples: stride 1 word -> 1 wavefront; stride 2 -> 2 (2-way); stride 32 -> 32;
    stride 33 (a ``[32][33]`` padded tile read by column) -> 1; every lane on one word
    -> 1; 8-byte stride-1 -> 2 wavefronts, 0 conflicts.

    Args:
        addresses: byte address per lane (1-D integers), position = lane id.
        access_bytes: 1, 2, 4, 8 or 16.
        active: bool mask per lane, None = all active.
        banks: number of banks (32).
        bank_bytes: bank width in bytes (4).

    Returns:
        BankReport with ``requests`` 0 or 1.
    """
    w = _access_bytes(access_bytes)
    nb, bb = check_positive_ints(banks=banks, bank_bytes=bank_bytes)
    a, m = _lanes(addresses, active, 1)
    if not m.any():
        return BankReport(0, 0, 0)
    per_phase = _lanes_per_phase(w, nb, bb)
    n_phases = -(-a.shape[0] // per_phase)
    first = a // bb
    last = (a + (w - 1)) // bb
    if n_phases == 1 and np.array_equal(first[m], last[m]):
        # fast path: one phase, every access inside one word (the 32-bit case)
        u = np.sort(first[m])
        u = u[np.concatenate(([True], u[1:] != u[:-1]))]
        wf = int(np.bincount(u % nb, minlength=nb).max())
        return BankReport(requests=1, wavefronts=wf, ideal_wavefronts=1)
    phase = np.arange(a.shape[0], dtype=np.int64) // per_phase
    span = int((last - first)[m].max())
    words = first[m][:, None] + np.arange(span + 1, dtype=np.int64)
    keep = words <= last[m][:, None]
    ph = np.broadcast_to(phase[m][:, None], words.shape)[keep]
    words = words[keep]
    # distinct (phase, word) pairs: a broadcast word is served once per phase
    w0 = int(words.min())  # relative word numbers keep the key small
    key = np.unique((words - w0) * n_phases + ph)
    word_u, phase_u = np.divmod(key, n_phases)
    load = np.bincount(phase_u * nb + (word_u + w0) % nb, minlength=n_phases * nb)
    per_phase_wavefronts = load.reshape(n_phases, nb).max(axis=1)
    return BankReport(
        requests=1,
        wavefronts=int(per_phase_wavefronts.sum()),
        ideal_wavefronts=int(np.count_nonzero(per_phase_wavefronts)),
    )


def bank_conflicts_reference(
    addresses: Sequence[int],
    access_bytes: int = 4,
    active: Sequence[bool] | None = None,
    banks: int = 32,
    *,
    bank_bytes: int = 4,
) -> BankReport:
    """Plain version of :func:`bank_conflicts`: a dict of word sets per (phase, bank)."""
    w, addrs, act = _plain_lanes(addresses, access_bytes, active)
    per_phase = _lanes_per_phase(w, banks, bank_bytes)
    served: dict[int, dict[int, set[int]]] = {}
    for lane, (addr, on) in enumerate(zip(addrs, act)):
        if not on:
            continue
        phase = served.setdefault(lane // per_phase, {})
        for byte in range(addr, addr + w):
            word = byte // bank_bytes
            phase.setdefault(word % banks, set()).add(word)
    wavefronts = sum(max(len(s) for s in p.values()) for p in served.values())
    return BankReport(1 if served else 0, wavefronts, len(served))


# --------------------------------------------------------------------------- tiles


@dataclass(frozen=True)
class TileLoad:
    """Segments needed to load one tile of a row-major matrix.

    Attributes:
        segments: segment reads, each tile row loaded on its own.
        distinct_segments: distinct segments over the whole tile (smaller than
            ``segments`` only when consecutive tile rows share a segment, i.e. when the
            tile spans almost the whole leading dimension).
        min_segments: ``rows * ceil(row_bytes / segment_bytes)``, the count when every
            tile row starts on a segment boundary.
        row_segments: segments per tile row, one entry per row.
    """

    segments: int
    distinct_segments: int
    min_segments: int
    row_segments: tuple[int, ...]

    @property
    def overhead(self) -> float:
        """``segments / min_segments`` (1.0 aligned; up to ~2 when rows straddle)."""
        return self.segments / self.min_segments


def tile_load_segments(
    tile_rows: int, tile_cols: int, leading_dim: int, elem_bytes: int = 4,
    *,
    base_address: int = 0, row0: int = 0, col0: int = 0, segment_bytes: int = 32,
) -> TileLoad:
    """Segments to load a ``tile_rows x tile_cols`` tile of a row-major matrix.

    Element ``(r, c)`` of the matrix lives at ``base_address + (r * leading_dim + c) *
    elem_bytes``; the tile starts at ``(row0, col0)``. The tiled-matrix picture of Kirk
    and Hwu, "Programming Massively Parallel Processors", chapters 5-6 (tiling, memory
    coalescing): when ``leading_dim * elem_bytes`` is a
    multiple of the segment size and the tile's first column is segment-aligned, every
    tile row is whole segments; one extra element per row shifts each row against the
    segments and a tile row straddles one more segment, up to doubling the count.
    :func:`padded_leading_dim` gives the fix.
    """
    check_positive_ints(tile_rows=tile_rows, tile_cols=tile_cols, leading_dim=leading_dim,
                        elem_bytes=elem_bytes, segment_bytes=segment_bytes)
    if tile_cols + col0 > leading_dim:
        raise ValueError(
            f"tile columns {col0}..{col0 + tile_cols - 1} exceed leading_dim {leading_dim}"
        )
    if min(base_address, row0, col0) < 0:
        raise ValueError("base_address, row0 and col0 must be non-negative")
    r = np.arange(row0, row0 + tile_rows, dtype=np.int64)
    start = base_address + (r * leading_dim + col0) * elem_bytes
    end = start + tile_cols * elem_bytes - 1
    per_row = end // segment_bytes - start // segment_bytes + 1
    distinct = int(_union_count(start[None, :], tile_cols * elem_bytes, segment_bytes)[0])
    row_bytes = tile_cols * elem_bytes
    return TileLoad(
        segments=int(per_row.sum()),
        distinct_segments=distinct,
        min_segments=tile_rows * -(-row_bytes // segment_bytes),
        row_segments=tuple(int(x) for x in per_row),
    )


def padded_leading_dim(cols: int, elem_bytes: int = 4, *, segment_bytes: int = 32) -> int:
    """Smallest leading dimension ``>= cols`` whose row pitch is whole segments.

    ``leading_dim * elem_bytes`` becomes a multiple of ``segment_bytes`` (rounded up to
    the least multiple that keeps every row start segment-aligned), so tiles whose first
    column is aligned load whole segments per row (the pitch ``cudaMallocPitch`` picks,
    CUDA C++ Programming Guide, "Device Memory"). The base address must itself be segment-aligned
    (``cudaMalloc`` returns 256-byte-aligned memory) and the tile's first column a
    multiple of ``segment_bytes / elem_bytes``; padding cannot fix a misaligned base.
    """
    check_positive_ints(cols=cols, elem_bytes=elem_bytes, segment_bytes=segment_bytes)
    # pitch must be a multiple of lcm(elem_bytes, segment_bytes) bytes
    step = math.lcm(elem_bytes, segment_bytes) // elem_bytes
    return -(-cols // step) * step


# --------------------------------------------------------------------------- traversal


@dataclass(frozen=True)
class Traversal:
    """Sectors per request of the two thread-to-matrix mappings
    (:func:`traversal_sectors`).

    Attributes:
        thread_per_row: the sweep with lane ``t`` on row ``t`` (strided: a sector a lane).
        thread_per_column: the sweep with lane ``t`` on column ``t`` (coalesced).
    """

    thread_per_row: CoalesceReport
    thread_per_column: CoalesceReport

    @property
    def ratio(self) -> float:
        """Sectors of thread-per-row over thread-per-column traversal."""
        return self.thread_per_row.sectors / self.thread_per_column.sectors


def traversal_sectors(
    rows: int, cols: int, elem_bytes: int = 4,
    *,
    warp_size: int = 32, base_address: int = 0, segment_bytes: int = 32,
) -> Traversal:
    """Global traffic of a warp sweeping a row-major ``rows x cols`` matrix two ways.

    (CUDA C++ Best Practices Guide, "Coalesced Access to Global Memory".) *Thread per
    row* -- lane ``t`` walks row ``t``, so at step ``k`` the
    warp reads ``A[t, k]``: lanes are a whole row apart and each needs its own
    sector. *Thread per column* -- lane ``t`` walks column ``t``, reading ``A[k, t]``:
    the warp reads consecutive addresses and the access coalesces. The first
    ``warp_size`` rows (columns) are swept, one
    load instruction per step.
    """
    check_positive_ints(rows=rows, cols=cols, elem_bytes=elem_bytes, warp_size=warp_size)
    w = _access_bytes(elem_bytes)
    lanes = np.arange(warp_size, dtype=np.int64)
    # thread per row: step k over columns, lane t on row t
    k = np.arange(cols, dtype=np.int64)[:, None]
    by_row = base_address + (lanes[None, :] * cols + k) * w
    by_row_active = np.broadcast_to(lanes[None, :] < rows, by_row.shape)
    # thread per column: step k over rows, lane t on column t
    k = np.arange(rows, dtype=np.int64)[:, None]
    by_col = base_address + (k * cols + lanes[None, :]) * w
    by_col_active = np.broadcast_to(lanes[None, :] < cols, by_col.shape)
    return Traversal(
        thread_per_row=coalesce_warps(by_row, w, by_row_active, segment_bytes=segment_bytes),
        thread_per_column=coalesce_warps(by_col, w, by_col_active,
                                         segment_bytes=segment_bytes),
    )
