"""The report of one engine start: the plain dict ``kvlib vllm-log --json`` prints.

Formatting it for people is the CLI's job (``kvlib.cli``). Taught in ch08_vllm_lab.
"""

from __future__ import annotations

from .cpu import log_block_size
from .engine import DEFAULT_BLOCK_SIZE, default_block_size
from .log import EngineStart
from .predict import LogPrediction

__all__ = ["report"]


def _block_size(start: EngineStart, override: int | None):
    if override is not None:
        return override, "cli"
    if start.block_size is not None:
        return start.block_size, "log"
    if start.device == "cpu":
        return log_block_size(start), "log" if start.kv_cache_group_block_sizes else "cpu backend"
    if start.version_tuple is not None:       # the release's default: 16 through 0.33, 64 from 0.34
        return default_block_size(start.version_tuple), "default"
    return DEFAULT_BLOCK_SIZE, "default"


def report(start: EngineStart, prediction: LogPrediction | None = None, *, block_size: int | None = None) -> dict:
    """The JSON object ``kvlib vllm-log --json`` prints for one engine start.

    Figures under their plain names are exactly as the log prints them (None
    when it prints none); figures computed from others carry a ``derived_``
    prefix. With a prediction, the ``predicted_*`` keys, ``agrees`` and
    ``reason`` / ``cause`` are added.

    A CPU-backend start (``device: 'cpu'``) keeps its printed token count under
    ``gpu_kv_cache_tokens`` (``gpu_kv_cache_tokens_source``: 'CPU KV cache size
    line'), so the same keys serve both; ``predicted_path`` says which backend's
    rules made the prediction ('cpu' or 'gpu'), ``kv_cache_group_block_sizes``
    what a hybrid model's group line printed and
    ``predicted_kv_cache_group_block_sizes`` what the CPU path expects there.

    >>> from kvlib.vllm import parse_log
    >>> r = report(parse_log("GPU KV cache size: 158,656 tokens")[0])
    >>> r["engine"], r["gpu_kv_cache_tokens"], r["num_gpu_blocks"], r["derived_num_gpu_blocks"]
    ('v1', 158656, None, 9916)
    """
    bs, bs_source = _block_size(start, block_size)
    derived_blocks = derived_tokens = None
    derived_note = None
    if start.num_gpu_blocks is None and start.gpu_kv_cache_tokens is not None:
        if prediction is not None and prediction.derived_blocks_min is not None:
            if prediction.derived_blocks_min == prediction.derived_blocks_max:
                derived_blocks = prediction.derived_blocks_min
                derived_note = "blocks whose token figure is the logged one, for the model given"
        elif start.gpu_kv_cache_tokens % bs == 0:
            derived_blocks = start.gpu_kv_cache_tokens // bs
            derived_note = "gpu_kv_cache_tokens / block_size (one KV-cache group assumed)"
    if start.gpu_kv_cache_tokens is None and start.num_gpu_blocks is not None:
        derived_tokens = start.num_gpu_blocks * bs
        derived_note = "num_gpu_blocks x block_size"
    out = {
        "index": start.index,
        "first_line": start.first_line,
        "last_line": start.last_line,
        "engine": start.engine,
        "engine_evidence": start.engine_evidence,
        "vllm_version": start.vllm_version,
        "model_in_log": start.model,
        "dtype": start.dtype,
        "kv_cache_dtype": start.kv_cache_dtype,
        "tensor_parallel_size": start.tensor_parallel_size,
        "pipeline_parallel_size": start.pipeline_parallel_size,
        "available_kv_cache_gib": start.available_kv_cache_gib,
        "available_kv_cache_bytes": start.available_kv_cache_bytes,
        "available_kv_cache_source": start.available_kv_cache_source,
        "available_kv_cache_by_rank": [{"process": rank or None, "gib": float(text)}
                                       for rank, text in start.available_kv_cache_by_rank],
        "pool_sizing": start.pool_sizing,
        "pool_sizing_evidence": start.pool_sizing_evidence,
        "estimated_kv_cache_gib": (None if start.estimated_kv_cache_text is None
                                   else float(start.estimated_kv_cache_text)),
        "gpu_kv_cache_tokens": start.gpu_kv_cache_tokens,
        "gpu_kv_cache_tokens_source": start.gpu_kv_cache_tokens_source,
        "num_gpu_blocks": start.num_gpu_blocks,
        "num_gpu_blocks_computed": start.num_gpu_blocks_computed,
        "num_cpu_blocks": start.num_cpu_blocks,
        "max_model_len": start.max_model_len,
        "max_model_len_source": start.max_model_len_source,
        "max_concurrency": start.max_concurrency,
        "derived_num_gpu_blocks": derived_blocks,
        "derived_gpu_kv_cache_tokens": derived_tokens,
        "derived_note": derived_note,
        "block_size": bs,
        "block_size_source": bs_source,
        "model_weights_gib": start.model_weights_gib,
        "model_weights_printed": start.model_weights_text,
        "total_gpu_memory_gib": start.total_gpu_memory_gib,
        "gpu_memory_utilization": start.gpu_memory_utilization,
        "num_ranks_reporting": start.num_ranks_reporting,
        "device": start.device,
        "attention_backend": start.attention_backend,
        "max_num_batched_tokens": start.max_num_batched_tokens,
        "kv_cache_group_block_sizes": (list(start.kv_cache_group_block_sizes)
                                       if start.kv_cache_group_block_sizes else None),
        # state hybrids: what the start printed about the state page and the block that covers it
        "attention_block_size_printed": start.block_size if "attention block size" in (start.block_size_line or "")
        else None,
        "mamba_padding_percent_printed": start.mamba_padding_text,
        "mamba_cache_mode": start.mamba_cache_mode,
        "mamba_ssm_cache_dtype": start.mamba_ssm_cache_dtype,
    }
    if prediction is None:
        return out
    p = prediction
    out.update({
        "model": p.model,
        "kv_cache_dtype_used": p.kv_cache_dtype,
        "kv_element_bytes": p.kv_element_bytes,
        "tensor_parallel_size_used": p.tensor_parallel_size,
        "pipeline_parallel_size_used": p.pipeline_parallel_size,
        "block_size": p.block_size,
        "block_size_source": p.block_size_source,
        "page_bytes": p.page_bytes,
        "bytes_per_block": p.bytes_per_block,
        "kv_cache_groups": p.kv_cache_groups,
        "available_kv_cache_bytes_min": p.available_bytes_min,
        "available_kv_cache_bytes_max": p.available_bytes_max,
        "predicted_blocks_min": p.blocks_min,
        "predicted_blocks_max": p.blocks_max,
        "predicted_tokens_min": p.tokens_min,
        "predicted_tokens_max": p.tokens_max,
        "predicted_concurrency_min": p.concurrency_min,
        "predicted_concurrency_max": p.concurrency_max,
        "predicted_num_cpu_blocks": p.num_cpu_blocks_default_swap,
        "derived_available_kv_cache_bytes_min": p.implied_available_bytes_min,
        "derived_available_kv_cache_bytes_max": p.implied_available_bytes_max,
        "compared": p.compared,
        "agrees": p.agrees,
        "error_blocks": p.error_blocks,
        "error_tokens": p.error_tokens,
        "reason": p.reason,
        "cause": p.cause,
        "alternatives": list(p.alternatives),
        "scenarios": list(p.scenarios),
        "stages": [dict(stage) for stage in p.stages],
        "notes": list(p.notes),
        "predicted_path": p.path,
        "predicted_kv_cache_group_block_sizes": (list(p.kv_cache_group_block_sizes)
                                                 if p.kv_cache_group_block_sizes else None),
        "predicted_hybrid": p.hybrid,
    })
    return out
