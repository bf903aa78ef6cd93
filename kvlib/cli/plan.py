"""``kvlib plan MODEL --users N --context T --itl-ms X --gpu G``: the capacity plan, one step a line.

``kvlib.planner`` returns a ``Plan`` (plain data); the rows for people are made here.
"""

from __future__ import annotations

import argparse
import json

from ..argtypes import byte_size as _byte_size, fraction as _fraction, positive_int as _positive_int, \
    vllm_version as _vllm_version
from ..dtypes import KV_DTYPES, WEIGHT_DTYPES, dtype_bytes as _dtype_bytes
from ..planner import (
    DEFAULT_ALLREDUCE_LATENCY_S,
    DEFAULT_EFFICIENCY,
    DEFAULT_OVERHEAD_BYTES,
    DEFAULT_REDUNDANCY_NODES,
    DEFAULT_SPIKE_FACTOR,
    DEFAULT_UTILIZATION,
    PESSIMISTIC_TP_OVERHEAD,
    Plan,
    PlanError,
    RequestPlan,
    _number,
    plan_capacity,
    plan_requests,
)
from ..units import GB, GiB, count_text, format_gb_gib
from .common import UsageError, print_table


def _gb(n) -> str:
    """Both readings; three decimals below 10 GB so per-GPU sequences stay readable."""
    if abs(n) < 10 * GB:
        return f"{n / GB:,.3f} GB ({n / GiB:,.3f} GiB)"
    return format_gb_gib(n)


def allreduce_text(p: Plan) -> str:
    """The all-reduce rule a plan used, in words, with its figure.

    >>> allreduce_text(plan_capacity("llama-3-70b", users=10, context=4096, itl_ms=60, gpu="H100"))
    'all-reduce modelled: 2 a layer at 20 us each, 3.20 ms a step'
    >>> allreduce_text(plan_capacity("llama-3-70b", users=10, context=4096, itl_ms=60, gpu="H100", tp_overhead=0.3))
    'all-reduce as 30% of the step (a pessimistic bound)'
    """
    if p.tp == 1:
        return "no all-reduce (tp = 1)"
    if p.allreduce_rule == "modelled":
        return (f"all-reduce modelled: 2 a layer at {p.allreduce_latency_s * 1e6:g} us each, "
                f"{p.allreduce_s_per_step * 1e3:.2f} ms a step")
    return f"all-reduce as {p.tp_overhead:.0%} of the step (a pessimistic bound)"


