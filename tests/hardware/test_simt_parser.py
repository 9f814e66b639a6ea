"""The PTX scanner and the call inliner (hardware/simt/parser.py, inline.py): directives
end where their grammar ends, nothing the parser did not consume passes silently, and
inlining costs time linear in the size of its result, refuses recursive, undefined and
indirect calls, and keeps the source line numbers."""
from __future__ import annotations

import time

import numpy as np
import pytest

from hardware.simt import GlobalMemory, PtxSyntaxError, UnsupportedPtxError, load_ptx
from hardware.simt.inline import inline_calls

_HEAD = ".version 9.0\n.target sm_90\n.address_size 64\n"


def _kernel(body: str, header: str = "") -> str:
    return _HEAD + f""".visible .entry k(.param .u64 p0){header}
{{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p0];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, 1;
{body}
    st.global.u32 [%rd1], %r1;
    ret;
}}
"""


def _run(src: str) -> int:
    mem = GlobalMemory()
    out = mem.alloc(4)
    load_ptx(src).launch("k", 1, 1, [out], mem)
    return int(mem.from_device(out, np.int32, 1)[0])


@pytest.mark.parametrize("directive", [
    ".loc 1 2 3",
    ".loc\t1 7 0, function_name $L__info_string0, inlined_at 1 11 9",
    ".loc 2 491 1, function_name $L__info_string1 + 12, inlined_at 1 19 5",
])
def test_loc_on_the_line_of_an_instruction_does_not_swallow_it(directive):
    """PTX ISA 11.5.2: .loc has no terminator; it ends after its operands. An
    instruction after it on the same line (as call inlining produces) must run."""
    assert _run(_kernel(f"    {directive} add.s32 %r1, %r1, 41;")) == 42
    assert _run(_kernel(f"    {directive}\n    add.s32 %r1, %r1, 41;")) == 42


@pytest.mark.parametrize("text,match", [
    ("    .loc 1 2", "malformed .loc"),
    ("    .loc 1 x 3", "malformed .loc"),
    ("    .loc 1 2 3, inlined_at 1 2 3", "malformed|cannot parse|not supported"),
    ('    .file 1 k.cu', "malformed .file"),
    ("    .pragma nounroll;", "malformed .pragma"),
    ('    .pragma "nounroll" junk;', "malformed .pragma"),
])
def test_malformed_directives_are_refused(text, match):
    with pytest.raises((PtxSyntaxError, UnsupportedPtxError), match=match):
        load_ptx(_kernel(text))


def test_text_after_a_line_directive_is_not_ignored():
    # an unknown word after .loc's operands is the start of a statement, and refused
    with pytest.raises((PtxSyntaxError, UnsupportedPtxError), match="garbage"):
        load_ptx(_kernel("    .loc 1 2 3 garbage\n    add.s32 %r1, %r1, 1;"))
    with pytest.raises((PtxSyntaxError, UnsupportedPtxError)):
        load_ptx(_HEAD.replace(".version 9.0", ".version 9.0 sm_90") + "\n")


@pytest.mark.parametrize("header,match", [
    (" .maxntid 64, 1, 1 junk", "cannot parse 'junk"),
    (" .maxntid 64, 1, x", "cannot parse"),
    (" .reqntid", "takes 1 to 3 positive values, got none"),  # ptxas refuses it too
])
def test_kernel_header_text_must_be_consumed(header, match):
    with pytest.raises(PtxSyntaxError, match=match):
        load_ptx(_kernel("", header))


def test_the_inlined_call_keeps_its_instructions_with_lineinfo():
    """A .func whose body starts with .loc (as -lineinfo and -G builds write it): the
    first instructions of the body run (they were swallowed, the function returned 0)."""
    src = _HEAD + """
.func (.param .b32 func_retval0) f(.param .b32 f_param_0)
{
    .reg .b32 %r<3>;
    .loc 1 1 0
    ld.param.b32 %r1, [f_param_0];
    .loc 1 2 5
    add.s32 %r2, %r1, 41;
    .loc 1 3 5
    st.param.b32 [func_retval0+0], %r2;
    ret;
}
.visible .entry k(.param .u64 p0)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [p0];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, 1;
    { // callseq 0, 0
    .param .b32 param0;
    st.param.b32 [param0+0], %r1;
    .param .b32 retval0;
    call.uni (retval0),
    f,
    (
    param0
    );
    ld.param.b32 %r2, [retval0+0];
    } // callseq 0
    st.global.u32 [%rd1], %r2;
    ret;
}
"""
    mem = GlobalMemory()
    out = mem.alloc(4)
    load_ptx(src).launch("k", 1, 1, [out], mem)
    assert mem.from_device(out, np.int32, 1)[0] == 42


