"""The sanitizer's plumbing (hardware.simt.sanitizer): options, reports, the tool hooks
a launch calls, hazards as warnings."""
from __future__ import annotations

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx, sanitizer
from hardware.simt.sanitizer import MAX_WARNINGS, Access, Report, Session, parse_sanitize

# every thread t: out[t] = x[t] (a 4-byte load and a 4-byte store per thread)
COPY = """.version 8.0
.target sm_90
.address_size 64
.visible .entry copy(.param .u64 p0, .param .u64 p1)
{
    .reg .b32 %r<4>;
    .reg .f32 %f<2>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [p0];
    ld.param.u64 %rd2, [p1];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    add.s64 %rd5, %rd2, %rd3;
    ld.global.f32 %f1, [%rd4];
    st.global.f32 [%rd5], %f1;
    ret;
}
"""


class _Recorder:
    """A stand-in tool that records the hooks a launch calls."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.calls: list[tuple] = []

    def begin_wave(self, wave) -> None:
        self.calls.append(("begin",))

    def access(self, wave, kind, space, threads, offsets, width, inst) -> None:
        self.calls.append(("access", kind, space, threads.tolist(), offsets.tolist(), width,
                           inst.line))

    def end_wave(self, wave) -> None:
        self.calls.append(("end",))

    def end_launch(self) -> None:
        self.calls.append(("done",))


@pytest.fixture
def recorder(monkeypatch):
    made: list[_Recorder] = []

    def factory(session):
        made.append(_Recorder(session))
        return made[-1]
    monkeypatch.setattr(sanitizer, "_FACTORIES", {"racecheck": factory})
    return made


def test_a_registered_tool_sees_every_access(recorder):
    mem = GlobalMemory()
    x, out = mem.to_device(np.arange(8, dtype=np.float32)), mem.alloc(32)
    load_ptx(COPY).launch("copy", 1, 8, [x, out], mem)
    (tool,) = recorder
    kinds = [c[0] for c in tool.calls]
    assert kinds == ["begin", "access", "access", "end", "done"]
    _, kind, space, threads, offsets, width, line = tool.calls[1]
    lines = [t.strip() for t in COPY.splitlines()]
    ld, st = lines.index("ld.global.f32 %f1, [%rd4];") + 1, lines.index(
        "st.global.f32 [%rd5], %f1;") + 1
    assert (kind, space, threads, width, line) == ("ld", "global", list(range(8)), 4, ld)
    # offsets index memory.buffer: they hold x's bytes
    buf = mem.buffer
    got = [buf[o: o + 4].view(np.float32)[0] for o in offsets]
    assert got == list(range(8))
    assert tool.calls[2][1] == "st" and tool.calls[2][6] == st


def test_a_tool_that_is_off_is_not_created(recorder):
    mem = GlobalMemory()
    x, out = mem.to_device(np.zeros(8, np.float32)), mem.alloc(32)
    load_ptx(COPY).launch("copy", 1, 8, [x, out], mem, sanitize={"racecheck": "off"})
    assert recorder == []


def test_reports_raise_or_warn():
    a = Access("write", "shared", (0, 0, 0), (1, 0, 0), 12, "st.shared.u32 [%r1], %r2", 64, 4,
               "shared variable 's' (128 bytes at 0x0) + 64")
    b = Access("read", "shared", (0, 0, 0), (33, 0, 0), 14, "ld.shared.u32 %r3, [%r1]", 64, 4,
               "shared variable 's' (128 bytes at 0x0) + 64")
    r = Report("racecheck", "k", "read-after-write race", b, a)
    text = str(r)
    assert "first:  4-byte write of shared address 0x40" in text
    assert "thread (1, 0, 0), line 12" in text and "thread (33, 0, 0), line 14" in text
    from hardware.simt import LaunchStats, RaceError
    with pytest.raises(RaceError) as e:
        Session(parse_sanitize(None), LaunchStats("k", (1, 1, 1), (64, 1, 1))).report(r)
    assert e.value.report is r
    st = LaunchStats("k", (1, 1, 1), (64, 1, 1))
    s = Session(parse_sanitize("warn"), st)
    for _ in range(MAX_WARNINGS + 5):
        s.report(r)
    s.end_launch()
    assert len(st.warnings) == MAX_WARNINGS + 1 and st.warnings[0] == text
    assert st.warnings[-1] == "... 5 more sanitizer warnings"
    Session(parse_sanitize("off"), st).report(r)   # off: nothing happens


def test_sanitize_off_still_refuses_accesses_outside_the_backing():
    from hardware.simt import MemoryAccessError
    mem = GlobalMemory()
    x, out = mem.to_device(np.zeros(8, np.float32)), mem.alloc(32)
    with pytest.raises(MemoryAccessError, match="out-of-bounds global access"):
        load_ptx(COPY).launch("copy", 1, 128, [x, out], mem, sanitize=False)
