"""The kvlib command line: ``kvlib info|models|gpus|vllm-log|plan|drill``.

The CLI owns its subcommands: ``info``, ``models`` and ``gpus`` here, ``plan``
and ``vllm-log`` in ``kvlib.cli.plan`` and ``kvlib.cli.vllm_log``. Domain
modules (``kvlib.info``, ``kvlib.planner``, ``kvlib.vllm``) return plain data;
the CLI formats it. Other installed packages add commands through the
``kvlib.commands`` entry-point group: each entry is a function that registers
its subparser (``kvlib drill`` is the course coach's, ``kvcoach.cli:add_parser``),
so kvlib imports none of them by name.

Tables for people (units named: GB = 10^9, GiB = 2^30), ``--json`` for
machines. A user error exits 2 with one line on stderr; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings

from ..argtypes import byte_size, fraction, positive_int, vllm_version
from ..vllm.engine import NEWEST_CHECKED_RELEASE, UncheckedReleaseWarning
from ..config import bundled_models, load_model
from ..dtypes import KV_DTYPES
from ..gpus import GPUS
from ..info import InfoError, info_report
from ..spec import ParamsError
from ..units import format_bytes, format_gb_gib
from . import plan, vllm_log
from .common import Parser as _Parser, UsageError, print_table as _print_table

__all__ = ["main", "build_parser", "UsageError", "info_report"]


# --- kvlib info ----------------------------------------------------------------
def _params_row(r):
    if r["num_params"] is None:
        return "parameters", f"unknown ({r['num_params_error']})"
    return ("parameters", f"{r['num_params'] / 1e9:.2f} B total, {r['num_params_active'] / 1e9:.2f} B active"
            + (f", MTP {r['num_params_mtp'] / 1e9:.2f} B apart" if r["num_params_mtp"] else ""))


def _capacity_rows(r):
    """The sequences that fit, or one 'does not fit: ...' row for what the pool rows above do not already say."""
    if not r["fits"]:
        # the pool row above already says the weights leave no pool: only the other reasons, if any
        pool = r.get("vllm_pool") or {}
        others = [why for why in r["reasons"] if not (pool.get("does_not_fit") and why.startswith("weights are"))]
        return [(f"one sequence of {r['context']:,}", "does not fit: " + "; ".join(others))] if others else []
    return [(f"sequences of {r['context']:,} that fit", f"{r['max_concurrency']:,}")]


_STATE_NAMES = {"mamba2": "Mamba2", "gated_deltanet": "Gated DeltaNet"}


def _attention_row(r):
    heads = f"{r['num_kv_heads']} KV head(s) x {r['head_dim']}"
    if "kv_geometry" in r:      # per-layer geometry (Gemma 4): each kind its own heads and head size
        heads = ", ".join(f"{kind} {k} KV head(s) x {d}" for kind, (k, d) in r["kv_geometry"].items())
    return "attention", f"{r['attention']} ({r['num_attention_heads']} query heads, {heads})"


def _layer_rows(r):
    """Which layers hold what: KV, a constant state, or nothing."""
    kinds = r["layer_kinds"]
    kv = {k: n for k, n in kinds.items() if k in ("full", "sliding", "chunked")}
    rows = [("layers holding KV", f"{r['num_layers']}  {kv if len(kv) < len(kinds) else kinds}"
                                  + (f", window {r['sliding_window']}" if r["sliding_window"] else "")
                                  + (f", chunk {r['attention_chunk_size']}" if r["attention_chunk_size"] else ""))]
    for kind, s in r["state_layers"].items():
        tensors = " + ".join(f"{name} {' x '.join(map(str, shape))} x {s['dtype_bytes'][name]} B"
                             for name, shape in s["shapes_per_gpu"].items())
        rows.append((f"layers holding state ({_STATE_NAMES[kind]})",
                     f"{s['layers']}, each {format_bytes(s['bytes_per_layer_per_gpu'])} a sequence per GPU "
                     f"(tp={r['tp']}: {tensors})"))
    if r.get("state_error"):
        rows.append(("layers holding state", f"unknown ({r['state_error']})"))
    if kinds.get("none"):
        rows.append(("layers holding nothing", f"{kinds['none']} (no KV, no state)"))
    return rows


def _print_info(r):
    rows = [
        ("model", r["model"]),
        _attention_row(r),
        *_layer_rows(r),
        _params_row(r),
        ("weights bf16/fp8/int4", "unknown (the parameter count is)" if r["num_params"] is None
         else " / ".join(format_gb_gib(v) for v in r["weight_bytes"].values())),
        (f"KV per token ({r['kv_dtype']})", format_bytes(r["kv_bytes_per_token"])
         + (f", the indexer's {format_bytes(r['indexer_bytes_per_token'])} included (fp8 keys + fp32 scales, "
            f"whole on every GPU)" if r["indexer_bytes_per_token"] else "")),
    ]
    if r["tp"] > 1:
        rows.append((f"KV per token per GPU (tp={r['tp']})", format_bytes(r["kv_bytes_per_token_per_gpu"])))
    if "kv_bytes_per_sequence" in r:
        rows.append((f"KV per sequence at {r['context']:,}", format_gb_gib(r["kv_bytes_per_sequence"])))
        if r["tp"] > 1:
            rows.append((f"KV per sequence per GPU (tp={r['tp']})", format_gb_gib(r["kv_bytes_per_sequence_per_gpu"])))
    if r["state_bytes_per_sequence"]:
        rows.append(("state per sequence (any context)", format_gb_gib(r["state_bytes_per_sequence"])
                     + (f"; per GPU (tp={r['tp']}) {format_gb_gib(r['state_bytes_per_sequence_per_gpu'])}"
                        if r["tp"] > 1 else "")))
    if "planned_sequence" in r:
        rows.append(_planned_row(r))
    if "kv_pool_bytes" in r and r["kv_pool_bytes"] is None:
        rows += [("GPU", f"{r['gpu']}: CUDA reports {format_gb_gib(r['gpu_cuda_memory_bytes'])}"),
                 ("KV pool per GPU", r["assumptions"])]
    elif "kv_pool_bytes" in r:
        rows += [("GPU", f"{r['gpu']}: CUDA reports {format_gb_gib(r['gpu_cuda_memory_bytes'])}, "
                         f"utilization {r['utilization']}"),
                 *_vllm_pool_rows(r["vllm_pool"]),
                 *_capacity_rows(r),
                 ("assumptions", r["assumptions"])]
    _print_table(rows)


def _planned_row(r):
    """What vLLM reserves for one request on one GPU (kvlib.info.planned_report), or why kvlib cannot say."""
    plan = r["planned_sequence"]
    label = f"vLLM plans per sequence per GPU (tp={r.get('tp', 1)})"
    if plan["error"]:
        return label, f"not computed: {plan['error']}"
    text = (f"{format_gb_gib(r['planned_bytes_per_sequence_per_gpu'])}: {plan['blocks_per_request']:,} blocks of "
            f"{format_bytes(plan['bytes_per_block'])} ({plan['block_size']}-token blocks, "
            f"{plan['kv_cache_groups']} KV-cache group(s))")
    if plan["notes"]:
        text += "; " + "; ".join(plan["notes"])
    return label, text


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def _vllm_pool_rows(pool) -> list:
    """The forward pool's parts, one row each, then the pool and tokens (or the one-line 'does not fit')."""
    rows = [("vLLM release rules", f"{pool['vllm_release']}: utilization {pool['utilization']}, max_num_seqs "
                                   f"{pool['max_num_seqs']:,}, max_num_batched_tokens {pool['max_num_batched_tokens']:,}"),
            ("requested", f"ceil(CUDA total x utilization) = {_gib(pool['requested_bytes'])}")]
    for name, part in pool["parts"].items():
        low, high = part["range"]
        spread = f" ({_gib(low)}-{_gib(high)})" if low != high else ""
        rows.append((f"- {name}", f"{_gib(part['bytes'])}{spread}: {part['rule']} [{part['source']}]"))
    if pool["does_not_fit"]:
        rows.append(("KV pool per GPU", pool["does_not_fit"]))
    else:
        low, high = pool["available_range"]
        rows.append(("KV pool per GPU", f"{_gib(pool['available_bytes'])} ({_gib(max(0, low))}-{_gib(high)}) = "
                                        f"{pool['num_gpu_blocks']:,} blocks x {pool['block_size']} = "
                                        f"{pool['gpu_kv_cache_tokens']:,} tokens"))
    old = pool.get("compared_with")
    if old and not pool["does_not_fit"]:
        rows.append((f"vs vLLM {old['vllm_version']}", (
            f"{_gib(old['available_bytes'])} = {old['gpu_kv_cache_tokens']:,} tokens in {old['block_size']}-token "
            f"blocks: {old['rule']}; this release measures the pool after warmup and CUDA-graph capture "
            f"(utilization {pool['utilization']}, {pool['block_size']}-token blocks), keeping a margin instead")))
    if pool.get("checked_against"):
        rows.append(("rules checked against", pool["checked_against"]))
    return rows