def plan_rows(p: Plan) -> list[tuple[str, str]]:
    """The report as (label, value) rows, one step at a time (GB = 10^9, GiB = 2^30).

    >>> rows = dict(plan_rows(plan_capacity("llama-3-70b", users=2000, context=6144, itl_ms=60, gpu="H100")))
    >>> rows["6. with headroom"]
    'ceil(9 x 1.3) + 1 = 13 nodes (104 x H100-SXM)'
    """
    tp_note = f" (tp={p.tp})" if p.tp > 1 else ""
    ms = 1e3
    if p.tp > 1 and p.allreduce_rule == "pessimistic_fraction":
        slowdown = f"x (1 + {p.tp_overhead:g}) / {p.efficiency:g}"
    elif p.tp > 1:
        slowdown = f"/ {p.efficiency:g} + {p.allreduce_s_per_step * ms:.2f} ms all-reduce"
    else:
        slowdown = f"/ {p.efficiency:g}"
    # the weights the step reads: all of them, or of a mixture of experts the experts its sequences touch
    read_mem = p.step_bytes_per_gpu_at_memory_limit - p.sequences_per_replica_by_memory * p.kv_bytes_per_sequence_per_gpu
    experts_note = " (the experts its sequences touch)" if read_mem != p.weight_bytes_per_gpu else ""
    rows = [
        ("requirement", f"{p.model}: {p.users:,} users at {p.context:,} tokens, ITL <= {p.itl_target_s * ms:g} ms"),
        ("1. KV per token", f"{p.kv_bytes_per_token:,} B in all, {p.kv_bytes_per_token_per_gpu:,} B per GPU{tp_note}"),
        ("1. KV per sequence", f"{_gb(p.kv_bytes_per_sequence)} in all, "
                               f"{_gb(p.kv_bytes_per_sequence_per_gpu)} per GPU"),
        ("2. total KV", f"{p.users:,} x {_gb(p.kv_bytes_per_sequence)} = {_gb(p.total_kv_bytes)}"),
        ("3. budget per GPU", f"ceil({_gb(p.gpu_memory_bytes)} x {p.utilization:g}) = {_gb(p.budget_bytes_per_gpu)}"),
        ("3. KV pool per GPU", f"{_gb(p.budget_bytes_per_gpu)} - weights {_gb(p.weight_bytes_per_gpu)} - overhead "
                               f"{_gb(p.overhead_bytes_per_gpu)} = {_gb(p.kv_pool_bytes_per_gpu)}"),
        ("3. KV pool per node", f"{p.gpus_per_node} x {_gb(p.kv_pool_bytes_per_gpu)} = "
                                f"{_gb(p.kv_pool_bytes_per_node)}"),
        ("3. sequences by memory", f"{count_text(p.replicas_per_node, 'replica')} x floor({_gb(p.kv_pool_bytes_per_gpu)} / "
                                   f"{_gb(p.kv_bytes_per_sequence_per_gpu)}) = "
                                   f"{p.sequences_per_node_by_memory:,} per node"),
        ("3. nodes for memory", f"ceil({p.users:,} / {p.sequences_per_node_by_memory:,}) = {p.nodes_for_memory}"),
        ("4. bytes per step per GPU", f"{_gb(read_mem)}{experts_note} + {p.sequences_per_replica_by_memory:,} x "
                                      f"{_gb(p.kv_bytes_per_sequence_per_gpu)} = "
                                      f"{_gb(p.step_bytes_per_gpu_at_memory_limit)}"),
        ("4. ITL at memory limit", f"{p.step_bytes_per_gpu_at_memory_limit / p.bandwidth_bytes_per_s * ms:.2f} ms at "
                                   f"{p.bandwidth_bytes_per_s / 1e12:g} TB/s {slowdown} = "
                                   f"{p.itl_s_at_memory_limit * ms:.1f} ms: "
                                   + ("meets" if p.meets_itl_at_memory_limit else "MISSES")
                                   + f" the {p.itl_target_s * ms:g} ms target"),
    ]
    if not p.meets_itl_at_memory_limit:
        rows.append(("4. sequences by latency", f"{p.sequences_per_replica_by_latency:,} per replica: "
                                                f"ITL {p.itl_s * ms:.1f} ms, "
                                                f"{p.sequences_per_node:,} per node"))
    rows += [
        ("5. throughput", f"{p.sequences_per_node:,} / {p.itl_s * ms:.1f} ms = {p.tokens_per_s_per_node:,.0f} tok/s "
                          f"per node; {count_text(p.nodes, 'node')}: {p.tokens_per_s:,.0f} tok/s "
                          f"({p.tokens_per_s_per_user:.1f} tok/s per user)"),
        ("6. nodes", f"ceil({p.users:,} / {p.sequences_per_node:,}) = {p.nodes} ({p.limited_by}-limited)"),
        ("6. with headroom", f"ceil({p.nodes} x {p.spike_factor:g}) + {p.redundancy_nodes} = "
                             f"{count_text(p.nodes_with_headroom, 'node')} ({p.gpus:,} x {p.gpu})"),
        ("assumptions", f"memory per GPU {_gb(p.gpu_memory_bytes)}, utilization {p.utilization:g}, overhead "
                        f"{_gb(p.overhead_bytes_per_gpu)} per GPU, weights {_gb(p.weight_bytes)}, KV "
                        f"{p.kv_dtype_bytes:g} B/element, bandwidth {p.bandwidth_bytes_per_s / 1e12:g} TB/s, "
                        f"efficiency {p.efficiency:g}, {allreduce_text(p)}, spike x{p.spike_factor:g}, "
                        f"+{count_text(p.redundancy_nodes, 'node')}; decode bandwidth-bound"),
    ]
    return rows