def _call_tree(depth: int) -> str:
    """f0 calls f1 twice, ..., f_depth returns x + 1: f0(x) = 2**depth (x + 1)."""
    out = [_HEAD]
    for d in range(depth, -1, -1):
        out.append(f".func (.param .b32 func_retval0) f{d}(.param .b32 f{d}_param_0)\n{{\n"
                   f"    .reg .b32 %r<6>;\n    .loc 1 {d + 1} 0\n"
                   f"    ld.param.b32 %r1, [f{d}_param_0];\n")
        if d == depth:
            out.append("    add.s32 %r5, %r1, 1;\n")
        else:
            for k in (2, 3):
                out.append(f"    {{\n    .param .b32 param0;\n    st.param.b32 [param0+0], %r1;"
                           f"\n    .param .b32 retval0;\n    call.uni (retval0), f{d + 1}, "
                           f"(param0);\n    ld.param.b32 %r{k}, [retval0+0];\n    }}\n")
            out.append("$L__BB0_1:\n    add.s32 %r5, %r2, %r3;\n")
        out.append("    st.param.b32 [func_retval0+0], %r5;\n    ret;\n}\n")
    out.append(""".visible .entry k(.param .u64 p0)
{
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p0];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, %tid.x;
    {
    .param .b32 param0;
    st.param.b32 [param0+0], %r1;
    .param .b32 retval0;
    call.uni (retval0), f0, (param0);
    ld.param.b32 %r2, [retval0+0];
    }
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd3, %rd2, %rd3;
    st.global.u32 [%rd3], %r2;
    ret;
}
""")
    return "".join(out)


@pytest.mark.slow
def test_inlining_a_deep_call_tree_is_linear():
    """A depth-8 binary call tree (511 calls, about 5 KB of PTX) took 38 s to inline;
    the inlined text grows with the call tree, the time with the text."""
    src = _call_tree(8)
    t0 = time.perf_counter()
    mod = load_ptx(src)
    elapsed = time.perf_counter() - t0
    mem = GlobalMemory()
    out = mem.alloc(4 * 32)
    mod.launch("k", 1, 32, [out], mem)
    assert mem.from_device(out, np.int32, 32).tolist() == [256 * (x + 1) for x in range(32)]
    assert elapsed < 10, elapsed
    # one more level doubles the inlined text (the call tree) and not more
    n8, n9 = len(inline_calls(src)), len(inline_calls(_call_tree(9)))
    assert 1.8 < n9 / n8 < 2.2


def test_inlining_size_is_bounded():
    from hardware.simt import inline
    old = inline.MAX_INLINED_CHARS
    inline.MAX_INLINED_CHARS = 20_000
    try:
        with pytest.raises(UnsupportedPtxError, match="would produce more than"):
            load_ptx(_call_tree(8))
    finally:
        inline.MAX_INLINED_CHARS = old


def test_indirect_and_predicated_calls_are_refused():
    base = _call_tree(0)
    with pytest.raises(UnsupportedPtxError, match="indirect call"):
        load_ptx(base.replace("call.uni (retval0), f0, (param0);",
                              "call.uni (retval0), f0, (param0), proto;"))
    with pytest.raises(UnsupportedPtxError, match="predicated call"):
        load_ptx(base.replace("call.uni (retval0), f0, (param0);",
                              "@%p1 call.uni (retval0), f0, (param0);"))


