"""``kvlib vllm-log LOGFILE [--model M] [--json] ...``: read a vLLM startup log and check its KV figures.

``kvlib.vllm`` returns plain data (``report``); the table for people is made here.
"""

from __future__ import annotations

import argparse
import json

from ..argtypes import positive_int
from ..config import load_model
from ..units import format_bytes, format_gb_gib
from .common import print_table
from ..vllm import KV_CACHE_DTYPES, VllmLogError, kv_element_bytes, parse_log, parse_version, predict_from_log, \
    read_log_file, report
from ..vllm.cpu import predict_cpu_from_log


def _n(value, unit=""):
    return "not printed" if value is None else f"{value:,}{unit}"


def _rows(r: dict) -> list:
    cpu = r["device"] == "cpu"
    dev = "CPU" if cpu else "GPU"
    rows = [("engine", f"{(r['engine'] or 'unknown').upper()} ({r['engine_evidence']})"
                       + (", CPU backend" if cpu else "")),
            ("vLLM version", r["vllm_version"] or "not printed")]
    if r["model_in_log"]:
        rows.append(("model (engine config)", r["model_in_log"]))
    if r["tensor_parallel_size"] or r["pipeline_parallel_size"]:
        rows.append(("TP x PP (engine config)",
                     f"{r['tensor_parallel_size'] or 1} x {r['pipeline_parallel_size'] or 1}"))
    if r["available_kv_cache_bytes"] is not None:
        ranks = len(r["available_kv_cache_by_rank"])
        rows.append(("KV space (VLLM_CPU_KVCACHE_SPACE)" if cpu else "available KV cache",
                     f"{r['available_kv_cache_gib']} GiB as printed = "
                                           f"{r['available_kv_cache_bytes']:,} B "
                                           f"({r['available_kv_cache_bytes'] / 1e9:,.2f} GB)"
                                           + (f", smallest of {ranks} ranks" if ranks > 1 else "")))
    else:
        rows.append(("available KV cache", "not printed"))
    if r["pool_sizing"] is not None:
        rows.append(("pool sized by", f"{r['pool_sizing']} ({r['pool_sizing_evidence']})"
                     + (f"; the estimate printed beside it: {r['estimated_kv_cache_gib']} GiB"
                        if r["estimated_kv_cache_gib"] is not None else "")))
    rows.append(("KV-cache blocks (CPU backend)" if cpu else "GPU blocks", _n(r["num_gpu_blocks"])
                 + (f" (derived {r['derived_num_gpu_blocks']:,})" if r["derived_num_gpu_blocks"] is not None else "")))
    if r["num_cpu_blocks"] is not None:
        rows.append(("CPU blocks", f"{r['num_cpu_blocks']:,}"))
    rows.append((f"{dev} KV cache tokens", _n(r["gpu_kv_cache_tokens"])
                 + (f" (derived {r['derived_gpu_kv_cache_tokens']:,})"
                    if r["derived_gpu_kv_cache_tokens"] is not None else "")))
    rows.append(("max_model_len", _n(r["max_model_len"])))
    rows.append(("max concurrency", "not printed" if r["max_concurrency"] is None else f"{r['max_concurrency']:.2f}x"))
    rows.append(("block size", f"{r['block_size']} ({r['block_size_source']})"))
    if r["kv_cache_group_block_sizes"]:
        rows.append(("KV-cache group block sizes", ", ".join(map(str, r["kv_cache_group_block_sizes"]))))
    if r["model_weights_printed"]:
        rows.append(("model weights", r["model_weights_printed"]
                     + (" (vLLM's 'GB' here is GiB)" if r["model_weights_printed"].endswith(" GB") else "")))
    if "model" not in r:
        return rows
    rows.append(("-- predicted by", "vLLM's CPU-backend rules (kvlib.vllm.cpu)" if r["predicted_path"] == "cpu"
                  else "vLLM's GPU-worker rules"))
    rows += [("-- checked against", f"{r['model']} (kv {r['kv_cache_dtype_used']} = {r['kv_element_bytes']} B/element, "
                                    f"TP {r['tensor_parallel_size_used']}, PP {r['pipeline_parallel_size_used']})"),
             ("bytes per block", format_bytes(r["bytes_per_block"])
              + (f", {r['kv_cache_groups']} KV-cache groups" if r["kv_cache_groups"] > 1 else ""))]
    if r["predicted_blocks_min"] is not None:
        rows.append(("available window", f"{format_gb_gib(r['available_kv_cache_bytes_min'])} to "
                                         f"{format_gb_gib(r['available_kv_cache_bytes_max'])}"))
        for st in r["stages"]:
            rows.append((f"PP stage {st['stage']}", f"{st['num_layers']} layers, {format_bytes(st['bytes_per_block'])} "
                                                    f"per block: {st['blocks_min']:,} to {st['blocks_max']:,} blocks"))
        rows.append(("predicted blocks", f"{r['predicted_blocks_min']:,} to {r['predicted_blocks_max']:,}"
                     + (" (the smallest stage's)" if r["stages"] else "")))
        if r["predicted_tokens_min"] is not None:
            rows.append(("predicted tokens", f"{r['predicted_tokens_min']:,} to {r['predicted_tokens_max']:,}"))
        if r["predicted_concurrency_min"] is not None:
            rows.append(("predicted concurrency", f"{r['predicted_concurrency_min']:.2f}x to "
                                                  f"{r['predicted_concurrency_max']:.2f}x"))
        if r["predicted_kv_cache_group_block_sizes"]:
            rows.append(("predicted group block sizes", ", ".join(map(str, r["predicted_kv_cache_group_block_sizes"]))))
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
        print_table(_rows(r), indent="  ")


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
        spec = load_model(args.model, hub=args.hub)
    reports = []
    for start in starts:
        prediction = None
        if spec is not None and start.device == "cpu":
            prediction = predict_cpu_from_log(start, spec, block_size=args.block_size, kv_cache_dtype=args.kv_dtype,
                                              tp=args.tp, pp=args.pp, version=args.vllm_version,
                                              max_num_batched_tokens=args.max_num_batched_tokens)
        elif spec is not None:
            prediction = predict_from_log(start, spec, block_size=args.block_size, kv_cache_dtype=args.kv_dtype,
                                          tp=args.tp, pp=args.pp, version=args.vllm_version,
                                          max_num_batched_tokens=args.max_num_batched_tokens)
        reports.append(report(start, prediction, block_size=args.block_size))
    if args.json:
        print(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2, allow_nan=False))
    else:
        _print_report(reports, args.logfile)


