"""brx.idx (PTX ISA 9.7.12.2) with its ``.branchtargets`` list (11.5.1): each lane
branches to the list entry its index names; lanes of one warp that pick different
entries diverge into one path per entry and reconverge at the branch's immediate
post-dominator (a warp-wide shfl.sync after it sees every lane). Expected values by
hand; the PTX checked with ptxas."""
from __future__ import annotations

import numpy as np
import pytest

from hardware.simt import GlobalMemory, load_ptx
from hardware.simt.errors import ExecutionError, PtxSyntaxError

from test_simt_tma import HEAD, ptxas_ok


def kernel(index: str = "rem.u32 %r2, %r1, 3;", table: str = "L0, L1, L2") -> str:
    return HEAD + f""".visible .entry k(.param .u64 out)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<10>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [out];
    mov.u32 %r1, %tid.x;
    {index}
    mov.u32 %r3, 0;
$ts:
    .branchtargets {table};
    brx.idx %r2, $ts;
L0:
    add.u32 %r3, %r3, 100;
    bra DONE;
L1:
    add.u32 %r3, %r3, 200;
    bra DONE;
L2:
    add.u32 %r3, %r3, 300;
DONE:
    shfl.sync.idx.b32 %r4, %r3, 0, 31, -1;
    add.u32 %r5, %r3, %r4;
    mul.wide.u32 %rd2, %r1, 4;
    add.u64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r5;
    ret;
}}
"""


def _run(src: str, threads: int = 64):
    mem = GlobalMemory()
    out = mem.calloc(4 * threads)
    st = load_ptx(src).launch("k", 1, threads, [out], mem)
    return mem.from_device(out, np.uint32, threads), st


def test_lanes_diverge_three_ways_and_reconverge():
    src = kernel()
    ptxas_ok(src)
    got, st = _run(src)
    i = np.arange(64)
    val = 100 * (1 + i % 3)
    # the shuffle, run with every lane converged, reads lane 0 of the warp (thread 0
    # picked L0, thread 32 L2)
    assert got.tolist() == (val + val[(i // 32) * 32]).tolist()
    assert st.divergent_branches == 2                 # one per warp
    assert st.max_stack_depth == 4                     # the warp's entry + three paths


def test_a_uniform_index_does_not_diverge():
    src = kernel(index="mov.u32 %r2, 2;")
    got, st = _run(src)
    assert got.tolist() == [600] * 64
    assert st.divergent_branches == 0


def test_an_index_outside_the_list_is_an_error():
    src = kernel(index="mov.u32 %r2, %r1;")           # lanes 3.. have no entry
    with pytest.raises(ExecutionError, match=r"thread \(3, 0, 0\), line \d+ \('brx.idx "
                                             r"%r2, \$ts'\): brx.idx index 3 is outside "
                                             r"its list of 3 targets"):
        _run(src)


def test_a_list_naming_something_else_is_refused():
    with pytest.raises(PtxSyntaxError, match="lists 'NOPE', which is not a label"):
        load_ptx(kernel(table="L0, NOPE"))