def test_call_sequence_is_refused_with_a_clear_message():
    """nvcc's call sequence (as for double sin/cos/pow slow paths) opens with a scoped
    .param declaration; a call to a function the module only declares is refused with
    a message naming it."""
    ptx = """
.version 9.0
.target sm_90
.address_size 64
.extern .func (.param .b64 func_retval0) helper(.param .b64 helper_param_0);
.visible .entry k(.param .u64 p0)
{
    .reg .f64 %fd<3>;
    mov.f64 %fd1, 0d3FF0000000000000;
    { // callseq 0, 0
    .param .b64 param0;
    st.param.f64 [param0+0], %fd1;
    .param .b64 retval0;
    call.uni (retval0), helper, (param0);
    ld.param.f64 %fd2, [retval0+0];
    } // callseq 0
    ret;
}
"""
    with pytest.raises(UnsupportedPtxError, match="call to helper, which this module "
                       "declares but does not define"):
        load_ptx(ptx)
    # without .extern the prototype itself is refused (ptxas: unresolved function)
    with pytest.raises(PtxSyntaxError, match="line 5: .func helper is declared but never "
                       "defined"):
        load_ptx(ptx.replace(".extern .func", ".func"))


def _func_module(body: str) -> str:
    return """
.version 9.0
.target sm_90
.address_size 64
.func (.param .b32 func_retval0) f(.param .b32 f_param_0)
{
    .reg .b32 %r<3>;
    ld.param.b32 %r1, [f_param_0];
""" + body + """
    st.param.b32 [func_retval0+0], %r2;
    ret;
}
.visible .entry k(.param .u64 p0)
{
    .reg .b32 %r<3>;
    mov.u32 %r1, 1;
    {
    .param .b32 param0;
    st.param.b32 [param0+0], %r1;
    .param .b32 retval0;
    call.uni (retval0), f, (param0);
    ld.param.b32 %r2, [retval0+0];
    }
    ret;
}
"""


def _call_block(callee: str) -> str:
    """A call of ``callee`` (one .b32 parameter, one .b32 result) as nvcc emits it."""
    return f"""
    {{
    .param .b32 param0;
    st.param.b32 [param0+0], %r1;
    .param .b32 retval0;
    call.uni (retval0), {callee}, (param0);
    ld.param.b32 %r2, [retval0+0];
    }}"""


def test_recursive_and_undefined_calls_are_refused():
    with pytest.raises(UnsupportedPtxError, match="recursive call to f"):
        load_ptx(_func_module(_call_block("f")))
    with pytest.raises(UnsupportedPtxError, match="call to g"):
        load_ptx(_func_module(_call_block("g")))
    # the same call to a defined, non-recursive function loads and runs
    mod = load_ptx(_func_module("    add.s32 %r2, %r1, 1;"))
    assert list(mod.kernels) == ["k"]
    mod.launch("k", 1, 1, [0], GlobalMemory())


def test_inlining_keeps_source_line_numbers():
    """An error after an inlined call (and inside a function body) names the line of
    the source text, not of the rewritten text."""
    text = _func_module("    add.s32 %r2, %r1, 1;").replace(
        "    ld.param.b32 %r2, [retval0+0];\n    }\n    ret;",
        "    ld.param.b32 %r2, [retval0+0];\n    }\n"
        "    vabsdiff4.u32.u32.u32 %r1, %r1, %r2, %r1;\n    ret;")
    line = text.splitlines().index("    vabsdiff4.u32.u32.u32 %r1, %r1, %r2, %r1;") + 1
    with pytest.raises(UnsupportedPtxError, match=rf"line {line}:"):
        load_ptx(text)


def test_many_labels_back_to_back_load():
    """50 000 labels on one instruction (each was compared with every pending label
    before it: quadratic, minutes for 100 000); all of them name instruction 0."""
    n = 50_000
    body = "\n".join(f"$L{i}:" for i in range(n))
    src = _HEAD + f""".visible .entry k(.param .u64 p0)
{{
{body}
    ret;
}}
"""
    labels = load_ptx(src).kernels["k"].source.labels
    assert len(labels) == n and set(labels.values()) == {0}


def test_nested_scope_labels_get_internal_names_and_outer_ones_keep_theirs():
    src = _kernel("""$L1:
    { $L1: add.s32 %r1, %r1, 1; }
    { $L1: add.s32 %r1, %r1, 2; @%p1 bra $L1; }""").replace(
        ".reg .b32 %r<4>;", ".reg .b32 %r<4>;\n    .reg .pred %p<2>;")
    k = load_ptx(src).kernels["k"].source
    assert k.labels == {"$L1": 3, "$L1#1": 3, "$L1#2": 4}
    bra = next(i for i in k.instructions if i.opcode == "bra")
    assert bra.operands[0].name == "$L1#2"


