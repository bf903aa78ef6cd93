"""kvcoach.drills' worked steps: Problem.steps(), slip_step(), matching_step().

Every topic's chain ends on the problem's answer; a few chains are checked step by step against
arithmetic written out here; a slip's recomputed value is placed at the step it enters.
"""

import math
import re

import pytest

from kvcoach.drills import TOPICS, Step, _amount, generate
from kvcoach.slips import variants

SEEDS = range(12)


@pytest.mark.parametrize("topic", sorted(TOPICS))
def test_every_chain_ends_on_the_answer(topic):
    for seed in SEEDS:
        p = generate(topic, seed)
        steps = p.steps()
        assert steps and all(isinstance(s, Step) for s in steps)
        assert steps[-1].value == p.answer, (seed, steps[-1])
        assert steps[-1].units == p.units
        for s in steps:
            assert s.label and s.formula and s.substitution and s.units
            if s.units == "bytes":
                assert type(s.value) is int, s          # whole bytes
        assert p.steps() == steps                       # the same chain every time


def test_kv_per_token_steps_by_hand():
    p = generate("kv_per_token", 3)
    L, K, D, b = (p.params[k] for k in ("layers", "kv_heads", "head_dim", "dtype_bytes"))
    one, every = p.steps()
    assert one.value == 2 * K * D * b and every.value == 2 * L * K * D * b
    assert every.substitution == f"2 · {L} · {K} · {D} · {b}"


def test_step_time_steps_by_hand():
    p = generate("step_time", 4)
    q = p.params
    bpt = 2 * q["layers"] * q["kv_heads"] * q["head_dim"] * q["dtype_bytes"]
    kv = bpt * q["seq_len"] * q["batch_size"]
    values = [s.value for s in p.steps()]
    assert values[1:4] == [bpt, kv, q["weight_bytes"] + kv]
    assert values[4] == pytest.approx((q["weight_bytes"] + kv) / q["bandwidth_bytes_per_s"] * 1000, rel=1e-12)


