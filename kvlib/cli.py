"""The kvlib command line: ``kvlib info|models|gpus|vllm-log|plan|drill``.

Tables for people (units named: GB = 10^9, GiB = 2^30), ``--json`` for
machines. A user error exits 2 with one line on stderr; never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys

from . import formulas
from .config import bundled_models, load_model
from .dtypes import dtype_bytes
from .gpus import GPUS, get_gpu
from .argtypes import byte_size, fraction, positive_int
from .units import GB, format_bytes, format_gb_gib, parse_bytes

DEFAULT_UTILIZATION = 0.92  # vLLM >= 0.20 (0.90 before)
DEFAULT_OVERHEAD = "3GB"    # activations and other allocations, seed 000's assumption


class UsageError(ValueError):
    """Bad command-line input; printed as one line, exit 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not argparse's usage block
        raise UsageError(f"{self.prog}: {message}")




def _print_table(rows):
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        print(f"{key:<{width}}  {value}")


# --- kvlib info ----------------------------------------------------------------
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
        "num_params": spec.num_params(),
        "num_params_active": spec.num_params_active(),
        "num_params_mtp": spec.num_params_mtp(),
        "weight_bytes": {"bf16": spec.weight_bytes(2), "fp8": spec.weight_bytes(1), "int4": spec.weight_bytes(0.5)},
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
            raise UsageError("kvlib info: --gpu needs --context (concurrency is per context length)")
        card = get_gpu(gpu)
        overhead = parse_bytes(DEFAULT_OVERHEAD) if overhead_bytes is None else overhead_bytes
        weights_per_gpu = math.ceil(spec.weight_bytes(2) / tp)
        budget = math.ceil(card.cuda_memory_bytes * utilization)  # vLLM rounds the request up
        pool = budget - weights_per_gpu - overhead
        per_seq = spec.kv_bytes_per_sequence(context, b, tp=tp)
        report.update({
            "gpu": card.name,
            "gpu_cuda_memory_bytes": card.cuda_memory_bytes,
            "utilization": utilization,
            "weight_bytes_per_gpu": weights_per_gpu,
            "overhead_bytes": overhead,
            "kv_pool_bytes": pool,
            "kv_pool_tokens": formulas.kv_pool_tokens(card.cuda_memory_bytes, utilization, weights_per_gpu,
                                                      overhead, spec.kv_bytes_per_token(b, tp=tp)) if pool > 0 else 0,
            "max_concurrency": formulas.max_concurrency(pool, per_seq) if pool > 0 else 0,
            "assumptions": (f"pool = CUDA-reported memory x utilization - bf16 weights / tp - "
                            f"{format_gb_gib(overhead)} for activations and other allocations"),
        })
    return report


def _print_info(r):
    rows = [
        ("model", r["model"]),
        ("attention", f"{r['attention']} ({r['num_attention_heads']} query heads, "
                      f"{r['num_kv_heads']} KV head(s) x {r['head_dim']})"),
        ("layers holding KV", f"{r['num_layers']}  {r['layer_kinds']}"
                              + (f", window {r['sliding_window']}" if r["sliding_window"] else "")),
        ("parameters", f"{r['num_params'] / 1e9:.2f} B total, {r['num_params_active'] / 1e9:.2f} B active"
                       + (f", MTP {r['num_params_mtp'] / 1e9:.2f} B apart" if r["num_params_mtp"] else "")),
        ("weights bf16/fp8/int4", " / ".join(format_gb_gib(v) for v in r["weight_bytes"].values())),
        (f"KV per token ({r['kv_dtype']})", format_bytes(r["kv_bytes_per_token"])),
    ]
    if "kv_bytes_per_token_per_gpu" in r:
        rows.append((f"KV per token per GPU (tp={r['tp']})", format_bytes(r["kv_bytes_per_token_per_gpu"])))
    if "kv_bytes_per_sequence" in r:
        rows.append((f"KV per sequence at {r['context']:,}", format_gb_gib(r["kv_bytes_per_sequence"])))
    if "kv_pool_bytes" in r:
        rows += [("GPU", f"{r['gpu']}: CUDA reports {format_gb_gib(r['gpu_cuda_memory_bytes'])}, "
                         f"utilization {r['utilization']}"),
                 ("KV pool per GPU", f"{format_gb_gib(r['kv_pool_bytes'])} = {r['kv_pool_tokens']:,} tokens"),
                 (f"sequences of {r['context']:,} that fit", f"{r['max_concurrency']:,}"),
                 ("assumptions", r["assumptions"])]
    _print_table(rows)


