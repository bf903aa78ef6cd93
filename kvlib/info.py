"""What ``kvlib info`` reports about one model, as plain data (the ``--json`` keys).

KV geometry always; parameters and weights when the config names every width
the count needs (else ``num_params: None`` and ``num_params_error`` saying
which field was missing); with ``gpu`` and ``context`` the pool per GPU by
kvlib's one pool rule (``formulas.kv_pool_bytes`` with vLLM's rounding of the
budget) and the sequences that fit. Taught in ch01_kv_formula and
ch04_pool_paging.

>>> r = info_report("llama-3.1-8b", context=8192)
>>> r["kv_bytes_per_token"], r["kv_bytes_per_sequence"] == 2**30, r["num_params_error"]
(131072, True, None)
"""

from __future__ import annotations

from . import formulas
from .assumptions import DEFAULT_OVERHEAD_BYTES, DEFAULT_UTILIZATION
from .config import load_model
from .dtypes import dtype_bytes
from .gpus import get_gpu
from .spec import ParamsError
from .units import format_gb_gib

__all__ = ["InfoError", "info_report"]


class InfoError(ValueError):
    """The arguments of an info report do not go together; the message names the option."""


def _params(spec) -> dict:
    try:
        weights = {"bf16": spec.weight_bytes(2), "fp8": spec.weight_bytes(1), "int4": spec.weight_bytes(0.5)}
        return {"num_params": spec.num_params(), "num_params_active": spec.num_params_active(),
                "num_params_mtp": spec.num_params_mtp(), "num_params_error": None, "weight_bytes": weights}
    except ParamsError as exc:
        return {"num_params": None, "num_params_active": None, "num_params_mtp": None,
                "num_params_error": str(exc), "weight_bytes": {"bf16": None, "fp8": None, "int4": None}}


def _feasibility(spec, card, *, tp, context, kv_dtype_bytes, weight_bytes, utilization, overhead) -> dict:
    """``fits`` and ``reasons`` (the JSON keys) for one sequence of ``context`` on ``card`` x ``tp``."""
    from .feasibility import check_deployment
    check = check_deployment(spec, card, tp=tp, seq_len=context, kv_dtype_bytes=kv_dtype_bytes,
                             weight_bytes=weight_bytes, utilization=utilization, other_bytes=overhead)
    return {"fits": check.fits, "reasons": list(check.reasons), "feasibility": check.summary()}


def info_report(model, kv_dtype=None, context=None, gpu=None, utilization=DEFAULT_UTILIZATION,
                tp=1, overhead_bytes=None, hub=False) -> dict:
    """What ``kvlib info`` prints, as a dict (the ``--json`` keys)."""
    spec = load_model(model, hub=hub)
    b = spec.dtype_bytes if kv_dtype is None else dtype_bytes(kv_dtype)
    report = {
        "model": spec.name,
        "source": spec.source,
        "attention": spec.attention,
        "num_layers": spec.num_kv_layers,
        "num_kv_heads": spec.cache_heads,
        "head_dim": spec.cache_head_dim,
        "num_attention_heads": spec.num_heads,
        "layer_kinds": {kind: spec.layer_kinds.count(kind) for kind in sorted(set(spec.layer_kinds))},
        "sliding_window": spec.sliding_window,
        "attention_chunk_size": spec.attention_chunk_size,
        **_params(spec),
        "kv_dtype": kv_dtype or "auto (16-bit)",
        "kv_dtype_bytes": b,
        "kv_bytes_per_token": spec.kv_bytes_per_token(b),
    }
    if tp > 1:
        spec.kv_heads_per_gpu(tp)  # validates tp against the heads
        report["tp"] = tp
        report["kv_bytes_per_token_per_gpu"] = spec.kv_bytes_per_token(b, tp=tp)
    if context is not None:
        report["context"] = context
        report["kv_bytes_per_sequence"] = spec.kv_bytes_per_sequence(context, b)
        if tp > 1:
            report["kv_bytes_per_sequence_per_gpu"] = spec.kv_bytes_per_sequence(context, b, tp=tp)
    if gpu is not None:
        if context is None:
            raise InfoError("--gpu needs --context (concurrency is per context length)")
        card = get_gpu(gpu)
        overhead = DEFAULT_OVERHEAD_BYTES if overhead_bytes is None else overhead_bytes
        report.update({"gpu": card.name, "gpu_cuda_memory_bytes": card.cuda_memory_bytes,
                       "utilization": utilization, "overhead_bytes": overhead})
        if report["weight_bytes"]["bf16"] is None:
            report.update({"weight_bytes_per_gpu": None, "kv_pool_bytes": None, "kv_pool_tokens": None,
                           "max_concurrency": None,
                           "assumptions": f"no pool: the weights are unknown ({report['num_params_error']})"})
            return report
        weights_per_gpu = formulas.weight_bytes_per_gpu(report["weight_bytes"]["bf16"], tp)
        pool = formulas.kv_pool_bytes(card.cuda_memory_bytes, utilization, weights_per_gpu, overhead,
                                      round_budget_up=True)   # vLLM rounds the request up
        per_seq = spec.kv_bytes_per_sequence(context, b, tp=tp)
        report.update({
            "weight_bytes_per_gpu": weights_per_gpu,
            "kv_pool_bytes": pool,
            "kv_pool_tokens": pool // spec.kv_bytes_per_token(b, tp=tp) if pool > 0 else 0,
            "max_concurrency": formulas.max_concurrency(pool, per_seq) if pool > 0 else 0,
            "assumptions": (f"pool = ceil(CUDA-reported memory x utilization) - bf16 weights / tp - "
                            f"{format_gb_gib(overhead)} for activations and other allocations"),
            **_feasibility(spec, card, tp=tp, context=context, kv_dtype_bytes=b,
                           weight_bytes=report["weight_bytes"]["bf16"], utilization=utilization, overhead=overhead),
        })
    return report
