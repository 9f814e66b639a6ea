"""The FlashAttention-2 forward kernel and the two-warp block sum of the gallery (the
interpreter's speed workloads): outputs against float64 NumPy attention with a tolerance
derived from float32 error bounds, the block sum bit for bit against a NumPy replay of
its summation order, statistics against hand counts; and the checks that must still
fire when the interpreter reuses the checks of a shifted access."""
from __future__ import annotations

import math

import numpy as np
import pytest

from hardware.simt import GlobalMemory, MemoryAccessError, StepLimitError, gallery

U = 2.0 ** -24                 # float32 unit roundoff
EX2_ERROR = 2.0 ** -22         # ex2.approx.f32: at most 2 ulp (PTX ISA 9.7.3.20)
LOG2E = 1.4426950408889634


def _gamma(n: int) -> float:
    """gamma_n = n u / (1 - n u) (Higham, Accuracy and Stability, 2nd ed., 3.1)."""
    return n * U / (1 - n * U)


def _attention_bound(Q: np.ndarray, K: np.ndarray, V: np.ndarray, c: float,
                     block_n: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """float64 reference O = softmax(Q K^T * c / log2(e)) V and a first-order bound on
    the error of the kernel's float32 computation, per element.

    Scores: 64 chained fma -> |s^ - s| <= gamma_64 sum_k |q_k k_k| (Higham 3.1);
    t = s^ * c (one rounding) and the exponent t - m (one rounding): each probability
    carries a relative error of at most ln 2 * |error of its exponent| plus the ex2
    error, and each K/V tile rescales the earlier weights by an alpha = ex2(m_old -
    m_new) with the same kind of error (ex2, its argument, one product). A relative
    perturbation rho_j of the weights moves the normalised output by at most
    max(rho) * E_w|v - o|; the accumulations of o (fma chains) and l (shuffle tree and
    rescales) through at most n_kv + 2 T + 8 roundings add gamma_N * E_w|v| each; the
    final division one rounding of |o|. The sum is doubled for second-order terms."""
    q, k, v = (x.astype(np.float64) for x in (Q, K, V))
    n_kv = k.shape[0]
    tiles = -(-n_kv // block_n)
    s = q @ k.T                                            # exact scores (float64)
    t = s * c                                              # exponents, base 2
    m = t.max(axis=1, keepdims=True)
    w = np.exp2(t - m)
    o = (w @ v) / w.sum(axis=1, keepdims=True)
    e_s = _gamma(k.shape[1]) * (np.abs(q) @ np.abs(k).T)   # score error
    d_t = c * e_s + U * np.abs(t) + U * np.abs(t - m)      # exponent error
    span = np.abs(t - m).max(axis=1, keepdims=True)
    rho = (math.log(2) * 2 * d_t.max(axis=1, keepdims=True) + EX2_ERROR
           + tiles * (EX2_ERROR + math.log(2) * U * span + U))
    wn = w / w.sum(axis=1, keepdims=True)
    spread = np.einsum("ij,ijc->ic", wn, np.abs(v[None, :, :] - o[:, None, :]))
    mag = wn @ np.abs(v)
    bound = 2 * (rho * spread + 2 * _gamma(n_kv + 2 * tiles + 8) * mag + U * np.abs(o))
    return o, bound


def _flash(Q, K, V, c):
    n_q, n_kv = Q.shape[0], K.shape[0]
    mem = GlobalMemory()
    pq, pk, pv = mem.to_device(Q), mem.to_device(K), mem.to_device(V)
    po = mem.alloc(4 * n_q * 64)
    st = gallery.load("flash_attention").launch(
        "flash_attention_fwd", -(-n_q // 64), 256, [pq, pk, pv, po, n_q, n_kv, np.float32(c)],
        mem)
    return mem.from_device(po, np.float32, (n_q, 64)), st


@pytest.mark.parametrize("n_q,n_kv,seed", [(64, 64, 0), (70, 45, 1), (16, 100, 2)])
def test_flash_attention_forward_within_float32_bound(n_q, n_kv, seed):
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((n_q, 64)).astype(np.float32)
    K = rng.standard_normal((n_kv, 64)).astype(np.float32)
    V = rng.standard_normal((n_kv, 64)).astype(np.float32)
    c = float(np.float32(LOG2E / 8))   # scale 1/sqrt(64), folded with log2(e)
    O, _ = _flash(Q, K, V, c)
    ref, bound = _attention_bound(Q, K, V, c)
    assert bound.max() < 1e-3          # tight enough to catch a wrong softmax or schedule
    err = np.abs(O.astype(np.float64) - ref)
    assert (err <= bound).all(), float((err / bound).max())


def test_flash_attention_softmax_is_shift_invariant_and_exact_for_equal_scores():
    # equal scores (K = 0): every weight is exactly 2**0 = 1, so O is the column mean
    # of V, computed by fma chains of exact products and one division: with V holding
    # small integers every partial sum is exact, hence O is exactly mean(V)
    n_kv = 48
    Q = np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32)
    K = np.zeros((n_kv, 64), np.float32)
    V = np.random.default_rng(4).integers(-8, 9, (n_kv, 64)).astype(np.float32)
    O, _ = _flash(Q, K, V, LOG2E / 8)
    expect = (V.astype(np.float64).sum(axis=0) / n_kv).astype(np.float32)
    np.testing.assert_array_equal(O, np.broadcast_to(expect, O.shape))


def test_flash_attention_statistics():
    # 64 queries, 64 keys: one block of 8 warps, 2 K/V tiles
    rng = np.random.default_rng(5)
    Q, K, V = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(3))
    _, st = _flash(Q, K, V, LOG2E / 8)
    # every global access of a warp is 32 consecutive floats of one 128-byte aligned
    # row half: Q 64*64/32 requests, K and V 2 tiles * 32*64/32 each; O 64 rows * 2
    assert st.global_load_requests == 128 + 2 * 2 * 64
    assert st.global_load_sectors == 4 * st.global_load_requests
    assert st.global_store_requests == 128
    assert st.global_store_sectors == 4 * 128
    # sQ rows are read by broadcast, sK[lane][k] through the padded row (stride 65
    # words: 32 banks), sV[j][lane] row-wise, every store row-wise: one wavefront each
    assert st.shared_load_requests > 0
    assert st.shared_load_bank_conflicts == 0
    assert st.shared_store_bank_conflicts == 0
    assert st.shared_load_wavefronts == st.shared_load_requests
    assert st.barriers == 2 * 2        # two __syncthreads per K/V tile, one block
    assert st.simd_efficiency == 1.0   # no divergence: every guard is warp-uniform


def _block_sum_reference(x: np.ndarray, grid: int) -> np.ndarray:
    """The kernel's summation order replayed in float32: thread t of block b sums
    x[b*64 + t], x[b*64 + t + 64*grid], ... in order; each warp reduces by
    __shfl_down_sync (a lane whose source is past lane 31 reads its own value); the
    block adds warp 1's total to warp 0's."""
    n = x.shape[0]
    out = np.empty(grid, np.float32)
    for b in range(grid):
        v = np.zeros(64, np.float32)
        for t in range(64):
            acc = np.float32(0)
            for i in range(b * 64 + t, n, 64 * grid):
                acc = np.float32(acc + x[i])
            v[t] = acc
        totals = []
        for w in range(2):
            lanes = v[32 * w: 32 * w + 32].copy()
            for off in (16, 8, 4, 2, 1):
                src = np.array([lanes[i + off] if i + off < 32 else lanes[i]
                                for i in range(32)], np.float32)
                lanes = (lanes + src).astype(np.float32)
            totals.append(lanes[0])
        out[b] = np.float32(totals[0] + totals[1])
    return out


@pytest.mark.parametrize("grid,n", [(1, 64 * 40), (3, 64 * 3 * 5 + 17), (2, 50)])
def test_block_sum_two_warps_bit_exact(grid, n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    mem = GlobalMemory()
    px, po = mem.to_device(x), mem.alloc(4 * grid)
    st = gallery.load("flash_attention").launch("block_sum_2warps", grid, 64, [px, po, n], mem)
    got = mem.from_device(po, np.float32, grid)
    np.testing.assert_array_equal(got.view(np.uint32),
                                  _block_sum_reference(x, grid).view(np.uint32))
    if grid == 1 and n % 64 == 0:
        # each warp loads 32 consecutive floats (128 aligned bytes) n/64 times
        assert st.global_load_requests == n // 32
        assert st.global_load_sectors == 4 * (n // 32)
        assert st.global_load_bytes == 4 * n


def test_loop_walking_past_its_allocation_still_faults():
    # the loop's addresses shift by 256 bytes per iteration; the shift that leaves the
    # allocation must be checked like any other access
    x = np.ones(64 * 10, np.float32)
    mem = GlobalMemory()
    px, po = mem.to_device(x), mem.alloc(4)
    with pytest.raises(MemoryAccessError, match="out-of-bounds global"):
        gallery.load("flash_attention").launch("block_sum_2warps", 1, 64,
                                               [px, po, 64 * 11], mem)


@pytest.mark.parametrize("n", [32 * 7, 32 * 7 + 5])
def test_step_limit_is_exact_through_uniform_loops(n):
    # one warp (a 32-thread block) loops over x: the warp executes exactly
    # warp_instructions instructions, so that many steps complete and any fewer stop
    # the launch, naming the warp and a line of the kernel
    x = np.ones(n, np.float32)
    mod = gallery.load("flash_attention")

    def run(max_steps):
        mem = GlobalMemory()
        px, po = mem.to_device(x), mem.alloc(4)
        # a 32-thread block never writes partial[1]: read as shared memory's initial
        # zero with initcheck off
        st = mod.launch("block_sum_2warps", 1, 32, [px, po, n], mem, max_steps=max_steps,
                        sanitize={"initcheck": "off"})
        return st, mem.from_device(po, np.float32, 1)[0]

    st, total = run(10 ** 6)
    # the kernel strides by 64: the warp sums the elements i with i % 64 < 32 (small
    # integers, so every float32 sum is exact)
    assert total == sum(1 for i in range(n) if i % 64 < 32)
    steps = st.warp_instructions
    assert run(steps)[0].warp_instructions == steps
    for max_steps in range(1, steps):  # every boundary: in a run, at a branch, at exit
        with pytest.raises(StepLimitError, match=r"warp 0 of block \(0, 0, 0\).*line \d+"):
            run(max_steps)
