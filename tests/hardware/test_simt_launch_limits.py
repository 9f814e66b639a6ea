"""Launch limits: the launch-wide instruction and time budget, strict grid/block
dimensions and argument checks; every refusal a LaunchError (or LaunchBudgetError)
naming the argument, raised before anything runs or between waves."""
from __future__ import annotations

import time

import numpy as np
import pytest

from hardware.simt import (
    DEFAULT_MAX_INSTRUCTIONS,
    GlobalMemory,
    LaunchBudgetError,
    LaunchError,
    StepLimitError,
    load_ptx,
)

HEAD = """.version 9.0
.target sm_90
.address_size 64
"""

#: three instructions per warp: two movs and the ret
THREE = HEAD + """
.visible .entry k(.param .u64 p0, .param .f32 f, .param .u32 u)
{
    .reg .b32 %r<3>;
    mov.u32 %r1, 1;
    mov.u32 %r2, 2;
    ret;
}
"""


@pytest.fixture(scope="module")
def mod():
    return load_ptx(THREE)


def launch(mod, grid=1, block=32, args=(0, 1.0, 0), **kw):
    return mod.launch("k", grid, block, list(args), GlobalMemory(), **kw)


def test_default_budget_refuses_the_largest_grid_before_running(mod):
    # 2^31 - 1 blocks of one warp: at least 2^31 - 1 warp instructions > 10^8
    assert DEFAULT_MAX_INSTRUCTIONS == 10**8
    t = time.perf_counter()
    with pytest.raises(LaunchBudgetError) as e:
        launch(mod, grid=2**31 - 1)
    assert time.perf_counter() - t < 1.0
    msg = str(e.value)
    assert "2147483647 warps" in msg and "max_instructions=100000000" in msg
    assert "pass a larger max_instructions" in msg
    assert isinstance(e.value, StepLimitError)


def test_budget_stops_between_waves_and_says_how_far(mod):
    # 1024-thread blocks run 128 to a wave (2^17 threads): the first wave executes
    # 128 blocks * 32 warps * 3 instructions = 12288 warp instructions
    with pytest.raises(LaunchBudgetError) as e:
        launch(mod, grid=256, block=1024, max_instructions=10_000)
    msg = str(e.value)
    assert "after 128 of 256 blocks and 12288 warp instructions" in msg
    assert "max_instructions=10000" in msg


def test_budget_exactly_met_and_no_budget_complete(mod):
    st = launch(mod, grid=256, block=1024, max_instructions=256 * 32 * 3)
    assert st.warp_instructions == 256 * 32 * 3
    assert launch(mod, grid=256, block=1024, max_instructions=None).warp_instructions == 24576


def test_time_limit_stops_between_waves(mod):
    with pytest.raises(LaunchBudgetError, match=r"after 128 of 256 blocks.*time_limit=1e-09"):
        launch(mod, grid=256, block=1024, time_limit=1e-9)
    # a single wave completes: the limit is checked only while blocks remain
    assert launch(mod, grid=1, time_limit=1e-9).warp_instructions == 3


@pytest.mark.parametrize("kw,match", [
    (dict(max_instructions=0), "max_instructions must be a positive int"),
    (dict(max_instructions=1.5), "max_instructions must be a positive int"),
    (dict(max_instructions=True), "max_instructions must be a positive int"),
    (dict(time_limit=0), "time_limit must be a positive number"),
    (dict(time_limit=float("nan")), "time_limit must be a positive number"),
    (dict(time_limit="1"), "time_limit must be a positive number"),
    (dict(max_steps=2**70), "max_steps must be None or a positive int below 2"),
    (dict(dynamic_shared=10**18), "dynamic_shared = 1000000000000000000 bytes exceeds"),
    (dict(dynamic_shared=1.0), "dynamic_shared must be a non-negative int"),
])
def test_bad_budget_and_size_arguments(mod, kw, match):
    with pytest.raises(LaunchError, match=match):
        launch(mod, **kw)


@pytest.mark.parametrize("grid,match", [
    ("64", r"grid must be an int or a tuple of 1 to 3 ints, got '64'"),
    (2.0, "grid must be an int or a tuple"),
    (np.float64(4), "grid must be an int or a tuple"),
    (True, "grid must be an int or a tuple"),
    (np.bool_(True), "grid must be an int or a tuple"),
    ((2, "1"), r"grid\[1\] must be an int, got str '1'"),
    ((2, 1.0), r"grid\[1\] must be an int, got float"),
    ((2, True), r"grid\[1\] must be an int, got bool"),
    ((1, 1, 1, 1), "grid must be an int or a tuple of 1 to 3"),
    ((), "grid must be an int or a tuple of 1 to 3"),
    ((2, 0), r"grid\[1\] must be positive, got 0"),
    ({1, 2}, "grid must be an int or a tuple"),
])
def test_grid_dimensions_are_ints(mod, grid, match):
    with pytest.raises(LaunchError, match=match):
        launch(mod, grid=grid)