def request_rows(r: RequestPlan) -> list[tuple[str, str]]:
    """The request-based plan as (label, value) rows.

    >>> rows = dict(request_rows(plan_requests("llama-3.3-70b", rate_per_s=10, prompt_tokens=2000,
    ...                                        output_tokens=300, itl_ms=50, ttft_ms=1000)))
    >>> rows["1. Little's law"]
    '10 req/s x (1,000 ms + 300 x 50 ms) = 160.0 requests in flight'
    """
    d, ms = r.decode, 1e3
    p95 = (f" (p95 {r.prompt_tokens_p95:,} in, {r.output_tokens_p95:,} out)"
           if (r.prompt_tokens_p95, r.output_tokens_p95) != (r.prompt_tokens, r.output_tokens) else "")
    return [
        ("requirement", f"{r.model}: {r.rate_per_s:g} req/s, {r.prompt_tokens:,} prompt + {r.output_tokens:,} output "
                        f"tokens{p95}, TTFT <= {r.ttft_target_s * ms:g} ms, ITL <= {r.itl_target_s * ms:g} ms, "
                        f"prefix hits {r.prefix_hit_rate:.0%}"),
        ("1. Little's law", f"{r.rate_per_s:g} req/s x ({r.ttft_target_s * ms:,.0f} ms + {r.output_tokens:,} x "
                            f"{r.itl_target_s * ms:g} ms) = {r.concurrency:,.1f} requests in flight"),
        ("1. cache per request", f"{r.mean_context:,} tokens on average (prompt + output / 2): "
                                 f"{_gb(d.kv_bytes_per_sequence)}"),
        ("2. p95 ITL margin", f"one {r.token_budget}-token chunk: {r.itl_margin_s * ms:.1f} ms held back"),
        ("2. per replica", f"memory {d.sequences_per_replica_by_memory:,}, ITL {d.sequences_per_replica_by_latency:,} "
                           f"({allreduce_text(d)}), after the TTFT "
                           f"cut {r.max_sequences_per_replica:,}"),
        ("3. TTFT at p95", f"{count_text(r.prefill_steps_p95, 'step')} for the prompt's uncached tokens: "
                           f"{r.ttft_s_p95 * ms:,.0f} ms"),
        ("4. prefill", f"{r.prefill_tokens_per_s_per_replica:,.0f} prompt tokens/s per replica at "
                       f"{count_text(r.sequences_per_replica, 'sequence')} each"),
        ("5. nodes", f"{r.nodes_for_decode} for the sequences, {r.nodes} with the prompts kept up with "
                     f"({r.binding_constraint} binds)"),
        ("5. with headroom", f"{count_text(r.nodes_with_headroom, 'node')} "
                             f"({r.nodes_with_headroom * d.gpus_per_node:,} x {d.gpu})"),
        ("assumptions", f"MFU {r.mfu:g} for prefill, token budget {r.token_budget} a step, efficiency "
                        f"{d.efficiency:g}, {allreduce_text(d)}; queueing left to the spike headroom"),
    ]


def _forward_defaults(args) -> tuple[int | None, int | None, float]:
    """Weights, overhead per GPU and utilization as vLLM will size them (``kvlib.vllm.forecast_pool``), for
    whichever of --weight-bytes/--num-params/--weight-dtype, --overhead and --utilization were not given: the
    weights as stored, the torch peak + non-torch + CUDA-graph parts at this tp, the release's utilization."""
    from ..gpus import get_gpu
    from ..vllm import forecast_pool
    from ..config import load_model
    weights, overhead, utilization = args.weight_bytes, args.overhead, args.utilization
    counted = args.num_params is not None or args.weight_dtype is not None
    if weights is not None and overhead is not None and utilization is not None or args.hub:
        return weights, overhead, utilization
    try:
        card = get_gpu(args.gpu)
        load_model(args.model)
        tp = args.gpus_per_node if args.tp is None else args.tp
        memory = card.cuda_memory_bytes if args.gpu_memory is None else args.gpu_memory
        f = forecast_pool(args.model, memory, version=args.vllm_version, tp=tp, utilization=utilization,
                          gpu_name=card.name)
    except ValueError:
        return weights, overhead, utilization   # plan_capacity names the bad input in its own words
    if weights is None and not counted:
        weights = f.part("weights").bytes * tp     # each GPU's share as stored (replicated norms included)
    if overhead is None:
        overhead = sum(p.bytes for p in f.parts if p.name != "weights")
    return weights, overhead, f.utilization if utilization is None else utilization


