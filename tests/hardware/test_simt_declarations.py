"""Declarations, scopes and literals as the PTX ISA and ptxas define them.

The verdict of every case in the tables below is ptxas's (CUDA 13.0,
``ptxas -arch=sm_90a``) on the PTX that :func:`kernel` builds: refused cases must be
refused by load_ptx naming the line, accepted ones must load. The values of accepted
initialisers are the bytes ptxas wrote to the ``.nv.global.init`` section of the cubin.
"""
from __future__ import annotations

import numpy as np
import pytest

from hardware.simt import GlobalMemory, MemoryAccessError, PtxError, load_ptx

HEAD = """.version 8.0
.target sm_90a
.address_size 64
"""


def kernel(body: str = "", module: str = "", params: str = ".param .u64 p0") -> str:
    """A kernel whose body is ``body`` (line 12 on), module-level text ``module`` on line 4."""
    return HEAD + f"""{module}
.visible .entry k({params})
{{
\t.reg .pred %p<4>;
\t.reg .b32 %r<10>;
\t.reg .f32 %f<10>;
\t.reg .b64 %rd<10>;
\t.reg .f64 %fd<10>;
\t.reg .b16 %h<10>;
{body}
\tret;
}}
"""


#: (case, module text, body, params): refused by ptxas
REFUSED = [
    ("register declared twice", "", ".reg .b32 %r1;", None),
    ("register range declared twice", "", ".reg .b32 %r<3>;", None),
    ("register twice in one nested scope", "", "{ .reg .b32 %q; .reg .b32 %q; }", None),
    ("variable with a register's name", "", ".shared .b32 %r1;", None),
    ("module variable twice", ".shared .b32 s; .shared .b32 s;", "", None),
    ("kernel variable twice", "", ".shared .b32 s; .shared .b32 s;", None),
    ("label twice", "", "L1: L1: mov.b32 %r1, 1;", None),
    ("label with a variable's name", "", ".shared .u32 L1; L1: mov.b32 %r1, 1;", None),
    ("label with a parameter's name", "", "p0: mov.b32 %r1, 1;", None),
    ("register with a parameter's name", "", ".reg .b32 p0;", None),
    ("parameter twice", "", "", ".param .u32 a, .param .u32 a"),
    ("branch into a nested scope", "", "{ L1: mov.b32 %r1, 1; } bra L1;", None),
    (".align 3", ".shared .align 3 .b8 s[16];", "", None),
    (".align 0", ".shared .align 0 .b8 s[16];", "", None),
    (".align 3 on .local", "", ".local .align 3 .b32 l[4];", None),
    (".align 3 on a parameter", "", "", ".param .align 3 .b8 a[8]"),
    (".align 3 on a pointer parameter", "", "", ".param .u64 .ptr .global .align 3 a"),
    ("empty .shared array", ".shared .b32 s[0];", "", None),
    ("empty kernel .shared array", "", ".shared .b32 s[0];", None),
    ("empty .local array", "", ".local .b32 l[0];", None),
    ("empty .global array", ".global .b32 g[0];", "", None),
    ("unsized non-extern array", ".shared .align 16 .b8 x[];", "", None),
    ("negative size", ".shared .b32 s[-1];", "", None),
    (".pred variable", ".shared .pred s;", "", None),
    (".pred parameter", "", "", ".param .pred a"),
    ("empty parameter array", "", "", ".param .align 4 .b8 a[0]"),
    ("unsized parameter array", "", "", ".param .align 4 .b8 a[]"),
    ("initialised .shared", "", ".shared .u32 s = 1;", None),
    # initialisers (PTX ISA 5.4.4)
    ("integer initialising .f32", ".global .f32 g[1] = {1};", "", None),
    ("integers initialising .f32", ".global .f32 g[2] = {1, 16777217};", "", None),
    ("integer initialising .f64", ".global .f64 g[1] = {16777217};", "", None),
    ("negative integer initialising .f32", ".global .f32 g[1] = {-1};", "", None),
    ("integer initialising a scalar .f32", ".global .f32 g = 1;", "", None),
    ("decimal initialising .u32", ".global .u32 g[1] = {1.5};", "", None),
    ("decimal initialising .s8", ".global .s8 g[1] = {1.5};", "", None),
    ("0f initialising .u32", ".global .u32 g[1] = {0f3F800000};", "", None),
    ("initialised .f16", ".global .f16 g[1] = {1.5};", "", None),
    ("initialised .f16 by an integer", ".global .f16 g[1] = {1};", "", None),
    ("initialised .pred", ".global .pred g = 1;", "", None),
    ("too many initial values", ".global .u32 g[1] = {1, 2};", "", None),
    ("list for a scalar", ".global .u32 g = {1};", "", None),
    ("scalar for an array", ".global .u32 g[2] = 5;", "", None),
    ("missing comma", ".global .u32 g[2] = {1 2};", "", None),
    ("nested list for a vector", ".global .u32 g[2] = {{1, 2}};", "", None),
    ("trailing comma", ".global .u32 g[2] = {1,};", "", None),
    ("trailing comma after two", ".global .u32 g[2] = {1, 2, };", "", None),
    ("decimal overflowing a double", ".global .f32 g[1] = {1e400};", "", None),
    ("negated 0f literal", ".global .f32 g[1] = {-0f3F800000};", "", None),
    # literals as instruction operands (PTX ISA 4.5)
    ("integer as .f32 (not exact)", "", "mov.f32 %f3, 16777217;", None),
    ("integer as .f32 (exact)", "", "mov.f32 %f3, 1;", None),
    ("integer as .f32 (2^24)", "", "mov.f32 %f3, 16777216;", None),
    ("hex integer as .f32", "", "mov.f32 %f3, 0x1000001;", None),
    ("integer as an add.f32 source", "", "add.f32 %f3, %f1, 16777217;", None),
    ("negative integer as .f32", "", "add.f32 %f3, %f1, -3;", None),
    ("integer as .f64", "", "add.f64 %fd1, %fd2, 1;", None),
    ("integer in setp.f32", "", "setp.lt.f32 %p1, %f1, 0;", None),
    ("decimal as .u32", "", "mov.u32 %r1, 1.5;", None),
    ("decimal as .b32", "", "mov.b32 %r1, 1.5;", None),
    ("decimal as .u64", "", "mov.u64 %rd1, 1.5;", None),
    ("decimal as .b16", "", "mov.b16 %h1, 1.5;", None),
    ("decimal as .f16", "", "add.f16 %h1, %h2, 1.5;", None),
    ("0f as .u32", "", "mov.u32 %r1, 0f3F800000;", None),
    ("0f as .b64", "", "mov.b64 %rd1, 0f3F800000;", None),
    ("0f as .b16", "", "mov.b16 %h1, 0f3F800000;", None),
    ("0d as .b32", "", "mov.b32 %r1, 0d3FF0000000000000;", None),
    ("negated 0f", "", "mov.f32 %f1, -0f3F800000;", None),
    ("float suffix", "", "mov.f32 %f1, 1.5f;", None),
    ("0f of 7 digits", "", "mov.f32 %f1, 0f3F80000;", None),
    ("0f of 9 digits", "", "mov.f32 %f1, 0f3F8000000;", None),
    ("hex float", "", "mov.f32 %f1, 0x1p3;", None),
    ("exponent without digits", "", "mov.f32 %f1, 1.5e;", None),
    ("decimal overflowing a double", "", "mov.f32 %f1, 1e400;", None),
    ("integer beyond 64 bits", "", "mov.u64 %rd1, 1267650600228229401496703205376;", None),
    ("offset beyond 64 bits", "",
     "ld.global.u32 %r1, [%rd1+1267650600228229401496703205376];", None),
    ("offset written reg-imm", "", "ld.global.u32 %r1, [%rd1-4];", None),
    # tokens nothing consumes
    ("trailing comma after operands", "", "add.s32 %r1, %r2, %r3,;", None),
    ("empty operand", "", "add.s32 %r1, , %r3;", None),
    ("operand after the last", "", "add.s32 %r1, %r2, %r3 %r4;", None),
    ("state space twice", "", "ld.global.global.u32 %r1, [%rd1];", None),
    ("rounding twice", "", "add.rn.rn.f32 %f1, %f2, %f3;", None),
    ("empty modifier", "", "add..s32 %r1, %r2, %r3;", None),
    ("comparison twice", "", "setp.gt.gt.s32 %p1, %r1, %r2;", None),
    (".to twice", "", "cvta.to.to.global.u64 %rd1, %rd2;", None),
    (".async twice", "", "cp.async.async.commit_group;", None),
    ("two state spaces", "", "ld.global.shared.u32 %r1, [%rd1];", None),
    ("a type of no PTX width", "", "activemask.b97 %r1;", None),
    ("a type of width 7", "", "add.u7 %r1, %r2, %r3;", None),
    ("three destinations", "", "setp.lt.s32 %p1|%p2|%p3, %r1, %r2;", None),
    ("empty statements", "", "mov.u32 %r1, 1; ; ;", None),
    ("linkage twice", ".visible .visible .global .u32 g;", "", None),
    ("two linkages", ".extern .visible .shared .align 16 .b8 x[];", "", None),
    ("two linkages, other order", ".visible .extern .shared .align 16 .b8 x[];", "", None),
    ("module variable with the kernel's name", ".global .u32 k;", "", None),
    (".extern variable in a kernel", "", ".extern .shared .align 16 .b8 dyn[];", None),
    ("double semicolon", "", "add.s32 %r1, %r2, %r3 ;;", None),
    ("label on an empty statement", "", "L1: ;", None),
    ("8 as an octal digit", "", "mov.u32 %r1, 08;", None),
    ("lower-case unsigned suffix", "", "mov.u32 %r1, 1u;", None),
    ("digit separator", "", "mov.u32 %r1, 1_000;", None),
    ("two guards", "", "@%p1 @%p2 mov.u32 %r1, 1;", None),
    ("float offset", "", "ld.global.u32 %r1, [%rd1+1.5];", None),
    ("selector on a special register", "", "mov.u32 %r1, %tid.x.y;", None),
]

