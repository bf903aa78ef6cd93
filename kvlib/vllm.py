"""vLLM's KV-cache accounting: read its startup log, predict its figures, check one against the other.

- ``parse_log(text)`` -> one ``EngineStart`` per engine start (``kvlib.vllm_log``);
- ``predict_from_log(start, spec)`` -> the block/token range vLLM should
  print from the available GiB it printed, and whether it did
  (``kvlib.vllm_predict``);
- ``predict_pool(spec, total_gpu_memory_bytes, ...)`` -> the pool and block
  count to expect before starting vLLM;
- ``report(start, prediction)`` -> the dict ``kvlib vllm-log --json`` prints;
- ``add_cli_parser(subparsers)`` registers ``kvlib vllm-log LOGFILE [--model M] [--json]``.

Taught in chapter 04 (the pool). The course's logs ship in ``kvlib/data/vllm_logs``
(``bundled_logs()``, ``read_bundled_log(name)``).

>>> from kvlib import load_model
>>> [start] = parse_log(read_bundled_log("12"))
>>> p = predict_from_log(start, load_model("llama-2-7b"))
>>> start.num_gpu_blocks, (p.blocks_min, p.blocks_max), p.agrees
(7191, (7190, 7191), True)
"""

from __future__ import annotations

import argparse
import json
from importlib import resources
from pathlib import Path

from .argtypes import positive_int
from .units import format_bytes, format_gb_gib
from .vllm_log import EngineStart, VllmLogError, gib_window, parse_log, parse_version
from .vllm_predict import (
    DEFAULT_BLOCK_SIZE,
    KV_CACHE_DTYPES,
    LogPrediction,
    PoolForecast,
    bytes_per_block,
    default_utilization,
    kv_cache_groups,
    kv_element_bytes,
    layer_page_bytes,
    pp_layer_split,
    predict_from_log,
    predict_pool,
)

__all__ = [
    "VllmLogError", "EngineStart", "parse_log", "parse_version", "gib_window",
    "LogPrediction", "predict_from_log", "PoolForecast", "predict_pool",
    "DEFAULT_BLOCK_SIZE", "default_utilization", "kv_element_bytes", "layer_page_bytes", "bytes_per_block",
    "pp_layer_split", "kv_cache_groups", "report", "read_log_file", "bundled_logs", "read_bundled_log",
    "add_cli_parser",
]

# --- bundled logs ----------------------------------------------------------------
def _logs_dir():
    return resources.files("kvlib") / "data" / "vllm_logs"


def bundled_logs() -> list[str]:
    """Names of the real vLLM logs shipped with kvlib ('02', '04', ...)."""
    return sorted(p.name[:-4] for p in _logs_dir().iterdir() if p.name.endswith(".log"))


def read_bundled_log(name: str) -> str:
    """The text of a bundled log ('07' or '07.log')."""
    stem = str(name).removesuffix(".log")
    if stem not in bundled_logs():
        raise VllmLogError(f"no bundled vLLM log {name!r} (have: {', '.join(bundled_logs())})")
    return (_logs_dir() / f"{stem}.log").read_text(encoding="utf-8")


def read_log_file(path) -> str:
    """Read a log file as text (undecodable bytes replaced); one-line VllmLogError if unreadable."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise VllmLogError(f"cannot read {path}: {exc.strerror or type(exc).__name__}") from None
    return raw.decode("utf-8", errors="replace")


# --- report ------------------------------------------------------------------------
def _block_size(start: EngineStart, override: int | None):
    if override is not None:
        return override, "cli"
    if start.block_size is not None:
        return start.block_size, "log"
    return DEFAULT_BLOCK_SIZE, "default"


def report(start: EngineStart, prediction: LogPrediction | None = None, *, block_size: int | None = None) -> dict:
    """The JSON object ``kvlib vllm-log --json`` prints for one engine start.

    Figures under their plain names are exactly as the log prints them (None
    when it prints none); figures computed from others carry a ``derived_``
    prefix. With a prediction, the ``predicted_*`` keys, ``agrees`` and
    ``reason`` / ``cause`` are added.

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
        "notes": list(p.notes),
    })
    return out


