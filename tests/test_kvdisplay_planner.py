"""kvdisplay.planner: the planner's view shows kvlib's plan step by step, and the binding limit.

Expected figures by hand: Qwen2.5-32B at 16,384 tokens is 2 x 64 x 8 x 128 x 2 x 16,384 = 4,294,967,296 B
per sequence; 500 users hold 2,147,483,648,000 B = 2,147.48 GB (2,000.00 GiB).
"""

import re

from pinned import pinned

from kvdisplay.planner import planner_explorer, planner_view


def test_view_shows_each_step_and_what_binds():
    view = planner_view("qwen2.5-32b", "A100-80GB", 8, 8, 500, 16384, 80)
    assert "total KV cache: <b>2,147.48 GB (2,000.00 GiB)</b>" in view
    assert "binds: <b style='color:#2e5c8a'>memory</b>" in view
    assert view.count("<tr>") == 8


def test_the_view_names_the_allreduce_rule():
    # Qwen2.5-32B, TP 8: modelled, 2 x 64 layers x 20 us = 2.56 ms a step; the bound says it is one
    view = planner_view("qwen2.5-32b", "A100-80GB", 8, 8, 500, 16384, 80)
    assert "all-reduce modelled, 2 a layer × 20 µs = 2.56 ms" in view
    bound = planner_view("qwen2.5-32b", "A100-80GB", 8, 8, 500, 16384, 80, tp_overhead=0.3)
    assert "× (1 + 0.3) / 0.7; all-reduce as a fraction, a pessimistic bound" in bound
    assert "no all-reduce" in planner_view("llama-3.1-8b", "H100-SXM", 8, 1, 2000, 4096, 30)


def test_latency_binds_at_a_tight_target():
    # Llama 3.1 8B, TP 1, 4,096 tokens, 30 ms: 110 sequences fit a GPU's pool but 30 ms allows about 101
    view = planner_view("llama-3.1-8b", "H100-SXM", 8, 1, 2000, 4096, 30)
    assert re.search(r"binds: <b[^>]*>latency</b>", view)


def test_max_num_seqs_binds_a_short_context_on_an_h100():
    # Qwen2.5 3B at 256 tokens: 9,437,184 B a sequence, far more than 1,024 fit; vLLM runs 1,024 (>= 70 GiB, no A100)
    view = planner_view("qwen2.5-3b", "H100-SXM", 8, 1, 5000, 256, 200)
    assert re.search(r"binds: <b[^>]*>max_num_seqs</b>", view) and "at most 1,024 by vLLM's max_num_seqs" in view


def test_a_plan_that_cannot_be_met_says_why():
    view = planner_view("llama-3.3-70b", "H100-SXM", 8, 1, 2000, 6144, 60)   # 141 GB of weights on one GPU
    assert "no plan" in view and "tp" in view and "total KV cache: <b>—</b>" in view


def test_the_number_follows_users():
    a = planner_view("qwen2.5-32b", "A100-80GB", 8, 8, 500, 16384, 80)
    b = planner_view("qwen2.5-32b", "A100-80GB", 8, 8, 550, 16384, 80)
    grab = re.compile(r"total KV cache: <b>([\d,.]+ GB)")
    assert grab.search(a).group(1) != grab.search(b).group(1)


def test_explorer_redraws_from_its_controls():
    pinned("ipywidgets")
    box = planner_explorer(["qwen2.5-32b"])
    before = box.view.value
    users = next(c for c in box.children if getattr(c, "description", "") == "users")
    users.value = users.value + 50
    assert box.view.value != before
    rule = next(c for c in box.children if getattr(c, "description", "") == "all-reduce rule")
    rule.value = 0.3
    assert "pessimistic bound" in box.view.value
    rule.value = None
    latency = next(c for c in box.children if getattr(c, "description", "") == "all-reduce latency (µs)")
    latency.value = 40.0          # 2 x 64 x 40 us = 5.12 ms
    assert "= 5.12 ms" in box.view.value
    tp = next(c for c in box.children if getattr(c, "description", "") == "TP (GPUs per replica)")
    per_node = next(c for c in box.children if getattr(c, "description", "") == "GPUs per node")
    per_node.value = 2
    assert "does not divide" in box.view.value
    del tp


def test_one_node_is_singular():
    # [interview 2026 §1] "1 nodes": Llama 3.1 8B, 4 users of 1,000 tokens on one H100 node of 8 GPUs at TP 8,
    # spike x1, no spare: ceil(1 x 1) + 0 = 1 node, one replica of TP 8 per node
    view = planner_view("llama-3.1-8b", "H100-SXM", 8, 8, 4, 1000, 50, spike_factor=1, redundancy_nodes=0)
    assert "deploy <b>1 node</b>" in view and "(1 replica of TP 8 per node)" in view and "(8 GPUs)" in view
    assert "1 nodes" not in view and "(s)" not in view
