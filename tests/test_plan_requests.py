"""kvlib.planner.plan_requests and `kvlib plan --rate`: a plan from a request rate, lengths and two SLOs.

Hand figures: Llama 3.3 70B (70,553,706,496 parameters; untied 128,256 x 8,192 table, so a prompt token costs
2 x 69,503,033,344 FLOPs; 80 layers; 327,680 B of KV a token, 40,960 B per GPU at TP 8) on 8 x H100.
"""

import json
import math

import pytest

from kvlib.cli import main
from kvlib.planner import BINDING_CONSTRAINTS, PlanError, itl_seconds, plan_requests

P_M = 70_553_706_496 - 128_256 * 8192        # 69,503,033,344
BASE = dict(rate_per_s=10, prompt_tokens=2000, output_tokens=300, itl_ms=50, ttft_ms=1000)


def test_littles_law_and_the_p95_margin():
    p = plan_requests("llama-3.3-70b", **BASE)
    # W = 1 s + 300 x 50 ms = 16 s; N = 10 x 16 = 160 requests in flight, 2,000 + 150 tokens each on average
    assert (p.seconds_in_system, p.concurrency, p.mean_context) == (16.0, 160.0, 2150)
    assert p.decode.users == 160 and p.decode.context == 2150
    # one 512-token chunk on 8 GPUs at 50% of 989e12: 2 x 69,503,033,344 x 512 / 3.956e15 = 17.99 ms
    assert p.itl_margin_s == pytest.approx(2 * P_M * 512 / (8 * 989e12 * 0.5)) and round(p.itl_margin_s * 1e3, 2) == 17.99
    # the all-reduce is modelled, not the 30% stand-in: 2 x 80 layers x 20 us = 3.2 ms a step
    assert p.decode.tp_overhead is None and p.decode.allreduce_s_per_step == pytest.approx(3.2e-3)


def test_prefill_capacity_binds_at_ten_requests_a_second():
    p = plan_requests("llama-3.3-70b", **BASE)
    assert (p.nodes_for_decode, p.nodes, p.binding_constraint) == (1, 2, "prefill")
    d = p.decode

    def capacity(n):      # prompt tokens a replica prefills per second with n sequences: (512 - n) per step
        decode_s = (d.weight_bytes_per_gpu + n * d.kv_bytes_per_sequence_per_gpu) / 3.35e12 / 0.7 + 3.2e-3
        chunk_s = 2 * P_M * (512 - n) / (8 * 989e12 * 0.5)
        return (512 - n) / (decode_s + chunk_s)

    # one node: 160 sequences, 20,000 prompt tokens/s needed, about 12,000 supplied; two: 80 each, 10,000 needed
    assert capacity(160) < 20_000 and capacity(80) >= 10_000
    assert p.sequences_per_replica == 80 and p.prefill_tokens_per_s_per_replica == pytest.approx(capacity(80))
    assert p.nodes_with_headroom == math.ceil(2 * 1.3) + 1 == 4