# --- human table ------------------------------------------------------------------------
def _n(value, unit=""):
    return "not printed" if value is None else f"{value:,}{unit}"


def _rows(r: dict) -> list:
    rows = [("engine", f"{(r['engine'] or 'unknown').upper()} ({r['engine_evidence']})"),
            ("vLLM version", r["vllm_version"] or "not printed")]
    if r["model_in_log"]:
        rows.append(("model (engine config)", r["model_in_log"]))
    if r["tensor_parallel_size"] or r["pipeline_parallel_size"]:
        rows.append(("TP x PP (engine config)",
                     f"{r['tensor_parallel_size'] or 1} x {r['pipeline_parallel_size'] or 1}"))
    if r["available_kv_cache_bytes"] is not None:
        ranks = len(r["available_kv_cache_by_rank"])
        rows.append(("available KV cache", f"{r['available_kv_cache_gib']} GiB as printed = "
                                           f"{r['available_kv_cache_bytes']:,} B "
                                           f"({r['available_kv_cache_bytes'] / 1e9:,.2f} GB)"
                                           + (f", smallest of {ranks} ranks" if ranks > 1 else "")))
    else:
        rows.append(("available KV cache", "not printed"))
    rows.append(("GPU blocks", _n(r["num_gpu_blocks"])
                 + (f" (derived {r['derived_num_gpu_blocks']:,})" if r["derived_num_gpu_blocks"] is not None else "")))
    if r["num_cpu_blocks"] is not None:
        rows.append(("CPU blocks", f"{r['num_cpu_blocks']:,}"))
    rows.append(("GPU KV cache tokens", _n(r["gpu_kv_cache_tokens"])
                 + (f" (derived {r['derived_gpu_kv_cache_tokens']:,})"
                    if r["derived_gpu_kv_cache_tokens"] is not None else "")))
    rows.append(("max_model_len", _n(r["max_model_len"])))
    rows.append(("max concurrency", "not printed" if r["max_concurrency"] is None else f"{r['max_concurrency']:.2f}x"))
    rows.append(("block size", f"{r['block_size']} ({r['block_size_source']})"))
    if r["model_weights_printed"]:
        rows.append(("model weights", r["model_weights_printed"]
                     + (" (vLLM's 'GB' here is GiB)" if r["model_weights_printed"].endswith(" GB") else "")))
    if "model" not in r:
        return rows
    rows += [("-- checked against", f"{r['model']} (kv {r['kv_cache_dtype_used']} = {r['kv_element_bytes']} B/element, "
                                    f"TP {r['tensor_parallel_size_used']}, PP {r['pipeline_parallel_size_used']})"),
             ("bytes per block", format_bytes(r["bytes_per_block"])
              + (f", {r['kv_cache_groups']} KV-cache groups" if r["kv_cache_groups"] > 1 else ""))]
    if r["predicted_blocks_min"] is not None:
        rows.append(("available window", f"{format_gb_gib(r['available_kv_cache_bytes_min'])} to "
                                         f"{format_gb_gib(r['available_kv_cache_bytes_max'])}"))
        rows.append(("predicted blocks", f"{r['predicted_blocks_min']:,} to {r['predicted_blocks_max']:,}"))
        if r["predicted_tokens_min"] is not None:
            rows.append(("predicted tokens", f"{r['predicted_tokens_min']:,} to {r['predicted_tokens_max']:,}"))
        if r["predicted_concurrency_min"] is not None:
            rows.append(("predicted concurrency", f"{r['predicted_concurrency_min']:.2f}x to "
                                                  f"{r['predicted_concurrency_max']:.2f}x"))
    if r["derived_available_kv_cache_bytes_min"] is not None:
        rows.append(("pool the count implies", f"{format_gb_gib(r['derived_available_kv_cache_bytes_min'])} to "
                                               f"{format_gb_gib(r['derived_available_kv_cache_bytes_max'])}"))
    if r["predicted_num_cpu_blocks"] is not None:
        rows.append(("CPU blocks at 4 GiB swap", f"{r['predicted_num_cpu_blocks']:,}"))
    verdict = {True: "AGREES", False: "DOES NOT AGREE", None: "nothing to compare"}[r["agrees"]]
    rows.append(("verdict", verdict + (f" (error {r['error_blocks']:+,} blocks)" if r["error_blocks"] else "")))
    rows.append(("reason", r["reason"]))
    for alt in r["alternatives"]:
        rows.append(("also possible", alt))
    for note in r["notes"]:
        rows.append(("note", note))
    return rows