#: (case, module text, body, params): accepted by ptxas
ACCEPTED = [
    ("register in a nested scope hides the outer one", "",
     "{ .reg .b32 %r1; mov.b32 %r1, 1; }", None),
    ("label in a nested scope hides the outer one", "", "L1: { L1: mov.b32 %r1, 1; }", None),
    ("labels of one name in sibling scopes", "",
     "{ L1: mov.b32 %r1, 1; bra L1; } { L1: mov.b32 %r1, 2; bra L1; }", None),
    ("branch from a nested scope to an outer label", "",
     "L2: { L1: mov.b32 %r1, 1; bra L2; }", None),
    ("branch to a label defined later, outside", "", "{ bra L3; } L3: mov.b32 %r1, 1;", None),
    ("label with a register's name", "", "%r1: mov.b32 %r1, 1;", None),
    ("shared variable hidden in a nested scope", "",
     ".shared .u32 s; { .shared .u32 s; }", None),
    ("local variable hidden in a nested scope", "", ".local .u32 s; { .local .u32 s; }", None),
    ("register hiding a variable in a nested scope", "",
     ".shared .u32 s; { .reg .b32 s; }", None),
    ("range not overlapping", "", ".reg .b32 %r1<3>;", None),
    ("no registers", "", ".reg .b32 %c<0>;", None),
    (".align 1, 2 and 256", ".shared .align 1 .b32 a[16]; .shared .align 2 .b32 b[16]; "
     ".shared .align 256 .b32 c[16];", "", None),
    ("dynamic shared array", ".extern .shared .align 16 .b8 x[];", "", None),
    ("sized extern shared array", ".extern .shared .align 16 .b8 x[16];", "", None),
    ("decimal initialisers", ".global .f32 g[2] = {1.5, 1e5};", "", None),
    ("fewer initial values than elements", ".global .u32 g[3] = {1};", "", None),
    ("empty initialiser list", ".global .u32 g[2] = {};", "", None),
    ("scalar integer initialiser", ".global .u32 g = 1;", "", None),
    ("negative .u32 initialiser", ".global .u32 g[1] = {-1};", "", None),
    ("integer beyond the type", ".global .u8 g[1] = {300};", "", None),
    ("decimal initialising .b32 and .b64",
     ".global .b32 a[1] = {1.5}; .global .b64 b[1] = {1.5};", "", None),
    ("decimal as .f32 and .f64", "", "mov.f32 %f1, 1.5; mov.f64 %fd1, 0.1;", None),
    ("decimal forms", "", "mov.f32 %f1, .5; mov.f32 %f2, 1.; mov.f32 %f3, 1e5; "
     "mov.f32 %f4, -1.5; mov.f32 %f5, 1.5e3; mov.f32 %f6, 007.5;", None),
    ("decimal overflowing .f32 only", "", "mov.f32 %f1, 1e39;", None),
    ("decimal as .b64", "", "mov.b64 %rd1, 1.5;", None),
    ("0d as .b64, 0f as .b32", "",
     "mov.b64 %rd1, 0d3FF0000000000000; mov.b32 %r1, 0f3F800000;", None),
    ("0f as .f64, 0d as .f32", "",
     "mov.f64 %fd1, 0f3F800000; mov.f32 %f1, 0d3FF0000000000001;", None),
    ("integers wider than the operand", "",
     "mov.u32 %r1, 4294967296; add.s32 %r1, %r2, 4294967295; mov.u16 %h1, 65536; "
     "add.u32 %r1, %r1, -2147483649;", None),
    ("64-bit extremes", "", "mov.u64 %rd1, 18446744073709551615; "
     "mov.u64 %rd2, -9223372036854775808; mov.u64 %rd3, 18446744073709551615U;", None),
    ("offsets of 2^63 and more", "", "ld.global.u32 %r1, [%rd1+9223372036854775808]; "
     "ld.global.u32 %r2, [%rd1+18446744073709551615]; "
     "ld.global.u32 %r3, [%rd1+0xFFFFFFFFFFFFFFFF]; "
     "ld.global.u32 %r4, [%rd1+-9223372036854775808];", None),
    ("types repeated in cvt", "", "cvt.rni.f32.f32 %f1, %f2;", None),
    ("integer forms", "", "mov.u32 %r1, 00; mov.u32 %r2, 0x1FU; mov.u32 %r3, +1; "
     "mov.u32 %r4, - 1; mov.u32 %r5, 0B101; mov.u32 %r6, 0X1F; mov.u32 %r7, 010;", None),
    ("offset forms", "", "ld.global.u32 %r1, [%rd1+4U]; ld.global.u32 %r2, [ %rd1 + 4 ]; "
     "ld.global.u32 %r3, [%rd1+0b100]; ld.global.u32 %r4, [%rd1+-4];", None),
    ("guards with spaces", "", "@ %p1 mov.u32 %r1, 1; @ ! %p1 mov.u32 %r1, 2;", None),
    ("empty scope", "", "{ }", None),
    ("array sized by its initialiser", ".global .u32 g[] = {1, 2, 3};", "", None),
    ("one linkage each", ".extern .shared .align 16 .b8 x[]; "
     ".visible .global .u32 g; .weak .global .u32 w;", "", None),
    ("module variable with a kernel variable's name", ".global .u32 g;",
     ".shared .u32 g;", None),
]


