"""kvlib.planner: [kv-math] section 8 step by step, exercise D, properties, and ``kvlib plan``."""

import json
import math
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pinned import pinned

from kvlib import load_model
from kvlib.cli import main
from kvlib.planner import PlanError, plan_capacity

# [kv-math] section 8's own assumptions: 80 GB per GPU (its "640 GB" node), no utilization cap,
# 24 GB of overhead and activations per node (3 GB per GPU), 70.6e9 x 2 = 141.2 GB of weights,
# TP = 8, 30% all-reduce overhead, 70% efficiency, 1.3x spike, N+1.
SEED_8 = dict(users=2000, context=6000, itl_ms=60, gpu="H100-SXM", gpus_per_node=8, tp=8,
              gpu_memory_bytes=80 * 10**9, utilization=1.0, overhead_bytes_per_gpu=3 * 10**9,
              weight_bytes=141_200_000_000, efficiency=0.7, tp_overhead=0.3, spike_factor=1.3, redundancy_nodes=1)


def test_seed_003_section_8_step_by_step():
    p = plan_capacity("llama-3-70b", **SEED_8)
    # Step 1: 320 KiB x 6k = 1.966 GB per sequence. The seed's "6k" is 6,000 here (327,680 x 6,144 would be
    # 2.013 GB); its step 4 writes 6,144 but computes with 6,000 (241 x 6,000 x 40,960 B = 59.2 GB).
    assert p.kv_bytes_per_token == 327_680 and p.kv_bytes_per_token_per_gpu == 327_680 // 8
    assert p.kv_bytes_per_sequence == 327_680 * 6000 == 1_966_080_000
    # Step 2: 2,000 x 1.966 GB = 3,932 GB
    assert p.total_kv_bytes == 2000 * 1_966_080_000 and round(p.total_kv_bytes / 1e9) == 3932
    # Step 3: 640 - 141 - 24 = 475 GB per node (141.2 GB of weights: 474.8 GB)
    assert p.weight_bytes_per_gpu == 141_200_000_000 // 8 == 17_650_000_000
    assert p.kv_pool_bytes_per_node == 8 * (80 * 10**9 - 17_650_000_000 - 3 * 10**9) == 474_800_000_000
    # 474.8 GB / 1.966 GB = 241.5 -> 241 sequences; 3,932 / 475 = 8.3 -> 9 nodes
    assert p.sequences_per_node_by_memory == math.floor(474.8e9 / 1_966_080_000) == 241
    assert p.nodes_for_memory == math.ceil(2000 / 241) == 9
    # Step 4: 17.65 GB + 241 x 6,000 x 40 KiB = 76.9 GB per GPU per step; 76.9 / 3,350 = 23 ms;
    # x 1.3 / 0.7 = 42.6 ms (the seed says ~42: it rounds 22.95 ms to 23 and then down)
    step_bytes = 17_650_000_000 + 241 * 6000 * 40_960
    assert p.step_bytes_per_gpu_at_memory_limit == step_bytes and round(step_bytes / 1e9, 1) == 76.9
    assert round(p.step_s_bound * 1e3) == 23
    itl = step_bytes / 3.35e12 * 1.3 / 0.7
    assert p.itl_s == pytest.approx(itl) and round(itl * 1e3, 1) == 42.6
    assert p.meets_itl_at_memory_limit and p.limited_by == "memory"
    # Step 5: 241 / 0.0426 s = 5,655 tok/s per node, 50,893 for 9 nodes. The seed prints 5,738 and 51,600:
    # it divides by 42 ms, not 42.6.
    assert round(p.tokens_per_s_per_node) == round(241 / itl) == 5655
    assert round(p.tokens_per_s) == round(9 * 241 / itl) == 50893
    # Step 6: 9 x 1.3 + 1 = 12.7 -> 13 nodes (104 GPUs)
    assert p.nodes == 9 and p.nodes_with_headroom == 13 and p.gpus == 104


def test_seed_003_section_8_with_real_memory():
    # The seed's "640 GB" takes the H100 label as 80 GB; CUDA reports 79.18 GiB = 85.02 GB per GPU.
    # With kvlib's defaults (CUDA memory x 0.92, counted weights) and 6K = 6,144 tokens the answer holds.
    params = load_model("llama-3-70b").num_params()
    pool = math.ceil(round(79.18 * 2**30) * 0.92) - math.ceil(2 * params / 8) - 3 * 10**9
    seqs = pool // (40_960 * 6144)
    p = plan_capacity("llama-3-70b", users=2000, context=6144, itl_ms=60, gpu="H100-SXM")
    assert p.sequences_per_node == seqs == 228
    assert p.nodes == math.ceil(2000 / seqs) == 9
    assert p.nodes_with_headroom == math.ceil(9 * 1.3) + 1 == 13


def test_seed_003_exercise_d():
    # Qwen2.5-32B: 2 x 64 x 8 x 128 x 2 = 262,144 B per token; TP = 8 on 8 x A100-80GB: 32,768 B per GPU.
    # 16K = 16,384 tokens: 4 GiB per sequence, 512 MiB per GPU.
    params = load_model("qwen2.5-32b").num_params()
    w_gpu = math.ceil(2 * params / 8)
    pool = math.ceil(round(79.15 * 2**30) * 0.92) - w_gpu - 3 * 10**9      # ~67.0 GB per GPU
    seqs = pool // (32_768 * 16384)
    # the all-reduce modelled (the default): 2 per layer x 64 layers x 20 us = 2.56 ms added to the step
    itl = (w_gpu + seqs * 32_768 * 16384) / 2.039e12 / 0.7 + 2 * 64 * 20e-6
    p = plan_capacity("qwen2.5-32b", users=500, context=16384, itl_ms=80, gpu="A100-80GB")
    assert p.kv_bytes_per_sequence == 2**32 and p.kv_bytes_per_sequence_per_gpu == 2**29
    assert p.sequences_per_node == seqs == 124
    assert p.itl_s == pytest.approx(itl) and itl < 0.080 and round(itl * 1e3, 1) == 54.9
    assert p.nodes == math.ceil(500 / 124) == 5
    assert p.nodes_with_headroom == math.ceil(5 * 1.3) + 1 == 8
    # the seed's 30% of the step instead (the pessimistic bound): x 1.3 / 0.7 = 68.1 ms, the same 124 and 8 nodes
    bound = plan_capacity("qwen2.5-32b", users=500, context=16384, itl_ms=80, gpu="A100-80GB", tp_overhead=0.3)
    itl_bound = (w_gpu + seqs * 32_768 * 16384) / 2.039e12 * 1.3 / 0.7
    assert bound.itl_s == pytest.approx(itl_bound) and round(itl_bound * 1e3, 1) == 68.1
    assert (bound.sequences_per_node, bound.nodes_with_headroom) == (124, 8)


