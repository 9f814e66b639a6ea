"""The instruction compilers, one module per chapter of the PTX ISA (9.0, section 9.7);
:mod:`hardware.simt.instructions` holds the opcode table that dispatches to them."""
