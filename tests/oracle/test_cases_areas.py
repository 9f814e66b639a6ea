"""Cases of the softmax, hardware and KV-cache areas checked against independent
oracles: a float64 NumPy softmax, hand-derived coalescing and bank figures, and a
contiguous per-sequence model of the KV cache."""
from __future__ import annotations

import numpy as np
import pytest

from oracles import built_case


@pytest.mark.parametrize("case_id", ["softmax.softmax.6x37",
                                     "softmax.online_softmax.6x257.offset+10000.block16"])
def test_softmax_cases_against_float64_numpy(case_id: str) -> None:
    spec, inputs, out = built_case(case_id)
    x = inputs["x"].astype(np.float64)
    m = np.max(x, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        e = np.where(np.isneginf(x), 0.0, np.exp(x - np.where(np.isneginf(m), 0, m)))
    s = e.sum(axis=-1, keepdims=True)
    want = np.where(s > 0, e / np.where(s > 0, s, 1), 0.0).astype(np.float32)
    assert spec.tolerance["y"].compare(out["y"], want).ok
    assert (out["y"][2] == 0).all() and not np.isnan(out["y"]).any()   # fully masked row


def test_coalesce_case_hand_derived() -> None:
    _, inputs, out = built_case("hardware.memory.coalesce.4b")
    # rows: stride 1, stride 2 (half warp active), one lane per line, broadcast
    assert out["sectors"][:4].tolist() == [4, 4, 32, 1]
    assert out["requests"][:4].tolist() == [1, 1, 1, 1]
    assert out["lines"][:4].tolist() == [1, 1, 32, 1]
    assert out["requests"][-2] == 0 and out["sectors"][-2] == 0       # nobody active


def test_bank_case_hand_derived() -> None:
    _, _, out = built_case("hardware.memory.bank_conflicts.4b")
    # word strides 1, 2, 4, 8, 16, 32, 33; then a broadcast
    assert out["wavefronts"][:8].tolist() == [1, 2, 4, 8, 16, 32, 1, 1]


def test_tile_case_257_column_example() -> None:
    _, _, out = built_case("hardware.tiling.tile_utilization")
    assert out["tiles"][0] == 6 and out["waves"][0] == 1
    assert abs(out["idle_sm_fraction_last_wave"][0] - 102 / 108) < 1e-15


@pytest.mark.parametrize("case_id", ["kvcache.trace.small", "kvcache.trace.prefix",
                                     "kvcache.trace.hnd"])
def test_kv_trace_pages_hold_what_a_contiguous_model_holds(case_id: str) -> None:
    spec, inputs, out = built_case(case_id)
    p = spec.params
    bs = p["block_size"]
    seqs: dict[int, list] = {}
    kv = 0
    for (code, seq, a, b), st in zip(inputs["ops"].tolist(), out["status"]):
        n = {0: a, 1: a}.get(code, 0)
        if st != 0:                    # not applied; its K/V rows are still consumed
            kv += n
            continue
        if code == 0:
            seqs[seq] = list(range(kv, kv + a))
        elif code == 1:
            seqs[seq] += list(range(kv, kv + a))
        elif code == 2:
            seqs[a] = list(seqs[seq])
        else:
            del seqs[seq]
        kv += n
    live = sorted(s for s in seqs if seqs[s])
    assert out["seq_ids"].tolist() == live
    indptr, indices, last = out["kv_indptr"], out["kv_indices"], out["kv_last_page_len"]
    rows = []
    for j, s in enumerate(live):
        pages = indices[indptr[j]:indptr[j + 1]]
        assert bs * (len(pages) - 1) + last[j] == len(seqs[s]) and 1 <= last[j] <= bs
        rows += seqs[s]
    assert np.array_equal(out["k_gathered"], inputs["k"][rows])
    assert np.array_equal(out["v_gathered"], inputs["v"][rows])


def test_simt_cases_against_numpy() -> None:
    _, x, out = built_case("simt.vector_add.vector_add")
    assert np.array_equal(out["c"], x["a"] + x["b"])
    _, x, out = built_case("simt.histogram.histogram")
    assert np.array_equal(out["hist"], np.bincount(x["data"], minlength=256).astype(np.uint32))
    _, x, out = built_case("simt.convert.to_bf16")
    bits = x["x"].view(np.uint32).astype(np.uint64)
    rne = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)   # finite inputs
    assert np.array_equal(out["codes"], rne)
    _, x, out = built_case("simt.matmul.matmul_tiled")
    ref = x["a"].astype(np.float64) @ x["b"].astype(np.float64)
    assert np.allclose(out["c"].reshape(32, 32), ref, rtol=1e-5, atol=1e-5)
    _, x, rows = built_case("simt.traversal.row_sums")
    assert np.allclose(rows["sums"], x["m"].astype(np.float64).sum(axis=1), atol=1e-5)
    warp_instr, thread_instr = rows["stats"][:2]
    assert thread_instr <= 32 * warp_instr