def test_latency_limit_cuts_the_batch():
    # an ITL target below what a full node gives: sequences per replica fall to
    # floor((target x eff / (1 + ovh) x BW - W / tp) / kv_per_seq_per_gpu)
    p = plan_capacity("llama-3-70b", **dict(SEED_8, itl_ms=30))
    n = math.floor((0.030 * 0.7 / 1.3 * 3.35e12 - 17_650_000_000) / (6000 * 40_960))
    assert p.limited_by == "latency" and not p.meets_itl_at_memory_limit
    assert p.sequences_per_replica == n
    assert p.itl_s <= 0.030 < (17_650_000_000 + (n + 1) * 6000 * 40_960) / 3.35e12 * 1.3 / 0.7
    assert p.nodes == math.ceil(2000 / n)


def test_replicas_per_node_under_smaller_tp():
    one = plan_capacity("llama-3.1-8b", users=1000, context=4096, itl_ms=100, gpu="H100-SXM", tp=1)
    assert one.replicas_per_node == 8
    assert one.sequences_per_node == 8 * one.sequences_per_replica
    # tp = 1 has no all-reduce: ITL = bytes / BW / efficiency
    assert one.itl_s == pytest.approx(one.step_bytes_per_gpu / 3.35e12 / 0.7)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 20_000), st.sampled_from([1024, 4096, 6000, 16384]), st.floats(40, 200),
       st.integers(0, 40), st.integers(0, 5000))
def test_plan_properties(users, context, itl_ms, extra_gb, more_users):
    base = dict(users=users, context=context, itl_ms=itl_ms, gpu="H100-SXM")
    p = plan_capacity("llama-3-70b", **base)
    assert p.nodes * p.sequences_per_node >= users > (p.nodes - 1) * p.sequences_per_node
    assert p.itl_s <= itl_ms / 1e3
    assert p.nodes_with_headroom >= p.nodes + p.redundancy_nodes
    bigger = plan_capacity("llama-3-70b", **dict(base, gpu_memory_bytes=p.gpu_memory_bytes + extra_gb * 10**9))
    assert bigger.nodes <= p.nodes
    more = plan_capacity("llama-3-70b", **dict(base, users=users + more_users))
    assert more.nodes >= p.nodes


@pytest.mark.parametrize("kwargs, name", [
    (dict(users=0), "users"),
    (dict(context=-5), "context"),
    (dict(itl_ms=0), "itl_ms"),
    (dict(itl_ms=1), "itl_ms"),                   # the weights alone take longer
    (dict(tp=3), "tp"),
    (dict(gpus_per_node=4, tp=8), "tp"),
    (dict(utilization=1.5), "utilization"),
    (dict(efficiency=0), "efficiency"),
    (dict(spike_factor=0.5), "spike_factor"),
    (dict(context=10**7), "context"),             # past the model's max_position_embeddings
    (dict(context=131072, gpu="L4"), "gpu"),      # one sequence does not fit a GPU
])
def test_bad_input_names_the_parameter(kwargs, name):
    args = dict(users=100, context=4096, itl_ms=60, gpu="H100-SXM")
    args.update(kwargs)
    with pytest.raises(ValueError, match=name) as info:
        plan_capacity("llama-3-70b", **args)
    assert "\n" not in str(info.value)


def test_plan_error_is_the_module_error():
    with pytest.raises(PlanError):
        plan_capacity("llama-3-70b", users=100, context=4096, itl_ms=1, gpu="H100-SXM")


# --- kvlib plan ---------------------------------------------------------------------
SEED_FLAGS = ["plan", "llama-3-70b", "--users", "2000", "--context", "6000", "--itl-ms", "60", "--gpu", "H100-SXM",
              "--gpu-memory", "80GB", "--utilization", "1", "--overhead", "3GB", "--num-params", "70.6e9",
              "--efficiency", "0.7", "--tp-overhead", "0.3", "--spike", "1.3", "--redundancy", "1"]


def test_cli_plan_table_reproduces_seed_003(capsys):
    assert main(SEED_FLAGS) == 0
    out = capsys.readouterr().out
    assert "ceil(2,000 / 241) = 9" in out
    assert "ceil(9 x 1.3) + 1 = 13 nodes (104 x H100-SXM)" in out
    assert "42.6 ms: meets the 60 ms target" in out
    for line in out.splitlines():
        if " GB" in line:
            assert "GiB" in line, line  # every figure in both units
    assert "assumptions" in out and "efficiency 0.7" in out and "spike x1.3" in out