def _cmd_plan(args):
    if args.weight_bytes is not None and args.num_params is not None:
        raise UsageError("kvlib plan: give --weight-bytes or --num-params, not both")
    request_flags = {"--rate": args.rate, "--prompt-tokens": args.prompt_tokens, "--output-tokens": args.output_tokens,
                     "--ttft-ms": args.ttft_ms, "--prompt-tokens-p95": args.prompt_tokens_p95,
                     "--output-tokens-p95": args.output_tokens_p95, "--prefix-hit-rate": args.prefix_hit_rate}
    given = [flag for flag, value in request_flags.items() if value is not None]
    if given and (args.users is not None or args.context is not None):
        raise UsageError(f"kvlib plan: give --users/--context or {given[0]} and the request flags, not both")
    if not given and (args.users is None or args.context is None):
        raise UsageError("kvlib plan: give --users and --context, or --rate with --prompt-tokens, --output-tokens "
                         "and --ttft-ms")
    if given:
        missing = [f for f in ("--rate", "--prompt-tokens", "--output-tokens", "--ttft-ms") if request_flags[f] is None]
        if missing:
            raise UsageError(f"kvlib plan: {missing[0]} is needed with {given[0]}")
    args.weight_bytes, args.overhead, args.utilization = _forward_defaults(args)
    if args.overhead is None:
        args.overhead = DEFAULT_OVERHEAD_BYTES
    if args.utilization is None:
        args.utilization = DEFAULT_UTILIZATION
    if args.tp_overhead is not None and args.allreduce_us is not None:
        raise UsageError("kvlib plan: give --tp-overhead (the pessimistic bound) or --allreduce-us (the modelled "
                         "all-reduce), not both")
    allreduce = dict(tp_overhead=args.tp_overhead, allreduce_latency_s=DEFAULT_ALLREDUCE_LATENCY_S
                     if args.allreduce_us is None else args.allreduce_us * 1e-6)
    if given:
        plan = plan_requests(
            args.model, rate_per_s=args.rate, prompt_tokens=args.prompt_tokens, output_tokens=args.output_tokens,
            itl_ms=args.itl_ms, ttft_ms=args.ttft_ms, prompt_tokens_p95=args.prompt_tokens_p95,
            output_tokens_p95=args.output_tokens_p95, prefix_hit_rate=args.prefix_hit_rate or 0.0, gpu=args.gpu,
            gpus_per_node=args.gpus_per_node, tp=args.tp, gpu_memory_bytes=args.gpu_memory,
            utilization=args.utilization, overhead_bytes_per_gpu=args.overhead, weight_bytes=args.weight_bytes,
            num_params=args.num_params, weight_dtype_bytes=_dtype_bytes(args.weight_dtype or "bf16"),
            kv_dtype_bytes=None if args.kv_dtype is None else _dtype_bytes(args.kv_dtype),
            bandwidth_bytes_per_s=args.bandwidth, efficiency=args.efficiency, spike_factor=args.spike,
            redundancy_nodes=args.redundancy, hub=args.hub, **allreduce)
        if args.json:
            print(json.dumps(plan.to_dict(), indent=2))
            return
        print_table(request_rows(plan))
        return
    plan = plan_capacity(
        args.model, users=args.users, context=args.context, itl_ms=args.itl_ms, gpu=args.gpu,
        gpus_per_node=args.gpus_per_node, tp=args.tp, gpu_memory_bytes=args.gpu_memory,
        utilization=args.utilization, overhead_bytes_per_gpu=args.overhead, weight_bytes=args.weight_bytes,
        num_params=args.num_params, weight_dtype_bytes=_dtype_bytes(args.weight_dtype or "bf16"),
        kv_dtype_bytes=None if args.kv_dtype is None else _dtype_bytes(args.kv_dtype),
        bandwidth_bytes_per_s=args.bandwidth, efficiency=args.efficiency, spike_factor=args.spike,
        redundancy_nodes=args.redundancy, hub=args.hub, **allreduce)
    if args.json:
        print(json.dumps(plan.to_dict(), indent=2))
        return
    print_table(plan_rows(plan))


def _float_arg(name, minimum=None, above=None, at_most=None):
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        try:
            _number(name, value, minimum=minimum, above=above, at_most=at_most)
        except PlanError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value
    return parse