def test_paged_attention_case_against_numpy() -> None:
    spec, x, out = built_case("kvcache.paged_attention.decode_and_prefill")
    # the K/V rows each live sequence holds, by the trace in the case's docstring
    rows = {0: list(range(0, 13)) + list(range(39, 42)),
            2: list(range(0, 13)) + list(range(34, 39)),
            3: list(range(42, 51))}
    want_all = np.zeros(out["out"].shape, np.float64)
    for b, s in enumerate((0, 2, 3)):
        k, v = x["k"][rows[s]].astype(np.float64), x["v"][rows[s]].astype(np.float64)
        n = len(rows[s])
        for h in range(4):
            q = x["q"][b, h].astype(np.float64)
            sc = q @ k[:, h // 2].T / 4.0
            i, j = np.arange(3)[:, None], np.arange(n)[None, :]
            sc = np.where(j <= i + n - 3, sc, -np.inf)          # bottom-right causal
            p = np.exp(sc - sc.max(-1, keepdims=True))
            want = p / p.sum(-1, keepdims=True) @ v[:, h // 2]
            assert np.abs(out["out"][b, h] - want).max() < 1e-5
            want_all[b, h] = want
    tol = spec.tolerance["out"].resolve(out)
    assert tol.compare(want_all.astype(np.float32), out["out"]).ok   # the float64 model passes


def test_pipeline_case_orders_schedules_as_the_paper() -> None:
    _, _, out = built_case("hardware.pipeline.h100.fp16.n4096")
    serial, ws, pingpong, fa3 = out["total_time"]
    assert fa3 < min(ws, pingpong) and max(ws, pingpong) < serial
    assert np.argmax(out["tensor_utilization"]) == 3


def test_fusion_case_reproduces_the_seed() -> None:
    _, _, out = built_case("hardware.fusion.seed_examples")
    # sin, cos, square, square, add as 5 kernels: 6 reads + 5 writes; fused: x in, y out
    assert out["sin2_plus_cos2"].tolist() == [11, 2]
    stored_f, stored_b, recomp_f, recomp_b = out["sigmoids"].tolist()
    assert stored_f + stored_b == 8 and recomp_f + recomp_b == 5


def test_tile_load_case_aligned_vs_misaligned_rows() -> None:
    _, _, out = built_case("hardware.memory.tile_loads")
    aligned, odd, padded = out["segments"][:3]
    assert aligned == 32 * 4                  # 128-byte rows: 4 sectors each
    assert odd > aligned                      # ld 33: rows start off the 32-byte grid
    assert padded == aligned                  # ld 40 (160-byte rows): aligned again
    assert out["min_segments"][0] == 128


def test_hadamard_case_against_a_sylvester_matrix() -> None:
    from refimpl.scaling import TE_WGRAD_SIGNS

    h = np.array([[1.0]])
    while h.shape[0] < 16:
        h = np.block([[h, h], [h, -h]])
    d = np.asarray(TE_WGRAD_SIGNS, dtype=np.float64)
    spec, x, out = built_case("scaling.hadamard16")
    groups = x["x"].astype(np.float64).reshape(8, 4, 16)
    want = ((groups * d) @ h / 4).reshape(8, 64)
    assert spec.tolerance["y"].compare(out["y"], want.astype(np.float32)).ok
    assert np.abs(out["y"] - want).max() < 1e-6


def test_float_to_int_case_cvt_rules() -> None:
    _, x, out = built_case("simt.convert.float_to_int")
    y = out["y"].reshape(16, 4)                       # rn, rz, rd, ru per input
    assert y[2].tolist() == [2, 2, 2, 3]              # 2.5: ties to even
    assert y[5].tolist() == [-3, -2, -3, -2]          # -2.7
    assert y[7].tolist() == [2 ** 31 - 1] * 4         # 3e9 saturates
    assert y[9].tolist() == [0, 0, 0, 0]              # NaN -> 0


def test_more_gallery_cases_against_numpy() -> None:
    _, x, out = built_case("simt.half_precision.halfk")
    h = x["x"]
    a = (h + np.float16(1.0)).astype(np.float16)                  # __hadd
    want = (a.astype(np.float64) * h.astype(np.float64)            # __hfma: one rounding
            - h[::-1].astype(np.float64)).astype(np.float16)
    assert np.array_equal(out["y"].view(np.uint16), want.view(np.uint16))
    _, x, out = built_case("simt.memory_spaces.dyn_reverse")
    assert np.array_equal(out["out"], x["x"].reshape(2, 64)[:, ::-1].reshape(-1))
    _, x, out = built_case("simt.intrinsics.int_intrinsics")
    v = x["x"]
    o = out["y"].reshape(40, 16)
    assert o[:, 0].tolist() == [bin(int(t)).count("1") for t in v]            # popc
    assert o[:, 1].tolist() == [32 - int(t).bit_length() for t in v]          # clz
    assert o[:, 2].tolist() == [int(f"{int(t):032b}"[::-1], 2) for t in v]    # brev


def test_kv_trace_failed_admission_changes_nothing() -> None:
    """A refused add (a prompt that hits cached blocks but needs more blocks than are
    free) must leave the free queue as it was: the next sequence gets the same blocks
    as in a trace without the refused add, and the prefix counters are untouched."""
    from oracle.cases.kvcache import _replay

    p = {"num_blocks": 4, "block_size": 4, "num_kv_heads": 1, "head_dim": 2,
         "layout": "NHD", "prefix_caching": True}
    rows = np.zeros((200, 1, 2), np.float32)

    def run(ops, tokens):
        inputs = {"ops": np.array(ops, np.int64), "tokens": np.array(tokens, np.int64),
                  "k": rows, "v": rows}
        return _replay(inputs, p)

    a = list(range(9))                  # 3 blocks, the first 2 full and cached once freed
    b = list(range(8)) + [90] * 12      # hits A's 2 cached blocks, needs 5 blocks in all
    c = [50, 51, 52, 53]
    c1, s1, _, _ = run([[0, 1, 9, -1], [3, 1, 0, 0], [0, 2, 20, -1], [0, 3, 4, -1]],
                       a + b + c)
    c0, s0, _, _ = run([[0, 1, 9, -1], [3, 1, 0, 0], [0, 3, 4, -1]], a + c)
    assert s1.tolist() == [0, 0, 1, 0] and s0.tolist() == [0, 0, 0]
    assert c1.block_table(3) == c0.block_table(3)
    for name in ("prefix_query_tokens", "prefix_hit_tokens", "free_blocks",
                 "cached_blocks"):
        assert getattr(c1.stats(), name) == getattr(c0.stats(), name), name
