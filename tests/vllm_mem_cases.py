"""The mem-log fixtures replayed forwards: kvlib's prediction of vLLM's available KV memory against what each log prints.

Shared by tests/test_forward_pool.py and benchmarks/forward_pool.py (which prints the BENCHMARKS.md table).
Fixtures: tests/fixtures/vllm_mem_logs (cases.json says how each log is replayed, PROVENANCE.md where it is from).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kvlib import formulas, get_gpu, load_model
from kvlib.units import GB, GiB
from kvlib.vllm import forecast_pool

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "vllm_mem_logs"
OLD_OVERHEAD_BYTES = 3 * GB     # the rule the forward path used before: util x memory - bf16 weights / tp - 3 GB


@dataclass(frozen=True)
class Row:
    id: str
    model: str
    version: str
    tp: int
    role: str
    printed_gib: float
    printed_tokens: int | None
    predicted_gib: float
    predicted_tokens: int
    old_gib: float
    printed_parts: dict
    forecast: object

    @property
    def error_gib(self) -> float:
        return self.predicted_gib - self.printed_gib

    @property
    def old_error_gib(self) -> float:
        return self.old_gib - self.printed_gib


def cases() -> list[dict]:
    return json.loads((FIXTURES / "cases.json").read_text())["cases"]


def printed(case: dict) -> dict:
    """The figures the log prints (the sidecar's ``printed`` block, or the case's ``expected`` for bundled logs)."""
    if "expected" in case:
        return case["expected"]
    return json.loads((FIXTURES / f"{case['log']}.json").read_text())["printed"]


def model_of(case: dict):
    cfg = case["config"]
    return str(FIXTURES / cfg) if cfg.startswith("configs/") else cfg


def total_bytes(case: dict) -> int:
    if case["total_gib"] is not None:
        return round(case["total_gib"] * GiB)
    return get_gpu(case["gpu"]).cuda_memory_bytes


def replay(case: dict) -> Row:
    p = printed(case)
    f = forecast_pool(model_of(case), total_bytes(case), version=case["version"], engine=case["engine"],
                      tp=case["tp"], pp=case.get("pp", 1), stage=case.get("stage"),
                      utilization=case["utilization"], gpu_name=case["gpu"], usage=case.get("usage", "serve"),
                      max_model_len=case["max_model_len"], max_num_seqs=case.get("max_num_seqs"),
                      sampler=case.get("sampler"))
    tokens = f.gpu_kv_cache_tokens
    if case.get("pp", 1) > 1:   # the log prints one stage's memory; the token count follows the smallest stage
        tokens = forecast_pool(model_of(case), total_bytes(case), version=case["version"], engine=case["engine"],
                               tp=case["tp"], pp=case["pp"], utilization=case["utilization"], gpu_name=case["gpu"],
                               max_model_len=case["max_model_len"]).gpu_kv_cache_tokens
    spec = load_model(model_of(case))
    old = formulas.kv_pool_bytes(total_bytes(case), case["utilization"],
                                 formulas.weight_bytes_per_gpu(spec.weight_bytes(2), case["tp"] * case.get("pp", 1)),
                                 OLD_OVERHEAD_BYTES, round_budget_up=True)
    return Row(case["id"], spec.name, case["version"], case["tp"] * case.get("pp", 1), case["role"],
               p["available_kv_gib"], p.get("kv_tokens"), f.available_bytes / GiB, tokens,
               old / GiB, p, f)


def rows(include_excluded: bool = False) -> list[Row]:
    """Every case replayed; cases marked 'excluded' (a feature kvlib does not model, cases.json says which) only
    when asked."""
    return [replay(c) for c in cases() if include_excluded or c["role"] != "excluded"]


def summary(rs, attr="error_gib") -> tuple[float, float]:
    errs = [abs(getattr(r, attr)) for r in rs]
    return sum(errs) / len(errs), max(errs)