def _count_arg(text):
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a count such as 70.6e9, got {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive count, got {text!r}")
    return int(round(value))


def _rate_arg(text):
    """'3.35TB' or '3350GB' (per second) or a bare bytes/s figure."""
    value = _byte_size(text.removesuffix("/s"))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive bandwidth, got {text!r}")
    return value


def add_parser(subparsers):
    """Register ``kvlib plan`` on the ``kvlib`` command line."""
    p = subparsers.add_parser(
        "plan", help="capacity plan: nodes for a request rate (or N users) under TTFT and ITL targets",
        description="Nodes of --gpus-per-node GPUs for --rate requests/s of --prompt-tokens in and --output-tokens "
                    "out under --ttft-ms and --itl-ms (Little's law, the p95 chunk margin, prefill capacity), or "
                    "for --users sequences of --context tokens under an ITL target, step by step. Every "
                    "assumption is a flag.")
    p.add_argument("model", help="bundled id or alias (see 'kvlib models'), config.json, or folder")
    p.add_argument("--users", type=_positive_int, default=None, help="concurrent users (sequences)")
    p.add_argument("--context", type=_positive_int, default=None, help="average context [tokens]")
    p.add_argument("--rate", type=_float_arg("--rate", above=0), default=None,
                   help="requests per second (the request-based plan, instead of --users/--context)")
    p.add_argument("--prompt-tokens", type=_positive_int, default=None, help="mean prompt length [tokens]")
    p.add_argument("--prompt-tokens-p95", type=_positive_int, default=None, help="p95 prompt length [tokens]")
    p.add_argument("--output-tokens", type=_positive_int, default=None, help="mean output length [tokens]")
    p.add_argument("--output-tokens-p95", type=_positive_int, default=None, help="p95 output length [tokens]")
    p.add_argument("--ttft-ms", type=_float_arg("--ttft-ms", above=0), default=None,
                   help="time-to-first-token target [ms]")
    p.add_argument("--prefix-hit-rate", type=_float_arg("--prefix-hit-rate", minimum=0, at_most=0.99),
                   default=None, help="share of prompt tokens served from the prefix cache (0 to 0.99)")
    p.add_argument("--itl-ms", type=_float_arg("--itl-ms", above=0), required=True,
                   help="inter-token latency target [ms]")
    p.add_argument("--gpu", required=True, help="GPU name (see 'kvlib gpus')")
    p.add_argument("--gpus-per-node", type=_positive_int, default=8)
    p.add_argument("--tp", type=_positive_int, default=None, help="tensor-parallel GPUs per replica "
                                                                   "(default: --gpus-per-node)")
    p.add_argument("--gpu-memory", type=_byte_size, default=None,
                   help="memory per GPU, e.g. 80GB (default: what CUDA reports for --gpu)")
    p.add_argument("--utilization", type=_fraction, default=None,
                   help="fraction of GPU memory the engine takes (default: the vLLM release's; 1.0 for the "
                        "newest, 0.34, which measures its pool)")
    p.add_argument("--vllm-version", type=_vllm_version, default=None,
                   help="vLLM release whose rules size the pool (default: the newest read)")
    p.add_argument("--overhead", type=_byte_size, default=None,
                   help="activations and other allocations per GPU (default: vLLM's torch peak, non-torch and "
                        "CUDA-graph memory as 'kvlib info' predicts them)")
    p.add_argument("--weight-bytes", type=_byte_size, default=None, help="weights of the whole model, e.g. 141.2GB")
    p.add_argument("--num-params", type=_count_arg, default=None, help="parameters, e.g. 70.6e9 (default: counted)")
    p.add_argument("--weight-dtype", default=None, choices=WEIGHT_DTYPES,
                   help="count the weights at this dtype (default: as the checkpoint stores them)")
    p.add_argument("--kv-dtype", default=None, choices=KV_DTYPES)
    p.add_argument("--bandwidth", type=_rate_arg, default=None, help="per GPU, e.g. 3.35TB (per second)")
    p.add_argument("--efficiency", type=_fraction, default=DEFAULT_EFFICIENCY,
                   help=f"achieved / peak bandwidth (default {DEFAULT_EFFICIENCY})")
    p.add_argument("--allreduce-us", type=_float_arg("--allreduce-us", minimum=0), default=None,
                   help="latency of one tensor-parallel all-reduce [us]; the plan adds two per layer to each step "
                        f"when tp > 1 (default {DEFAULT_ALLREDUCE_LATENCY_S * 1e6:g}; measure yours with nccl-tests' "
                        "all_reduce_perf)")
    p.add_argument("--tp-overhead", type=_float_arg("--tp-overhead", minimum=0), default=None,
                   help="instead of modelling the all-reduce, charge it as this fraction of the step when tp > 1: "
                        f"a pessimistic bound ({PESSIMISTIC_TP_OVERHEAD:g} is the common rule of thumb)")
    p.add_argument("--spike", type=_float_arg("--spike", minimum=1), default=DEFAULT_SPIKE_FACTOR,
                   help=f"traffic spike factor (default {DEFAULT_SPIKE_FACTOR})")
    p.add_argument("--redundancy", type=int, default=DEFAULT_REDUNDANCY_NODES, help="spare nodes (default 1: N+1)")
    p.add_argument("--hub", action="store_true", help="fetch the config from the Hugging Face Hub")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=_cmd_plan)
    return p
