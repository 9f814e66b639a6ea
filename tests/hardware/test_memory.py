"""Tests for hardware.memory: coalescing, banks, tile loads, traversal.

Expected values are derived by hand from the definitions in the CUDA C Programming
Guide (sectors of 32 bytes, banks of 4 bytes) and the Best Practices Guide's coalescing
and tiled-matrix examples;
the vectorised functions are also checked against their plain byte-by-byte versions.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hardware.memory import (
    BankReport,
    CoalesceReport,
    bank_conflicts,
    bank_conflicts_reference,
    coalesce,
    coalesce_reference,
    coalesce_warps,
    padded_leading_dim,
    tile_load_segments,
    traversal_sectors,
)

LANES = np.arange(32, dtype=np.int64)
BASE = 256 * 1000  # cudaMalloc alignment


# --------------------------------------------------------------------------- coalescing


@pytest.mark.parametrize(
    "addresses, width, sectors, lines",
    [
        (BASE + 4 * LANES, 4, 4, 1),  # stride-1 float32: 128 B = 4 sectors, 1 line
        (BASE + 8 * LANES, 4, 8, 2),  # stride 2: every other word, 256 B span
        (BASE + 128 * LANES, 4, 32, 32),  # one sector per lane
        (np.full(32, BASE + 12), 4, 1, 1),  # every lane on one word
        (BASE + 16 * LANES, 16, 16, 4),  # float4 loads: 512 B
        (BASE + 8 * LANES, 8, 8, 2),  # double loads
        (BASE + 2 * LANES, 2, 2, 1),  # half loads: 64 B
        (BASE + LANES, 1, 1, 1),  # bytes: 32 B
        (BASE + 4 * LANES + 2, 4, 5, 2),  # shifted by 2 bytes: straddles, one more sector
        (BASE + 4 * LANES[::-1], 4, 4, 1),  # reversed lanes: same sectors
    ],
)
def test_coalesce_hand_values(addresses, width, sectors, lines):
    r = coalesce(addresses, width)
    assert (r.requests, r.sectors, r.lines) == (1, sectors, lines)
    assert r.bytes_requested == 32 * width
    assert r == coalesce_reference(addresses, width)


def test_coalesce_efficiency_and_metrics():
    r = coalesce(BASE + 4 * LANES, 4)
    assert r.efficiency == 1.0 and r.sectors_per_request == 4.0
    assert r.bytes_transferred == 128
    r2 = coalesce(BASE + 8 * LANES, 4)
    assert r2.efficiency == 0.5
    r3 = coalesce(BASE + 16 * LANES, 16)
    assert r3.sectors_per_request == 16.0 and r3.efficiency == 1.0
    m = r.metrics("ld")
    assert m["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == 4
    assert m["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"] == 1
    assert m["l1tex__average_t_sectors_per_request_pipe_lsu_mem_global_op_ld.ratio"] == 4
    assert "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum" in r.metrics("st")
    with pytest.raises(ValueError, match="kind"):
        r.metrics("atom")


def test_broadcast_efficiency_above_one():
    r = coalesce(np.full(32, BASE), 4)
    assert r.bytes_touched == 4 and r.bytes_requested == 128
    assert r.efficiency == 128 / 32


def test_partially_active():
    active = LANES < 8
    r = coalesce(BASE + 4 * LANES, 4, active)
    assert (r.requests, r.sectors, r.active_lanes, r.bytes_requested) == (1, 1, 8, 32)
    # inactive lanes may hold garbage addresses
    garbage = np.where(active, BASE + 4 * LANES, -12345)
    assert coalesce(garbage, 4, active) == r
    none = coalesce(BASE + 4 * LANES, 4, np.zeros(32, bool))
    assert none == CoalesceReport(0, 0, 0, 0, 0, 0)
    assert (none.efficiency, none.sectors_per_request) == (0.0, 0.0)


def test_straddling_wide_accesses():
    # 16-byte accesses at odd offsets touch two sectors each when they cross a boundary
    r = coalesce(np.array([BASE + 24]), 16)
    assert (r.sectors, r.lines) == (2, 1)
    r = coalesce(np.array([BASE + 120]), 16)
    assert (r.sectors, r.lines) == (2, 2)
    # segment smaller than the access: an 8-byte segment model
    r = coalesce(np.array([BASE]), 16, segment_bytes=8)
    assert r.sectors == 2


def test_segment_size_option():
    # a burst segment of 4 elements of 4 bytes = 16 bytes
    r = coalesce(BASE + 4 * LANES, 4, segment_bytes=16)
    assert r.sectors == 8
    assert coalesce(BASE + 4 * LANES, 4, segment_bytes=64).sectors == 2


def test_reports_sum():
    a = coalesce(BASE + 4 * LANES, 4)
    b = coalesce(BASE + 8 * LANES, 4)
    total = sum([a, b])
    assert (total.requests, total.sectors, total.bytes_requested) == (2, 12, 256)
    with pytest.raises(ValueError, match="segment"):
        a + coalesce(BASE + 4 * LANES, 4, segment_bytes=64)


def test_coalesce_warps_matches_per_warp():
    rng = np.random.default_rng(5)
    addrs = BASE + 4 * rng.integers(0, 200, size=(20, 32))
    active = rng.random((20, 32)) < 0.7
    active[3] = False
    expected = sum(coalesce(addrs[i], 4, active[i]) for i in range(20))
    assert coalesce_warps(addrs, 4, active) == expected
    assert coalesce_warps(addrs, 4, active).requests == 19


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(addresses=np.zeros((2, 32), int), access_bytes=4), ValueError, "1-D"),
        (dict(addresses=np.zeros(32), access_bytes=4), TypeError, "integers"),
        (dict(addresses=np.arange(32), access_bytes=3), ValueError, "access_bytes"),
        (dict(addresses=np.arange(32), access_bytes=4, active=np.ones(31, bool)),
         ValueError, "shape"),
        (dict(addresses=np.arange(32), access_bytes=4, active=np.ones(32)),
         TypeError, "bool"),
        (dict(addresses=np.arange(32) - 5, access_bytes=4), ValueError, "lane 0"),
        (dict(addresses=np.arange(32), access_bytes=4, segment_bytes=0),
         ValueError, "segment_bytes"),
    ],
)
def test_coalesce_errors(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        coalesce(**kwargs)


widths = st.sampled_from([1, 2, 4, 8, 16])
lane_addrs = st.lists(st.integers(0, 4096), min_size=1, max_size=32)


@settings(max_examples=60)
@given(lane_addrs, widths, st.data())
@example([0] * 32, 4, None)
@example([31, 32], 2, None)
def test_coalesce_properties(addrs, width, data):
    a = np.array(addrs, dtype=np.int64)
    active = None if data is None else np.array(
        data.draw(st.lists(st.booleans(), min_size=len(addrs), max_size=len(addrs))))
    r = coalesce(a, width, active)
    ref = coalesce_reference(addrs, width, active)
    assert r == ref
    n = r.active_lanes
    # sectors bounded below by the distinct bytes and above by lanes x max sectors/access
    per_access = math.ceil(width / 32) + (1 if width > 1 else 0)
    assert math.ceil(r.bytes_touched / 32) <= r.sectors <= n * per_access
    assert r.lines <= r.sectors
    # permuting lanes (with their masks) changes nothing
    perm = np.array(data.draw(st.permutations(range(len(addrs))))) if data is not None \
        else np.arange(len(addrs))[::-1]
    pa = a[perm]
    pm = None if active is None else active[perm]
    assert coalesce(pa, width, pm) == r


# --------------------------------------------------------------------------- banks


@pytest.mark.parametrize("stride, wavefronts", [(1, 1), (2, 2), (4, 4), (32, 32), (33, 1),
                                                (0, 1), (16, 16), (3, 1)])
def test_bank_strides(stride, wavefronts):
    r = bank_conflicts(4 * stride * LANES)
    assert (r.wavefronts, r.conflicts) == (wavefronts, wavefronts - 1)
    assert r == bank_conflicts_reference(4 * stride * LANES)


def test_padded_tile_column_read():
    # float tile[32][33]; lane t reads tile[t][c]: conflict-free for every column c
    for c in range(33):
        assert bank_conflicts(4 * (LANES * 33 + c)).conflicts == 0
    # unpadded [32][32]: 32-way
    assert bank_conflicts(4 * (LANES * 32 + 5)).wavefronts == 32


def test_broadcast_partial():
    # lanes pair up on 16 words in distinct banks: broadcast, no conflict
    r = bank_conflicts(4 * (LANES // 2))
    assert r.wavefronts == 1
    # two distinct words in bank 0 plus a broadcast: 2 wavefronts
    addrs = np.zeros(32, np.int64)
    addrs[1:16] = 128
    assert bank_conflicts(addrs).wavefronts == 2


def test_eight_and_sixteen_byte_accesses():
    # double, stride 1: two half-warps of 128 B, each conflict-free
    r = bank_conflicts(8 * LANES, 8)
    assert (r.wavefronts, r.ideal_wavefronts, r.conflicts) == (2, 2, 0)
    # double, stride 2 (every other double): each half-warp spans 256 B -> 2-way
    r = bank_conflicts(16 * LANES, 8)
    assert (r.wavefronts, r.conflicts) == (4, 2)
    # float4 stride 1: four quarter-warps, conflict-free
    r = bank_conflicts(16 * LANES, 16)
    assert (r.wavefronts, r.conflicts) == (4, 0)
    # every lane reads the same double: one wavefront per half-warp, no conflict
    r = bank_conflicts(np.zeros(32, np.int64), 8)
    assert (r.wavefronts, r.conflicts) == (2, 0)
    # only the first half-warp active: one phase
    r = bank_conflicts(8 * LANES, 8, LANES < 16)
    assert (r.wavefronts, r.conflicts) == (1, 0)


def test_bank_inactive_and_metrics():
    r = bank_conflicts(4 * LANES, active=np.zeros(32, bool))
    assert r == BankReport(0, 0, 0) and r.conflicts == 0
    r = bank_conflicts(4 * 2 * LANES)
    m = r.metrics("st")
    assert m["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"] == 1
    assert m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"] == 2
    assert (r + r).wavefronts == 4 and sum([r, r]).conflicts == 2


@settings(max_examples=60)
@given(st.lists(st.integers(0, 2048), min_size=1, max_size=32), widths, st.data())
def test_banks_match_reference(addrs, width, data):
    active = np.array(data.draw(st.lists(st.booleans(), min_size=len(addrs),
                                         max_size=len(addrs))))
    r = bank_conflicts(np.array(addrs), width, active)
    assert r == bank_conflicts_reference(addrs, width, active)
    assert r.wavefronts <= int(active.sum()) * (width // 4 + 1)


# --------------------------------------------------------------------------- tiles


def test_tile_misalignment_doubles_and_padding_fixes():
    # float32, 32-byte segments = 8 elements; an 8x8 tile of a 256-wide matrix
    aligned = tile_load_segments(8, 8, 256, 4)
    assert aligned.segments == 8 == aligned.min_segments
    # one extra element per row: row r starts 4r bytes into a segment, rows 1..7 straddle
    shifted = tile_load_segments(8, 8, 257, 4)
    assert shifted.row_segments == (1, 2, 2, 2, 2, 2, 2, 2)
    assert shifted.segments == 15
    ld = padded_leading_dim(257, 4)
    assert ld == 264
    assert tile_load_segments(8, 8, ld, 4).segments == 8
    # a tile 32 rows down the 257-wide matrix: every row straddles -> exactly double
    # except rows landing on a boundary again (every 8th)
    t = tile_load_segments(32, 8, 257, 4)
    assert t.segments == 32 + 28


def test_tile_base_alignment():
    # a base 4 bytes past a segment boundary misaligns every row even with ld=256
    t = tile_load_segments(4, 8, 256, 4, base_address=4)
    assert t.segments == 8 and t.overhead == 2.0


@pytest.mark.parametrize("cols, elem, seg, ld", [(257, 4, 32, 264), (256, 4, 32, 256),
                                                  (100, 2, 32, 112), (5, 8, 32, 8),
                                                  (7, 4, 128, 32), (1, 1, 32, 32),
                                                  (3, 12, 32, 8)])
def test_padded_leading_dim(cols, elem, seg, ld):
    assert padded_leading_dim(cols, elem, segment_bytes=seg) == ld


@settings(max_examples=40)
@given(st.integers(1, 12), st.integers(1, 24), st.integers(0, 40), st.sampled_from([1, 2, 4, 8]),
       st.integers(0, 100), st.integers(0, 5), st.sampled_from([16, 32, 64]))
def test_tile_load_matches_byte_enumeration(rows, cols, extra, elem, base, row0, seg):
    ld = cols + extra
    t = tile_load_segments(rows, cols, ld, elem, base_address=base, row0=row0,
                           segment_bytes=seg)
    addr = [[base + ((row0 + r) * ld + c) * elem for c in range(cols)] for r in range(rows)]
    per_row = [coalesce_reference(a, elem, segment_bytes=seg).sectors for a in addr]
    assert t.row_segments == tuple(per_row) and t.segments == sum(per_row)
    flat = [x for a in addr for x in a]
    assert t.distinct_segments == coalesce_reference(flat, elem, segment_bytes=seg).sectors
    assert t.segments >= t.min_segments
    padded = padded_leading_dim(ld, elem, segment_bytes=seg)
    assert padded >= ld and (padded * elem) % seg == 0
    # aligned base and padded pitch: no row straddles more than it must
    fixed = tile_load_segments(rows, cols, padded, elem, row0=row0, segment_bytes=seg)
    assert fixed.segments == fixed.min_segments == rows * -(-(cols * elem) // seg)


def test_tile_errors():
    with pytest.raises(ValueError, match="leading_dim"):
        tile_load_segments(4, 300, 257)
    with pytest.raises(TypeError, match="tile_rows"):
        tile_load_segments(4.0, 8, 257)


# --------------------------------------------------------------------------- traversal


def test_traversal_row_vs_column():
    t = traversal_sectors(32, 32, 4)
    # thread per row: lanes 128 B apart -> 32 sectors per request
    assert t.thread_per_row.sectors_per_request == 32
    # thread per column: 32 consecutive floats -> 4 sectors per request
    assert t.thread_per_column.sectors_per_request == 4
    assert t.ratio == 8
    assert t.thread_per_row.requests == 32 == t.thread_per_column.requests


def test_traversal_narrow_matrix():
    # 4 columns: thread-per-column has only 4 active lanes, one sector per step
    t = traversal_sectors(32, 4, 4)
    assert t.thread_per_column.sectors_per_request == 1
    # thread per row: rows are 16 B, two rows share a sector -> 16 sectors per step
    assert t.thread_per_row.sectors_per_request == 16
