"""What ``kvlib info`` reports about one model, as plain data (the ``--json`` keys).

KV geometry always (each attention kind's where they differ, ``kv_geometry``),
the indexer's share of a token's cache and the constant state of Mamba2 /
Gated DeltaNet layers, whole and per GPU; parameters and weights when the config names every width
the count needs (else ``num_params: None`` and ``num_params_error`` saying
which field was missing); with ``gpu`` and ``context`` the pool per GPU as
vLLM will size it (``vllm_pool_report``: ``kvlib.vllm.forecast_pool``, each
part with its vLLM source) and the sequences that fit. Taught in ch01_kv_formula and
ch04_pool_paging.

>>> r = info_report("llama-3.1-8b", context=8192)
>>> r["kv_bytes_per_token"], r["kv_bytes_per_sequence"] == 2**30, r["num_params_error"]
(131072, True, None)
"""

from __future__ import annotations

from . import formulas
from .config import load_model
from .dtypes import dtype_bytes
from .errors import InfoError
from .gpus import get_gpu
from .spec import ATTENTION_KINDS, STATE_KINDS, ParamsError, SpecError
from .units import GiB

__all__ = ["InfoError", "info_report", "vllm_pool_report", "planned_report", "COMPARED_RELEASE"]

COMPARED_RELEASE = "0.32.0"   # the release the course teaches: the newest rules are set beside it


def _more_than_one_geometry(spec) -> bool:
    return len({spec.kv_geometry(kind) for kind in set(spec.layer_kinds) & set(ATTENTION_KINDS)}) > 1


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


def vllm_pool_report(model, card, *, tp=1, kv_dtype=None, version=None, utilization=None, max_num_seqs=None,
                     max_num_batched_tokens=None, weights_bytes=None, overhead_bytes=None) -> dict:
    """vLLM's KV pool on one GPU of ``card`` before it starts (``kvlib.vllm.forecast_pool``), part by part.

    Each part: its bytes, a (low, high) range, the rule and the vLLM source it
    follows. ``weights_bytes`` (a measured "Model loading took" figure)
    replaces the model's weights as stored; ``overhead_bytes``, when given,
    replaces the modelled torch peak and non-torch memory. ``does_not_fit``
    is the one line to print when the weights leave no pool.
    """
    from .vllm import forecast_pool
    from .vllm.engine import VllmLogError
    from .vllm.layout import KV_CACHE_DTYPES
    kv = "auto" if kv_dtype in (None, "bf16", "fp16") else kv_dtype
    vllm_dtype = kv in KV_CACHE_DTYPES
    try:
        f = forecast_pool(model, card.cuda_memory_bytes, version=version, tp=tp, utilization=utilization,
                          max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                          weights_bytes=weights_bytes, gpu_name=card.name,
                          kv_cache_dtype=kv if vllm_dtype else "auto")
    except (VllmLogError, ParamsError) as exc:
        raise InfoError(str(exc)) from None
    parts = {p.name: {"bytes": p.bytes, "range": [p.low, p.high], "rule": p.rule, "source": p.source}
             for p in f.parts}
    if overhead_bytes is not None:
        parts["torch peak"] = {"bytes": overhead_bytes, "range": [overhead_bytes, overhead_bytes],
                               "rule": "--overhead given: replaces torch peak, non-torch and sampler state",
                               "source": "--overhead"}
        parts["non-torch"] = {"bytes": 0, "range": [0, 0], "rule": "in --overhead", "source": "--overhead"}
        if "sampler state" in parts:
            parts["sampler state"] = {"bytes": 0, "range": [0, 0], "rule": "in --overhead", "source": "--overhead"}
    used = sum(p["bytes"] for p in parts.values())
    available = f.requested_bytes - used
    low = f.requested_bytes - sum(p["range"][1] for p in parts.values())
    high = f.requested_bytes - sum(p["range"][0] for p in parts.values())
    blocks = max(0, available) // f.bytes_per_block
    budget = f.requested_bytes - (used - parts["weights"]["bytes"])
    compared = None
    if f.pool_rule == "measured":
        # how the newest rules differ from the estimate-based ones the course teaches (0.32)
        g = forecast_pool(model, card.cuda_memory_bytes, version=COMPARED_RELEASE, tp=tp,
                          max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                          weights_bytes=weights_bytes, gpu_name=card.name, kv_cache_dtype=kv if vllm_dtype else "auto")
        compared = {"vllm_version": COMPARED_RELEASE, "vllm_release": g.era, "utilization": g.utilization,
                    "block_size": g.block_size, "available_bytes": g.available_bytes,
                    "gpu_kv_cache_tokens": g.gpu_kv_cache_tokens,
                    "rule": f"ceil(CUDA total x {g.utilization}) - weights - torch peak - non-torch - CUDA-graph "
                            f"estimate, {g.block_size}-token blocks (estimate-based sizing)"}
    return {
        "vllm_release": f.era, "vllm_version": version, "utilization": f.utilization,
        "pool_rule": f.pool_rule, "model_runner": f.runner,
        "checked_against": f.checked,
        "compared_with": compared,
        "max_num_seqs": f.max_num_seqs, "max_num_batched_tokens": f.max_num_batched_tokens,
        "requested_bytes": f.requested_bytes, "parts": parts, "weights_scheme": f.weights_scheme,
        "available_bytes": available, "available_range": [low, high],
        "kv_cache_dtype": kv if vllm_dtype else None,
        "block_size": f.block_size, "bytes_per_block": f.bytes_per_block, "num_gpu_blocks": blocks,
        "gpu_kv_cache_tokens": blocks * f.block_size,
        "does_not_fit": None if available > 0 else
        (f"does not fit: weights {parts['weights']['bytes'] / GiB:.2f} GiB > budget {budget / GiB:.2f} GiB"),
    }