def _cmd_info(args):
    try:
        report = info_report(args.model, kv_dtype=args.kv_dtype, context=args.context, gpu=args.gpu,
                             utilization=args.utilization, tp=args.tp, overhead_bytes=args.overhead, hub=args.hub,
                             vllm_version=args.vllm_version, max_num_seqs=args.max_num_seqs,
                             max_num_batched_tokens=args.max_num_batched_tokens, weights_bytes=args.weights)
    except InfoError as exc:
        raise UsageError(f"kvlib info: {exc}") from None
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print_info(report)


def _cmd_models(args):
    rows = []
    for model_id in bundled_models():
        spec = load_model(model_id)
        try:
            num_params = spec.num_params()
        except ParamsError:
            num_params = None
        rows.append({"model": model_id, "attention": spec.attention, "num_layers": spec.num_kv_layers,
                     "num_kv_heads": spec.cache_heads, "head_dim": spec.cache_head_dim,
                     "num_params": num_params, "kv_bytes_per_token": spec.kv_bytes_per_token()})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'model':<36} {'attn':<4} {'L':>3} {'K':>3} {'D':>4} {'params':>9}  KV/token (bf16)")
    for r in rows:
        print(f"{r['model']:<36} {r['attention']:<4} {r['num_layers']:>3} {r['num_kv_heads']:>3} "
              f"{r['head_dim']:>4} {_billions(r['num_params']):>9}  {format_bytes(r['kv_bytes_per_token'])}")