#: cases whose error is on another line than the declaration (ptxas names it too)
_LINE = {"module variable with the kernel's name": 5}


def _src(module: str, body: str, params: str | None) -> str:
    return kernel("\t" + body if body else "", module, params or ".param .u64 p0")


@pytest.mark.parametrize("case,module,body,params", REFUSED, ids=[c[0] for c in REFUSED])
def test_what_ptxas_refuses_is_refused_naming_the_line(case, module, body, params):
    src = _src(module, body, params)
    line = _LINE.get(case, 4 if module else (5 if params else 13))
    with pytest.raises(PtxError, match=rf"line {line}\b"):
        load_ptx(src)


@pytest.mark.parametrize("case,module,body,params", ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_what_ptxas_accepts_loads(case, module, body, params):
    load_ptx(_src(module, body, params))


def _run_u32(body: str, n: int, module: str = "") -> list[int]:
    """Run ``body`` (with %rd1 = an output of ``n`` words) on one thread."""
    src = kernel("\tld.param.u64 %rd1, [p0];\n" + body, module)
    mem = GlobalMemory()
    out = mem.calloc(4 * n)
    load_ptx(src).launch("k", 1, 1, [out], mem)
    return mem.from_device(out, np.uint32, n).tolist()


def test_a_variable_in_a_nested_scope_is_its_own():
    # the outer s gets 5, the inner s (which hides it) 7: two words, both kept
    got = _run_u32("""\t.shared .u32 s;
\tmov.u32 %r1, 5;
\tst.shared.u32 [s], %r1;
\t{
\t.shared .u32 s;
\tmov.u32 %r2, 7;
\tst.shared.u32 [s], %r2;
\tld.shared.u32 %r3, [s];
\t}
\tld.shared.u32 %r4, [s];
\tst.global.v2.u32 [%rd1], {%r3, %r4};""", 2)
    assert got == [7, 5]


def test_labels_of_one_name_in_sibling_scopes_branch_within_their_scope():
    # each loop branches back to its own L: 3 passes of +1, then 5 passes of +10
    got = _run_u32("""\tmov.u32 %r1, 0;
\tmov.u32 %r2, 0;
\t{
\tL:
\tadd.u32 %r1, %r1, 1;
\tsetp.lt.u32 %p1, %r1, 3;
\t@%p1 bra L;
\t}
\t{
\tL:
\tadd.u32 %r2, %r2, 10;
\tsetp.lt.u32 %p1, %r2, 50;
\t@%p1 bra L;
\t}
\tst.global.v2.u32 [%rd1], {%r1, %r2};""", 2)
    assert got == [3, 50]


def test_a_nested_label_hides_the_outer_one():
    # the inner bra L goes to the inner L (skipping the +100); the outer L is the exit
    got = _run_u32("""\tmov.u32 %r1, 1;
\t{
\tbra L;
\tadd.u32 %r1, %r1, 100;
\tL:
\tadd.u32 %r1, %r1, 10;
\t}
\tbra L;
\tadd.u32 %r1, %r1, 1000;
L:
\tst.global.u32 [%rd1], %r1;""", 1)
    assert got == [11]


def _module_bytes(module: str, name: str, nbytes: int) -> bytes:
    mod = load_ptx(kernel("", module))
    mem = GlobalMemory()
    return mem.from_device(mod.symbol_address(name, mem), np.uint8, nbytes).tobytes()


@pytest.mark.parametrize("module,name,expected", [
    # decimal text -> double (nearest) -> float (nearest): 16777217.000000001 becomes
    # the double 16777217.0, a tie that rounds to even, 16777216 (0x4B800000)
    (".global .f32 g[4] = {0.1, 1.5, 16777217.000000001, 1e-50};", "g",
     "cdcccc3d" "0000c03f" "0000804b" "00000000"),
    (".global .f32 g[2] = {0d3FB999999999999A, 1e39};", "g", "cdcccc3d" "0000807f"),
    (".global .u8 g[2] = {300, -200};", "g", "2c38"),
    (".global .s8 g[2] = {127, 128};", "g", "7f80"),
    (".global .u64 g[1] = {18446744073709551615};", "g", "ff" * 8),
    # a 0f literal in a 64-bit variable is its 32 bits zero-extended
    (".global .f64 g[2] = {0.1, 0f3F800000};", "g",
     "9a9999999999b93f" "0000803f00000000"),
    (".global .b64 g[2] = {1.5, 0f3F800000};", "g",
     "000000000000f83f" "0000803f00000000"),
    # 32 bits or fewer: the literal as a float, truncated to the width
    (".global .b32 g[3] = {0d3FF0000000000000, 1.5, 0.1};", "g",
     "0000803f" "0000c03f" "cdcccc3d"),
    (".global .b16 g[3] = {0f3F800000, 0f40490FDB, 1.5};", "g", "0000" "db0f" "0000"),
    (".global .b8 g[2] = {0f3F800000, 0f40490FDB};", "g", "00db"),
    (".global .f32 g = 1.5;", "g", "0000c03f"),
    (".global .u32 g[3] = {7};", "g", "07000000" "00000000" "00000000"),
    (".global .u16 g[] = {1, 2, 3};", "g", "0100" "0200" "0300"),
])
def test_initialisers_store_what_ptxas_stores(module, name, expected):
    assert _module_bytes(module, name, len(expected) // 2).hex() == expected


@pytest.mark.parametrize("body,expected", [
    ("mov.f32 %f1, 1.5;", 0x3FC00000),
    ("mov.f32 %f1, 0.1;", 0x3DCCCCCD),
    ("mov.f32 %f1, 1e5;", 0x47C35000),
    ("mov.f32 %f1, .5;", 0x3F000000),
    ("mov.f32 %f1, -1.5;", 0xBFC00000),
    ("mov.f32 %f1, 1e39;", 0x7F800000),
    ("mov.f32 %f1, 1e-50;", 0x00000000),
    ("mov.f32 %f1, 0d3FF0000000000000;", 0x3F800000),
])
def test_decimal_float_operands_are_doubles_rounded_to_the_operand(body, expected):
    got = _run_u32(f"\t{body}\n\tst.global.f32 [%rd1], %f1;", 1)
    assert got == [expected]


def test_decimal_and_hex_literals_as_64_bit_operands():
    got = _run_u32("""\tmov.b64 %rd2, 1.5;
\tmov.f64 %fd1, 0f3F800000;
\tmov.b64 %rd3, %fd1;
\tst.global.v2.u64 [%rd1], {%rd2, %rd3};""", 4)
    assert got == [0, 0x3FF80000, 0, 0x3FF00000]


def test_integer_literal_forms():
    # 010 is octal 8, 0B101 binary 5, - 1 and 0xFFFFFFFFU the same 32 bits
    got = _run_u32("""\tmov.u32 %r1, 010;
\tmov.u32 %r2, 0B101;
\tmov.u32 %r3, - 1;
\tmov.u32 %r4, +0xFFFFFFFFU;
\tst.global.v4.u32 [%rd1], {%r1, %r2, %r3, %r4};""", 4)
    assert got == [8, 5, 2**32 - 1, 2**32 - 1]


def test_address_offsets_wrap_modulo_2_to_the_64():
    # [%rd2 + (2^64 - 4)] is [%rd2 - 4]: the store lands on word 1 of the output
    got = _run_u32("""\tadd.u64 %rd2, %rd1, 8;
\tmov.u32 %r1, 7;
\tst.global.u32 [%rd2+18446744073709551612], %r1;""", 3)
    assert got == [0, 7, 0]


def test_an_offset_of_2_to_the_63_faults_at_run_time_not_at_load():
    src = kernel("\tld.param.u64 %rd1, [p0];\n\tld.global.u32 %r1, "
                 "[%rd1+9223372036854775808];")
    mod = load_ptx(src)
    mem = GlobalMemory()
    out = mem.calloc(4)
    with pytest.raises(MemoryAccessError, match="line 14"):
        mod.launch("k", 1, 1, [out], mem)


#: (module text after the .version/.target/.address_size lines, ptxas accepts it)
MODULES = [
    (".visible .entry k() .maxntid 0 {\nret;\n}", False),
    (".visible .entry k() .maxntid 32, 1, 1, 1 {\nret;\n}", False),
    (".visible .entry k() .maxntid 32 .reqntid 64 {\nret;\n}", False),
    (".visible .entry k() .maxnreg 0 {\nret;\n}", False),
    (".visible .entry k() .minnctapersm 0 {\nret;\n}", False),
    (".visible .visible .entry k() {\nret;\n}", False),
    (".visible .entry k() {\nret;\n}\n.visible .entry k() {\nret;\n}", False),
    (".visible .entry k(.param .u64 a .param .u64 b) {\nret;\n}", False),
    (".visible .entry k(.param .u64 a,) {\nret;\n}", False),
    (".version 8.0\n.visible .entry k() {\nret;\n}", False),
    (".target sm_90a\n.visible .entry k() {\nret;\n}", False),
    (".address_size 64\n.visible .entry k() {\nret;\n}", False),
    (".visible .entry k() .maxntid 2000 {\nret;\n}", True),
    (".visible .entry k() .maxntid 32, 32, 32 {\nret;\n}", True),
    (".visible .entry k() .reqntid 32 .reqntid 64 {\nret;\n}", True),
    (".visible .entry k() .maxntid 32 .maxntid 64 {\nret;\n}", True),
    (".visible .entry k() .maxnreg 1000 .minnctapersm 2 {\nret;\n}", True),
    (".visible .entry k() .reqnctapercluster 2 {\nret;\n}", True),
    (".visible .entry k(.param .u64 .ptr .global .align 4 a, .param .b8 b[3]) {\nret;\n}",
     True),
    (".entry k() {\nret;\n}", True),
    (".weak .entry k() {\nret;\n}", True),
    (".visible .entry k() {\n}", True),
    (".visible .entry k() {\nL: bra L;\n}", True),
    (".func (.param .align 3 .b8 r[4]) f ();\n.visible .entry k() {\nret;\n}", False),
    (".func f (.param .b0 a)\n{\nret;\n}\n.visible .entry k() {\nret;\n}", False),
    (".func f (.param .b32 a)\n{\nret;\n}\n.visible .entry k() {\nret;\n}", True),
    (".extern .func (.param .b32 r) vprintf (.param .b32 .b64 a, .param .b64 b);\n"
     ".visible .entry k() {\nret;\n}", False),
    (".func (.param .align 4 .b8 r[4]) f ();\n.visible .entry k() {\nret;\n}", False),
    (".func (.param .align 4 .b8 r[4]) f ();\n.func (.param .align 4 .b8 r[4]) f ()\n"
     "{\nret;\n}\n.visible .entry k() {\nret;\n}", True),
    (".extern .func (.param .b32 r) vprintf (.param .b64 a, .param .b64 b);\n"
     ".visible .entry k() {\nret;\n}", True),
    (".visible .entry k() {\nret;\n}\n.section .debug_abbrev\n{\n.b8 1\n.b8 17, 1\n"
     ".b32 .debug_abbrev\n}", True),
    (".visible .entry k() {\nret;\n}\n.section .debug_abbrev\n{\n.b8 1\n.b25 3\n}", False),
    (".visible .entry k() {\nret;\n}\n.section .debug_abbrev\n{\n.b8 1 2\n}", False),
]


@pytest.mark.parametrize("text,accepted", MODULES)
def test_kernel_headers_and_module_directives(text, accepted):
    src = HEAD + text + "\n"
    if accepted:
        load_ptx(src)
    else:
        with pytest.raises(PtxError, match=r"line \d+"):
            load_ptx(src)