def test_block_dimensions_are_ints(mod):
    with pytest.raises(LaunchError, match=r"block must be an int or a tuple.*'32'"):
        launch(mod, block="32")
    with pytest.raises(LaunchError, match=r"block\[0\] must be an int, got float"):
        launch(mod, block=(32.0,))


def test_numpy_integer_dimensions_are_accepted(mod):
    st = launch(mod, grid=(np.int64(2), np.uint8(3)), block=[np.int32(64)])
    assert st.grid == (2, 3, 1) and st.block == (64, 1, 1)
    assert st.warp_instructions == 2 * 3 * 2 * 3


@pytest.mark.parametrize("args,match", [
    ((0, 1e39, 0), r"argument 1 of k \(.f32\) = 1e\+39 is beyond the largest finite .f32"),
    ((0, 2**2000, 0), r"argument 1 of k \(.f32\) = \d{37}\.\.\. is beyond"),
    ((0, 1.0, 2**32), r"argument 2 of k \(.u32\) = 4294967296 does not fit 32 bits"),
    ((0, 1.0, -2**31 - 1), r"argument 2 of k \(.u32\) = -2147483649 does not fit"),
    ((2**64, 1.0, 0), r"argument 0 of k \(.u64\) = 18446744073709551616 does not fit"),
    ((0.5, 1.0, 0), r"argument 0 of k \(.u64\) must be an int, got float"),
    ((0, "1.0", 0), r"argument 1 of k \(.f32\) must be a float, got str"),
    ((0, 1.0, True), r"argument 2 of k \(.u32\) must be an int, got bool"),
    ((0, 1.0), "kernel k takes 3 arguments"),
])
def test_bad_arguments(mod, args, match):
    with pytest.raises(LaunchError, match=match):
        launch(mod, args=args)


def test_float_arguments_round_like_c_and_keep_explicit_infinities():
    src = HEAD + """
.visible .entry k(.param .u64 p0, .param .f32 f)
{
    .reg .b64 %rd<2>;
    .reg .f32 %f<2>;
    ld.param.u64 %rd1, [p0];
    ld.param.f32 %f1, [f];
    st.global.f32 [%rd1], %f1;
    ret;
}
"""
    m = load_ptx(src)
    mem = GlobalMemory()
    out = mem.alloc(4)
    # 0.1 (a double) rounds to the nearest float, 0x3DCCCCCD; inf is passed as given
    m.launch("k", 1, 1, [out, 0.1], mem)
    assert mem.from_device(out, np.uint32, 1)[0] == 0x3DCCCCCD
    m.launch("k", 1, 1, [out, float("-inf")], mem)
    assert mem.from_device(out, np.uint32, 1)[0] == 0xFF800000


@pytest.mark.parametrize("args", [5, (x for x in [0, 1.0, 0]), {0: 1}])
def test_args_must_be_a_list_or_tuple(mod, args):
    with pytest.raises(LaunchError, match="args of kernel k must be a list or tuple of 3"):
        mod.launch("k", 1, 32, args, GlobalMemory())


def test_kernel_name_must_be_a_string(mod):
    with pytest.raises(LaunchError, match=r"no kernel named \['k'\]"):
        mod.launch(["k"], 1, 32, [0, 1.0, 0], GlobalMemory())


def test_a_one_dimensional_integer_array_is_a_dim3(mod):
    assert launch(mod, grid=np.array([2, 3])).grid == (2, 3, 1)
    with pytest.raises(LaunchError, match="grid must be an int or a tuple"):
        launch(mod, grid=np.array([2.0, 3.0]))


def test_symbol_address_checks_its_arguments():
    m = load_ptx(HEAD + ".global .u32 g;\n.visible .entry k()\n{\n    ret;\n}\n")
    with pytest.raises(LaunchError, match=r"no .global/.const variable named \['g'\]"):
        m.symbol_address(["g"], GlobalMemory())
    with pytest.raises(LaunchError, match="memory must be a GlobalMemory, got NoneType"):
        m.symbol_address("g", None)