def _billions(n) -> str:
    return "unknown" if n is None else f"{n / 1e9:.2f}B"


def _cmd_gpus(args):
    rows = [dict(vars(g), label=g.label, ridge_flop_per_byte=round(g.ridge_flop_per_byte, 1)) for g in GPUS.values()]
    if args.json:
        print(json.dumps(rows, indent=2))
        return

    def peak(x):
        return "-" if x is None else f"{x / 1e12:,.0f}TF/s"

    print(f"{'gpu':<12} {'label':>8} {'CUDA reports':>30} {'HBM':>10} {'bf16 dense':>12} {'fp8 dense':>12} "
          f"{'fp4 dense':>12} {'GPU link':>10}")
    for g in GPUS.values():
        link = "-" if g.interconnect_bytes_per_s is None else f"{g.interconnect_bytes_per_s / 1e12:g}TB/s"
        print(f"{g.name:<12} {g.label:>8} {format_gb_gib(g.cuda_memory_bytes):>30} "
              f"{g.bandwidth_bytes_per_s / 1e12:>6.2f}TB/s {peak(g.bf16_flop_per_s):>12} {peak(g.fp8_flop_per_s):>12} "
              f"{peak(g.fp4_flop_per_s):>12} {link:>10}")
    print("dense FLOP/s (no 2:4 sparsity); GPU link: NVLink / Infinity Fabric per GPU, both directions; "
          "GB200-NVL72 is the whole 72-GPU domain")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kvlib", description="The arithmetic of the LLM KV cache, to the byte.")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    sub.required = True

    p = sub.add_parser("info", help="KV geometry, parameters and capacity of a model")
    p.add_argument("model", help="bundled id or alias (see 'kvlib models'), config.json, or folder")
    p.add_argument("--kv-dtype", choices=KV_DTYPES, default=None)
    p.add_argument("--context", type=positive_int)
    p.add_argument("--gpu", help="GPU name (see 'kvlib gpus'); needs --context")
    p.add_argument("--utilization", type=fraction, default=None,
                   help="gpu_memory_utilization (default: the release's; 1.0 for the newest, 0.34, which measures "
                        "its pool)")
    p.add_argument("--tp", type=positive_int, default=1, help="tensor-parallel GPUs")
    p.add_argument("--vllm-version", type=vllm_version, default=None,
                   help=f"vLLM release whose rules size the pool (default: the newest read, {NEWEST_CHECKED_RELEASE})")
    p.add_argument("--max-num-seqs", type=positive_int, default=None, help="default: the release's for the GPU")
    p.add_argument("--max-num-batched-tokens", type=positive_int, default=None,
                   help="default: the release's for the GPU")
    p.add_argument("--weights", type=byte_size, default=None,
                   help="measured weights per GPU (bytes, or e.g. 13.5GiB): overrides the weights as stored")
    p.add_argument("--overhead", type=byte_size, default=None,
                   help="replace the modelled torch peak and non-torch memory per GPU with this figure")
    p.add_argument("--hub", action="store_true", help="fetch the config from the Hugging Face Hub")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_info)

    p = sub.add_parser("models", help="bundled model configs")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_models)

    p = sub.add_parser("gpus", help="the GPU table")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_gpus)

    for module in (vllm_log, plan):
        module.add_parser(sub)
    from importlib.metadata import entry_points     # here: it imports email and socket, which kvlib.cli must not
    for entry in sorted(entry_points(group=COMMANDS), key=lambda e: e.name):
        _add_command(sub, entry)
    return parser


#: The entry-point group through which installed packages add ``kvlib`` subcommands (pyproject.toml's
#: ``[project.entry-points."kvlib.commands"]``): ``name = "module:function"``, the function taking argparse's
#: subparsers and registering the command called ``name``.
COMMANDS = "kvlib.commands"


def _add_command(subparsers, entry) -> None:
    """Register one ``kvlib.commands`` entry; one that does not load is left out with one line on stderr."""
    try:
        add_parser = entry.load()
    except Exception as exc:  # noqa: BLE001 -- a broken plugin must not take kvlib info down with it
        print(f"kvlib: warning: command {entry.name!r} ({entry.value}) did not load: {exc}", file=sys.stderr)
        return
    add_parser(subparsers)


def _report_warnings(caught) -> None:
    """An unchecked vLLM release: its one line on stderr, once; any other warning as Python shows it."""
    for message in dict.fromkeys(str(w.message) for w in caught if issubclass(w.category, UncheckedReleaseWarning)):
        print(f"kvlib: warning: {message}", file=sys.stderr)
    for w in caught:
        if not issubclass(w.category, UncheckedReleaseWarning):
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)


def main(argv=None) -> int:
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", UncheckedReleaseWarning)
            args = build_parser().parse_args(argv)
            args.func(args)
        _report_warnings(caught)
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
