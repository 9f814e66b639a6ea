"""The PTX ISA's instruction type rules, checked once per module by ``load_ptx``.

PTX ISA 9.0 section 6.1 ("Operand Type Information") and 9.4 ("Type Information for
Instructions and Operands"): every operand has the type of its declaration, and an
operand's type must agree with the type the instruction template gives it:

- bit-size types (``.bN``) agree with any type of the same size;
- signed and unsigned integer types agree when they have the same size;
- floating-point types agree only with the same floating-point type;
- predicates agree only with predicates; integer immediates only with bit-size and
  integer types, floating-point immediates (``0f``/``0d``) only with bit-size and
  floating-point types.

``ld``, ``st`` and ``cvt`` relax this for their data operands (section 9.4.1, "Operand
Size Exceeding Instruction-Type Size"): a bit-size or integer register may be wider than
an integer or bit-size instruction type, a floating-point register only matches the same
floating-point type, and a bit-size register may be wider than any instruction type.
Address registers (6.4.1) are integer or bit-size registers, and a generic or .global
address of a 64-bit module is not a 32-bit register.

On top of that each instruction description of chapter 9.7 lists the types the
instruction takes, the modifiers it requires (``mul.lo``/``.hi``/``.wide`` for integers, a
rounding mode for ``fma``, ``mad.f32``, IEEE ``div``/``sqrt``/``rcp``, for ``cvt`` between
integers and floats and for narrowing float conversions, ``.approx`` for the special
functions, ``.sync`` for the warp collectives), the modifiers it refuses (``.cc`` and
``.lo``/``.hi`` on floats) and the ranges of some immediates (``bfe``/``bfi`` positions
and lengths 0..255, barrier numbers 0..15). :func:`check_module` walks the decoded
kernels and raises :class:`~hardware.simt.errors.PtxTypeError` for the first statement
that breaks one of these rules; a form the tables do not describe is left to the
instruction compilers (which check it or refuse it as unsupported).

The tables were written from the PTX ISA and checked against ``ptxas`` (CUDA 13.0) for
sm_80, sm_90a and sm_100a: every form this module refuses, ptxas refuses too. So are
``atom``/``red`` ``.min``/``.max`` on ``.f32`` and ``.f64`` refused, as ptxas refuses
them for every target (sm_80 to sm_120, PTX ISA 7.8 to 9.0: "Operation .min requires
.u32 or .s32 or .u64 or .s64 or .f16 or .f16x2 or .bf16 or .bf16x2 type"), although the
PTX ISA's table of atom types lists ``.f32`` and ``.f64`` beside them.

The tables are :mod:`hardware.simt.ptx_rule_table`, the shared operand checks
:mod:`hardware.simt.ptx_rule_checker`, the instructions a table row cannot describe
:mod:`hardware.simt.ptx_rule_forms`; :data:`RULES` and :class:`Rule` are importable
from here.
"""
from __future__ import annotations

from .parser import Addr, Instruction, KernelSource, ModuleSource, Reg, Vec
from .ptx_rule_checker import _Checker, _FRAGMENT_OPCODES, _check_fragment, _check_table, _err
from .ptx_rule_forms import FORMS
from .ptx_rule_table import RULES, Rule  # noqa: F401 (importable from here)

__all__ = ["RULES", "Rule", "check_module", "check_kernel", "check_instruction"]


def check_instruction(chk: _Checker, inst: Instruction) -> None:
    """Raise :class:`PtxTypeError` if ``inst`` breaks a type rule of its opcode."""
    head = inst.parts[0]
    special = FORMS.get(head)
    if special is not None:
        special(chk, inst)
    elif head in RULES:
        _check_table(chk, inst)
    if inst.guard is not None and inst.guard.name in chk.kernel.registers:
        g = chk.reg_type(inst.guard.name)
        if g is not None and g.kind != "pred":
            raise _err(inst, f"guard {inst.guard.name} is .{g.name}, not a predicate", "9.3")
    for i, op in enumerate(inst.operands):
        if isinstance(op, Vec) and head in _FRAGMENT_OPCODES:
            _check_fragment(chk, inst, op, i)
        if isinstance(op, Addr) and isinstance(op.base, Reg):
            have = chk.reg_type(op.base.name)
            if have is not None and have.kind in ("f", "pred"):
                raise _err(inst, f"operand {i + 1}: {op.base.name} of type .{have.name} "
                                 "cannot be an address (integer or bit-size registers only)",
                           "6.4.1")


def check_kernel(kernel: KernelSource, address_size: int = 64,
                 symbols: dict[str, str] | None = None) -> None:
    """Check every instruction of one kernel (see the module docstring); ``symbols``:
    the state space of each module-level variable."""
    chk = _Checker(kernel, address_size, symbols)
    for inst in kernel.instructions:
        try:
            check_instruction(chk, inst)
        except (KeyError, IndexError, AttributeError, TypeError):
            continue  # a form the tables do not describe: the compiler decides


def check_module(src: ModuleSource) -> None:
    """Check every kernel of a parsed module; raise :class:`PtxTypeError` naming the
    line, the statement and the rule of the first instruction that breaks one."""
    symbols = {v.name: v.space for v in src.variables}
    for kernel in src.kernels.values():
        check_kernel(kernel, src.address_size, symbols)