def test_cli_plan_json(capsys):
    assert main(SEED_FLAGS + ["--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert (r["nodes"], r["nodes_with_headroom"], r["sequences_per_node"]) == (9, 13, 241)
    assert r["weight_bytes"] == 141_200_000_000
    for key in ("utilization", "overhead_bytes_per_gpu", "efficiency", "tp_overhead", "spike_factor",
                "redundancy_nodes", "bandwidth_bytes_per_s", "gpu_memory_bytes"):
        assert key in r, key


def test_cli_plan_says_which_allreduce_rule(capsys):
    # without --tp-overhead the all-reduce is modelled: 2 x 80 layers x 20 us = 3.2 ms (35.98 ms, as above)
    modelled = [f for f in SEED_FLAGS if f not in ("--tp-overhead", "0.3")]
    assert main(modelled + ["--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert (r["allreduce_rule"], r["tp_overhead"], r["allreduce_latency_s"]) == ("modelled", None, 20e-6)
    assert r["allreduce_s_per_step"] == pytest.approx(3.2e-3) and round(r["itl_s"] * 1e3, 2) == 35.98
    assert main(modelled) == 0
    out = capsys.readouterr().out
    assert "/ 0.7 + 3.20 ms all-reduce = 36.0 ms: meets" in out
    assert "all-reduce modelled: 2 a layer at 20 us each, 3.20 ms a step" in out
    # --allreduce-us 10: 2 x 80 x 10 us = 1.6 ms
    assert main(modelled + ["--allreduce-us", "10", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["allreduce_s_per_step"] == pytest.approx(1.6e-3)
    # --tp-overhead 0.3: the bound, named as one
    assert main(SEED_FLAGS + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["allreduce_rule"] == "pessimistic_fraction"
    assert main(SEED_FLAGS) == 0
    assert "all-reduce as 30% of the step (a pessimistic bound)" in capsys.readouterr().out


def run(*args):
    proc = subprocess.run([sys.executable, "-m", "kvlib", *args], capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def test_cli_plan_help_names_the_rules():
    code, out, _ = run("plan", "--help")
    flat = " ".join(out.split())
    assert code == 0 and "--allreduce-us" in flat and "(default 20;" in flat
    assert "charge it as this fraction of the step when tp > 1: a pessimistic bound" in flat


@pytest.mark.parametrize("args", [
    ["plan", "llama-3-70b", "--users", "0", "--context", "6000", "--itl-ms", "60", "--gpu", "H100"],
    ["plan", "llama-3-70b", "--context", "6000", "--itl-ms", "60", "--gpu", "H100"],
    ["plan", "llama-3-70b", "--users", "10", "--context", "6000", "--itl-ms", "60", "--gpu", "Z80"],
    ["plan", "llama-3-70b", "--users", "10", "--context", "6000", "--itl-ms", "60", "--gpu", "H100", "--tp", "3"],
    ["plan", "llama-3-70b", "--users", "10", "--context", "6000", "--itl-ms", "1", "--gpu", "H100"],
    ["plan", "llama-3-70b", "--users", "10", "--context", "6000", "--itl-ms", "x", "--gpu", "H100"],
    ["plan", "no-such-model", "--users", "10", "--context", "6000", "--itl-ms", "60", "--gpu", "H100"],
    ["plan", "llama-3-70b", "--users", "10", "--context", "6000", "--itl-ms", "60", "--gpu", "H100",
     "--weight-bytes", "1GB", "--num-params", "7e9"],
    ["plan", "llama-3-70b", "--users", "10", "--context", "6000", "--itl-ms", "60", "--gpu", "H100",
     "--tp-overhead", "0.3", "--allreduce-us", "20"],
    ["plan", "llama-3-70b", "--users", "10", "--context", "6000", "--itl-ms", "60", "--gpu", "H100",
     "--allreduce-us", "-1"],
])
def test_cli_plan_bad_input_exits_2_with_one_line(args):
    code, out, err = run(*args)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


# --- headroom: ceil(nodes x spike) + redundancy ([kv-math] s8: "9 x 1.3 + 1 = 13 nodes") ----------------
SEED_003_S8 = dict(context=6000, itl_ms=60, gpu="H100-SXM", gpu_memory_bytes=80 * 10**9, utilization=1.0,
                   overhead_bytes_per_gpu=3 * 10**9, weight_bytes=141_200_000_000, tp_overhead=0.3)


def test_headroom_is_ceil_of_nodes_times_spike_plus_redundancy():
    # [kv-math] s8's node holds 241 sequences; 2,410 users need exactly 10 nodes. Its rule, nodes x 1.3 + 1:
    # 10 x 1.3 = 13 exactly (float: 13.000000000000002, which a bare ceil would turn into 14), + 1 = 14.
    # ceil((10 + 1) x 1.3) = ceil(14.3) = 15 would be the other reading of "N+1 and 30%".
    p = plan_capacity("llama-3-70b", users=2410, **SEED_003_S8)
    assert (p.sequences_per_node, p.nodes) == (241, 10)
    assert p.nodes_with_headroom == 14


def test_headroom_spike_and_redundancy_are_separate_knobs():
    # 2,410 users -> 10 nodes (above). Spike 1.05: ceil(10.5) = 11, + 2 redundant = 13; spike 1: 10 + 0 = 10.
    assert plan_capacity("llama-3-70b", users=2410, spike_factor=1.05, redundancy_nodes=2,
                         **SEED_003_S8).nodes_with_headroom == 13
    assert plan_capacity("llama-3-70b", users=2410, spike_factor=1, redundancy_nodes=0,
                         **SEED_003_S8).nodes_with_headroom == 10
# --- the plan's steps as functions (kvlib.planner, ch07's sympy chain) ----------------------------------------
from kvlib.planner import (allreduce_seconds_per_step, itl_seconds, nodes_needed, nodes_with_headroom,  # noqa: E402
                           sequences_under_itl, step_slowdown)


def test_step_functions_by_hand():
    # Hand arithmetic, [kv-math] s8's figures: 1.3 / 0.7 = 1.857142...; one GPU has no all-reduce: 1 / 0.7.
    assert step_slowdown(8, 0.3, 0.7) == pytest.approx(1.857142857)
    assert step_slowdown(1, 0.3, 0.7) == pytest.approx(1.428571429)
    # 17.65e9 + 241 x 245,760,000 = 76,878,160,000 B; / 3.35e12 = 22.9487 ms; x 1.857142857 = 42.619 ms
    assert itl_seconds(17.65e9, 245_760_000, 241, 3.35e12) == pytest.approx(0.0229487)
    assert itl_seconds(17.65e9, 245_760_000, 241, 3.35e12, 1.3 / 0.7) == pytest.approx(0.0426190, rel=1e-5)
    # 0.06 x 3.35e12 / 1.857142857 = 108.2308e9; - 17.65e9 = 90.5808e9; / 245.76e6 = 368.57 -> 368
    assert sequences_under_itl(0.06, 17.65e9, 245_760_000, 3.35e12, 1.3 / 0.7) == 368
    # the weights alone (17.65e9 / 3.35e12 x 1.857 = 9.8 ms) miss a 5 ms target: no sequence at all
    assert sequences_under_itl(0.005, 17.65e9, 245_760_000, 3.35e12, 1.3 / 0.7) < 1
    # 2,000 / 241 = 8.30 -> 9; 2,000 / 250 = 8 exactly
    assert nodes_needed(2000, 241) == 9 and nodes_needed(2000, 250) == 8
    # 9 x 1.3 = 11.7 -> 12, + 1 = 13 ([kv-math]: "9 x 1.3 + 1 = 13"); 10 x 1.3 = 13 exactly, + 1 = 14
    assert nodes_with_headroom(9, 1.3, 1) == 13 and nodes_with_headroom(10, 1.3, 1) == 14
    assert nodes_with_headroom(5, 1.0, 0) == 5


def test_step_functions_take_symbols():
    sp = pinned("sympy")
    w, s, n, bw, tau, slow = sp.symbols("W_g S_g n BW tau s", positive=True)
    itl = itl_seconds(w, s, n, bw, slow)
    solved = sp.solve(sp.Eq(itl, tau), n)[0]
    assert sp.simplify(sequences_under_itl(tau, w, s, bw, slow) - sp.floor(solved)) == 0


def test_plan_uses_the_step_functions():
    # Exercise D (Qwen2.5-32B on 8 x A100-80GB), kvlib's defaults: the plan's figures are the step functions'.
    p = plan_capacity("qwen2.5-32b", users=500, context=16384, itl_ms=80, gpu="A100-80GB")
    slow = step_slowdown(p.tp, 0, p.efficiency)                # the all-reduce is time added, not a fraction
    allreduce = allreduce_seconds_per_step(64, p.tp, 20e-6)      # 64 layers
    assert p.allreduce_s_per_step == allreduce
    s_g = p.kv_bytes_per_sequence_per_gpu
    assert s_g == 2 * 64 * (8 // 8) * 128 * 2 * 16384          # 64 layers, 8 KV heads / TP 8, 128 dims, bf16
    assert p.itl_s == itl_seconds(p.weight_bytes_per_gpu, s_g, p.sequences_per_replica, p.bandwidth_bytes_per_s,
                                  slow) + allreduce
    assert p.sequences_per_replica_by_latency == sequences_under_itl(0.08 - allreduce, p.weight_bytes_per_gpu, s_g,
                                                                     p.bandwidth_bytes_per_s, slow)
    assert p.nodes == nodes_needed(500, p.sequences_per_node)
    assert p.nodes_with_headroom == nodes_with_headroom(p.nodes, 1.3, 1)


# --- every input's bound, and the exact one-line message naming it ------------------------------------------------
@pytest.mark.parametrize("kwargs, message", [
    (dict(users=0), "users must be at least 1, got 0"),
    (dict(users=True), "users must be an integer, got True"),             # a bool is not a count
    (dict(users=10.0), "users must be an integer, got 10.0"),
    (dict(context=-5), "context must be at least 1, got -5"),
    (dict(context=4096.0), "context must be an integer, got 4096.0"),
    (dict(gpus_per_node=8.0), "gpus_per_node must be an integer, got 8.0"),
    (dict(tp=8.0), "tp must be an integer, got 8.0"),
    (dict(itl_ms=0), "itl_ms must be greater than 0, got 0"),
    (dict(itl_ms="60"), "itl_ms must be a number, got '60'"),
    (dict(itl_ms=float("nan")), "itl_ms must be a number, got nan"),      # NaN compares false to every bound
    (dict(gpus_per_node=0), "gpus_per_node must be at least 1, got 0"),
    (dict(tp=0), "tp must be at least 1, got 0"),
    (dict(gpus_per_node=4, tp=8), "tp (8) must divide gpus_per_node (4)"),
    (dict(gpu_memory_bytes=0), "gpu_memory_bytes must be greater than 0, got 0"),
    (dict(utilization=0), "utilization must be greater than 0, got 0"),
    (dict(utilization=1.5), "utilization must be at most 1, got 1.5"),
    (dict(overhead_bytes_per_gpu=-1), "overhead_bytes_per_gpu must be at least 0, got -1"),
    (dict(efficiency=0), "efficiency must be greater than 0, got 0"),
    (dict(efficiency=1.01), "efficiency must be at most 1, got 1.01"),
    (dict(tp_overhead=-0.1), "tp_overhead must be at least 0, got -0.1"),
    (dict(spike_factor=0.5), "spike_factor must be at least 1, got 0.5"),
    (dict(redundancy_nodes=-1), "redundancy_nodes must be at least 0, got -1"),
    (dict(redundancy_nodes=1.0), "redundancy_nodes must be an integer, got 1.0"),
    (dict(num_params=0), "num_params must be greater than 0, got 0"),
    (dict(weight_dtype_bytes=0), "weight_dtype_bytes must be greater than 0, got 0"),
    (dict(weight_bytes=0), "weight_bytes must be greater than 0, got 0"),
    (dict(bandwidth_bytes_per_s=0), "bandwidth_bytes_per_s must be greater than 0, got 0"),
    (dict(kv_dtype_bytes=0), "kv_dtype_bytes must be greater than 0, got 0"),
])
def test_bad_input_exact_message(kwargs, message):
    args = dict(users=100, context=4096, itl_ms=60, gpu="H100-SXM")
    args.update(kwargs)
    with pytest.raises(PlanError) as info:
        plan_capacity("llama-3-70b", **args)
    assert str(info.value) == message


def test_bounds_themselves_are_accepted():
    # 1 user, 1 token of context, efficiency 1 (the bandwidth bound itself), no overhead, no all-reduce cost
    p = plan_capacity("llama-3-70b", users=1, context=1, efficiency=1, overhead_bytes_per_gpu=0, tp_overhead=0,
                      **{k: v for k, v in SEED_003_S8.items() if k not in ("context", "overhead_bytes_per_gpu",
                                                                           "tp_overhead")})
    assert (p.users, p.context, p.efficiency, p.overhead_bytes_per_gpu, p.tp_overhead) == (1, 1, 1, 0, 0)
    # one GPU per node, one GPU per replica: Llama 3.1 8B (8 KV heads) fits tp = 1
    q = plan_capacity("llama-3.1-8b", users=1, context=4096, itl_ms=60, gpus_per_node=1, tp=1)
    assert (q.gpus_per_node, q.tp, q.replicas_per_node) == (1, 1, 1)


def test_one_sequence_that_does_not_fit_says_what_is_left():
    # Llama 3 70B, 10^7 tokens: 327,680 / 8 = 40,960 B per token per GPU x 10^7 = 409.6e9 B (409.6e9 / 2^30
    # = 381.47 GiB); the pool is 80e9 - 17.65e9 - 3e9 = 59.35e9 B (55.27 GiB); weights 17.65e9 B (16.44 GiB)
    with pytest.raises(PlanError) as info:
        plan_capacity("llama-3-70b", users=10, **dict(SEED_003_S8, context=10**7))
    assert str(info.value) == (
        "context: 10,000,000 tokens is over the model's max_position_embeddings 131,072; vLLM will not serve it")
    # within the model's context, a sequence too large for the pool: 131,072 x 40,960 = 5.37 GB per GPU
    # against 80e9 - 3e9 - 75e9 = 2e9 B left after 8 x 75e9 B of weights
    with pytest.raises(PlanError) as info:
        plan_capacity("llama-3-70b", users=10, **dict(SEED_003_S8, context=131072, weight_bytes=8 * 75 * 10**9))
    assert str(info.value) == (
        "gpu: one sequence of 131,072 tokens does not fit: KV for 1 sequence of 131,072 tokens is 5.37 GB (5.00 GiB) "
        "per GPU but the pool left after weights and overhead is 2.00 GB (1.86 GiB); "
        "use more GPUs per replica (tp) or a bigger GPU")


def test_planner_refuses_a_tp_the_engine_refuses():
    # Qwen2.5-7B: 28 query heads; 28 % 8 = 4, so vLLM will not start it at TP 8 (the default: gpus_per_node).
    with pytest.raises(PlanError, match="tp: TP 8 does not divide the 28 query heads"):
        plan_capacity("qwen2.5-7b", users=100, context=4096, itl_ms=60)
    assert plan_capacity("qwen2.5-7b", users=100, context=4096, itl_ms=60, tp=4).tp == 4   # 28 % 4 = 0, 4 % 4 = 0


def test_weights_bigger_than_the_gpu_leave_nothing_not_a_negative_figure():
    # 8 x 79e9 B of weights: 79e9 per GPU; 80e9 - 79e9 - 3e9 = -2e9 B, shown as nothing left
    # (the budget: ceil(80e9 x 1.0) - 3e9 = 77e9 B = 71.71 GiB)
    with pytest.raises(PlanError, match=r"does not fit: weights are 79\.00 GB \(73\.57 GiB\) per GPU but the "
                                        r"engine's budget for weights and KV .* is 77\.00 GB \(71\.71 GiB\)"):
        plan_capacity("llama-3-70b", users=10, **dict(SEED_003_S8, weight_bytes=8 * 79 * 10**9))


def test_missed_target_says_how_long_one_sequence_takes():
    # weights 17.65e9 + one sequence 6,000 x 40,960 = 245.76e6 B = 17.89576e9 B / 3.35e12 B/s = 5.342 ms,
    # x 1.3 / 0.7 = 9.92 ms > 1 ms
    with pytest.raises(PlanError) as info:
        plan_capacity("llama-3-70b", users=10, **dict(SEED_003_S8, itl_ms=1))
    assert str(info.value) == ("itl_ms: 1 ms cannot be met: reading the weights (17.65 GB (16.44 GiB) per GPU) "
                               "and one sequence already takes 9.9 ms per step")


def test_a_target_that_admits_exactly_one_sequence():
    # One sequence: 9.921 ms (above); two: (17.65e9 + 2 x 245.76e6) / 3.35e12 x 1.3 / 0.7 = 10.057 ms.
    # A 10 ms target admits exactly one per replica ((0.010 x 0.7 / 1.3 x 3.35e12 - 17.65e9) / 245.76e6 = 1.58),
    # so 5 users need 5 nodes; headroom ceil(5 x 1.3) + 1 = ceil(6.5) + 1 = 8
    p = plan_capacity("llama-3-70b", users=5, **dict(SEED_003_S8, itl_ms=10))
    assert (p.sequences_per_replica_by_latency, p.sequences_per_replica, p.sequences_per_node) == (1, 1, 1)
    assert (p.nodes, p.nodes_with_headroom) == (5, 8)
    assert round(p.itl_s * 1e3, 2) == 9.92


def test_every_figure_of_seed_003_section_8():
    # The figures the step-by-step test leaves out, same hand arithmetic ([kv-math] s8's assumptions):
    p = plan_capacity("llama-3-70b", **SEED_8)
    assert (p.model, p.gpu, p.users, p.context, p.itl_target_s) == ("meta-llama/Llama-3.3-70B-Instruct",
                                                                     "H100-SXM", 2000, 6000, 0.060)
    assert (p.gpus_per_node, p.tp, p.gpu_memory_bytes, p.utilization) == (8, 8, 80 * 10**9, 1.0)
    assert (p.overhead_bytes_per_gpu, p.weight_bytes, p.kv_dtype_bytes) == (3 * 10**9, 141_200_000_000, 2)
    assert (p.bandwidth_bytes_per_s, p.efficiency, p.tp_overhead) == (3.35e12, 0.7, 0.3)
    assert (p.spike_factor, p.redundancy_nodes) == (1.3, 1)
    assert p.kv_bytes_per_sequence_per_gpu == 6000 * 40_960 == 245_760_000
    # ceil(80e9 x 1.0) = 80e9 budget; pool 80e9 - 17.65e9 - 3e9 = 59.35e9 per GPU, 474.8e9 per node
    assert (p.budget_bytes_per_gpu, p.kv_pool_bytes_per_gpu) == (80 * 10**9, 59_350_000_000)
    assert (p.replicas_per_node, p.sequences_per_replica_by_memory, p.sequences_per_replica) == (1, 241, 241)
    # memory-limited: the ITL at the memory limit is the ITL, 76,878,160,000 B / 3.35e12 x 1.3 / 0.7 = 42.62 ms
    assert p.itl_s_at_memory_limit == pytest.approx(76_878_160_000 / 3.35e12 * 1.3 / 0.7)
    assert p.step_bytes_per_gpu == 76_878_160_000
    # 368 by latency (0.06 x 0.7 / 1.3 x 3.35e12 - 17.65e9) / 245.76e6 = 368.57), 241 by memory
    assert p.sequences_per_replica_by_latency == 368
    assert p.sequences_per_node == 241
    # one user gets a token every 42.62 ms: 23.46 tok/s
    assert round(p.tokens_per_s_per_user, 2) == 23.46


def test_plan_to_dict_adds_the_derived_figures():
    d = plan_capacity("llama-3-70b", **SEED_8).to_dict()
    # 241 x 1 replica; 42.6 ms <= 60 ms; 241 / 42.62 ms = 5,655 tok/s, x 9 = 50,893; 1 / 42.62 ms = 23.46;
    # 13 nodes x 8 GPUs = 104
    assert (d["sequences_per_node_by_memory"], d["meets_itl_at_memory_limit"], d["limited_by"]) == (241, True, "memory")
    assert (round(d["tokens_per_s_per_node"]), round(d["tokens_per_s"])) == (5655, 50893)
    assert (round(d["tokens_per_s_per_user"], 2), d["gpus"]) == (23.46, 104)
    assert (d["nodes"], d["nodes_with_headroom"], d["sequences_per_node"]) == (9, 13, 241)


def test_defaults_are_kvlibs_assumptions():
    # No gpu and no assumption given: H100-SXM (3.35 TB/s, 79.18 GiB as CUDA reports it = 85,018,877,624 B),
    # 8 GPUs, tp 8, vLLM's 0.92, 3 GB overhead, 70% efficiency, the all-reduce modelled (2 per layer at 20 us:
    # 2 x 80 x 20e-6 = 3.2 ms a step), 1.3x spike, N+1, bf16 KV.
    # Budget ceil(85,018,877,624 x 0.92) = ceil(78,217,367,414.08) = 78,217,367,415 (vLLM rounds up);
    # pool 78,217,367,415 - 141.2e9 / 8 - 3e9 = 57,567,367,415 B; / 245.76e6 = 234.2 -> 234 sequences;
    # 2,000 / 234 = 8.5 -> 9 nodes, ceil(9 x 1.3) + 1 = 13.
    p = plan_capacity("llama-3-70b", users=2000, context=6000, itl_ms=60, weight_bytes=141.2e9)
    assert (p.gpu, p.gpus_per_node, p.tp, p.gpu_memory_bytes) == ("H100-SXM", 8, 8, 85_018_877_624)
    assert (p.utilization, p.overhead_bytes_per_gpu, p.efficiency, p.tp_overhead) == (0.92, 3 * 10**9, 0.7, None)
    assert (p.allreduce_rule, p.allreduce_latency_s) == ("modelled", 20e-6)
    assert p.allreduce_s_per_step == pytest.approx(3.2e-3)
    assert (p.spike_factor, p.redundancy_nodes, p.kv_dtype_bytes, p.bandwidth_bytes_per_s) == (1.3, 1, 2, 3.35e12)
    assert p.weight_bytes == 141_200_000_000 and isinstance(p.weight_bytes, int)
    assert (p.budget_bytes_per_gpu, p.kv_pool_bytes_per_gpu) == (78_217_367_415, 57_567_367_415)
    assert (p.sequences_per_node, p.nodes, p.nodes_with_headroom) == (234, 9, 13)


def test_weights_from_a_parameter_count_and_a_dtype():
    # 70.6e9 parameters at 1 B (fp8 weights): 70.6e9 B, 8.825e9 per GPU
    p = plan_capacity("llama-3-70b", users=10, num_params=70.6e9, weight_dtype_bytes=1,
                      **{k: v for k, v in SEED_003_S8.items() if k != "weight_bytes"})
    assert (p.weight_bytes, p.weight_bytes_per_gpu) == (70_600_000_000, 8_825_000_000)


def test_kv_dtype_and_bandwidth_overrides():
    # fp8 KV: 163,840 B per token, 20,480 per GPU; 6,000 tokens = 122.88e6 B per GPU; pool 59.35e9 / 122.88e6
    # = 482.99 -> 482 sequences. At 2e12 B/s one sequence's step is (17.65e9 + 122.88e6) / 2e12 = 8.886 ms.
    p = plan_capacity("llama-3-70b", users=10, kv_dtype_bytes=1, bandwidth_bytes_per_s=2e12,
                      **dict(SEED_003_S8, itl_ms=1000))
    assert (p.kv_dtype_bytes, p.kv_bytes_per_token, p.kv_bytes_per_token_per_gpu) == (1, 163_840, 20_480)
    assert p.sequences_per_replica_by_memory == 482
    # 163,840 x 6,000 = 983,040,000 B per sequence; x 10 users = 9,830,400,000
    assert (p.kv_bytes_per_sequence, p.total_kv_bytes) == (983_040_000, 9_830_400_000)
    assert p.bandwidth_bytes_per_s == 2e12
    assert p.step_s_bound == pytest.approx((17.65e9 + 482 * 122_880_000) / 2e12)


def test_two_gpus_pay_the_all_reduce():
    # tp = 2 already reduces across GPUs: (1 + 0.3) / 0.7 = 1.857, the same as tp = 8
    assert step_slowdown(2, 0.3, 0.7) == pytest.approx(1.3 / 0.7)
    # by default no fraction is charged (a plan adds the modelled all-reduce as time): 1 / 0.7 at any tp
    assert step_slowdown(8) == pytest.approx(1 / 0.7) and step_slowdown(1) == pytest.approx(1 / 0.7)


def test_headroom_defaults_and_symbols():
    # defaults 1.3x and N+1: ceil(9 x 1.3) + 1 = 13; ceil(2 x 1.3) + 1 = ceil(2.6) + 1 = 4
    assert nodes_with_headroom(9) == 13 and nodes_with_headroom(2) == 4
    # 3 x 1.1 = 3.3000000000000003 in floats: the guard keeps it 3.3, ceil 4 (a guard rounding to whole
    # numbers would give 3); 7 x 1.1 = 7.700000000000001 -> 8, + 2 = 10
    assert nodes_with_headroom(3, 1.1, 0) == 4 and nodes_with_headroom(7, 1.1, 2) == 10
    sp = pinned("sympy")
    n = sp.Symbol("n", positive=True, integer=True)
    expr = nodes_with_headroom(n, sp.Rational(13, 10), 1)
    assert expr.subs(n, 9) == 13 and expr.subs(n, 10) == 14


def test_nodes_needed_for_symbols_and_floats():
    # 2,000 / 241 = 8.3 -> 9; a float count of sequences goes through the same ceiling
    assert nodes_needed(2000, 241.0) == 9 and nodes_needed(2000.0, 250) == 8
    assert type(nodes_needed(2000, 241.0)) is int and type(nodes_needed(2000.0, 250)) is int   # whole nodes
    sp = pinned("sympy")
    u = sp.Symbol("u", positive=True, integer=True)
    assert nodes_needed(u, 241).subs(u, 2000) == 9


def test_headroom_guard_ignores_only_what_is_below_a_billionth():
    # The guard rounds to 9 decimals before the ceiling: 1 x (1 + 2e-10) = 1.0000000002 is float noise
    # around 1 node (-> 1); 1 x (1 + 2e-9) = 1.000000002 is a real excess (-> 2)
    assert nodes_with_headroom(1, 1 + 2e-10, 0) == 1
    assert nodes_with_headroom(1, 1 + 2e-9, 0) == 2


def test_an_unknown_model_is_not_fetched_unless_asked():
    # offline by default: an id that is not bundled is refused, with the hint to pass hub=True (--hub)
    from kvlib.config import ConfigError
    with pytest.raises(ConfigError, match=r"^unknown model 'no-such-model': .* add --hub to fetch it"):
        plan_capacity("no-such-model", users=10, context=4096, itl_ms=60)


def test_a_pool_of_exactly_one_sequence_plans_one_per_replica():
    # [kv-math] s8's assumptions with 20,895,760,000 B per GPU: 20,895,760,000 - 17.65e9 - 3e9 = 245,760,000 B,
    # exactly one sequence of 6,000 x 40,960 B. It fits: 3 users need 3 nodes.
    p = plan_capacity("llama-3-70b", users=3, **dict(SEED_003_S8, gpu_memory_bytes=20_895_760_000))
    assert p.kv_pool_bytes_per_gpu == p.kv_bytes_per_sequence_per_gpu == 245_760_000
    assert (p.sequences_per_replica, p.nodes) == (1, 3)


def test_efficiency_enters_the_plan():
    # [kv-math] s8 at 50% efficiency: 76,878,160,000 B / 3.35e12 = 22.9487 ms x 1.3 / 0.5 = 59.67 ms, still
    # under 60 ms: the node keeps its 241 sequences
    p = plan_capacity("llama-3-70b", **dict(SEED_8, efficiency=0.5))
    assert round(p.itl_s * 1e3, 2) == 59.67 and p.sequences_per_node == 241


def test_missed_target_on_a_slow_gpu():
    # 1e12 B/s: (17.65e9 + 245.76e6) / 1e12 = 17.896 ms x 1.3 / 0.7 = 33.23 ms for one sequence > 30 ms
    with pytest.raises(PlanError, match=r"and one sequence already takes 33\.2 ms per step$"):
        plan_capacity("llama-3-70b", users=10, **dict(SEED_003_S8, itl_ms=30, bandwidth_bytes_per_s=1e12))


def test_sequences_under_itl_at_the_bandwidth_bound():
    # no slowdown given: (0.06 x 3.35e12 - 17.65e9) / 245.76e6 = 183.35e9 / 245.76e6 = 746.06 -> 746
    assert sequences_under_itl(0.06, 17.65e9, 245_760_000, 3.35e12) == 746


def test_hub_is_asked_only_when_hub_is_true(monkeypatch):
    # The Hub fetch replaced by a stand-in that hands back Llama 3.1 8B's config (offline): hub=True plans it
    # (131,072 B per token, 16,384 per GPU under tp 8)
    import kvlib.config
    monkeypatch.setattr(kvlib.config, "_fetch_from_hub",
                        lambda repo_id: (kvlib.bundled_config("llama-3.1-8b"), f"hub:{repo_id}"))
    p = plan_capacity("someone/llama-copy", users=10, context=4096, itl_ms=60, hub=True)
    assert (p.model, p.kv_bytes_per_token, p.kv_bytes_per_token_per_gpu) == ("someone/llama-copy", 131_072, 16_384)


# --- [corrections 05-09]: the p95 margin, the all-reduce latency, vLLM's max_num_seqs cap ---------------------------------
def test_prefill_chunk_and_allreduce_by_hand():
    from kvlib.planner import prefill_chunk_seconds
    # 2 x 8.03e9 x 1,024 / (1 x 989e12 x 0.5) = 33.26 ms; on 4 GPUs a quarter of it
    assert prefill_chunk_seconds(8.03e9, 1024, 1, 989e12) == pytest.approx(0.033255, rel=1e-4)
    assert prefill_chunk_seconds(8.03e9, 1024, 4, 989e12) == pytest.approx(0.033255 / 4, rel=1e-4)
    # two all-reduces per layer: 32 layers x 2 x 15 us = 0.96 ms at TP 2; none on one GPU
    assert allreduce_seconds_per_step(32, 2, 15e-6) == pytest.approx(0.96e-3)
    assert allreduce_seconds_per_step(32, 1, 15e-6) == 0


def test_the_allreduce_is_modelled_by_default_and_the_fraction_is_a_bound():
    # [kv-math] s8's plan without its 30%: 76,878,160,000 B / 3.35e12 / 0.7 = 32.78 ms, plus two all-reduces per
    # layer, 2 x 80 x 20 us = 3.2 ms: 35.98 ms. The fraction charges 76.878e9 / 3.35e12 x 0.3 / 0.7 = 9.84 ms.
    args = {k: v for k, v in SEED_8.items() if k != "tp_overhead"}
    p = plan_capacity("llama-3-70b", **args)
    assert (p.tp_overhead, p.allreduce_rule, p.allreduce_latency_s) == (None, "modelled", 20e-6)
    assert p.allreduce_s_per_step == pytest.approx(3.2e-3)
    assert p.itl_s_at_memory_limit == pytest.approx(76_878_160_000 / 3.35e12 / 0.7 + 3.2e-3)
    assert round(p.itl_s * 1e3, 2) == 35.98
    # by latency: ((0.060 - 0.0032) x 0.7 x 3.35e12 - 17.65e9) / 245.76e6 = 115.546e9 / 245.76e6 = 470.15 -> 470
    assert p.sequences_per_replica_by_latency == 470
    # memory binds either way: 241 per node, 9 nodes, 13 deployed
    assert (p.sequences_per_node, p.nodes, p.nodes_with_headroom) == (241, 9, 13)
    bound = plan_capacity("llama-3-70b", **SEED_8)
    assert (bound.allreduce_rule, bound.allreduce_s_per_step, bound.allreduce_latency_s) == (
        "pessimistic_fraction", 0, None)
    assert bound.itl_s - p.itl_s == pytest.approx(76_878_160_000 / 3.35e12 * 0.3 / 0.7 - 3.2e-3)
    assert p.to_dict()["allreduce_rule"] == "modelled" and bound.to_dict()["allreduce_rule"] == "pessimistic_fraction"


def test_where_latency_binds_the_rule_moves_the_node_count():
    # [kv-math] s8 at a 30 ms target. Modelled: ((0.030 - 0.0032) x 0.7 x 3.35e12 - 17.65e9) / 245.76e6
    # = 45.196e9 / 245.76e6 = 183.9 -> 183 sequences, ceil(2,000 / 183) = 11 nodes, ceil(11 x 1.3) + 1 = 16.
    # Under the 30% bound: (0.030 x 0.7 / 1.3 x 3.35e12 - 17.65e9) / 245.76e6 = 148.4 -> 148, 14 nodes, 20.
    args = {k: v for k, v in SEED_8.items() if k != "tp_overhead"}
    p = plan_capacity("llama-3-70b", **dict(args, itl_ms=30))
    bound = plan_capacity("llama-3-70b", **dict(SEED_8, itl_ms=30))
    assert (p.limited_by, p.sequences_per_replica, p.nodes, p.nodes_with_headroom) == ("latency", 183, 11, 16)
    assert (bound.limited_by, bound.sequences_per_replica, bound.nodes, bound.nodes_with_headroom) == (
        "latency", 148, 14, 20)
    # one GPU has nothing to reduce, under either rule
    one = plan_capacity("llama-3.1-8b", users=10, context=4096, itl_ms=60, tp=1)
    assert (one.allreduce_rule, one.allreduce_s_per_step) == ("modelled", 0)


def test_itl_margin_is_taken_off_the_target():
    # [kv-math] s8 at 60 ms less an 18 ms margin: (0.042 x 3.35e12 x 0.7 / 1.3 - 17.65e9) / 245.76e6 = 236.5 -> 236,
    # below memory's 241: latency binds
    p = plan_capacity("llama-3-70b", **SEED_8, itl_margin_ms=18)
    assert p.sequences_per_replica_by_latency == 236 and p.limited_by == "latency" and p.itl_margin_s == 0.018
    assert p.sequences_per_replica_by_memory == 241 and p.nodes == math.ceil(2000 / 236) == 9
    with pytest.raises(PlanError, match="itl_margin_ms"):
        plan_capacity("llama-3-70b", **dict(SEED_8, itl_ms=10), itl_margin_ms=10)


def test_max_num_seqs_caps_a_replica():
    # Qwen2.5 3B at 256 tokens: 2 x 36 x 2 x 128 x 2 x 256 = 9,437,184 B a sequence; an H100's pool holds
    # thousands, vLLM schedules 1,024 (get_batch_defaults: >= 70 GiB, not an A100); an A100 256
    h100 = plan_capacity("qwen2.5-3b", users=5000, context=256, itl_ms=200, gpu="H100-SXM", tp=1)
    assert h100.kv_bytes_per_sequence_per_gpu == 2 * 36 * 2 * 128 * 2 * 256
    assert h100.sequences_per_replica_by_memory > 1024 and h100.sequences_per_replica_by_latency > 1024
    assert (h100.max_num_seqs, h100.sequences_per_replica, h100.limited_by) == (1024, 1024, "max_num_seqs")
    a100 = plan_capacity("qwen2.5-3b", users=5000, context=256, itl_ms=200, gpu="A100-80GB", tp=1)
    assert (a100.max_num_seqs, a100.sequences_per_replica, a100.sequences_per_node) == (256, 256, 8 * 256)
    assert plan_capacity("qwen2.5-3b", users=5000, context=256, itl_ms=200, tp=1,
                         max_num_seqs=2048).sequences_per_replica == 2048


def test_cli_plan_one_node_is_singular(capsys):
    # [interview 2026 §1] "1 nodes": Llama 3.1 8B, 4 users of 1,000 tokens fit one H100 node many times over
    # (131,072 B a token x 1,000 = 0.13 GB each); spike x1 and no spare node leave ceil(1 x 1) + 0 = 1 node.
    # A request rate of 0.1/s of 100-token prompts: one prefill step of the 512-token budget, one sequence each.
    users = ["plan", "meta-llama/Llama-3.1-8B", "--users", "4", "--context", "1000", "--itl-ms", "50",
             "--gpu", "H100-SXM", "--spike", "1", "--redundancy", "0"]
    assert main(users) == 0
    out = capsys.readouterr().out
    assert "ceil(1 x 1) + 0 = 1 node (8 x H100-SXM)" in out and "+0 nodes;" in out and "; 1 node:" in out
    rate = ["plan", "meta-llama/Llama-3.1-8B", "--rate", "0.1", "--prompt-tokens", "100", "--output-tokens", "100",
            "--ttft-ms", "2000", "--itl-ms", "50", "--gpu", "H100-SXM", "--spike", "1", "--redundancy", "0"]
    assert main(rate) == 0
    out = capsys.readouterr().out
    assert "1 node (8 x H100-SXM)" in out and "1 step for the prompt" in out
    assert not re.search(r"\b1 (nodes|steps|sequences|replicas)\b", out) and "(s)" not in out, out


# --- a mixture of experts' step reads only the experts its sequences touch ----------------------------------------
def test_a_moe_plan_reads_the_experts_its_sequences_touch():
    # Qwen3-30B-A3B on one H100 (3.35 TB/s, efficiency 0.7, TP 1: no all-reduce), 4,096-token sequences, ITL 20 ms.
    # n sequences touch 128 (1 - (15/16)^n) of the 128 experts in each of 48 layers (4,718,592 parameters each), beside
    # 1,541,093,376 dense parameters, bf16; each sequence's cache 98,304 x 4,096 = 402,653,184 B. Reading every expert
    # (61.06 GB) and one sequence takes 26.2 ms: the old rule refused the plan. By hand the largest n within 20 ms:
    def itl(n):
        touched = 128 * (1 - (15 / 16) ** n)
        return (2 * (1_541_093_376 + 48 * touched * 4_718_592) + n * 402_653_184) / 3.35e12 / 0.7
    assert (2 * (1_541_093_376 + 48 * 128 * 4_718_592) + 402_653_184) / 3.35e12 / 0.7 > 0.026
    assert itl(16) <= 0.020 < itl(17)
    p = plan_capacity("qwen3-30b-a3b", users=200, context=4096, itl_ms=20, gpu="H100-SXM", tp=1, gpus_per_node=1)
    assert p.sequences_per_replica_by_latency == p.sequences_per_replica == 16
    assert p.itl_s == pytest.approx(itl(16), rel=1e-9)
    assert p.weight_bytes_per_gpu == 2 * (1_541_093_376 + 48 * 128 * 4_718_592)      # memory still holds them all


def test_a_deepseek_plan_step_reads_the_experts_touched():
    # DeepSeek-V3 in fp8 on 8 x H200 (4.8 TB/s), 200 users of 4,096 tokens, ITL 50 ms: memory holds 177 sequences a
    # replica; they touch 256 (1 - (31/32)^177) = 255.07 of 256 experts in each of 58 layers (44,040,192 parameters);
    # the GPU's share of the weights, ceil(671,026,404,352 / 8), scaled by the parameters read, (17,117,633,536 +
    # 58 x 255.07 x 44,040,192) / 671,026,404,352; MLA's 70,272 B a token whole on every GPU; two all-reduces of
    # 20 us in each of 61 layers: 42.48 ms (every expert: 42.57 ms)
    p = plan_capacity("deepseek-v3", users=200, context=4096, itl_ms=50, gpu="H200", tp=8, weight_dtype_bytes=1)
    assert p.sequences_per_replica == p.sequences_per_replica_by_memory == 177
    touched = 256 * (1 - (31 / 32) ** 177)
    read = -(-671_026_404_352 // 8) * (671_026_404_352 - 58 * 256 * 44_040_192 + 58 * touched * 44_040_192) \
        / 671_026_404_352
    itl = (read + 177 * 70_272 * 4096) / 4.8e12 / 0.7 + 2 * 61 * 20e-6
    assert p.itl_s == pytest.approx(itl, rel=1e-9)
    assert round(p.itl_s * 1e3, 2) == 42.48


def test_the_plan_report_names_the_experts_a_moe_step_reads(capsys):
    # step 4's bytes add up. The CLI holds the checkpoint's bytes: 2 x 30,532,122,624 parameters plus the rotary cache
    # (40,960 positions x 128 x 2 B) = 61,074,731,008 B; the 42 sequences memory holds touch 128 (1 - (15/16)^42) =
    # 117.9 experts a layer, so a step reads that share of the parameters, 57.22 GB, plus 42 caches of 0.403 GB
    assert main(["plan", "qwen3-30b-a3b", "--users", "200", "--context", "4096", "--itl-ms", "20", "--tp", "1",
                 "--gpu", "H100-SXM", "--gpus-per-node", "1"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("4. bytes per step"))
    held = 2 * (1_541_093_376 + 48 * 128 * 4_718_592) + 40_960 * 128 * 2
    assert held == 61_074_731_008
    share = (1_541_093_376 + 48 * 128 * (1 - (15 / 16) ** 42) * 4_718_592) / (1_541_093_376 + 48 * 128 * 4_718_592)
    assert f"{held * share / 1e9:.2f} GB" in row and round(held * share / 1e9, 2) == 57.22
    assert "(the experts its sequences touch)" in row and "+ 42 x 0.403 GB" in row
