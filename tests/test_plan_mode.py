"""Plan mode (``kvcoach.plan_mode``, ``kvlib drill --plan``): kvlib's plan against hand arithmetic, the CLI driven
with scripted stdin (a right plan scores the full rubric and is recorded; a slipped step is named where it enters;
bad input is one line and asked again), the assumptions asked, not echoed, and the plan's slips in the catalogue.

Scenario 2 (seed 2) states: Llama 3.1 8B (32 layers, 8 KV heads of 128, bf16; 8,030,261,248 parameters) on
nodes of 8 x H100-SXM (CUDA reports 85,018,877,624 bytes; 3.35 TB/s; 989 bf16 TFLOP/s), tp 1; 100 requests/s,
prompts of 4,000 tokens (12,000 at p95), 600 output tokens (1,200 at p95), 60% prefix hits; TTFT 2,000 ms,
ITL 50 ms; vLLM takes 0.9 of GPU memory, 3 GB per GPU of overhead; one spare node.
"""

from __future__ import annotations

import io
import json
import math
import sys

import pytest

from kvcoach import plan_mode as pm
from kvcoach import drill_history as H
from kvcoach.slips import QUANTITIES, diagnose
from kvlib.cli import main
from drill_terminal import Terminal

ASSUMED = "efficiency=0.7 allreduce_us=20 spike=1.3"
# Hand arithmetic, scenario 2:
KV_PER_TOKEN = 2 * 32 * 8 * 128 * 2                                   # 131,072 B
WEIGHTS = 8_030_261_248 * 2                                           # 16,060,522,496 B
POOL = math.ceil(85_018_877_624 * 0.9) - WEIGHTS - 3 * 10**9           # 76,516,989,862 - ... = 57,456,467,366 B
PER_SEQUENCE = KV_PER_TOKEN * (4000 + 600 // 2)                       # mean context 4,300 tokens: 563,609,600 B
SEQUENCES = POOL // PER_SEQUENCE                                      # 101.9 -> 101 (memory binds, see below)
IN_FLIGHT = 100 * (2.0 + 600 * 0.050)                                 # Little: 100/s x 32 s = 3,200 requests
NODES = -(-3200 // (8 * SEQUENCES))                                   # 8 replicas of 101: 3,200 / 808 = 3.96 -> 4
DEPLOY = math.ceil(NODES * 1.3) + 1                                   # 5.2 -> 6, + 1 spare = 7
# Memory binds: even with the largest p95 margin (one 512-token chunk, 2 x 8.03e9 x 512 / (989e12 x 0.5) = 16.6 ms)
# the ITL allows floor(((0.050 - 0.0166) x 3.35e12 x 0.7 - 16.06e9) / 563.6e6) = 110 > 101 sequences; the p95
# prompt's 4,800 uncached tokens take ceil(4,800 / (512 - 101)) = 12 steps of about 31 ms, far inside 2 s; and
# 4 nodes prefill 100 x 1,600 uncached tokens/s at (512 - 101) tokens per ~40 ms step per replica (~10K/s x 32).
RIGHT = [ASSUMED, str(KV_PER_TOKEN), str(POOL), str(SEQUENCES), "memory", str(NODES), str(DEPLOY), str(IN_FLIGHT)]




def plan_cli(monkeypatch, capsys, lines, *args, terminal=False):
    monkeypatch.setattr(sys, "stdin", (Terminal if terminal else io.StringIO)("".join(f"{x}\n" for x in lines)))
    code = main(["drill", "--plan", "--seed", "2", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_scenario_2_plan_matches_hand_arithmetic():
    s = pm.PlanSession(pm.draw(2), clock=lambda: 0.0)
    assert (s.scenario.model, s.scenario.gpu, s.scenario.tp, s.scenario.rate_per_s) == (
        "meta-llama/Llama-3.1-8B", "H100-SXM", 1, 100)
    assert s.answer(ASSUMED).ok
    assert [s.expected(k) for k in ("kv_per_token", "pool", "sequences", "binding", "nodes", "headroom", "sanity")] \
        == [131_072, 57_456_467_366, 101, "memory", 4, 7, 3200.0]
    assert (KV_PER_TOKEN, POOL, SEQUENCES, NODES, DEPLOY, IN_FLIGHT) == (131_072, 57_456_467_366, 101, 4, 7, 3200.0)
    assert "79.18 GiB as CUDA reports it" in s.scenario.text() and "12,000 at p95" in s.scenario.text()


def test_cli_right_plan_scores_the_full_rubric_and_is_recorded(monkeypatch, capsys, history_file):
    code, out, err = plan_cli(monkeypatch, capsys, RIGHT, terminal=True)
    assert code == 0 and err == ""
    assert out.count("correct: ") == 7 and "not quite" not in out
    assert "rubric 4/4: assumptions stated 100%; steps right 100%; binding constraint named; sanity line right." in out
    assert "kvlib's plan: 7 nodes of 8 x H100-SXM (binding: memory)." in out
    assert "holds up to" not in out and "hold up to 3,232 sequences against 3,200.0 in flight: it holds." in out
    attempts = json.loads(history_file.read_text())["attempts"]
    assert [(a["topic"], a["correct"], a["slips"], a["rubric"], a["target"]) for a in attempts] == [
        ("plan", True, [], {"assumptions": 1, "steps": 1, "binding": 1, "sanity": 1}, 600)]
    # the scenario asked, as the module docstring states scenario 2: its seed, model, node, rate
    assert attempts[0]["scenario"] == "scenario 2: meta-llama/Llama-3.1-8B, 8 x H100-SXM (TP 1), 100 requests/s"
    code, out = main(["drill", "--stats"]), capsys.readouterr().out
    plans = out[out.index("plan (date)"):].splitlines()
    assert code == 0
    assert plans[1].split()[3:] == ["scenario", "2:", "meta-llama/Llama-3.1-8B,", "8", "x", "H100-SXM", "(TP", "1),",
                                    "100", "requests/s", "1", "1", "1", "1", "4/4"]


def test_cli_piped_plan_is_a_replay_and_not_recorded(monkeypatch, capsys, history_file):
    code, out, _ = plan_cli(monkeypatch, capsys, RIGHT)
    assert code == 0 and "rubric 4/4" in out and f"> {ASSUMED}\n" in out        # echoed: not typed at a terminal
    assert not history_file.exists()


def test_cli_slipped_steps_are_named_where_they_enter(monkeypatch, capsys, history_file):
    no_utilization = 85_018_877_624 - WEIGHTS - 3 * 10**9        # the whole reported memory: 65,958,355,128 B
    lines = [ASSUMED, str(KV_PER_TOKEN), f"{no_utilization / 1e9:.2f} GB", str(SEQUENCES), "itl", str(NODES),
             str(NODES), f"{100 * 600 * 0.050:g}"]                # no headroom; W without the TTFT: 3,000
    code, out, _ = plan_cli(monkeypatch, capsys, lines, terminal=True)
    assert code == 0
    step2 = out.split("step 2/7")[1].split("step 3/7")[0]
    assert "not quite [no_utilization]" in step2 and "utilization cap (0.9) is missing" in step2
    assert "not quite [binding_misnamed]: the constraint that sets the node count here is memory" in out
    step6 = out.split("step 6/7")[1].split("step 7/7")[0]
    assert "not quite [no_headroom]" in step6
    assert "not quite [ttft_left_out_of_w]" in out.split("step 7/7")[1]
    assert "rubric 1.6/4: assumptions stated 100%; steps right 60%; binding constraint missed; sanity line missed." \
        in out
    assert "slips: no_utilization, binding_misnamed, no_headroom, ttft_left_out_of_w" in out
    (attempt,) = json.loads(history_file.read_text())["attempts"]
    assert attempt["slips"] == ["no_utilization", "binding_misnamed", "no_headroom", "ttft_left_out_of_w"]
    assert attempt["rubric"] == {"assumptions": 1, "steps": 0.6, "binding": 0, "sanity": 0} and not attempt["correct"]


def test_cli_bad_input_is_one_line_and_asked_again(monkeypatch, capsys, history_file):
    lines = ["efficiency=fast", "efficiency=1.5", "latency=3", ASSUMED, "lots", str(KV_PER_TOKEN), "13,1072",
             str(POOL), str(SEQUENCES), "throughput", "memory", str(NODES), str(DEPLOY), str(IN_FLIGHT)]
    code, out, err = plan_cli(monkeypatch, capsys, lines)
    assert code == 0 and err == "" and "Traceback" not in out
    for line in ("efficiency: expected a number, got 'fast'",
                 "efficiency: 1.5 is outside the plausible range 0.3 to 1 (a share: a decimal or a percentage)",
                 "latency: not an assumption plan mode asks (efficiency, allreduce_us, spike)",
                 "kv_per_token: expected a number, got 'lots'.",
                 "pool: '13,1072': a comma groups thousands (131,072); decimals take a point.",
                 "binding: expected one of memory, itl, ttft, prefill, got 'throughput'"):
        assert f"\n{line}\n" in out, line
    assert "rubric 4/4" in out                                  # unreadable lines are not scored


def test_cli_end_of_input_stops_and_scores_what_was_answered(monkeypatch, capsys, history_file):
    code, out, _ = plan_cli(monkeypatch, capsys, RIGHT[:3])
    assert code == 0 and "(end of input)" in out
    assert "rubric 1.4/4: assumptions stated 100%; steps right 40%; binding constraint missed; sanity line missed." \
        in out


@pytest.mark.parametrize("args", [("--topic", "pool"), ("--review",), ("--student", "ada"), ("--stats",),
                                  ("--assumptions",)])
def test_cli_plan_refuses_other_modes_in_one_line(monkeypatch, capsys, args):
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code = main(["drill", "--plan", *args]) if args[0] == "--student" else main(["drill", "--plan", *args])
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "--plan asks one whiteboard plan; it takes no" in err, err


def test_the_open_assumptions_are_asked_not_echoed():
    s = pm.PlanSession(pm.draw(2), clock=lambda: 0.0)
    shown = s.scenario.text() + s.prompt()
    for echoed in ("0.7", "70%", "1.3", "30%", "20 µs", "20us"):
        assert echoed not in shown, echoed                       # kvlib's defaults are never shown before
    r = s.answer("efficiency=0.8")                              # one of three stated
    assert r.scored and not r.ok
    assert "✗ spike: not stated" in r.feedback and "The plan below uses kvlib's 1.3." in r.feedback
    assert s.rubric()["assumptions"] == pytest.approx(1 / 3, abs=1e-3)
    # the plan is made with the stated efficiency: 0.8 of 3.35 TB/s lets more sequences under the ITL
    assert s.plan.decode.efficiency == 0.8


def test_stated_assumptions_change_kvlib_s_plan():
    # spike 2.0 instead of 1.3: 4 nodes x 2 = 8, + 1 spare = 9 (hand arithmetic)
    s = pm.PlanSession(pm.draw(2), clock=lambda: 0.0)
    s.answer("efficiency=70% allreduce_us=0.02ms spike=100%")
    assert s.assumed == {"efficiency": 0.7, "allreduce_us": 20.0, "spike": 2.0}
    assert s.expected("headroom") == 4 * 2 + 1


def test_the_clock_and_the_rubric_with_a_fake_clock():
    ticks = iter([0.0, 10.0, 700.0, 700.0, 700.0, 700.0, 700.0, 700.0, 700.0, 700.0])
    s = pm.PlanSession(pm.draw(2), clock=lambda: next(ticks))
    assert s.elapsed() == 10.0
    for line in RIGHT:
        s.answer(line)
    assert s.done and s.elapsed() == 700.0
    assert s.summary().endswith("time 700 s (target 600 s, 100 s over)")
    history = H.History()
    s.record(history, history.new_session("cli"), now=1.0)
    assert history.attempts[0]["rubric"] == {"assumptions": 1, "steps": 1, "binding": 1, "sanity": 1}
    assert history.attempts[0]["seconds"] == 700.0
    with pytest.raises(pm.PlanModeError, match="^plan: the plan is complete"):
        s.answer("1")


# --- the plan's slips in the catalogue, on a small case worked by hand ----------------------------------------
def test_plan_pool_slips_by_hand():
    # M = 1,000, u = 0.9, W = 400 over tp 2, O = 50, label 1,100: ceil(900) - 200 - 50 = 650
    i = dict(gpu_bytes=1000, label_bytes=1100, utilization=0.9, weight_bytes=400, other_bytes=50, tp=2)
    assert QUANTITIES["plan_pool_bytes_per_gpu"](i) == (650, [
        ("weights_not_split", 450),      # 900 - 400 - 50
        ("no_utilization", 750),         # 1,000 - 200 - 50
        ("missing_overhead", 700),       # 900 - 200
        ("label_memory", 740)])          # ceil(990) - 200 - 50


def test_plan_sequences_nodes_headroom_and_little_slips_by_hand():
    seq = dict(sequences_per_replica=40, sequences_by_memory=90, sequences_by_itl=60, max_num_seqs=1024,
               token_budget=512, itl_margin_ms=5.0, allreduce_ms=3.2, sequences_by_itl_without_margin=70,
               sequences_by_itl_without_allreduce=65, sequences_before_ttft=60)
    # the TTFT cut took 60 to 40; ITL without the 5 ms margin 70, without the all-reduce 65; memory 90
    assert QUANTITIES["plan_sequences_per_replica"](seq) == (40, [
        ("ttft_cut_left_out", 60), ("itl_margin_left_out", 70), ("allreduce_left_out", 65),
        ("non_binding_constraint", 90)])
    nodes = dict(nodes=5, users=1000, replicas=2, sequences_per_replica=120, nodes_for_decode=5, gpus_per_node=8,
                 tp=4, rate_per_s=10, prompt_tokens=1000)
    # 1,000 / (2 x 120) = 4.17 -> 5; floor 4; 40 GPUs; one replica a node: 1,000 / 120 = 8.3 -> 9
    assert QUANTITIES["plan_nodes"](nodes) == (5, [("floor_nodes", 4), ("gpus_not_nodes", 40),
                                                   ("missing_replicas", 9)])
    head = dict(nodes=5, spike_factor=1.3, redundancy_nodes=1, gpus_per_node=8)
    # ceil(6.5) + 1 = 8; none 5; floor(6.5) + 1 = 7; ceil(6 x 1.3 = 7.8) = 8 (the same: dropped); 64 GPUs
    assert QUANTITIES["plan_nodes_with_headroom"](head) == (8, [("no_headroom", 5), ("spike_not_rounded_up", 7),
                                                                ("gpus_not_nodes", 64)])
    little = dict(rate_per_s=10, ttft_ms=500, itl_ms=40, output_tokens=200, output_tokens_p95=400)
    got_expected, got = QUANTITIES["plan_concurrency"](little)   # 10 x (0.5 + 200 x 0.04) = 85
    assert got_expected == pytest.approx(85.0)
    assert [k for k, _ in got] == ["ttft_left_out_of_w", "target_ms_as_seconds", "p95_for_mean"]
    assert [v for _, v in got] == pytest.approx([80.0, 80_005.0, 165.0])   # 10 x 8; 10 x (0.5 + 8,000); 10 x 16.5
    d = diagnose("plan_concurrency", 80.0, rel_tol=0.005, unit="requests", **little)
    assert d.slip.key == "ttft_left_out_of_w"


def test_no_plan_slip_falls_within_a_right_answer_s_tolerance():
    """Over 30 scenarios, every slip of every step is at least the step's tolerance away from the right figure."""
    for seed in range(30):
        s = pm.PlanSession(pm.draw(seed), clock=lambda: 0.0)
        s.answer(ASSUMED)
        for key, p in s.problems.items():
            expected, slipped = QUANTITIES[p.quantity](dict(p.inputs))
            for slip, value in slipped:
                assert abs(value - expected) > p._rel_tol() * abs(expected), (seed, key, slip)


def test_no_assumption_stated_scores_zero_and_one_node_holds():
    s = pm.PlanSession(pm.draw(5), clock=lambda: 0.0)
    r = s.answer("")                                            # nothing stated: scored, kvlib's values used
    assert r.scored and r.feedback.count("not stated") == 3 and s.rubric()["assumptions"] == 0
    for key, _, _ in pm.STEPS:
        s.answer(str(s.expected(key)))
    assert s.expected("nodes") == 1
    assert "The plan's 1 node holds up to " in s.results[-1].feedback
    assert s.rubric() == {"assumptions": 0, "steps": 1, "binding": 1, "sanity": 1}


def test_the_itl_margin_left_out_is_named_at_the_sequences_step():
    # Scenario 3: Qwen2.5-7B (28 layers, 4 KV heads of 128; 7,615,616,512 parameters) on an H100-SXM, tp 1,
    # 2,000-token prompts and 600 out (mean context 2,300), ITL 30 ms. Aiming the mean step at the whole 30 ms:
    # floor((0.030 x 3.35e12 x 0.7 - 15,231,233,024) / (57,344 x 2,300)) = floor(55,118,766,976 / 131,891,200) = 417
    margin_left_out = (round(0.030 * 3.35e12 * 0.7) - 7_615_616_512 * 2) // (2 * 28 * 4 * 128 * 2 * 2300)
    assert margin_left_out == 417
    s = pm.PlanSession(pm.draw(3), clock=lambda: 0.0)
    s.answer(ASSUMED)
    s.answer(str(2 * 28 * 4 * 128 * 2))
    s.answer(str(s.expected("pool")))
    r = s.answer(str(margin_left_out))
    assert not r.ok and r.slips == ("itl_margin_left_out",)
    assert "aim the mean step at the target less that chunk's compute" in r.feedback


def test_prefill_left_out_of_one_node_reads_in_the_singular():
    # [interview 2026 §1] "1 nodes": the sequences fit one node, the prompts need two: 1 is prefill_left_out
    nodes = dict(nodes=2, users=100, replicas=2, sequences_per_replica=120, nodes_for_decode=1, gpus_per_node=8,
                 tp=4, rate_per_s=10, prompt_tokens=1000)
    d = diagnose("plan_nodes", 1, rel_tol=0.005, unit="nodes", **nodes)
    assert d.slip.key == "prefill_left_out"
    assert "1 nodes" not in d.message and "hold the sequences (1)" in d.message, d.message
