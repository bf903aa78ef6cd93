"""Median run times of the simulators and the planner at widget sizes (prints, never asserts).

Run: ``.venv/bin/python benchmarks/bench_simulators.py [--repeats N]``. A widget
redraws on every slider move, so each call here should stay well under 100 ms.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import md_table, median, time_call  # noqa: E402  (benchmarks/common.py)

from kvcoach import drills, plan_mode  # noqa: E402
from kvlib import alloc_sim, offload, planner, prefix_cache, roofline  # noqa: E402


def cases():
    """(name, size, callable) for each call a widget or drill makes."""
    out = []
    for policy in alloc_sim.POLICIES:
        out.append((f"alloc_sim.simulate {policy}", "chat, 300 requests, 32,768 slots",
                    lambda p=policy: alloc_sim.simulate(policy=p)))
    out.append(("alloc_sim.compare", "chat, 300 requests, 3 policies", lambda: alloc_sim.compare()))
    out.append(("alloc_sim.compare", "long, 200 requests, 65,536 slots",
                lambda: alloc_sim.compare("long", capacity_tokens=65_536)))
    for name in prefix_cache.WORKLOADS:
        requests = prefix_cache.make_workload(name)
        out.append((f"prefix_cache.run_cache {name}", f"{len(requests)} requests, unbounded",
                    lambda r=requests: prefix_cache.run_cache(r)))
    requests = prefix_cache.make_workload("multi_turn_chat")
    out.append(("prefix_cache.run_cache multi_turn_chat", "400-block budget (LRU evicting)",
                lambda: prefix_cache.run_cache(requests, capacity_blocks=400)))
    out.append(("prefix_cache.make_workload document_qa", "100 requests", lambda: prefix_cache.make_workload(
        "document_qa")))
    prompt = list(range(8192))
    out.append(("prefix_cache.block_hashes", "8,192 tokens, 512 blocks", lambda: prefix_cache.block_hashes(prompt)))
    out.append(("planner.plan_capacity", "[kv-math] section 8", lambda: planner.plan_capacity(
        "llama-3-70b", users=2000, context=6000, itl_ms=60, gpu="H100-SXM")))
    out.append(("roofline.decode_step", "Llama 3 8B, batch 32, 4K",
                lambda: roofline.decode_step("llama-3-8b", batch=32, context=4096)))
    out.append(("offload.fetch_or_recompute", "Llama 3.1 8B, 8K",
                lambda: offload.fetch_or_recompute("llama-3.1-8b", 8192)))
    out.append(("offload.break_even_context", "5 ms fixed fetch cost",
                lambda: offload.break_even_context("llama-3.1-8b", fetch_overhead_s=0.005)))
    out.append(("drills.problem_set", "11 problems", lambda: drills.problem_set(0, 11)))
    out.append(("plan_mode: draw + assumptions", "scenario 2: plan_requests and its steps",
                lambda: plan_mode.PlanSession(plan_mode.draw(2), clock=lambda: 0.0).answer(
                    "efficiency=0.7 allreduce_us=20 spike=1.3")))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per case (at least 3)")
    args = parser.parse_args(argv)
    repeats = max(3, args.repeats)
    rows = []
    for name, size, fn in cases():
        fn()  # warm: first-call imports and config reads are not what a slider pays
        times = time_call(fn, repeats)
        rows.append((name, size, f"{median(times) * 1e3:.2f}", f"{max(times) * 1e3:.2f}"))
    print(f"median and max of {repeats} runs, milliseconds (Python {sys.version.split()[0]})\n")
    print(md_table(["call", "size", "median ms", "max ms"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
