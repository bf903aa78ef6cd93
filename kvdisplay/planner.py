"""The capacity planner as a view: every step of ``kvlib.planner.plan_capacity`` and the binding constraint.

``planner_view`` is a plain function returning HTML (tests and benchmarks call it);
``planner_explorer`` wires ipywidgets controls to it. Every figure comes from the
``Plan`` kvlib returns; a plan that cannot be met shows kvlib's one-line reason.

Used in: ch07_capacity_plan (section "Explore the planner").
"""

from __future__ import annotations

import html

import kvlib as kv
from kvlib.units import count_text

from .explorer import wire

SLIDER_WIDTH = "640px"
LABEL_WIDTH = "190px"
CONTEXTS = (1024, 2048, 4096, 6144, 8192, 16384, 32768, 65536, 131072)


def _row(step: str, what: str, value: str) -> str:
    return f"<tr><td style='padding:2px 10px 2px 0'>{step}</td><td style='padding:2px 10px'>{what}</td>" \
           f"<td style='padding:2px 0 2px 10px;text-align:right'><b>{value}</b></td></tr>"


def planner_view(model: str, gpu: str, gpus_per_node: int, tp: int, users: int, context: int, itl_ms: float,
                 overhead_bytes_per_gpu: int = kv.GB * 3, efficiency: float = 0.7, tp_overhead: float | None = None,
                 spike_factor: float = 1.3, redundancy_nodes: int = 1,
                 allreduce_latency_s: float = kv.planner.DEFAULT_ALLREDUCE_LATENCY_S) -> str:
    """The planner's steps as HTML, from ``kv.planner.plan_capacity`` with these arguments.

    Memory is what CUDA reports for ``gpu``, times vLLM's default utilization; the
    weights are bf16 from kvlib's parameter count. The all-reduce is modelled
    (two per layer at ``allreduce_latency_s``) unless ``tp_overhead`` gives the
    pessimistic fraction of the step.

    >>> view = planner_view("qwen2.5-32b", "A100-80GB", 8, 8, 500, 16384, 80)
    >>> "total KV cache: <b>2,147.48 GB" in view, ">memory</b> (124 by memory, 190 by ITL" in view
    (True, True)

    Used in: ch07_capacity_plan (through planner_explorer); benchmarks may time it.
    """
    try:
        p = kv.planner.plan_capacity(model, users=users, context=context, itl_ms=itl_ms, gpu=gpu,
                                     gpus_per_node=gpus_per_node, tp=tp,
                                     overhead_bytes_per_gpu=overhead_bytes_per_gpu, efficiency=efficiency,
                                     tp_overhead=tp_overhead, spike_factor=spike_factor,
                                     redundancy_nodes=redundancy_nodes, allreduce_latency_s=allreduce_latency_s)
    except ValueError as error:
        return (f"<div style='font-family:sans-serif;font-size:13px'>total KV cache: <b>—</b><br>"
                f"<b style='color:#c0392b'>no plan:</b> {html.escape(str(error))}</div>")
    gb = kv.format_gb_gib
    binds = p.limited_by
    color = "#c0392b" if binds == "latency" else "#2e5c8a"
    rows = [
        _row("1", f"KV per sequence of {context:,} tokens (all GPUs / one GPU of TP {tp})",
             f"{gb(p.kv_bytes_per_sequence)} / {gb(p.kv_bytes_per_sequence_per_gpu)}"),
        _row("2", f"total KV cache of {users:,} users", gb(p.total_kv_bytes)),
        _row("3", f"pool per GPU: ⌈{gb(p.gpu_memory_bytes)} × {p.utilization}⌉ − weights "
                  f"{gb(p.weight_bytes_per_gpu)} − overhead {gb(p.overhead_bytes_per_gpu)}",
             gb(p.kv_pool_bytes_per_gpu)),
        _row("3", f"sequences per replica by memory ({count_text(p.replicas_per_node, 'replica')} of TP {tp} per node)",
             f"{p.sequences_per_replica_by_memory:,}"),
        _row("4", f"ITL at the memory limit ({_step_rule(p)})", f"{p.itl_s_at_memory_limit * 1e3:.1f} ms"),
        _row("4", f"sequences per replica under {itl_ms:g} ms", f"{p.sequences_per_replica_by_latency:,}"),
        _row("5", "sequences per node, and its decode rate",
             f"{p.sequences_per_node:,} at {p.itl_s * 1e3:.1f} ms: {p.tokens_per_s_per_node:,.0f} tokens/s"),
        _row("6", f"nodes: ⌈{users:,} / {p.sequences_per_node:,}⌉, then ⌈× {spike_factor}⌉ + {redundancy_nodes}",
             f"{p.nodes} → {p.nodes_with_headroom} ({count_text(p.gpus, 'GPU')})"),
    ]
    return (f"<div style='font-family:sans-serif;font-size:13px;line-height:1.5'>"
            f"total KV cache: <b>{gb(p.total_kv_bytes)}</b> &nbsp;·&nbsp; binds: "
            f"<b style='color:{color}'>{binds}</b> ({p.sequences_per_replica_by_memory:,} by memory, "
            f"{p.sequences_per_replica_by_latency:,} by ITL, at most {p.max_num_seqs:,} by vLLM's max_num_seqs per "
            f"replica) &nbsp;·&nbsp; deploy "
            f"<b>{count_text(p.nodes_with_headroom, 'node')}</b>"
            f"<table style='margin-top:6px;border-collapse:collapse'>{''.join(rows)}</table></div>")


