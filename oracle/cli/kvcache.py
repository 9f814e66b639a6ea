"""``python -m oracle kvcache``: replay a request trace against a KV memory budget,
contiguous reservation at the maximum length versus paged allocation (vLLM, Kwon et
al. 2023, sections 3 and 6; :func:`refimpl.kvcache.simulate.simulate`), and print what
each policy did. ``--plot FILE`` draws the memory in use over time for both policies
(slots allocated and tokens held per step, the budget, the running requests); it needs
matplotlib (``pip install '.[plot]'``).
"""
from __future__ import annotations

import argparse

from tabulate import tabulate

from oracle import limits, plots
from refimpl.kvcache.simulate import POLICIES, paged_example_trace, sharegpt_like_trace, simulate


#: the most requests a trace may have (the trace rows ``oracle.limits`` allows)
MAX_REQUESTS = 4096
#: the longest mean gap between arrivals (steps): arrivals stay far inside the trace
#: values ``oracle.limits`` allows (2**16)
MAX_MEAN_GAP = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--requests", type=int, default=300, metavar="N",
                        help="requests of the ShareGPT-like trace (default 300)")
    parser.add_argument("--seed", type=int, default=0, help="trace seed (default 0)")
    parser.add_argument("--mean-gap", type=float, default=1.0, metavar="STEPS",
                        help="mean steps between arrivals (default 1)")
    parser.add_argument("--memory-slots", type=int, default=16 * 2048, metavar="SLOTS",
                        help="KV budget in token slots (default 16 x 2048)")
    parser.add_argument("--max-len", type=int, default=2048,
                        help="contiguous reservation and longest request (default 2048)")
    parser.add_argument("--block-size", type=int, default=16,
                        help="page size of the paged policy (default 16)")
    parser.add_argument("--example", "--seed-example", dest="example", action="store_true",
                        help="replay the 128/1024/300-token PagedAttention example instead "
                             "of a trace (--seed-example: the old spelling)")
    parser.add_argument("--plot", metavar="FILE", default=None,
                        help="draw memory over time for both policies to FILE")


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.requests <= MAX_REQUESTS:
        raise ValueError(f"--requests must be in [1, {MAX_REQUESTS}], got {args.requests} "
                         "(the limits of oracle/limits.py)")
    if not 0 <= args.mean_gap <= MAX_MEAN_GAP:      # also refuses nan
        raise ValueError(f"--mean-gap must be a number in [0, {MAX_MEAN_GAP}], got "
                         f"{args.mean_gap}")
    limits.check_arguments("kvcache.simulate", {
        "memory_slots": args.memory_slots, "max_len": args.max_len,
        "block_size": args.block_size}, {"memory_slots": "--memory-slots",
                                         "max_len": "--max-len", "block_size": "--block-size"})
    trace = (paged_example_trace() if args.example
             else sharegpt_like_trace(args.requests, seed=args.seed, mean_gap=args.mean_gap))
    results = [simulate(trace, policy, memory_slots=args.memory_slots, max_len=args.max_len,
                        block_size=args.block_size) for policy in POLICIES]
    rows = [[r.policy, r.steps, r.finished, r.peak_running, f"{r.mean_running:.1f}",
             r.preemptions, f"{r.utilization:.1%}", f"{r.waste:.1%}",
             f"{r.memory_utilization:.1%}"] for r in results]
    what = ("PagedAttention example (128/1024/300 tokens)" if args.example else
            f"ShareGPT-like trace, {args.requests} requests, seed {args.seed}")
    print(f"{what}; budget {args.memory_slots} slots, max length {args.max_len}, "
          f"{args.block_size}-token pages")
    print(tabulate(rows, headers=["policy", "steps", "finished", "peak running",
                                  "mean running", "preempted", "KV used", "waste",
                                  "budget used"], disable_numparse=True, stralign="right"))
    if args.plot is None:
        return 0

    return plots.write_figure(plots.draw_kv_memory, results, args.plot,
                              memory_slots=args.memory_slots,
                              title=f"KV-cache memory over time: {what}")
