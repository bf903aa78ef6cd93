"""kvlib's forward prediction of vLLM's available KV memory against every fixture log, and the old rule beside it.

    .venv/bin/python benchmarks/bench_forward_pool.py      # prints the section
    .venv/bin/python benchmarks/run.py --only forward      # writes it into BENCHMARKS.md

The logs and how each is replayed: tests/fixtures/vllm_mem_logs (cases.json, PROVENANCE.md). Expected figures are
what each log prints. The old rule: utilization x CUDA memory - bf16 weights / (tp x pp) - 3 GB.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from common import md_table  # noqa: E402

import vllm_mem_cases as mc  # noqa: E402

HEADING = "## Forward pool prediction against vLLM's startup logs"


def _err(e: float, printed: float) -> str:
    return f"{e:+.2f} ({100 * e / printed:+.1f}%)"


def _stats(rows, attr) -> str:
    mean, worst = mc.summary(rows, attr)
    return f"mean {mean:.2f} GiB, max {worst:.2f} GiB"


def bench_forward_pool(args=None) -> str:
    rows = mc.rows()
    table = []
    excluded = [r for r in mc.rows(include_excluded=True) if r.role == "excluded"]
    for r in rows + excluded:
        tokens = f"{r.predicted_tokens:,} / {r.printed_tokens:,}" if r.printed_tokens else f"{r.predicted_tokens:,} / -"
        peak = r.printed_parts.get("torch_peak_increase_gib")
        peak_text = f"{r.forecast.part('torch peak').bytes / 2**30:.2f} / " + (f"{peak:.2f}" if peak else "-")
        table.append((r.id, r.model.split("/")[-1], r.version, r.tp, r.role, f"{r.printed_gib:.2f}",
                      f"{r.predicted_gib:.2f}", _err(r.error_gib, r.printed_gib), peak_text, tokens,
                      f"{r.old_gib:.2f}", _err(r.old_error_gib, r.printed_gib)))
    held = [r for r in rows if r.role == "held-out"]
    fitted = [r for r in rows if r.role == "fitted"]
    return "\n".join([
        HEADING, "",
        "`kvlib.vllm.forecast_pool` from the model's config alone (weights as stored; torch peak by release: the "
        "forward, and the dummy sampler at the bytes per logit of that release's sampler path; non-torch by TP; "
        "Model Runner V2's sampler state; CUDA graphs where the release and runner subtract them), against the "
        "`Available KV cache memory` "
        "each log prints (GiB), and the old forward rule (utilization x CUDA memory - bf16 weights - 3 GB) on the "
        "same runs. Tokens: predicted / printed (blocks x 16; under PP the smaller stage). 'fitted' logs set a "
        "release constant (cases.json says which); the others are held out.", "",
        md_table(["log", "model", "vLLM", "GPUs", "role", "printed", "predicted", "error GiB (%)",
                  "torch peak GiB predicted / printed", "tokens predicted / printed", "old rule",
                  "old error GiB (%)"], table), "",
        f"**New rule:** all {len(rows)} logs {_stats(rows, 'error_gib')}; held-out {len(held)} "
        f"{_stats(held, 'error_gib')}; fitted-on {len(fitted)} {_stats(fitted, 'error_gib')}.", "",
        f"**Old rule:** all {len(rows)} logs {_stats(rows, 'old_error_gib')}.", "",
        *(f"Excluded from the means: {r.id} ({r.error_gib:+.2f} GiB), {c['why']}." for r in excluded
          for c in mc.cases() if c["id"] == r.id),
    ])


if __name__ == "__main__":
    print(bench_forward_pool())
