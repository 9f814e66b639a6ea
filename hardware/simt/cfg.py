"""Control-flow graph of a kernel and the reconvergence points of its branches.

The SIMT stack (Fung et al., "Dynamic Warp Formation", MICRO 2007; the GPGPU-Sim
manual, "SIMT stack") reconverges a divergent branch at its *immediate
post-dominator*: the first instruction that every path from the branch to the kernel's
exit must pass. Post-dominators are computed on basic blocks with a virtual exit node
that every ``ret``/``exit`` reaches (the dominators of the reversed graph, by Lengauer
and Tarjan's algorithm: time O(m log n) whatever the shape of the graph). Blocks that
cannot reach an exit (infinite loops) get the virtual exit as their post-dominator.
"""
from __future__ import annotations

from .parser import Instruction

__all__ = ["reconvergence_points", "branch_target", "indexed_targets", "is_terminator"]


def branch_target(inst: Instruction, labels: dict[str, int]) -> int | None:
    """Target instruction index of a ``bra``, else None."""
    if inst.parts[0] != "bra":
        return None
    return labels[inst.operands[0].name]  # validated by the compiler


def indexed_targets(inst: Instruction, labels: dict[str, int],
                    tables: dict[str, tuple[str, ...]]) -> list[int]:
    """Target instruction indices of a ``brx.idx`` (its ``.branchtargets`` list), else
    an empty list."""
    if inst.parts[0] != "brx":
        return []
    return [labels[t] for t in tables[inst.operands[1].name]]  # validated by the module


def is_terminator(inst: Instruction) -> bool:
    return inst.parts[0] in ("bra", "brx", "ret", "exit")


def reconvergence_points(instructions: list[Instruction], labels: dict[str, int],
                         tables: dict[str, tuple[str, ...]] | None = None) -> dict[int, int]:
    """Map each conditional ``bra`` and each ``brx.idx`` (a branch to one of several
    targets, ``tables`` its lists) index to the index of its immediate post-dominator
    (``len(instructions)`` stands for the virtual exit)."""
    tables = tables or {}
    n = len(instructions)
    exit_node = n
    # basic-block leaders
    leaders = {0}
    for pc, inst in enumerate(instructions):
        t = branch_target(inst, labels)
        if t is not None:
            leaders.add(t)
        leaders.update(indexed_targets(inst, labels, tables))
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
        elif op == "brx":
            out.extend(dict.fromkeys(indexed_targets(inst, labels, tables)))
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
    # post-dominators: dominators of the reversed graph, rooted at the exit
    ipdom = _dominators(exit_node, pred, succ)
    out: dict[int, int] = {}
    for pc, inst in enumerate(instructions):
        if (inst.parts[0] == "bra" and inst.guard is not None) or inst.parts[0] == "brx":
            b = block_of[pc]
            out[pc] = ipdom.get(b, exit_node)
    return out


def _dominators(root: int, succ: dict[int, list[int]], pred: dict[int, list[int]]
                ) -> dict[int, int]:
    """Immediate dominator of every node reachable from ``root`` (the root maps to
    itself): Lengauer and Tarjan, "A Fast Algorithm for Finding Dominators in a
    Flowgraph" (TOPLAS 1979), the simple version with path compression, O(m log n), so
    that thousands of branches to one label cost no more than thousands of others
    (the iterative algorithm walks dominator chains whose length grows with them)."""
    # depth-first numbering (iterative)
    num = {root: 0}
    vertex = [root]
    parent = [0]
    stack = [(root, iter(succ.get(root, ())))]
    while stack:
        v, it = stack[-1]
        for w in it:
            if w not in num:
                num[w] = len(vertex)
                vertex.append(w)
                parent.append(num[v])
                stack.append((w, iter(succ.get(w, ()))))
                break
        else:
            stack.pop()
    n = len(vertex)
    semi = list(range(n))
    label = list(range(n))
    ancestor = [-1] * n
    idom = [0] * n
    bucket: list[list[int]] = [[] for _ in range(n)]

    def evaluate(v: int) -> int:
        if ancestor[v] < 0:
            return v
        # path compression, iteratively: the chain of ancestors up to the forest root
        chain = []
        u = v
        while ancestor[ancestor[u]] >= 0:
            chain.append(u)
            u = ancestor[u]
        for u in reversed(chain):
            a = ancestor[u]
            if semi[label[a]] < semi[label[u]]:
                label[u] = label[a]
            ancestor[u] = ancestor[a]
        return label[v]

    for w in range(n - 1, 0, -1):
        for v in pred.get(vertex[w], ()):
            if v in num:
                u = evaluate(num[v])
                if semi[u] < semi[w]:
                    semi[w] = semi[u]
        bucket[semi[w]].append(w)
        p = parent[w]
        ancestor[w] = p
        for v in bucket[p]:
            u = evaluate(v)
            idom[v] = u if semi[u] < semi[v] else p
        bucket[p] = []
    for w in range(1, n):
        if idom[w] != semi[w]:
            idom[w] = idom[idom[w]]
    return {vertex[w]: vertex[idom[w]] for w in range(n)}