# GPUs whose CUDA build runs FlashInfer's Gated DeltaNet prefill (Hopper, Blackwell): 0.33+ checkpoints there
_FLASHINFER_GDN_GPUS = ("H100", "H200", "B200", "B300", "GB200", "GB300")


def planned_report(spec, context, *, tp=1, kv_dtype=None, version=None, max_num_batched_tokens=None,
                   card=None) -> dict:
    """``planned_bytes_per_sequence_per_gpu``: what vLLM reserves for one request of ``context`` on one GPU.

    ``kvlib.vllm.admission.planned_bytes_per_sequence``: the request's worst-case blocks (block rounding, the
    window / chunk worst step, a hybrid's state pages) times the bytes of one block (padding layers and padded
    state pages included), the divisor of vLLM's "Maximum concurrency". ``planned_sequence`` says how; a figure
    kvlib cannot compute is None with its one-line reason (``error``).
    """
    from .vllm.admission import planned_bytes_per_sequence
    from .vllm.engine import V1, VllmLogError, batch_defaults
    from .vllm.layout import KV_CACHE_DTYPES
    kv = "auto" if kv_dtype in (None, "bf16", "fp16") else kv_dtype
    out = {"planned_bytes_per_sequence_per_gpu": None, "planned_sequence": None}
    if kv not in KV_CACHE_DTYPES:
        out["planned_sequence"] = {"error": f"vLLM has no KV-cache dtype {kv_dtype!r}: no planned figure"}
        return out
    batched, flashinfer = max_num_batched_tokens, None
    if card is not None:
        if batched is None:
            batched = batch_defaults(version, V1, card.cuda_memory_bytes, card.name)[1]
        flashinfer = card.name.split("-")[0] in _FLASHINFER_GDN_GPUS
    try:
        a = planned_bytes_per_sequence(spec, context, tp=tp, kv_cache_dtype=kv, version=version,
                                       max_num_batched_tokens=batched, gdn_flashinfer=flashinfer)
    except VllmLogError as exc:
        out["planned_sequence"] = {"error": str(exc)}
        return out
    out["planned_bytes_per_sequence_per_gpu"] = a.bytes
    out["planned_sequence"] = {
        "vllm_version": version, "block_size": a.block_size, "bytes_per_block": a.bytes_per_block,
        "blocks_per_request": a.blocks_per_request, "kv_cache_groups": len(a.groups),
        "max_in_flight_tokens": a.max_in_flight_tokens,
        "state_pages_per_request": a.plan.state_pages_per_request if a.plan is not None else 0,
        "notes": list(a.notes), "error": None}
    return out


def _state_report(spec, tp) -> dict:
    """The constant state per sequence: the whole model and one rank, and each state kind's tensors on one rank."""
    if spec.unmodelled_state:
        return {"state_bytes_per_sequence": None, "state_bytes_per_sequence_per_gpu": None,
                "state_layers": {}, "state_error": spec.unmodelled_state}
    layers = {}
    for kind in sorted(set(spec.layer_kinds) & set(STATE_KINDS)):
        try:
            shapes = spec.state_tensor_shapes(kind, tp)
        except SpecError as exc:
            raise InfoError(f"--tp: {exc}") from None
        layers[kind] = {"layers": spec.layer_kinds.count(kind),
                        "shapes_per_gpu": {name: list(shape) for name, shape in shapes.items()},
                        "dtype_bytes": spec.state_dtype_bytes(kind),
                        "bytes_per_layer_per_gpu": spec.layer_state_bytes(kind, tp)}
    return {"state_bytes_per_sequence": spec.state_bytes_per_sequence(),
            "state_bytes_per_sequence_per_gpu": spec.state_bytes_per_sequence(tp),
            "state_layers": layers, "state_error": None}


