"""``kvlib drill --assumptions`` asks for the assumptions a question leaves open instead of echoing them: the question
withholds the engine's share of memory and the MFU, a plausible stated value is right, and the figure (and the worked
steps after a miss) follow the stated value. Expected figures are hand arithmetic on the question's stated inputs.

Pool, seed 2: Qwen2.5-7B on one H200, CUDA reports 150,109,106,995 bytes, bf16 weights 15.23 GB, other allocations
2.00 GB, 57,344 bytes per token; the question's own share (0.92) is not shown.
"""

from __future__ import annotations

import io
import math
import sys

from kvcoach import drill_assumptions as A
from kvcoach.drills import problem_set
from kvlib.cli import main

M, W, OTHER, B_TOK = 150_109_106_995, 15_230_000_000, 2_000_000_000, 57_344


def drill(monkeypatch, capsys, topic, seed, answer):
    monkeypatch.setattr(sys, "stdin", io.StringIO(answer + "\n"))
    code = main(["drill", "--topic", topic, "--count", "1", "--seed", str(seed), "--assumptions"])
    return code, capsys.readouterr().out


def test_the_question_withholds_the_share_and_the_figure_follows_the_stated_one(monkeypatch, capsys):
    at_085 = (math.floor(M * 0.85) - W - OTHER) // B_TOK            # 110,362,740,945 / 57,344 = 1,924,573 tokens
    assert at_085 == 1_924_573
    code, out = drill(monkeypatch, capsys, "pool", 2, f"tokens={at_085:,} utilization=85% memory=cuda")
    assert code == 0
    assert "The engine takes 0.92" not in out and "0.92" not in out.split("answer as key=value")[0]
    assert "The engine takes its share of what CUDA reports (state the share you assume);" in out
    assert f"✓ tokens: correct: {at_085:,} tokens." in out and "✓ utilization: 0.85, stated: the figure is judged " \
                                                              "with it." in out
    assert "score 1/1" in out


def test_an_implausible_share_is_wrong_and_the_figure_is_judged_with_the_question_s(monkeypatch, capsys):
    at_092 = (math.floor(M * 0.92) - W - OTHER) // B_TOK            # 121,100,378,435 / 57,344 = 2,111,823 tokens
    code, out = drill(monkeypatch, capsys, "pool", 2, f"tokens={at_092} utilization=0.3 memory=cuda")
    assert code == 0 and f"✓ tokens: correct: {at_092:,} tokens." in out
    assert "✗ utilization: 0.3 is outside the plausible range 0.5 to 0.99" in out and "score 0/1" in out


def test_a_miss_shows_the_worked_steps_on_the_stated_premise(monkeypatch, capsys):
    code, out = drill(monkeypatch, capsys, "pool", 2, "tokens=1000 utilization=0.85 memory=cuda")
    assert code == 0 and "worked steps:" in out
    assert f"floor({M:,} · 0.85) = {math.floor(M * 0.85):,} bytes" in out


def test_the_mfu_is_asked_too():
    p = problem_set(0, 1, topic="ttft")[0]
    i = p.inputs
    assert A.fields(p) == ("ms", "mfu")
    assert f"{i['mfu']:.0%} MFU" in p.question and "MFU" in A.open_question(p)
    assert f"{i['mfu']:.0%} MFU" not in A.open_question(p) and "an MFU you state" in A.open_question(p)
    ms = 2 * i["num_params"] * i["prompt_tokens"] / (i["peak_flop_per_s"] * 0.45) * 1e3   # 2 P T / (F x 0.45)
    v = A.check(p, f"ms={ms:.6g} mfu=45%")
    assert v.correct, v.text()
    assert not A.check(p, f"ms={ms:.6g} mfu={i['mfu']}").fields[0].ok       # that figure is not the question's MFU's


def test_every_slip_the_figure_s_feedback_names_is_recorded(tmp_path):
    # [interview 2026 §1] "every slip shown is recorded", with --assumptions too: a bf16 cache's figure halved is
    # the factor 2 for K and V forgotten, and equally 1 byte per element for 2 (2 L K D b / 2 = 2 L K D x 1):
    # the feedback names both ("Or: ..."), the run summary, the history and --stats keep both
    from drill_terminal import Terminal
    from kvcoach import cli, drill_history
    from kvcoach.drills import generate

    p = generate("kv_per_token", 2)
    L, K, D, b = (p.params[k] for k in ("layers", "kv_heads", "head_dim", "dtype_bytes"))
    assert b == 2 and p.answer == 2 * L * K * D * b
    half = L * K * D * b
    v = A.check(p, f"bytes={half} dtype=bf16")
    assert v.slips == ("missing_kv_factor", "wrong_16bit_vs_fp8") and "Or: the element size" in v.text()
    history = drill_history.History(tmp_path / "drills.json")
    session = history.new_session("cli", now=0.0)
    out = io.StringIO()
    cli.ask([p], stdin=Terminal(f"bytes={half} dtype=bf16\n"), stdout=out, assumptions=True, history=history,
            session=session, clock=iter(range(10)).__next__, wall=lambda: 0.0)
    assert "slips: missing_kv_factor x1, wrong_16bit_vs_fp8 x1" in out.getvalue()
    saved = drill_history.load(tmp_path / "drills.json")
    assert saved.attempts[0]["slips"] == ["missing_kv_factor", "wrong_16bit_vs_fp8"]
    assert "wrong_16bit_vs_fp8 x1" in drill_history.stats_table(saved)