def _print_report(reports: list, path: str):
    for i, r in enumerate(reports):
        if i:
            print()
        print(f"engine start {i + 1} of {len(reports)} (lines {r['first_line']}-{r['last_line']} of {path})")
        rows = _rows(r)
        width = max(len(k) for k, _ in rows)
        for key, value in rows:
            print(f"  {key:<{width}}  {value}")


# --- CLI -----------------------------------------------------------------------------
def _kv_dtype(text):
    try:
        kv_element_bytes(text)
    except VllmLogError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text.lower()


def _version_arg(text):
    if parse_version(text) is None:
        raise argparse.ArgumentTypeError(f"not a vLLM version: {text!r} (e.g. 0.8.5)")
    return text


def _cmd_vllm_log(args):
    text = read_log_file(args.logfile)
    starts = parse_log(text)
    if not starts:
        raise VllmLogError(f"no vLLM engine start found in {args.logfile} (no KV-cache, memory-profiling "
                           f"or engine-config line)")
    spec = None
    if args.model is not None:
        from .config import load_model
        spec = load_model(args.model, hub=args.hub)
    reports = []
    for start in starts:
        prediction = None
        if spec is not None:
            prediction = predict_from_log(start, spec, block_size=args.block_size, kv_cache_dtype=args.kv_dtype,
                                          tp=args.tp, pp=args.pp, version=args.vllm_version,
                                          max_num_batched_tokens=args.max_num_batched_tokens)
        reports.append(report(start, prediction, block_size=args.block_size))
    if args.json:
        print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2, allow_nan=False))
    else:
        _print_report(reports, args.logfile)


def add_cli_parser(subparsers):
    """Register ``kvlib vllm-log LOGFILE [--model M] [--json] ...`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "vllm-log", help="read a vLLM startup log; with --model, check its KV-cache figures",
        description="Read a vLLM startup log (any version 0.2-0.33, V0 or V1). With --model, predict the "
                    "block and token range from the available-memory figure it prints and say whether the "
                    "log agrees. Sizes: GB = 10^9 B, GiB = 2^30 B.")
    p.add_argument("logfile", help="the log (prefixes, ANSI colours and several engine starts are fine)")
    p.add_argument("--model", help="bundled id or alias (see 'kvlib models'), config.json, or folder")
    p.add_argument("--hub", action="store_true", help="fetch the model's config from the Hugging Face Hub")
    p.add_argument("--block-size", type=positive_int, help="override the block size (default: printed, else 16)")
    p.add_argument("--kv-dtype", type=_kv_dtype, help=f"override kv_cache_dtype ({', '.join(KV_CACHE_DTYPES)})")
    p.add_argument("--tp", type=positive_int, help="override tensor_parallel_size")
    p.add_argument("--pp", type=positive_int, help="override pipeline_parallel_size")
    p.add_argument("--vllm-version", type=_version_arg, help="the vLLM version, when the log does not print it")
    p.add_argument("--max-num-batched-tokens", type=positive_int,
                   help="needed for the concurrency of sliding-window models")
    p.add_argument("--json", action="store_true", help="one object per engine start (a list if several)")
    p.set_defaults(func=_cmd_vllm_log)
    return p
