"""A vLLM 0.34 start's KV-cache lines *built* from kvlib's forecast, in the 0.34 source's own formats.

No public thread held a vLLM 0.34 startup log when the course was written, and no 0.34 engine runs
here (the CPU build stops at 0.32.0). To teach what a 0.34 start prints, ``built_start_lines`` writes
the lines its source would log, with the figures ``forecast_pool(..., version="0.34.0")`` predicts.
**Built, not run: a built start is never evidence for a prediction** -- kvlib reading back what kvlib
wrote proves only that the reader knows the format. Each line is the format string of one 0.34 logger
call (paths under ``vllm/``), prefixed as an engine-core process prints it:

- ``v1/engine/core.py``: "Initializing a V1 LLM engine (v%s) with config: %s" (``VllmConfig.__str__``,
  the fields a reader needs; the rest elided as "...");
- ``config/scheduler.py``: "Chunked prefill is enabled with max_num_batched_tokens=%d.";
- ``v1/worker/gpu/model_runner.py``: "Model loading took %s GiB memory and %.6f seconds";
- ``v1/worker/gpu_worker.py`` ``determine_available_memory``: "Available KV cache memory: %s GiB" --
  under the extensible cache this is the profiling *estimate* at utilization 1.0 that sizes the
  address range reserved, not the pool;
- ``v1/worker/extensible_kv_cache.py`` ``measure_kv_cache_blocks``: "Memory after warmup: ..." -- the
  measured pool, in blocks and GiB;
- ``v1/core/kv_cache_utils.py`` ``update_kv_cache_capacity`` (called by ``kv_cache_planning.py``
  ``finalize_extensible_kv_cache``): "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per
  request: %.2fx";
- ``extensible_kv_cache.py`` ``extend_kv_cache``: "Extended KV cache to %d blocks (%.2f GiB).".

GiB figures go through 0.34's ``format_gib`` (``str(round(b / 2**30, 2))``: "15.0", not "15.00"), except
the last line's ``%.2f``. Two figures of the warmup line are not forecast by kvlib and are assumptions
of the build, said so in ``BuiltStart.assumptions``: the blocks warmup committed (those one
``max_num_batched_tokens`` batch addresses) and torch's reservation after warmup (the weights, the
sampler state and the captured graphs).

Taught in ch08_vllm_lab (reading a 0.34 start beside the older formats).

>>> built = built_start_lines("llama-3.1-8b", "H100-SXM", max_model_len=8192)
>>> from kvlib.vllm import parse_log
>>> [start] = parse_log("\\n".join(built.lines))
>>> start.pool_sizing, start.measured_kv_cache_blocks == built.forecast.num_gpu_blocks
('measured', True)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..gpus import get_gpu
from ..units import GiB
from .engine import VllmLogError
from .pool import IN_USE_AT_START, Forecast, forecast_pool, predict_pool

__all__ = ["BuiltStart", "built_start_lines", "VERSION", "NON_TORCH_RESERVE_BYTES"]

VERSION = "0.34.0"
NON_TORCH_RESERVE_BYTES = 1 << 29    # extensible_kv_cache.py KV_CACHE_NON_TORCH_RESERVE_BYTES (0.5 GiB)
_PREFIX = "(EngineCore pid=4242) INFO 12-01 09:00:{:02d} [{}] "


@dataclass(frozen=True)
class BuiltStart:
    """The lines a 0.34 start would print per kvlib's forecast, and what they were built from."""

    lines: tuple              # the log lines, in the order a start prints them
    forecast: Forecast        # forecast_pool(..., version="0.34.0"): the measured pool
    estimate: Forecast        # the same at utilization 1.0, estimate-based: the "Available" line's figure
    assumptions: tuple        # figures of the lines kvlib does not forecast, and what the build took


def _gib(b: int) -> str:
    """0.34's ``format_gib``: ``str(round(b / 2**30, 2))``."""
    return str(round(b / GiB, 2))


