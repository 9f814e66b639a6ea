"""memcheck: exact allocation bounds, use after free, misaligned accesses, per-variable
shared and local bounds (hardware.simt.sanitizer, hardware.simt.memory).

Each kernel with undefined behaviour in tests/hardware/data/ub/memcheck_*.cu (compiled
with ``nvcc -ptx -arch=sm_90``) is reported, naming the PTX line, the address and the
allocation; its corrected twin (``*_fixed``) runs clean with the outputs NumPy gives.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from hardware.simt import GlobalMemory, HostMemoryError, MemoryAccessError, load_ptx
from hardware.simt.memory import MAX_BYTES, SLOT_BYTES

UB = Path(__file__).parent / "data" / "ub"


def _ptx(name: str) -> str:
    return (UB / f"{name}.ptx").read_text()


def _line(name: str, pattern: str, nth: int | None = None) -> int:
    """The 1-based line of the PTX file matching ``pattern`` (exactly one, or the
    ``nth`` of several)."""
    lines = [i + 1 for i, t in enumerate(_ptx(name).splitlines()) if re.search(pattern, t)]
    assert len(lines) == 1 or nth is not None, lines
    return lines[nth or 0]


def _floats(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


# ------------------------------------------------------------ out of bounds, global

@pytest.mark.parametrize("kernel,shift", [("read_past_end", 128), ("read_before_start", -128)])
def test_out_of_bounds_into_a_neighbour_is_reported(kernel, shift):
    mem = GlobalMemory()
    before = mem.to_device(_floats(32, 1), name="before")
    a = mem.to_device(_floats(32), name="a")
    after = mem.to_device(_floats(32, 2), name="after")
    out = mem.alloc(128, name="out")
    with pytest.raises(MemoryAccessError) as e:
        load_ptx(_ptx("memcheck_oob")).launch(kernel, 1, 32, [a, out], mem)
    r = e.value.report
    # the first kernel's load, or the second kernel's
    line = _line("memcheck_oob", r"ld\.global\.f32", 0 if shift > 0 else 1)
    assert r.tool == "memcheck" and r.access.line == line
    assert r.access.kind == "read" and r.access.space == "global"
    assert r.access.thread == (0, 0, 0) and r.access.block == (0, 0, 0)
    assert r.access.address == a + 4 * shift
    # names the allocation the address is nearest to and how far off it is
    if shift > 0:
        assert r.access.allocation.startswith("384 bytes past the end of allocation 'a'")
    else:
        assert r.access.allocation.startswith("512 bytes before allocation 'a'")
    assert f"line {line}" in str(e.value) and f"{a + 4 * shift:#x}" in str(e.value)
    assert not mem.from_device(out, np.float32, 32).any()   # nothing was stored
    del before, after


@pytest.mark.parametrize("kernel,index", [("read_past_end", lambda i: (i + 128) % 32),
                                          ("read_before_start", lambda i: (i + 31) % 32)])
def test_out_of_bounds_twin_is_clean(kernel, index):
    x = _floats(32)
    mem = GlobalMemory()
    a, out = mem.to_device(x, name="a"), mem.alloc(128, name="out")
    st = load_ptx(_ptx("memcheck_oob_fixed")).launch(kernel, 1, 32, [a, out], mem)
    np.testing.assert_array_equal(mem.from_device(out, np.float32, 32), x[index(np.arange(32))])
    assert st.warnings == []


def test_past_the_exact_end_inside_the_rounding_is_reported():
    # a 10-float allocation is backed by 256 bytes: element 10 is inside the backing
    # but past the allocation (a GPU reads it silently)
    mem = GlobalMemory()
    a = mem.to_device(_floats(10), name="ten")
    out = mem.alloc(128)
    mod = load_ptx(_ptx("memcheck_use_after_free"))
    with pytest.raises(MemoryAccessError, match=r"0 bytes past the end of allocation 'ten'"):
        mod.launch("copy", 1, 11, [a, out], mem)
    # turned into warnings, the launch completes (element 10 reads as 0: never written
    # either, so initcheck is switched off here)
    st = mod.launch("copy", 1, 11, [a, out], mem,
                    sanitize={"memcheck": "warn", "initcheck": "off"})
    assert len(st.warnings) == 1 and "out-of-bounds global access" in st.warnings[0]


# ------------------------------------------------------------ use after free

def test_use_after_free_is_reported_and_the_twin_is_clean():
    x = _floats(32)
    mem = GlobalMemory()
    a, out = mem.to_device(x, name="a"), mem.alloc(128, name="out")
    load_ptx(_ptx("memcheck_use_after_free_fixed")).launch("copy", 1, 32, [a, out], mem)
    np.testing.assert_array_equal(mem.from_device(out, np.float32, 32), x)
    mem.free(a)
    with pytest.raises(MemoryAccessError) as e:
        load_ptx(_ptx("memcheck_use_after_free")).launch("copy", 1, 32, [a, out], mem)
    r = e.value.report
    assert r.what == "use after free" and r.access.address == a
    assert r.access.allocation.startswith("freed allocation 'a'")
    assert r.access.line == _line("memcheck_use_after_free", r"ld\.global\.f32")


def test_free_errors():
    mem = GlobalMemory()
    a = mem.alloc(64, name="a")
    with pytest.raises(HostMemoryError, match="not the address of an allocation"):
        mem.free(a + 4)
    with pytest.raises(HostMemoryError, match="not the address of an allocation"):
        mem.free(a + SLOT_BYTES)
    mem.free(a)
    with pytest.raises(HostMemoryError, match="double free"):
        mem.free(a)
    with pytest.raises(HostMemoryError, match="outside every live allocation"):
        mem.read(a, np.uint8, 1)
    b = mem.alloc(64)
    assert b != a and mem.allocations == [(b, 64)]      # addresses are never reused


# ------------------------------------------------------------ misaligned

def test_misaligned_load_is_reported_and_the_twin_is_clean():
    x = _floats(33)
    mem = GlobalMemory()
    a, out = mem.to_device(x, name="a"), mem.alloc(128)
    with pytest.raises(MemoryAccessError) as e:
        load_ptx(_ptx("memcheck_misaligned")).launch("misaligned_load", 1, 32, [a, out], mem)
    r = e.value.report
    assert "misaligned 4-byte" in r.what and r.access.address == a + 2
    assert r.access.line == _line("memcheck_misaligned", r"ld\.global\.f32")
    assert "allocation 'a'" in r.access.allocation
    # misaligned accesses are faults: refused even with memcheck off
    with pytest.raises(MemoryAccessError, match="misaligned"):
        load_ptx(_ptx("memcheck_misaligned")).launch("misaligned_load", 1, 32, [a, out], mem,
                                                     sanitize="off")
    load_ptx(_ptx("memcheck_misaligned_fixed")).launch("misaligned_load", 1, 32, [a, out], mem)
    want = np.frombuffer(x.tobytes()[2: 2 + 128], np.float32)
    np.testing.assert_array_equal(mem.from_device(out, np.float32, 32).view(np.uint32),
                                  want.view(np.uint32))


# ------------------------------------------------------------ shared and local variables

def test_static_shared_overrun_into_the_dynamic_region_is_reported():
    x = _floats(32)
    mem = GlobalMemory()
    px, out = mem.to_device(x), mem.alloc(128)
    with pytest.raises(MemoryAccessError) as e:
        load_ptx(_ptx("memcheck_shared")).launch("shared_overrun", 1, 32, [px, out], mem,
                                                 dynamic_shared=128)
    r = e.value.report
    assert r.access.space == "shared" and r.access.kind == "write"
    assert r.access.address == 128 and r.access.thread == (0, 0, 0)
    assert r.access.line == _line("memcheck_shared", r"st\.shared.*\+128\]")
    # on a GPU the address is dyn[0]; the interpreter's layout leaves a gap after s
    assert r.access.allocation == ("0 bytes past the end of shared variable "
                                   "'_ZZ14shared_overrunE1s' (128 bytes at 0x0)")
    st = load_ptx(_ptx("memcheck_shared_fixed")).launch("shared_overrun", 1, 32, [px, out],
                                                        mem, dynamic_shared=128)
    np.testing.assert_array_equal(mem.from_device(out, np.float32, 32), x + 2 * x)
    assert st.warnings == []


def test_local_overrun_inside_the_frame_is_reported():
    idx = np.array([t % 6 for t in range(31)] + [6], np.int32)
    mem = GlobalMemory()
    pi, out = mem.to_device(idx), mem.alloc(128)
    with pytest.raises(MemoryAccessError) as e:
        load_ptx(_ptx("memcheck_local")).launch("local_overrun", 1, 32, [pi, out], mem)
    r = e.value.report
    assert r.access.space == "local" and r.access.thread == (31, 0, 0)
    assert r.access.address == 24
    assert r.access.allocation.startswith("0 bytes past the end of local variable "
                                          "'__local_depot0' (24 bytes")
    assert r.access.line == _line("memcheck_local", r"ld\.local\.f32")
    load_ptx(_ptx("memcheck_local_fixed")).launch("local_overrun", 1, 32, [pi, out], mem)
    t = np.arange(32)
    np.testing.assert_array_equal(mem.from_device(out, np.float32, 32),
                                  (t * 10 + np.minimum(idx, 5)).astype(np.float32))


# ------------------------------------------------------------ host API

def test_host_access_outside_allocations_is_a_clear_error():
    mem = GlobalMemory()
    with pytest.raises(HostMemoryError, match="nothing is allocated"):
        mem.read(1 << 32, np.float32, 1)
    a = mem.alloc(16, name="a")
    with pytest.raises(HostMemoryError, match=r"write of 20 bytes at address 0x.*'a' "
                                              r"\(16 bytes"):
        mem.write(a, np.zeros(5, np.float32))
    with pytest.raises(IndexError):            # HostMemoryError is an IndexError too
        mem.read(a + 16, np.uint8, 1)
    with pytest.raises(ValueError):
        mem.read(a - 1, np.uint8, 1)
    mem.write(a, np.arange(4, dtype=np.float32))  # a failed write changed nothing
    np.testing.assert_array_equal(mem.from_device(a, np.float32, 4), np.arange(4))


def test_alloc_over_the_limit_is_refused_before_allocating():
    mem = GlobalMemory()
    with pytest.raises(HostMemoryError, match=f"MAX_BYTES = {MAX_BYTES}"):
        mem.alloc(2**36)
    assert mem.allocations == [] and mem.buffer.size == 0
    a = mem.alloc(100)
    assert mem.allocations == [(a, 100)]


def test_memset_and_calloc_write():
    mem = GlobalMemory()
    a = mem.alloc(8)
    mem.memset(a, 0xAB, 8)
    assert mem.read(a, np.uint8, 8).tolist() == [0xAB] * 8
    assert mem.init_shadow[: 8].all()
    with pytest.raises(ValueError, match="value"):
        mem.memset(a, 256, 1)
    b = mem.calloc(4)
    assert mem.read(b, np.uint32, 1)[0] == 0


def test_sanitize_option_is_validated():
    from hardware.simt import LaunchError, parse_sanitize
    assert parse_sanitize(None).tools == {"memcheck", "racecheck", "initcheck", "synccheck"}
    assert parse_sanitize("default") == parse_sanitize(True) == parse_sanitize(None)
    assert parse_sanitize(False).tools == parse_sanitize("off").tools == frozenset()
    assert parse_sanitize(set()).tools == frozenset()
    assert parse_sanitize(("memcheck",)).tools == {"memcheck"}
    assert parse_sanitize("initcheck").action("initcheck") == "error"
    w = parse_sanitize({"racecheck": "warn"})
    assert w.action("racecheck") == "warn" and w.action("memcheck") == "error"
    assert parse_sanitize("warn").action("synccheck") == "warn"
    for bad, msg in [("fast", "sanitize='fast'"), ({"memcheck": "loud"}, "memcheck"),
                     (("memchek",), "unknown tool 'memchek'"), (3, "got int"),
                     ({"x": "warn"}, "unknown tool 'x'")]:
        with pytest.raises(LaunchError, match=re.escape(msg)):
            parse_sanitize(bad)
    mem = GlobalMemory()
    with pytest.raises(LaunchError, match="sanitize"):
        load_ptx(_ptx("memcheck_use_after_free")).launch("copy", 1, 1, [0, 0], mem,
                                                         sanitize="everything")