def _cmd_info(args):
    report = info_report(args.model, kv_dtype=args.kv_dtype, context=args.context, gpu=args.gpu,
                         utilization=args.utilization, tp=args.tp, overhead_bytes=args.overhead, hub=args.hub)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_info(report)


def _cmd_models(args):
    rows = []
    for model_id in bundled_models():
        spec = load_model(model_id)
        rows.append({"model": model_id, "attention": spec.attention, "num_layers": spec.num_kv_layers,
                     "num_kv_heads": spec.cache_heads, "head_dim": spec.cache_head_dim,
                     "num_params": spec.num_params(), "kv_bytes_per_token": spec.kv_bytes_per_token()})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'model':<36} {'attn':<4} {'L':>3} {'K':>3} {'D':>4} {'params':>9}  KV/token (bf16)")
    for r in rows:
        print(f"{r['model']:<36} {r['attention']:<4} {r['num_layers']:>3} {r['num_kv_heads']:>3} "
              f"{r['head_dim']:>4} {r['num_params'] / 1e9:>8.2f}B  {format_bytes(r['kv_bytes_per_token'])}")


def _cmd_gpus(args):
    rows = [dict(vars(g), ridge_flop_per_byte=round(g.ridge_flop_per_byte, 1)) for g in GPUS.values()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'gpu':<10} {'label':>8} {'CUDA reports':>24} {'HBM':>10} {'bf16 dense':>12}")
    for g in GPUS.values():
        print(f"{g.name:<10} {g.memory_bytes / GB:>5.0f} GB {format_gb_gib(g.cuda_memory_bytes):>24} "
              f"{g.bandwidth_bytes_per_s / 1e12:>6.2f}TB/s {g.bf16_flop_per_s / 1e12:>8.0f}TF/s")


# Optional subcommands that live with their own modules: name -> module.
_PLUGINS = {"vllm-log": "kvlib.vllm", "plan": "kvlib.planner", "drill": "kvlib.drills"}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kvlib", description="The arithmetic of the LLM KV cache, to the byte.")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("info", help="KV geometry, parameters and capacity of a model")
    p.add_argument("model", help="bundled id or alias (see 'kvlib models'), config.json, or folder")
    p.add_argument("--kv-dtype", choices=["bf16", "fp16", "fp8"], default=None)
    p.add_argument("--context", type=positive_int)
    p.add_argument("--gpu", help="GPU name (see 'kvlib gpus'); needs --context")
    p.add_argument("--utilization", type=fraction, default=DEFAULT_UTILIZATION)
    p.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel GPUs")
    p.add_argument("--overhead", type=byte_size, default=None,
                   help=f"activations and other allocations per GPU (default {DEFAULT_OVERHEAD})")
    p.add_argument("--hub", action="store_true", help="fetch the config from the Hugging Face Hub")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_info)

    p = sub.add_parser("models", help="bundled model configs")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_models)

    p = sub.add_parser("gpus", help="the GPU table")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_gpus)

    for name, module_name in _PLUGINS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        module.add_cli_parser(sub)
    return parser


def main(argv=None) -> int:
    try:
        args = build_parser().parse_args(argv)
        args.func(args)
        return 0
    except (ValueError, OSError) as exc:  # ConfigError, GPUError, UsageError, unreadable files
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        # UsageError messages already start with the command ("kvlib info: ...")
        print(message if isinstance(exc, UsageError) else f"kvlib: error: {message}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