def built_start_lines(model, gpu, *, max_model_len: int, tp: int = 1, kv_cache_dtype: str = "auto",
                      model_id: str | None = None) -> BuiltStart:
    """The KV-cache lines of a vLLM 0.34 start on ``gpu`` with its defaults (extensible KV cache, u = 1.0).

    ``model`` is a name kvlib knows; ``model_id`` the name printed in the config line (default: the
    config's). TP 1 only: every rank of a TP start prints its own lines, which a built log would invent.
    """
    if tp != 1:
        raise VllmLogError("built_start_lines: TP 1 only (each rank of a TP start prints its own figures)")
    if type(max_model_len) is not int or max_model_len < 1:
        raise VllmLogError(f"max_model_len must be a positive integer, got {max_model_len!r}")
    from ..config import load_model
    spec, device = load_model(model), get_gpu(gpu)
    total = device.cuda_memory_bytes
    kwargs = dict(version=VERSION, gpu_name=device.name, max_model_len=max_model_len, kv_cache_dtype=kv_cache_dtype)
    f = forecast_pool(spec, total, **kwargs)
    est = forecast_pool(spec, total, utilization=1.0, extensible=False, **kwargs)
    if not f.fits or f.num_gpu_blocks == 0:
        raise VllmLogError(f"{spec.name} leaves no KV pool on one {device.name}: nothing to build")
    part = {p.name: p.bytes for p in f.parts}
    transient = part["torch peak"]
    non_kv = sum(b for name, b in part.items() if name not in ("torch peak", "margin"))
    block_bytes = f.bytes_per_block
    committed = -(-f.max_num_batched_tokens // f.block_size) * block_bytes       # an assumption of the build
    free = total - IN_USE_AT_START[1] - non_kv - committed
    pool_bytes = f.num_gpu_blocks * block_bytes
    reserved = part["weights"] + part.get("sampler state", 0) + part["CUDA graphs"]   # an assumption too
    left_free = free - (pool_bytes - committed) - (f.available_bytes - pool_bytes) - NON_TORCH_RESERVE_BYTES
    torch_limit = reserved + max(left_free, 0)
    # the printed tokens and concurrency: vLLM's rule for the release, from the measured blocks' bytes
    shown = predict_pool(spec, total, activation_bytes=max(0, f.requested_bytes - part["weights"] - pool_bytes),
                         weights_bytes=part["weights"], cudagraph_bytes=0, version=VERSION, utilization=1.0,
                         kv_cache_dtype=kv_cache_dtype, max_model_len=max_model_len,
                         max_num_batched_tokens=f.max_num_batched_tokens)
    assert shown.num_gpu_blocks == f.num_gpu_blocks
    name = model_id or spec.name
    dtype = spec.dtype
    lines = [
        _PREFIX.format(1, "core.py:153") + f"Initializing a V1 LLM engine (v{VERSION}) with config: "
        f"model={name!r}, ..., dtype=torch.{dtype}, max_seq_len={max_model_len}, ..., tensor_parallel_size=1, "
        f"pipeline_parallel_size=1, ..., kv_cache_dtype={kv_cache_dtype}, device_config=cuda, ..., "
        "enable_prefix_caching=True, enable_chunked_prefill=True, ...",
        _PREFIX.format(1, "scheduler.py:354")
        + f"Chunked prefill is enabled with max_num_batched_tokens={f.max_num_batched_tokens}.",
        _PREFIX.format(9, "model_runner.py:441") + f"Model loading took {_gib(part['weights'])} GiB memory and "
        "6.104811 seconds",
        _PREFIX.format(21, "gpu_worker.py:795") + f"Available KV cache memory: {_gib(est.available_bytes)} GiB",
        _PREFIX.format(48, "extensible_kv_cache.py:693")
        + f"Memory after warmup: {_gib(free)} GiB free, {_gib(committed)} GiB committed to the KV cache, "
        f"{_gib(transient)} GiB kept for transient activations ({_gib(transient)} GiB allocated at peak, "
        f"0.0 GiB of torch reservation growth); {f.num_gpu_blocks} KV cache blocks ({_gib(pool_bytes)} GiB) fit "
        f"within the requested {_gib(f.requested_bytes)} GiB. Torch may reserve up to {_gib(torch_limit)} GiB.",
        _PREFIX.format(48, "kv_cache_utils.py:1168") + f"GPU KV cache size: {shown.gpu_kv_cache_tokens:,} tokens, "
        f"Maximum concurrency for {max_model_len:,} tokens per request: {shown.max_concurrency:.2f}x",
        _PREFIX.format(49, "extensible_kv_cache.py:536")
        + f"Extended KV cache to {f.num_gpu_blocks} blocks ({pool_bytes / GiB:.2f} GiB).",
    ]
    assumptions = (
        f"committed during warmup: the {committed // block_bytes} blocks one batch of "
        f"{f.max_num_batched_tokens:,} tokens addresses",
        "torch's reservation after warmup: the weights, the sampler state and the captured graphs; no reservation "
        "growth over a sizing step",
        "the load time, process id and clock of the prefixes",
    )
    return BuiltStart(tuple(lines), f, est, assumptions)

