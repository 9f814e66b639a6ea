"""Device printf and assert (hardware/simt/device_runtime.py): C99 printf rules checked
on cases derived by hand from C99 7.19.6.1 (and glibc's spelling of special values),
kernels calling vprintf / __assertfail written in PTX as nvcc writes them."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from hardware.simt import (
    DeviceAssertionError,
    ExecutionError,
    GlobalMemory,
    MemoryAccessError,
    load_ptx,
)
from hardware.simt.device_runtime import format_printf


def _fmt(fmt: str, args: list, strings: dict | None = None) -> str:
    """Format with arguments given as Python values: an int is an int argument (its
    size from the conversion), a float a double."""
    it = iter(args)

    def read_arg(size: int) -> int:
        v = next(it)
        if isinstance(v, float):
            assert size == 8
            return struct.unpack("<Q", struct.pack("<d", v))[0]
        return v % (1 << (8 * size))

    def read_string(addr: int, limit):
        return strings[addr]
    out, n = format_printf(fmt.encode(), read_arg, read_string)
    assert n == len(args)
    return out.decode()


@pytest.mark.parametrize("fmt,args,expected", [
    # C99 7.19.6.1: precision of an integer = minimum digits; the 0 flag is ignored
    # when a precision is given; zero with precision 0 prints no digits
    ("%08.3d", [5], "     005"),
    ("%.0d|%.0x|%#.0o", [0, 0, 0], "||0"),
    ("%-05d|", [3], "3    |"),
    # '#': octal gets a leading 0, hex a 0x prefix only for nonzero values
    ("%#o|%#o|%#x|%#X|%#x", [8, 0, 255, 255, 0], "010|0|0xff|0XFF|0"),
    # unsigned conversions read the bits of the argument type
    ("%u|%x|%o", [-1, -2, -8], "4294967295|fffffffe|37777777770"),
    ("%lu|%llx", [-1, -1], "18446744073709551615|ffffffffffffffff"),
    ("%hd|%hu|%hhd|%hhu", [65537, -1, 255, 256 + 7], "1|65535|-1|7"),
    ("%+d|% d|%+ d|%+05d|% 05d", [7, 7, 7, -7, 7], "+7| 7|+7|-0007| 0007"),
    ("%lld|%ld", [-2**63, 2**63 - 1], "-9223372036854775808|9223372036854775807"),
    # '*' takes an int; a negative width means '-', a negative precision none
    ("%*d|%-*d|%*d|", [4, 1, 4, 2, -4, 3], "   1|2   |3   |"),
    ("%.*d|%.*d", [3, 7, -1, 7], "007|7"),
    ("%c%c%3c|%-3c|", [ord("h"), ord("i"), ord("x"), ord("y")], "hi  x|y  |"),
    ("100%%", [], "100%"),
    # floats: exact decimal expansion of the binary value, ties to even
    ("%.2f|%.2f|%.1f", [0.125, 0.375, 0.25], "0.12|0.38|0.2"),
    ("%.0f|%.0f|%#.0f|%.0e", [0.5, 1.5, 2.0, 2.5], "0|2|2.|2e+00"),
    ("%f", [0.1], "0.100000"),
    ("%.20f", [0.1], "0.10000000000000000555"),
    ("%e|%E", [12345.678, -0.0], "1.234568e+04|-0.000000E+00"),
    ("%g|%g|%g|%g|%#g", [100000.0, 1000000.0, 0.0001, 0.00001, 1.0],
     "100000|1e+06|0.0001|1e-05|1.00000"),
    ("%G|%.3g|%10.4f|%-10.2e|", [1e-10, 3.14159, 3.14159, 31.4159],
     "1E-10|3.14|    3.1416|3.14e+01  |"),
    # special values: glibc spells inf/nan, '-' from the sign bit, no zero padding
    ("%f|%F|%e|%g|%05f|%-5f|%+f", [float("inf"), float("inf"), float("-inf"),
                                   float("nan"), float("inf"), float("nan"),
                                   float("nan")],
     "inf|INF|-inf|nan|  inf|nan  |+nan"),
])
def test_printf_conversions_by_hand(fmt, args, expected):
    assert _fmt(fmt, args) == expected


def test_printf_negative_nan_and_strings():
    neg_nan = struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000000))[0]
    assert _fmt("%f|%G", [neg_nan, neg_nan]) == "-nan|-NAN"
    strings = {0x1000: b"hello", 0x2000: b""}
    assert _fmt("%s|%8s|%-8s|%.3s|%s|%s", [0x1000, 0x1000, 0x1000, 0x1000, 0x2000, 0],
                strings) == "hello|   hello|hello   |hel||(null)"
    assert _fmt("%p|%p|%18p", [0x7F00, 0, 0x10]) == "0x7f00|(nil)|              0x10"


@pytest.mark.parametrize("fmt", ["%n", "%a", "%A", "%Lf", "%q", "%", "%ls", "%lc",
                                 "%100000d", "%.100000f"])
def test_printf_unsupported_conversions_are_refused(fmt):
    with pytest.raises(ExecutionError, match="printf"):
        format_printf(fmt.encode(), lambda size: 0, lambda a, lim: b"")


def test_printf_counts_arguments():
    out, n = format_printf(b"no args\n", lambda size: 0, lambda a, lim: b"")
    assert (out, n) == (b"no args\n", 0)


# ------------------------------------------------------------------- kernels in PTX


def _bytes_init(s: bytes) -> str:
    return ", ".join(str(b) for b in s + b"\0")


def _printf_kernel(fmt: bytes, guard: str = "", fmt_reg: str = "%rd3") -> str:
    """One vprintf call per thread, the thread index as the only argument; its return
    value stored to p0[tid]. ``guard`` predicates the call sequence's branch around."""
    return f"""
.version 9.0
.target sm_90
.address_size 64
.extern .func (.param .b32 func_retval0) vprintf
(
    .param .b64 vprintf_param_0,
    .param .b64 vprintf_param_1
)
;
.global .align 1 .b8 $str[{len(fmt) + 1}] = {{{_bytes_init(fmt)}}};
.visible .entry k(.param .u64 p0)
{{
    .local .align 8 .b8 __local_depot0[8];
    .reg .b64 %SP;
    .reg .b64 %SPL;
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<6>;
    mov.u64 %SPL, __local_depot0;
    cvta.local.u64 %SP, %SPL;
    ld.param.u64 %rd1, [p0];
    mov.u32 %r1, %tid.x;
    mov.u32 %r2, -7;
    and.b32 %r3, %r1, 1;
    setp.eq.s32 %p1, %r3, 0;
    {guard}
    st.local.u32 [%SPL], %r1;
    mov.u64 %rd2, $str;
    cvta.global.u64 %rd3, %rd2;
    {{ // callseq 0, 0
    .reg .b32 temp_param_reg;
    .param .b64 param0;
    st.param.b64 [param0+0], {fmt_reg};
    .param .b64 param1;
    st.param.b64 [param1+0], %SP;
    .param .b32 retval0;
    call.uni (retval0),
    vprintf,
    (
    param0,
    param1
    );
    ld.param.b32 %r2, [retval0+0];
    }} // callseq 0
$L__BB0_2:
    cvta.to.global.u64 %rd4, %rd1;
    mul.wide.u32 %rd5, %r1, 4;
    add.s64 %rd4, %rd4, %rd5;
    st.global.u32 [%rd4], %r2;
    ret;
}}
"""


