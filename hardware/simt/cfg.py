"""Control-flow graph of a kernel and the reconvergence points of its branches.

The SIMT stack (Fung et al., "Dynamic Warp Formation", MICRO 2007; the GPGPU-Sim
manual, "SIMT stack") reconverges a divergent branch at its *immediate
post-dominator*: the first instruction that every path from the branch to the kernel's
exit must pass. Post-dominators are computed on basic blocks with a virtual exit node
that every ``ret``/``exit`` reaches (Cooper, Harvey, Kennedy, "A Simple, Fast Dominance
Algorithm", 2001, applied to the reversed graph). Blocks that cannot reach an exit
(infinite loops) get the virtual exit as their post-dominator.
"""
from __future__ import annotations

from .parser import Instruction

__all__ = ["reconvergence_points", "branch_target", "is_terminator"]


def branch_target(inst: Instruction, labels: dict[str, int]) -> int | None:
    """Target instruction index of a ``bra``, else None."""
    if inst.parts[0] != "bra":
        return None
    return labels[inst.operands[0].name]  # validated by the compiler


def is_terminator(inst: Instruction) -> bool:
    return inst.parts[0] in ("bra", "ret", "exit")


def reconvergence_points(instructions: list[Instruction], labels: dict[str, int]) -> dict[int, int]:
    """Map each conditional ``bra`` index to the index of its immediate post-dominator
    (``len(instructions)`` stands for the virtual exit)."""
    n = len(instructions)
    exit_node = n
    # basic-block leaders
    leaders = {0}
    for pc, inst in enumerate(instructions):
        t = branch_target(inst, labels)
        if t is not None:
            leaders.add(t)
        if is_terminator(inst) and pc + 1 < n:
            leaders.add(pc + 1)
    leaders.update(v for v in labels.values() if v < n)
    starts = sorted(x for x in leaders if x < n)
    block_of = {}
    ends = {}
    for i, s in enumerate(starts):
        e = starts[i + 1] if i + 1 < len(starts) else n
        ends[s] = e
        for pc in range(s, e):
            block_of[pc] = s
    succ: dict[int, list[int]] = {}
    for s in starts:
        last = ends[s] - 1
        inst = instructions[last]
        out: list[int] = []
        op = inst.parts[0]
        fall = ends[s] if ends[s] < n else exit_node
        if op == "bra":
            out.append(labels[inst.operands[0].name])
            if inst.guard is not None:
                out.append(fall)
        elif op in ("ret", "exit"):
            out.append(exit_node)
            if inst.guard is not None:
                out.append(fall)
        else:
            out.append(fall)
        succ[s] = out
    nodes = starts + [exit_node]
    pred: dict[int, list[int]] = {v: [] for v in nodes}
    for s, outs in succ.items():
        for t in outs:
            pred[t].append(s)
    # post-order of the reversed graph from the exit (iterative DFS)
    order: list[int] = []
    seen = {exit_node}
    stack = [(exit_node, iter(pred[exit_node]))]
    while stack:
        v, it = stack[-1]
        for w in it:
            if w not in seen:
                seen.add(w)
                stack.append((w, iter(pred[w])))
                break
        else:
            order.append(v)
            stack.pop()
    rpo = list(reversed(order))
    index = {v: i for i, v in enumerate(rpo)}
    ipdom: dict[int, int | None] = {v: None for v in nodes}
    ipdom[exit_node] = exit_node

    def intersect(a: int, b: int) -> int:
        while a != b:
            while index[a] > index[b]:
                a = ipdom[a]  # type: ignore[assignment]
            while index[b] > index[a]:
                b = ipdom[b]  # type: ignore[assignment]
        return a

    changed = True
    while changed:
        changed = False
        for v in rpo[1:]:
            cands = [w for w in succ.get(v, []) if ipdom[w] is not None and w in index]
            if not cands:
                continue
            new = cands[0]
            for w in cands[1:]:
                new = intersect(new, w)
            if ipdom[v] != new:
                ipdom[v] = new
                changed = True
    out: dict[int, int] = {}
    for pc, inst in enumerate(instructions):
        if inst.parts[0] == "bra" and inst.guard is not None:
            b = block_of[pc]
            p = ipdom.get(b)
            out[pc] = exit_node if p is None else p
    return out