def _step_rule(p) -> str:
    """How the step was stretched: ``/ e``, plus the modelled all-reduce, or the pessimistic ``x (1 + o) / e``."""
    if p.tp == 1:
        return f"/ {p.efficiency}; one GPU, no all-reduce"
    if p.allreduce_rule == "modelled":
        return (f"/ {p.efficiency} + all-reduce modelled, 2 a layer × {p.allreduce_latency_s * 1e6:g} µs = "
                f"{p.allreduce_s_per_step * 1e3:.2f} ms")
    return f"× (1 + {p.tp_overhead}) / {p.efficiency}; all-reduce as a fraction, a pessimistic bound"


def planner_explorer(models, *, gpus=("H100-SXM", "A100-80GB", "H200", "B200", "L40S")):
    """The planner as ipywidgets: model, GPU, GPUs per node, TP, users, context, ITL target and assumptions.

    Returns the ``VBox``; its ``.view`` is the HTML widget every control redraws.

    Used in: ch07_capacity_plan.
    """
    import ipywidgets as widgets

    style = {"description_width": LABEL_WIDTH}
    layout = widgets.Layout(width=SLIDER_WIDTH)
    model_w = widgets.Dropdown(options=list(models), description="model", style=style, layout=layout)
    gpu_w = widgets.Dropdown(options=list(gpus), description="GPU", style=style, layout=layout)
    per_node_w = widgets.SelectionSlider(options=[1, 2, 4, 8], value=8, description="GPUs per node", style=style,
                                         layout=layout)
    tp_w = widgets.SelectionSlider(options=[1, 2, 4, 8], value=8, description="TP (GPUs per replica)", style=style,
                                   layout=layout)
    users_w = widgets.IntSlider(500, min=50, max=20000, step=50, description="users", style=style, layout=layout)
    context_w = widgets.SelectionSlider(options=[(f"{t:,}", t) for t in CONTEXTS], value=16384,
                                        description="context (tokens)", style=style, layout=layout)
    itl_w = widgets.IntSlider(80, min=10, max=200, step=5, description="ITL target (ms)", style=style, layout=layout)
    overhead_w = widgets.FloatSlider(3.0, min=0.0, max=10.0, step=0.5, description="overhead per GPU (GB)",
                                     style=style, layout=layout)
    eff_w = widgets.FloatSlider(0.7, min=0.3, max=1.0, step=0.05, description="bandwidth efficiency", style=style,
                                layout=layout)
    rule_w = widgets.Dropdown(options=[("modelled: 2 a layer × the latency", None),
                                       (f"{kv.planner.PESSIMISTIC_TP_OVERHEAD:.0%} of the step (pessimistic bound)",
                                        kv.planner.PESSIMISTIC_TP_OVERHEAD)],
                              value=None, description="all-reduce rule", style=style, layout=layout)
    latency_w = widgets.FloatSlider(kv.planner.DEFAULT_ALLREDUCE_LATENCY_S * 1e6, min=0.0, max=100.0, step=5.0,
                                    description="all-reduce latency (µs)", style=style, layout=layout)
    spike_w = widgets.FloatSlider(1.3, min=1.0, max=2.0, step=0.05, description="spike factor", style=style,
                                  layout=layout)
    spare_w = widgets.IntSlider(1, min=0, max=4, description="spare nodes (N+r)", style=style, layout=layout)
    def render() -> str:
        tp = tp_w.value
        if per_node_w.value % tp:
            return ("<div style='font-family:sans-serif;font-size:13px'>total KV cache: <b>—</b><br>"
                    f"<b style='color:#c0392b'>no plan:</b> TP {tp} does not divide {per_node_w.value} "
                    "GPUs per node</div>")
        return planner_view(model_w.value, gpu_w.value, per_node_w.value, tp, users_w.value, context_w.value,
                            itl_w.value, overhead_bytes_per_gpu=round(overhead_w.value * kv.GB),
                            efficiency=eff_w.value, tp_overhead=rule_w.value, spike_factor=spike_w.value,
                            redundancy_nodes=spare_w.value, allreduce_latency_s=latency_w.value * 1e-6)

    return wire((model_w, gpu_w, per_node_w, tp_w, users_w, context_w, itl_w, overhead_w, eff_w, rule_w, latency_w,
                 spike_w, spare_w), render)