def test_ttft_at_p95_counts_steps_queue_free():
    p = plan_requests("llama-3.3-70b", **BASE)
    d = p.decode
    # 2,000 prompt tokens at (512 - 80) a step beside 80 decodes: 5 steps of the decode step, plus the prompt's
    # compute: 2 x P_m x 2,000 + 2 x 64 heads x 256 x 80 layers x 2,000 x 2,001 / 2 FLOPs over 3.956e15
    decode_s = itl_seconds(d.weight_bytes_per_gpu, d.kv_bytes_per_sequence_per_gpu, 80, 3.35e12, 1 / 0.7) + 3.2e-3
    compute = (2 * P_M * 2000 + 2 * 64 * 256 * 80 * (2000 * 2001 // 2)) / (8 * 989e12 * 0.5)
    assert p.prefill_steps_p95 == 5 and p.ttft_s_p95 == pytest.approx(5 * decode_s + compute)


def test_the_pessimistic_bound_is_reachable_and_named():
    p = plan_requests("llama-3.3-70b", **BASE)
    assert p.allreduce_rule == "modelled" and p.to_dict()["allreduce_rule"] == "modelled"
    bound = plan_requests("llama-3.3-70b", **BASE, tp_overhead=0.3)
    d = bound.decode
    assert (bound.allreduce_rule, d.tp_overhead, d.allreduce_s_per_step) == ("pessimistic_fraction", 0.3, 0)
    # the TTFT's decode steps stretched by 1.3 / 0.7 instead of 3.2 ms added: ceil(2,000 / (512 - n)) steps
    n = bound.sequences_per_replica
    decode_s = (d.weight_bytes_per_gpu + n * d.kv_bytes_per_sequence_per_gpu) / 3.35e12 * 1.3 / 0.7
    compute = (2 * P_M * 2000 + 2 * 64 * 256 * 80 * (2000 * 2001 // 2)) / (8 * 989e12 * 0.5)
    assert bound.prefill_steps_p95 == -(-2000 // (512 - n))
    assert bound.ttft_s_p95 == pytest.approx(bound.prefill_steps_p95 * decode_s + compute)


@pytest.mark.parametrize("model, kw, binding", [
    # a 16K-token context on one H100 per replica: the pool holds 30 sequences, the step allows 68
    ("llama-3.1-8b", dict(rate_per_s=0.5, prompt_tokens=14000, output_tokens=2000, itl_ms=80, ttft_ms=10000, tp=1),
     "memory"),
    # a 15 ms ITL on one H100: 9 sequences by the step, 601 by memory
    ("llama-3.1-8b", dict(rate_per_s=20, prompt_tokens=500, output_tokens=500, itl_ms=15, ttft_ms=2000, tp=1,
                          token_budget=256), "itl"),
    # a 20,000-token p95 prompt under a 3 s TTFT: fewer decodes per replica, so larger chunks
    ("llama-3.3-70b", dict(rate_per_s=1, prompt_tokens=2000, prompt_tokens_p95=20000, output_tokens=300, itl_ms=50,
                           ttft_ms=3000), "ttft"),
    ("llama-3.3-70b", BASE, "prefill"),
])
def test_each_binding_constraint(model, kw, binding):
    p = plan_requests(model, **kw)
    assert p.binding_constraint == binding and binding in BINDING_CONSTRAINTS
    d = p.decode
    if binding == "memory":
        assert p.max_sequences_per_replica == d.sequences_per_replica_by_memory < d.sequences_per_replica_by_latency
    if binding == "itl":
        assert p.max_sequences_per_replica == d.sequences_per_replica_by_latency < d.sequences_per_replica_by_memory
    if binding == "ttft":
        assert p.max_sequences_per_replica < min(d.sequences_per_replica_by_memory, d.sequences_per_replica_by_latency)
        assert p.ttft_s_p95 <= 3.0


def test_prefix_hits_shorten_the_prefill():
    hit = plan_requests("llama-3.3-70b", **dict(BASE, prefix_hit_rate=0.5))
    # half of each prompt from the cache: 1,000 tokens to prefill, 10,000 a second; one node keeps up
    assert hit.nodes == 1 and hit.prefill_steps_p95 < plan_requests("llama-3.3-70b", **BASE).prefill_steps_p95


@pytest.mark.parametrize("kw, field", [
    (dict(rate_per_s=0), "rate_per_s"), (dict(prompt_tokens_p95=10), "prompt_tokens_p95"),
    (dict(prefix_hit_rate=1), "prefix_hit_rate"), (dict(ttft_ms=-1), "ttft_ms"),
    (dict(ttft_ms=10), "ttft_ms"), (dict(token_budget=8192), "token_budget"),
])
def test_bad_input_names_the_field(kw, field):
    with pytest.raises(PlanError, match=field):
        plan_requests("llama-3.3-70b", **dict(BASE, **kw))


def _plan(*args):
    return main(["plan", "llama-3.3-70b", "--gpu", "H100", *args])


def test_cli_rate_json_reports_the_binding_constraint(capsys):
    assert _plan("--rate", "10", "--prompt-tokens", "2000", "--output-tokens", "300", "--itl-ms", "50",
                 "--ttft-ms", "1000", "--json") == 0
    d = json.loads(capsys.readouterr().out)
    assert d["binding_constraint"] == "prefill" and d["concurrency"] == 160.0 and d["nodes"] == 2
    assert _plan("--rate", "10", "--prompt-tokens", "2000", "--output-tokens", "300", "--itl-ms", "50",
                 "--ttft-ms", "1000") == 0
    out = capsys.readouterr().out
    assert "10 req/s x (1,000 ms + 300 x 50 ms) = 160.0 requests in flight" in out and "prefill binds" in out
    assert "all-reduce modelled: 2 a layer at 20 us each, 3.20 ms a step" in out
    # the same flag as the users form for the bound, and the rule in the JSON
    assert _plan("--rate", "10", "--prompt-tokens", "2000", "--output-tokens", "300", "--itl-ms", "50",
                 "--ttft-ms", "1000", "--tp-overhead", "0.3", "--json") == 0
    assert json.loads(capsys.readouterr().out)["allreduce_rule"] == "pessimistic_fraction"


@pytest.mark.parametrize("args, message", [
    (["--rate", "10", "--prompt-tokens", "2000", "--itl-ms", "50"], "--output-tokens is needed with --rate"),
    (["--rate", "10", "--users", "5", "--itl-ms", "50"], "not both"),
    (["--itl-ms", "50"], "give --users and --context, or --rate"),
    (["--rate", "x", "--itl-ms", "50"], "--rate"),
    (["--rate", "1", "--prompt-tokens", "2000", "--prompt-tokens-p95", "30000", "--output-tokens", "300",
      "--itl-ms", "50", "--ttft-ms", "1500"], "ttft_ms"),
])
def test_cli_errors_are_one_line(capsys, args, message):
    assert _plan(*args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_users_form_stays():
    assert _plan("--users", "2000", "--context", "6144", "--itl-ms", "60") == 0
