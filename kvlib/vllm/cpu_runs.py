"""Real vLLM CPU-engine starts shipped with kvlib (``kvlib/data/vllm_cpu``, see its PROVENANCE.md).

Copies of the fixtures ``tools/engine_fixtures.py`` captured (``tests/fixtures/vllm_cpu``), so
that a chapter can show a real engine's KV-cache lines without reading the test tree: each run
is the model's ``config.json``, the start's log and the sidecar record of settings and reported
figures.

Taught in ch04_pool_paging (a hybrid model's pool: one size, two printed token counts).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .bundled import _cpu_dir
from .engine import VllmLogError

__all__ = ["CpuEngineRun", "cpu_engine_runs", "read_cpu_engine_run"]


@dataclass(frozen=True)
class CpuEngineRun:
    """One CPU-engine start: the config vLLM read, the log it wrote, the sidecar record (settings, figures)."""

    geometry: str
    run: str
    config: dict
    log: str
    record: dict

    def kv_lines(self) -> tuple:
        """The log's lines about the KV cache (pool space, padding, size in tokens, groups), message part only."""
        keys = ("for KV cache", "padding layers", "KV cache size", "kv cache group", "kv lcm block")
        out = []
        for line in self.log.splitlines():
            if any(key in line for key in keys):
                out.append(line.split("] ", 1)[-1].strip())
        return tuple(out)


def cpu_engine_runs(geometry: str = "gemma2_hybrid") -> list[str]:
    """Names of the bundled runs of ``geometry`` ('kv1g_len1000', ...).

    >>> cpu_engine_runs("gemma2_hybrid")
    ['kv1g_len1000', 'kv1g_len6000']
    """
    folder = _cpu_dir() / geometry
    if not folder.is_dir():
        known = sorted(p.name for p in _cpu_dir().iterdir() if p.is_dir())
        raise VllmLogError(f"no bundled CPU-engine geometry {geometry!r} (have: {', '.join(known)})")
    return sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".log"))


def read_cpu_engine_run(geometry: str = "gemma2_hybrid", run: str = "kv1g_len6000") -> CpuEngineRun:
    """One bundled CPU-engine start: config, log and record.

    The Gemma 2 hybrid (4 sliding-window layers, 3 full) with 1 GiB of KV space and
    max_model_len 6,000: 4,096 blocks of 128 tokens, printed as 299,707 tokens:

    >>> r = read_cpu_engine_run("gemma2_hybrid", "kv1g_len6000")
    >>> r.record["engine_reported"]["num_gpu_blocks"], r.record["printed"]["tokens"]
    (4096, 299707)
    >>> r.kv_lines()[-3]
    'CPU KV cache size: 299,707 tokens, Maximum concurrency for 6,000 tokens per request: 49.95x'
    """
    runs = cpu_engine_runs(geometry)
    if run not in runs:
        raise VllmLogError(f"no bundled CPU-engine run {run!r} of {geometry} (have: {', '.join(runs)})")
    folder = _cpu_dir() / geometry
    return CpuEngineRun(geometry, run, json.loads((folder / "config.json").read_text(encoding="utf-8")),
                        (folder / f"{run}.log").read_text(encoding="utf-8"),
                        json.loads((folder / f"{run}.json").read_text(encoding="utf-8")))