def test_literal_messages_quote_the_statement():
    """The messages about literals show the instruction itself (the decimal-literal
    message once printed the placeholder '{text!r}' instead)."""
    with pytest.raises(PtxSyntaxError) as e:
        load_ptx(_kernel("    mov.b32 %r2, 1e400;"))
    msg = str(e.value)
    assert "line 11:" in msg and "'1e400'" in msg and "'mov.b32 %r2, 1e400'" in msg
    assert "{" not in msg
    with pytest.raises(PtxSyntaxError) as e:
        load_ptx(_kernel("    mov.b32 %r2, 1.5;"))
    msg = str(e.value)
    assert "line 11: 'mov.b32 %r2, 1.5': floating-point literal of the 0d or decimal" in msg
    assert "{" not in msg


def _post_dominators_by_definition(succ: dict, exit_node: int) -> dict:
    """d post-dominates v when no path from v reaches the exit once d is removed."""
    def reaches(v: int, removed: int) -> bool:
        seen, todo = {v}, [v]
        while todo:
            u = todo.pop()
            if u == exit_node:
                return True
            for w in succ.get(u, ()):
                if w != removed and w not in seen:
                    seen.add(w)
                    todo.append(w)
        return False
    nodes = set(succ) | {exit_node}
    out = {}
    for v in nodes:
        if v == exit_node or not reaches(v, -1):
            continue
        pdoms = {d for d in nodes if d != v and not reaches(v, d)}
        # the immediate one: the post-dominator that every other one post-dominates
        out[v] = next(d for d in pdoms if all(e == d or not reaches(d, e) or e == v
                                              for e in pdoms))
    return out


def test_cfg_dominators_match_the_definition_on_random_graphs():
    from hardware.simt.cfg import _dominators
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        exit_node = n
        succ = {v: sorted({int(x) for x in rng.integers(0, n + 1, int(rng.integers(1, 3)))})
                for v in range(n)}
        pred: dict = {v: [] for v in range(n + 1)}
        for v, outs in succ.items():
            for w in outs:
                pred[w].append(v)
        got = _dominators(exit_node, pred, succ)
        assert got.pop(exit_node) == exit_node
        assert got == _post_dominators_by_definition(succ, exit_node)


def test_many_branches_to_one_label_load():
    """20 000 conditional branches back to one label (the iterative post-dominator
    algorithm walked a chain as long as the kernel for each: minutes)."""
    n = 20_000
    body = "$L_top:\n    add.s32 %r1, %r1, 1;\n" + "    @%p1 bra $L_top;\n" * n
    src = _kernel(body).replace(".reg .b32 %r<4>;", ".reg .b32 %r<4>;\n    .reg .pred %p<2>;")
    k = load_ptx(src).kernels["k"]
    # each branch reconverges at the instruction after it (its fall-through path's
    # only way to the exit), the last one after the loop
    first = k.source.labels["$L_top"] + 1
    assert [k.reconvergence[pc] for pc in (first, first + n - 1)] == [first + 1, first + n]


# ptxas -arch=sm_90 (CUDA 13) verdicts on these forms: a scalar ld/st may write its
# register as a one-element vector (Triton writes every scalar access so); the element
# count of a vector must match .v2/.v4 and none may be given without one
@pytest.mark.parametrize("body, ok", [
    ("ld.global.u32 { %r2 }, [%rd1];\n    add.u32 %r1, %r1, %r2;", True),
    ("st.global.u32 [%rd1], { %r1 };\n    ld.global.u32 %r1, [%rd1];", True),
    ("ld.global.v2.u32 { %r2 }, [%rd1];", False),
    ("ld.global.u32 { %r2, %r3 }, [%rd1];", False),
    ("st.global.u32 [%rd1], { %r1, %r2 };", False),
    ("ld.global.u32 { %rd2 }, [%rd1];", True),
])
def test_one_element_vector_operands_of_scalar_ld_st(body, ok):
    src = _kernel(body)
    if not ok:
        with pytest.raises((PtxSyntaxError, UnsupportedPtxError)):
            load_ptx(src)
        return
    mem = GlobalMemory()
    out = mem.to_device(np.array([41], np.int32))
    load_ptx(src).launch("k", 1, 1, [out], mem)
    got = int(mem.from_device(out, np.int32, 1)[0])
    assert got == (42 if "add" in body else 1)
