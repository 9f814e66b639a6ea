"""Global-memory traffic of elementwise dataflow graphs: fusion and recomputation.

A small model of kernel fusion (the data-movement view of Ivanov et al., "Data Movement
Is All You Need: A Case Study on Optimizing Transformers", MLSys 2021) and of
recomputation in the backward pass (Chen et al., "Training Deep Nets with Sublinear
Memory Cost", arXiv:1604.06174, 2016).
A :class:`Graph` is a list of elementwise ops over named tensors of equal size; traffic
is counted in *tensor accesses* (one read or one write of a whole tensor from global
memory), which multiplied by the tensor's bytes is the traffic in bytes.

- Unfused, every op is its own kernel: it reads each of its distinct inputs from global
  memory and writes its output there.
- Fused, the graph is one kernel: it reads each graph input once and writes only the
  graph outputs (plus any tensor it must *save* for a backward pass).
- Backward (one fused kernel): reads the gradient of each output and whatever values
  the ops' derivatives need; a needed value that was saved (or is an input or output of
  the graph, hence in global memory) can be read, any other is *recomputed* in
  registers from values that can be read. Among the ways to obtain what the derivatives
  need, the model takes the one with the fewest reads, then the fewest recomputed ops,
  then the most reads of saved activations (what they were saved for), then the
  derivative form listed first for each op. It writes the gradient of each graph input.

Two worked examples, counted by hand in the tests: ``sin(x)**2 + cos(x)**2`` fused is one read
of ``x`` and one write; three stacked sigmoids cost 8 accesses over forward and
backward when S1 and S2 are stored, 5 when they are recomputed (5/8 of the traffic).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Iterable, Mapping, Sequence

from refimpl.validation import check_bool

__all__ = [
    "OP_KINDS",
    "Op",
    "Graph",
    "Traffic",
    "TrainingTraffic",
    "traffic",
    "training_traffic",
    "sin2_plus_cos2",
    "stacked_sigmoids",
]

# kind -> (arity, derivative forms). Each form is a tuple of the values the local
# derivative needs: "in0", "in1" (inputs) or "out". The first form is preferred on ties.
OP_KINDS: Mapping[str, tuple[int, tuple[tuple[str, ...], ...]]] = MappingProxyType({
    "sin": (1, (("in0",),)),            # d sin x = cos x
    "cos": (1, (("in0",),)),            # d cos x = -sin x
    "exp": (1, (("out",), ("in0",))),   # d e^x = e^x
    "log": (1, (("in0",),)),            # d log x = 1/x
    "sigmoid": (1, (("out",), ("in0",))),  # s' = s (1 - s)
    "tanh": (1, (("out",), ("in0",))),  # t' = 1 - t^2
    "relu": (1, (("out",), ("in0",))),  # mask from either
    "square": (1, (("in0",),)),         # 2x
    "neg": (1, ((),)),
    "add": (2, ((),)),
    "sub": (2, ((),)),
    "mul": (2, (("in0", "in1"),)),      # d(ab) = b da + a db
})

# Bound on derivative-form combinations searched by the backward model.
_MAX_COMBINATIONS = 1 << 16


@dataclass(frozen=True)
class Op:
    """``out = kind(*inputs)``, elementwise."""

    out: str
    kind: str
    inputs: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.kind not in OP_KINDS:
            raise ValueError(f"op {self.out!r}: unknown kind {self.kind!r}; "
                             f"known: {', '.join(OP_KINDS)}")
        object.__setattr__(self, "inputs", tuple(self.inputs))
        arity = OP_KINDS[self.kind][0]
        if len(self.inputs) != arity:
            raise ValueError(f"op {self.out!r}: {self.kind} takes {arity} inputs, "
                             f"got {len(self.inputs)}")

    def needs(self) -> tuple[tuple[str, ...], ...]:
        """Derivative forms with value names substituted."""
        name = {"out": self.out, **{f"in{i}": v for i, v in enumerate(self.inputs)}}
        return tuple(tuple(name[k] for k in form) for form in OP_KINDS[self.kind][1])


@dataclass(frozen=True)
class Graph:
    """Elementwise ops in execution order; each tensor is produced once (SSA).

    Args:
        inputs: tensors read from global memory.
        ops: the ops, each using graph inputs or earlier ops' outputs.
        outputs: tensors the caller needs in global memory afterwards.
    """

    inputs: tuple[str, ...]
    ops: tuple[Op, ...]
    outputs: tuple[str, ...]
    producer: Mapping[str, Op] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "ops", tuple(self.ops))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        defined = set(self.inputs)
        if len(defined) != len(self.inputs):
            raise ValueError(f"duplicate graph inputs: {self.inputs}")
        producer: dict[str, Op] = {}
        for i, op in enumerate(self.ops):
            for v in op.inputs:
                if v not in defined:
                    raise ValueError(f"op {i} ({op.out} = {op.kind}): input {v!r} is not "
                                     "a graph input or an earlier op's output")
            if op.out in defined:
                raise ValueError(f"op {i}: tensor {op.out!r} is defined twice")
            defined.add(op.out)
            producer[op.out] = op
        for v in self.outputs:
            if v not in producer:
                raise ValueError(f"output {v!r} is not produced by any op")
        object.__setattr__(self, "producer", MappingProxyType(producer))

    @property
    def intermediates(self) -> tuple[str, ...]:
        """Op outputs that are not graph outputs."""
        return tuple(op.out for op in self.ops if op.out not in self.outputs)


@dataclass(frozen=True)
class Traffic:
    """Global-memory tensor accesses of one or more kernels."""

    reads: tuple[str, ...]
    writes: tuple[str, ...]
    kernels: int
    recomputed: tuple[str, ...] = ()

    @property
    def accesses(self) -> int:
        return len(self.reads) + len(self.writes)

    def bytes(self, elements: int, elem_bytes: int) -> int:
        """Traffic in bytes when every tensor holds ``elements`` of ``elem_bytes``."""
        return self.accesses * elements * elem_bytes

    def __add__(self, other: "Traffic") -> "Traffic":
        return Traffic(self.reads + other.reads, self.writes + other.writes,
                       self.kernels + other.kernels, self.recomputed + other.recomputed)


@dataclass(frozen=True)
class TrainingTraffic:
    """The traffic of a training step: the forward pass and the backward pass.

    Attributes:
        forward: the fused forward's traffic (it writes the saved intermediates).
        backward: the fused backward's traffic (it reads the outputs' gradients and what
            it needs, writes the inputs' gradients, and names what it recomputes).
    """

    forward: Traffic
    backward: Traffic

    @property
    def accesses(self) -> int:
        """Tensor accesses of both passes."""
        return self.forward.accesses + self.backward.accesses


def _unique(seq: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(seq))


def traffic(graph: Graph, fused: bool = False, *, saved: Sequence[str] = ()) -> Traffic:
    """Forward traffic: one kernel per op (``fused=False``) or one for the graph.

    ``saved``: intermediates the fused kernel must also write (activations kept for a
    backward pass); ignored when unfused, where every op output is written anyway.
    """
    if not check_bool("fused", fused):
        return Traffic(
            reads=tuple(v for op in graph.ops for v in _unique(op.inputs)),
            writes=tuple(op.out for op in graph.ops),
            kernels=len(graph.ops),
        )
    _check_saved(graph, saved)
    used = {v for op in graph.ops for v in op.inputs}
    return Traffic(
        reads=tuple(v for v in graph.inputs if v in used),
        writes=_unique([*graph.outputs, *(v for v in graph.intermediates if v in saved)]),
        kernels=1,
    )


def _check_saved(graph: Graph, saved: Sequence[str]) -> None:
    known = set(graph.producer)
    for v in saved:
        if v not in known:
            raise ValueError(f"saved tensor {v!r} is not produced by the graph; "
                             f"intermediates: {', '.join(graph.intermediates)}")


def _plan(graph: Graph, forms: Sequence[tuple[str, ...]], in_memory: set[str]
          ) -> tuple[list[str], list[str]]:
    """Reads and recomputed ops needed to make every value of ``forms`` resident."""
    reads: list[str] = []
    recomputed: list[str] = []
    resident: set[str] = set()

    def materialise(v: str) -> None:
        if v in resident:
            return
        if v in in_memory:
            reads.append(v)
        else:  # recompute from its producer's inputs, recursively
            for u in graph.producer[v].inputs:
                materialise(u)
            recomputed.append(v)
        resident.add(v)

    for form in forms:
        for v in form:
            materialise(v)
    return reads, recomputed


def training_traffic(graph: Graph, saved: Sequence[str] | None = None) -> TrainingTraffic:
    """Forward (fused, saving ``saved``) plus backward (fused) traffic.

    Args:
        graph: the forward graph.
        saved: intermediates stored by the forward for the backward; None saves every
            intermediate (no recomputation), ``()`` saves none (full recomputation).

    The backward reads ``d<output>`` for each output and writes ``d<input>`` for each
    graph input; see the module docstring for how it chooses what to read.
    """
    saved = graph.intermediates if saved is None else tuple(saved)
    _check_saved(graph, saved)
    forward = traffic(graph, fused=True, saved=saved)
    saved_set = set(saved)
    in_memory = set(graph.inputs) | set(graph.outputs) | saved_set
    choices = [op.needs() for op in reversed(graph.ops)]  # backward runs output-first
    n = 1
    for c in choices:
        n *= len(c)
    if n > _MAX_COMBINATIONS:
        raise ValueError(f"graph too large for the exhaustive backward plan ({n} choices)")
    best: tuple[tuple[int, int, int, tuple[int, ...]], list[str], list[str]] | None = None
    for pick in itertools.product(*(range(len(c)) for c in choices)):
        reads, recomputed = _plan(graph, [c[i] for c, i in zip(choices, pick)], in_memory)
        from_saved = sum(v in saved_set for v in reads)
        key = (len(reads), len(recomputed), -from_saved, pick)
        if best is None or key < best[0]:
            best = (key, reads, recomputed)
    assert best is not None
    _, reads, recomputed = best
    backward = Traffic(
        reads=tuple(f"d{v}" for v in graph.outputs) + tuple(reads),
        writes=tuple(f"d{v}" for v in graph.inputs),
        kernels=1,
        recomputed=tuple(recomputed),
    )
    return TrainingTraffic(forward, backward)


# --------------------------------------------------------------------------- worked examples


def sin2_plus_cos2() -> Graph:
    """Kernel fusion's worked example: ``y = sin(x)**2 + cos(x)**2`` as five elementwise
    kernels."""
    return Graph(
        inputs=("x",),
        ops=(Op("s", "sin", ("x",)), Op("c", "cos", ("x",)),
             Op("s2", "square", ("s",)), Op("c2", "square", ("c",)),
             Op("y", "add", ("s2", "c2"))),
        outputs=("y",),
    )


def stacked_sigmoids(depth: int = 3) -> Graph:
    """Recomputation's worked example: ``S1 = sigmoid(x)``, ``S2 = sigmoid(S1)``,
    ``out = sigmoid(S2)``."""
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    names = ["x", *(f"S{i}" for i in range(1, depth)), "out"]
    ops = tuple(Op(names[i + 1], "sigmoid", (names[i],)) for i in range(depth))
    return Graph(inputs=("x",), ops=ops, outputs=("out",))
