"""Small timing helpers for the benchmarks: medians over repeats, never asserts."""

from __future__ import annotations

import statistics
import time


def time_call(fn, repeats: int = 5) -> list[float]:
    """Wall seconds of ``fn()`` for each of ``repeats`` runs."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def median(values) -> float:
    return statistics.median(values)


def p95(values) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def md_table(headers, rows) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