def test_pool_steps_by_hand():
    p = generate("pool", 6)
    q = p.params
    budget = math.floor(q["gpu_bytes"] * q["utilization"])
    left = budget - q["weight_bytes"] - q["other_bytes"]
    assert [s.value for s in p.steps()] == [budget, left, left // q["bytes_per_token"]]


def test_plan_step_steps_by_hand():
    p = generate("plan_step", 2)
    q = p.params
    k_g = max(1, q["kv_heads"] // 8)
    s_g = 2 * q["layers"] * k_g * q["head_dim"] * q["dtype_bytes"] * q["seq_len"]
    per_node = q["pool_bytes_per_gpu"] // s_g
    assert [s.value for s in p.steps()][-3:] == [s_g, per_node, math.ceil(q["users"] / per_node)]


# (topic, slip, label of the step where it enters)
ENTERS = [("kv_per_token", "query_heads", "bytes per token, one layer"),
          ("kv_per_token", "missing_layers", "bytes per token, all layers"),
          ("pool", "label_memory", "the engine's budget"),
          ("step_time", "kv_only_step", "bytes read in one step"),
          ("step_time", "seconds_for_ms", "step time at the bandwidth limit"),
          ("tp_per_gpu", "total_not_per_gpu", "KV heads on each GPU"),
          ("crossover", "crossover_not_divided", "context per sequence at the crossover"),
          ("block_waste", "one_sequence_waste", "expected empty slots, all sequences")]


@pytest.mark.parametrize("topic, key, label", ENTERS)
def test_slip_step_names_where_the_slip_enters(topic, key, label):
    p = generate(topic, 1)
    assert p.steps()[p.slip_step(key)].label == label
    assert p.steps()[p.slip_step(key + "@up")].label == label      # a variant is its catalogue key


def test_slip_step_of_units_combined_and_unknown_slips():
    p = generate("kv_per_token", 1)
    last = len(p.steps()) - 1
    assert p.slip_step("answer_in_gib") == last and p.slip_step("gb_for_gib") == last
    assert p.slip_step("missing_layers+query_heads") == 0
    assert p.slip_step("no_such_slip") is None and p.slip_step("") is None and p.slip_step(None) is None


def test_every_catalogued_slip_of_a_topic_has_its_step():
    # each slip the catalogue recomputes for a drill is placed somewhere in that drill's chain
    from kvcoach.slips import base_key
    for topic in TOPICS:
        for seed in range(6):       # every template of the topic
            p = generate(topic, seed)
            _, slips = variants(p.quantity, unit=p.units, **p.inputs)
            missing = {base_key(k) for k, _ in slips if p.slip_step(k) is None}
            assert not missing, (topic, p.template, sorted(missing))


def test_matching_step_finds_where_the_learner_stopped():
    p = generate("per_sequence", 2)            # Qwen3-0.6B, 2,048 tokens (test_drills)
    one_layer, per_token, _ = p.steps()
    assert p.matching_step(per_token.value) == 1           # forgot the sequence length
    assert p.matching_step(f"{one_layer.value:,}") == 0
    assert p.matching_step(p.answer) is None and p.matching_step("abc") is None
    assert p.matching_step(p.answer + 12345) is None
    p = generate("step_time", 4)
    kv = p.steps()[2].value
    assert p.matching_step(f"{kv / 1e9:.4f} GB") is None   # asked in ms: a byte figure is not read
    assert p.matching_step(p.steps()[4].value * 1.001) is None


def test_a_slip_named_and_the_step_it_matches_agree():
    # missing_layers gives one layer's bytes: the slip enters at step 1 and the number is step 0's
    p = generate("kv_per_token", 0)
    wrong = p.steps()[0].value
    assert p.slip_key(wrong) == "missing_layers"
    assert p.matching_step(wrong) == 0 and p.slip_step("missing_layers") == 1


# --- the steps as ch09's worked problems show them (kvdisplay.serving_problems; [drills §1], [diagnosis §4]) -----
@pytest.mark.parametrize("topic", sorted(TOPICS))
def test_every_step_formula_in_latex_uses_the_notation_table(topic):
    """Each step's formula, as kvdisplay writes it in LaTeX, names only letters of kvlib/notation.py (words and
    functions upright), read by the chapters' own LaTeX scan."""
    from test_notation import math_letters, undefined_in_latex

    from kvdisplay.serving_problems import step_latex
    for seed in SEEDS:
        for step in generate(topic, seed).steps():
            latex = step_latex(step.formula)
            assert undefined_in_latex(latex) == [], (topic, step.formula, latex)
            assert "·" not in latex and "−" not in latex, latex
            assert not re.search(r"(?<!\\)\b(?:eta|alpha|gamma)\b", latex), latex     # Greek as \eta
            if "P" in step.formula.split():
                assert "P" in math_letters(latex)


def test_the_latex_of_a_step_by_hand():
    from kvdisplay.serving_problems import step_latex
    assert step_latex("2 · P · (T − T_c) / (eta · F) · 1000") == \
        r"2 \cdot P \cdot (T - T_{c}) / (\eta \cdot F) \cdot 1000"
    assert step_latex("(1 − alpha^(gamma + 1)) / (1 − alpha)") == r"(1 - \alpha^{(\gamma + 1)}) / (1 - \alpha)"
    assert step_latex("max(read, compute)") == r"\operatorname{max}(\text{read} , \text{compute})"
    assert step_latex("C_h · N / (3600 · tokens/s) · 10^6") == \
        r"C_{h} \cdot N / (3600 \cdot \text{tokens/s}) \cdot 10^6"


def test_ch09s_serving_worked_problems():
    """One worked problem per serving family, each from its own fixed seed (never a learner's): the question
    unfolded, then in the fold every step's substitution, the bold result (the last step, its unit) and a
    sanity line; nothing of the answer before the fold."""
    import re

    from kvdisplay.serving_problems import HEADINGS, SERVING_SEEDS, drill_worked_problem, serving_worked_problem_views
    from kvcoach.drills import GRADED_TOPICS, _fmt

    from kvcoach.drills import FAMILIES_2026
    serving = [t for t in TOPICS if t not in GRADED_TOPICS and t not in
               ("per_sequence", "block_waste", "fp8") and t not in FAMILIES_2026]   # the cache-size practice topics
    assert list(SERVING_SEEDS) == serving and len(serving) == 10
    for n, (topic, seed) in enumerate(SERVING_SEEDS.items(), 8):
        p = generate(topic, seed)
        text = drill_worked_problem(n, p).data
        before, folded = text.split("<details>", 1)
        assert before.startswith(f"**Question {n}.** {p.question.replace('$', chr(92) + '$')}")
        assert "*Assumptions:*" in before and "$" not in before.replace(chr(92) + "$", "")   # no LaTeX opened
        result = f"{_fmt(p.answer)} {p.units}"
        assert f"Result: **{result}**" in folded and result not in before
        assert len(re.findall(r"^\* \$", folded, flags=re.M)) == len(p.steps())
        for step in p.steps():
            assert step.substitution in folded and step.label in folded
        sanity = folded.split("*Sanity check:*", 1)[1].split("</details>")[0].strip()
        assert sanity and sanity.endswith(".")
    views = [v.data for v in serving_worked_problem_views()]
    assert len(views) == 10 and all(v.count("<details>") == 1 and v.startswith("#### ") for v in views)
    whole = "\n".join(views)
    assert all(f"#### {HEADINGS[t]}" in whole for t in serving)
    assert r"\$4.00" in whole and whole.count("$4.00") == whole.count(r"\$4.00")   # Question 17's price, escaped
    assert "**Question 8.**" in whole and "**Question 17.**" in whole


def test_one_of_a_unit_is_singular_and_big_rates_read_in_tflop_per_s():
    # [interview 2026 §1]: "1 nodes" and "42,600,000,000,000.0 FLOP/s"
    one = next(p for p in (generate("plan_step", s) for s in range(400)) if p.answer == 1)
    assert one.check("1")[1] == "correct: 1 node."
    assert one.steps()[-1].text().endswith("= 1 node")
    assert _amount(42_600_000_000_000.0, "FLOP/s") == "42.6 TFLOP/s"            # the figure
    # H100 dense bf16 989 TFLOP/s (data sheet) at 50% MFU: 494.5 TFLOP/s; 8 B200s at fp8 4,500 TFLOP/s and 60%
    # MFU: 8 x 0.6 x 4.5e15 = 2.16e16 FLOP/s = 21.6 PFLOP/s
    assert _amount(0.5 * 989e12, "FLOP/s") == "494.5 TFLOP/s"
    assert _amount(8 * 0.6 * 4.5e15, "FLOP/s") == "21.6 PFLOP/s"
    ttft = generate("ttft", 0)
    reached = ttft.steps()[1]
    assert reached.units == "FLOP/s"
    line = reached.text()
    assert ",000" not in line.rsplit(" = ", 1)[1] and line.endswith(" TFLOP/s")
    shown = float(line.rsplit(" = ", 1)[1].split()[0].replace(",", ""))
    assert shown * 1e12 == pytest.approx(ttft.inputs["mfu"] * ttft.inputs["peak_flop_per_s"], rel=1e-3)
    # no worked step of any topic prints a compute rate as a long run of digits or in e-notation
    for topic in TOPICS:
        for seed in range(6):
            for step in generate(topic, seed).steps():
                if step.units == "FLOP/s":
                    assert re.search(r"= [\d.,]+ [TP]FLOP/s$", step.text()), (topic, seed, step.text())


#: "1 nodes", "1 sequences", "1 bytes": a plural noun after a lone 1 ("block_size - 1 tokens" is a formula)
_ONE_PLURAL = re.compile(r"(?<![\d.,])(?<![+\-] )1 (nodes|GPUs|sequences|tokens|replicas|experts|steps|requests|"
                         r"layers|heads|blocks|bytes|seconds|drafts|chunks|slots)\b")


@pytest.mark.parametrize("topic", sorted(TOPICS))
def test_no_lone_one_with_a_plural_noun(topic):
    # [interview 2026 §1] "1 nodes": the question, each worked step, and the feedback on each catalogued slip
    for seed in range(40):
        p = generate(topic, seed)
        texts = [p.question, *(s.text() for s in p.steps())]
        _, table = variants(p.quantity, unit=p.units, **p.inputs)
        texts += [p.verdict(repr(v)).feedback for _, v in table if isinstance(v, (int, float))
                  and not isinstance(v, bool)]
        for text in texts:
            assert not _ONE_PLURAL.search(text), (topic, seed, text)