def test_printf_from_divergent_code_and_return_value():
    """Only odd threads print (the even ones branch around the call); the call returns
    the number of arguments (CUDA: not the number of characters)."""
    mod = load_ptx(_printf_kernel(b"tid %d\n", guard="@%p1 bra $L__BB0_2;"))
    mem = GlobalMemory()
    out = mem.alloc(4 * 40)
    st = mod.launch("k", 1, 40, [out], mem)
    # two warps (threads 0-31 and 32-39) reach the call together: thread order
    assert st.stdout == "".join(f"tid {t}\n" for t in range(1, 40, 2))
    got = mem.from_device(out, np.int32, 40)
    assert (got[1::2] == 1).all() and (got[0::2] == -7).all()


def test_printf_null_format_returns_minus_one():
    mod = load_ptx(_printf_kernel(b"x", fmt_reg="0"))
    mem = GlobalMemory()
    out = mem.alloc(4 * 32)
    st = mod.launch("k", 1, 32, [out], mem)
    assert st.stdout == ""
    assert (mem.from_device(out, np.int32, 32) == -1).all()


def test_printf_bad_pointer_is_a_memory_error():
    # %s of the thread index (a small integer read as a pointer): unallocated
    mod = load_ptx(_printf_kernel(b"%s\n"))
    mem = GlobalMemory()
    out = mem.alloc(4 * 32)
    with pytest.raises(MemoryAccessError, match=r"kernel k, block \(0, 0, 0\), thread "
                                                r"\(1, 0, 0\).*address 0x1"):
        mod.launch("k", 1, 32, [out], mem)