def add_parser(subparsers):
    """Register ``kvlib vllm-log LOGFILE [--model M] [--json] ...`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "vllm-log", help="read a vLLM startup log; with --model, check its KV-cache figures",
        description="Read a vLLM startup log (any version 0.2-0.33, V0 or V1). With --model, predict the "
                    "block and token range from the available-memory figure it prints and say whether the "
                    "log agrees. A log of vLLM's CPU backend (it prints 'CPU KV cache size') is predicted "
                    "to the token by the CPU rules of vLLM 0.32.0: the space set by VLLM_CPU_KVCACHE_SPACE, "
                    "block size 128 (16 for MLA on the reference CPU_MLA kernel). "
                    "Sizes: GB = 10^9 B, GiB = 2^30 B.")
    p.add_argument("logfile", help="the log (prefixes, ANSI colours and several engine starts are fine)")
    p.add_argument("--model", help="bundled id or alias (see 'kvlib models'), config.json, or folder")
    p.add_argument("--hub", action="store_true", help="fetch the model's config from the Hugging Face Hub")
    p.add_argument("--block-size", type=positive_int, help="override the block size (default: printed, else 16; CPU backend 128)")
    p.add_argument("--kv-dtype", type=_kv_dtype, help=f"override kv_cache_dtype ({', '.join(KV_CACHE_DTYPES)})")
    p.add_argument("--tp", type=positive_int, help="override tensor_parallel_size")
    p.add_argument("--pp", type=positive_int, help="override pipeline_parallel_size")
    p.add_argument("--vllm-version", type=_version_arg, help="the vLLM version, when the log does not print it")
    p.add_argument("--max-num-batched-tokens", type=positive_int,
                   help="needed for the concurrency of sliding-window models")
    p.add_argument("--json", action="store_true", help="one object per engine start (a list if several)")
    p.set_defaults(func=_cmd_vllm_log)
    return p