def info_report(model, kv_dtype=None, context=None, gpu=None, utilization=None,
                tp=1, overhead_bytes=None, hub=False, vllm_version=None, max_num_seqs=None,
                max_num_batched_tokens=None, weights_bytes=None) -> dict:
    """What ``kvlib info`` prints, as a dict (the ``--json`` keys).

    Per token: ``kv_bytes_per_token`` (attention KV, the indexer included) and
    ``indexer_bytes_per_token`` (the indexer's share, 0 where none); per
    sequence: ``kv_bytes_per_sequence`` (windows capped) and
    ``state_bytes_per_sequence`` (the constant state of Mamba2 / Gated DeltaNet
    layers, 0 where none; None with ``state_error`` where kvlib cannot size
    it). Each has a ``_per_gpu`` twin for one rank of ``tp``, at every TP, 1
    included.
    """
    spec = load_model(model, hub=hub)
    b = spec.dtype_bytes if kv_dtype is None else dtype_bytes(kv_dtype)
    try:
        per_gpu = spec.kv_bytes_per_token(b, tp=tp)      # validates tp against every attention kind's heads
    except SpecError as exc:
        raise InfoError(f"--tp: {exc}") from None
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
    if _more_than_one_geometry(spec):
        report["kv_geometry"] = {kind: list(spec.kv_geometry(kind))
                                 for kind in sorted(set(spec.layer_kinds) & set(ATTENTION_KINDS))}
    report.update({
        "tp": tp,
        "kv_bytes_per_token_per_gpu": per_gpu,
        "indexer_bytes_per_token": spec.indexer_bytes_per_token(),
        "indexer_bytes_per_token_per_gpu": spec.indexer_bytes_per_token(tp),
        **_state_report(spec, tp),
    })
    if context is not None:
        report["context"] = context
        report["kv_bytes_per_sequence"] = spec.kv_bytes_per_sequence(context, b)
        report["kv_bytes_per_sequence_per_gpu"] = spec.kv_bytes_per_sequence(context, b, tp=tp)
        report.update(planned_report(spec, context, tp=tp, kv_dtype=kv_dtype, version=vllm_version,
                                     max_num_batched_tokens=max_num_batched_tokens,
                                     card=get_gpu(gpu) if gpu is not None else None))
    if gpu is not None:
        if context is None:
            raise InfoError("--gpu needs --context (concurrency is per context length)")
        card = get_gpu(gpu)
        report.update({"gpu": card.name, "gpu_cuda_memory_bytes": card.cuda_memory_bytes})
        if report["weight_bytes"]["bf16"] is None and weights_bytes is None:
            report.update({"utilization": utilization, "weight_bytes_per_gpu": None, "kv_pool_bytes": None,
                           "kv_pool_tokens": None, "max_concurrency": None, "vllm_pool": None,
                           "assumptions": f"no pool: the weights are unknown ({report['num_params_error']})"})
            return report
        pool = vllm_pool_report(spec if (weights_bytes is not None or hub) else model, card, tp=tp, kv_dtype=kv_dtype,
                                version=vllm_version, utilization=utilization, max_num_seqs=max_num_seqs,
                                max_num_batched_tokens=max_num_batched_tokens, weights_bytes=weights_bytes,
                                overhead_bytes=overhead_bytes)
        available = max(0, pool["available_bytes"])
        # one sequence holds its KV and, in a hybrid, its constant state
        per_seq = spec.kv_bytes_per_sequence(context, b, tp=tp) + (report["state_bytes_per_sequence_per_gpu"] or 0)
        report.update({
            "utilization": pool["utilization"],
            "overhead_bytes": overhead_bytes,
            "weight_bytes_per_gpu": pool["parts"]["weights"]["bytes"],
            "kv_pool_bytes": available,
            # whole blocks of the release's block size; a KV dtype vLLM has no cache dtype for: bytes per token
            "kv_pool_tokens": pool["gpu_kv_cache_tokens"] if pool["kv_cache_dtype"] else
            available // spec.kv_bytes_per_token(b, tp=tp),
            "max_concurrency": formulas.max_concurrency(available, per_seq) if available > 0 else 0,
            "vllm_pool": pool,
            "assumptions": (f"vLLM {pool['vllm_release']}: pool = ceil(CUDA-reported memory x utilization) - "
                            "weights as stored - torch peak - non-torch - CUDA graphs"
                            + (" - margin (measured after warmup and CUDA-graph capture)"
                               if pool["pool_rule"] == "measured" else "") + " (each part below)"),
            # the same figures through kvlib's feasibility rules (TP vs heads, context, weights, one sequence's KV)
            **_feasibility(spec, card, tp=tp, context=context, kv_dtype_bytes=b,
                           weight_bytes=pool["parts"]["weights"]["bytes"] * tp, utilization=pool["utilization"],
                           overhead=sum(p["bytes"] for name, p in pool["parts"].items() if name != "weights")),
        })
    return report