def test_printf_unsupported_conversion_names_the_thread():
    mod = load_ptx(_printf_kernel(b"%n\n"))
    mem = GlobalMemory()
    with pytest.raises(ExecutionError, match=r"thread \(0, 0, 0\).*'%n' is not supported"):
        mod.launch("k", 1, 32, [mem.alloc(128)], mem)


def test_assertfail_from_hand_written_ptx_keeps_printed_output():
    """__assertfail(message, file, line, function, char_size) as nvcc calls it; the
    printf output before the failure travels with the error."""
    msg, file_, func = b"x < 4", b"k.cu", b"void k(int *)"
    ptx = f"""
.version 9.0
.target sm_90
.address_size 64
.extern .func __assertfail
(
    .param .b64 __assertfail_param_0,
    .param .b64 __assertfail_param_1,
    .param .b32 __assertfail_param_2,
    .param .b64 __assertfail_param_3,
    .param .b64 __assertfail_param_4
)
;
.extern .func (.param .b32 func_retval0) vprintf(.param .b64 a, .param .b64 b);
.global .align 1 .b8 $m[{len(msg) + 1}] = {{{_bytes_init(msg)}}};
.global .align 1 .b8 $f[{len(file_) + 1}] = {{{_bytes_init(file_)}}};
.global .align 1 .b8 $n[{len(func) + 1}] = {{{_bytes_init(func)}}};
.global .align 1 .b8 $hi[4] = {{104, 105, 10, 0}};
.visible .entry k(.param .u64 p0)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<3>;
    .reg .b64 %rd<6>;
    mov.u64 %rd4, $hi;
    {{
    .param .b64 param0;
    st.param.b64 [param0+0], %rd4;
    .param .b64 param1;
    st.param.b64 [param1+0], 0;
    .param .b32 retval0;
    call.uni (retval0), vprintf, (param0, param1);
    }}
    mov.u32 %r1, %tid.x;
    setp.lt.u32 %p1, %r1, 4;
    @%p1 bra $L__ok;
    mov.u64 %rd1, $m;
    mov.u64 %rd2, $f;
    mov.u64 %rd3, $n;
    {{
    .param .b64 param0;
    st.param.b64 [param0+0], %rd1;
    .param .b64 param1;
    st.param.b64 [param1+0], %rd2;
    .param .b32 param2;
    st.param.b32 [param2+0], 17;
    .param .b64 param3;
    st.param.b64 [param3+0], %rd3;
    .param .b64 param4;
    st.param.b64 [param4+0], 1;
    call.uni __assertfail, (param0, param1, param2, param3, param4);
    }}
$L__ok:
    ret;
}}
"""
    mod = load_ptx(ptx)
    mem = GlobalMemory()
    st = mod.launch("k", 1, 4, [0], mem)
    assert st.stdout == "hi\n" * 4
    with pytest.raises(DeviceAssertionError) as e:
        mod.launch("k", 2, 8, [0], mem)
    # threads 4-7 of both blocks fail; the first in thread order is reported
    assert ("kernel k, block (0, 0, 0), thread (4, 0, 0)" in str(e.value)
            and "`x < 4` failed (k.cu:17, in void k(int *))" in str(e.value))
    assert e.value.stdout == "hi\n" * 16


def test_trap_aborts_naming_the_thread():
    """__trap() compiles to trap (it was refused at load as unsupported)."""
    ptx = """
.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p0)
{
    .reg .pred %p<2>;
    .reg .b32 %r<2>;
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 37;
    @%p1 bra $L__done;
    trap;
$L__done:
    ret;
}
"""
    mod = load_ptx(ptx)
    mod.launch("k", 1, 32, [0], GlobalMemory())        # thread 37 does not exist
    with pytest.raises(ExecutionError, match=r"block \(0, 0, 0\), thread \(37, 0, 0\).*trap"):
        mod.launch("k", 1, 64, [0], GlobalMemory())
