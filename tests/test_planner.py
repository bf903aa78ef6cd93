"""kvlib.planner: seed 003 section 8 step by step, exercise D, properties, and ``kvlib plan``."""

import json
import math
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvlib import load_model
from kvlib.cli import main
from kvlib.planner import PlanError, plan_capacity

# Seed 003 section 8's own assumptions: 80 GB per GPU (its "640 GB" node), no utilization cap,
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
    itl = (w_gpu + seqs * 32_768 * 16384) / 2.039e12 * 1.3 / 0.7
    p = plan_capacity("qwen2.5-32b", users=500, context=16384, itl_ms=80, gpu="A100-80GB")
    assert p.kv_bytes_per_sequence == 2**32 and p.kv_bytes_per_sequence_per_gpu == 2**29
    assert p.sequences_per_node == seqs == 124
    assert p.itl_s == pytest.approx(itl) and itl < 0.080 and round(itl * 1e3, 1) == 68.1
    assert p.nodes == math.ceil(500 / 124) == 5
    assert p.nodes_with_headroom == math.ceil(5 * 1.3) + 1 == 8


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
    (dict(context=10**7), "gpu"),                 # one sequence does not fit a GPU
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


def run(*args):
    proc = subprocess.run([sys.executable, "-m", "kvlib", *args], capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


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
])
def test_cli_plan_bad_input_exits_2_with_one_line(args):
    code, out, err = run(*args)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


# --- headroom: ceil(nodes x spike) + redundancy (seed 003 s8: "9 x 1.3 + 1 = 13 nodes") ----------------
SEED_003_S8 = dict(context=6000, itl_ms=60, gpu="H100-SXM", gpu_memory_bytes=80 * 10**9, utilization=1.0,
                   overhead_bytes_per_gpu=3 * 10**9, weight_bytes=141_200_000_000)


def test_headroom_is_ceil_of_nodes_times_spike_plus_redundancy():
    # Seed 003 s8's node holds 241 sequences; 2,410 users need exactly 10 nodes. Its rule, nodes x 1.3 + 1:
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
