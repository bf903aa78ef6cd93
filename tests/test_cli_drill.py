"""``kvlib drill`` in-process: worked steps after a miss, the clock, the history (--stats, --review,
--no-history), structured answers (--assumptions), and --student revealing nothing.

Run through ``kvlib.cli.main`` with a fake stdin (a terminal or a pipe) and XDG_DATA_HOME in a
temporary folder; the times come from a fake clock. Expected figures are hand arithmetic on the
question's stated inputs (bytes per token = 2 L K D b).
"""

from __future__ import annotations

import io
import json
import stat
import sys

import pytest

from kvlib.cli import main
from kvcoach.cli import ask
from kvcoach import drill_history as H
from kvcoach.drills import TOPICS, generate, problem_set, student_problem
from drill_terminal import TWO_PLANS, Terminal




def drill(monkeypatch, capsys, *args, stdin="", terminal=False):
    monkeypatch.setattr(sys, "stdin", (Terminal if terminal else io.StringIO)(stdin))
    code = main(["drill", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _bpt(i, heads="kv_heads"):
    return 2 * i["layers"] * i[heads] * i["head_dim"] * i["dtype_bytes"]


def test_drill_a_miss_shows_the_worked_steps_and_where_the_slip_enters(monkeypatch, capsys, history_file):
    p = problem_set(3, 1, topic="kv_per_token")[0]
    i = p.inputs
    wrong = _bpt(i, "num_heads")
    code, out, err = drill(monkeypatch, capsys, "--topic", "kv_per_token", "--count", "1", "--seed", "3",
                           stdin=f"{wrong}\n")
    assert code == 0 and err == ""
    assert "worked steps:\n  1. bytes per token, one layer: 2 · K · D · b = " in out
    assert (f"  2. bytes per token, all layers: 2 · L · K · D · b = 2 · {i['layers']} · {i['kv_heads']} · "
            f"{i['head_dim']} · {i['dtype_bytes']} = {_bpt(i):,} bytes") in out
    assert f"your {wrong:,}: the slip [query_heads] enters at step 1 (bytes per token, one layer)." in out
    assert not history_file.exists()                     # piped answers are a replay: never recorded


def test_drill_a_right_answer_shows_no_steps(monkeypatch, capsys, history_file):
    p = problem_set(3, 1, topic="kv_per_token")[0]
    code, out, _ = drill(monkeypatch, capsys, "--topic", "kv_per_token", "--count", "1", "--seed", "3",
                         stdin=f"{_bpt(p.inputs)}\n")
    assert code == 0 and "correct:" in out and "worked steps" not in out


def test_drill_student_shows_no_steps_and_records_nothing(monkeypatch, capsys, history_file):
    p = student_problem("ada", "kv_per_token")
    code, out, _ = drill(monkeypatch, capsys, "--student", "ada", "--topic", "kv_per_token",
                         stdin=f"{_bpt(p.inputs) // 2}\n", terminal=True)
    assert code == 0 and "not quite [missing_kv_factor] (within 0.5%)" in out
    assert "worked steps" not in out and "enters at step" not in out and f"{_bpt(p.inputs):,}" not in out
    assert "target " in out                              # the clock still runs at a terminal
    assert not history_file.exists()


def test_drill_at_a_terminal_records_and_stats_print_the_table(monkeypatch, capsys, history_file):
    first, second = problem_set(5, 2, topic="fp8")
    right = first.inputs["budget_bytes"] // _bpt(first.inputs)
    without_two = second.inputs["budget_bytes"] // (_bpt(second.inputs) // 2)     # K and V counted once
    answers = f"{right}\n{without_two}\n"
    code, out, _ = drill(monkeypatch, capsys, "--topic", "fp8", "--count", "2", "--seed", "5", stdin=answers,
                         terminal=True)
    assert code == 0 and f"(recorded in {history_file}" in out
    assert out.count("answer (tokens; target 65 s)> ") == 2          # 20 s + 15 s x 3 steps
    assert stat.S_IMODE(history_file.stat().st_mode) == 0o600
    saved = json.loads(history_file.read_text())
    assert [(a["topic"], a["correct"], a["slip"], a["target"]) for a in saved["attempts"]] == [
        ("fp8", True, None, 65), ("fp8", False, "missing_kv_factor", 65)]
    assert [s["source"] for s in saved["sessions"]] == ["cli"]
    code, out, _ = drill(monkeypatch, capsys, "--stats")
    rows = out.splitlines()
    # coverage ([interview 2026 §4]): a row for every topic, in the drills' order; the ones never asked are due
    assert code == 0 and rows[0].split()[-2:] == ["next", "review"] and len(rows) == 1 + len(TOPICS) + 1
    fp8 = rows[1 + list(TOPICS).index("fp8")]
    assert fp8.split()[:4] == ["fp8", "2", "1", "50%"] and "missing_kv_factor x1" in fp8
    assert fp8.endswith("missed once, last just now (slip missing_kv_factor): due")
    never = rows[1 + list(TOPICS).index("pool")]
    assert never.split()[:3] == ["pool", "0", "0"] and never.endswith("never asked: due")
    assert rows[-1].startswith(f"coverage: 1 of {len(TOPICS)} topics asked; 2 answer(s) over 1 session(s), 50% right; "
                               "history: ")


def test_drill_stats_lists_the_plans_with_their_rubric_scores(monkeypatch, capsys, history_file):
    history_file.parent.mkdir(parents=True)
    history_file.write_text(json.dumps(TWO_PLANS))
    code, out, err = drill(monkeypatch, capsys, "--stats")
    assert code == 0 and err == ""
    plans = out[out.index("plan (date)"):].splitlines()
    # oldest first: 1 + 0.8 + 1 + 0 = 2.8 of 4, then 0.6667 + 0.4 + 0 + 1 = 2.07 of 4
    assert plans[1].split() == ["2027-01-15", "08:01", "UTC", "-", "1", "0.8", "1", "0", "2.8/4"]
    assert plans[2].split() == ["2027-01-16", "09:00", "UTC", "scenario", "3:", "Qwen/Qwen2.5-7B,", "8", "x", "H200",
                                "(TP", "1),", "50", "requests/s", "0.67", "0.4", "0", "1", "2.07/4"]
    assert plans[3].startswith("2 plan(s)")
    assert "coverage: 1 of" in out[:out.index("plan (date)")]           # the topics' table comes first


def test_drill_no_history_records_nothing(monkeypatch, capsys, history_file):
    code, out, _ = drill(monkeypatch, capsys, "--count", "1", "--no-history", stdin="1\n", terminal=True)
    assert code == 0 and "recorded" not in out and not history_file.exists()
    code, out, _ = drill(monkeypatch, capsys, "--stats")
    assert out.strip().splitlines()[-1] == f"coverage: 0 of {len(TOPICS)} topics asked; no drills recorded yet; " \
                                           f"history: {history_file}"
    assert out.count("never asked: due") == len(TOPICS)


def test_drill_review_asks_the_missed_topic_first(monkeypatch, capsys, history_file):
    h = H.load()
    s = h.new_session("cli", now=0.0)
    h.record(s, "crossover", False, 30.0, "missing_batch", now=0.0)
    h.record(s, "kv_per_token", True, 10.0, now=0.0)
    code, out, _ = drill(monkeypatch, capsys, "--review", "--count", "3", "--seed", "1", stdin="1\n1\n1\n")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "kvlib drill --review: 3 question(s), in review order: crossover, per_sequence."
    # why each was picked ([interview 2026 §4])
    assert lines[1].startswith("  crossover: missed once, last ") and lines[1].endswith(
        " days ago (slip missing_batch): due")
    assert lines[2] == "  per_sequence: never asked: due"
    assert out.count("[crossover]") == 2 and "[per_sequence]" in out      # twice (a slip), then one never tried


def test_drill_a_corrupt_history_is_one_line_and_left_as_it_was(monkeypatch, capsys, history_file):
    history_file.parent.mkdir(parents=True)
    history_file.write_text("{oops")
    for args, terminal in ((["--stats"], False), (["--count", "1"], True), (["--review"], False)):
        code, out, err = drill(monkeypatch, capsys, *args, stdin="1\n", terminal=terminal)
        assert code == 2 and out == "", args
        assert err.count("\n") == 1 and str(history_file) in err and "Traceback" not in err, err
    assert history_file.read_text() == "{oops"


def test_drill_assumptions_are_checked_field_by_field(monkeypatch, capsys, history_file):
    p = problem_set(2, 1, topic="pool")[0]
    i = p.inputs
    right = (int(i["gpu_bytes"] * i["utilization"]) - i["weight_bytes"] - i["other_bytes"]) // i["bytes_per_token"]
    code, out, _ = drill(monkeypatch, capsys, "--topic", "pool", "--count", "1", "--seed", "2", "--assumptions",
                         stdin=f"tokens={right:,} utilization={i['utilization']} memory=label\n")
    assert code == 0
    assert "answer as key=value: tokens=<your figure> utilization=<share of GPU memory> memory=cuda|label" in out
    assert f"✓ tokens: correct: {right:,} tokens." in out and "✓ utilization:" in out
    assert "✗ memory: the label's" in out and "score 0/1" in out
    assert "worked steps" not in out                     # the figure was right: only the premise to fix


@pytest.mark.parametrize("args", [["--stats", "--review"], ["--student", "ada", "--review"],
                                  ["--student", "ada", "--assumptions"], ["--stats", "--student", "ada"]])
def test_drill_flags_that_do_not_go_together_exit_2_with_one_line(monkeypatch, capsys, args):
    code, out, err = drill(monkeypatch, capsys, *args)
    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err


def test_drill_clock_at_a_terminal_with_a_fake_clock():
    # started at 0; question 1 asked at 1 and answered at 101 (100 s, 50 s over its 50 s target: kv_per_token has
    # 2 steps); question 2 asked at 102 and answered at 112 (10 s); the whole drill: 120 s
    ticks = iter([0.0, 1.0, 101.0, 102.0, 112.0, 120.0]).__next__
    p = generate("kv_per_token", 3)
    out = io.StringIO()
    assert ask([p, p], stdin=Terminal(f"{p.answer}\n{p.answer}\n"), stdout=out, clock=ticks) == (2, 2)
    text = out.getvalue()
    assert text.count("answer (bytes; target 50 s)> ") == 2
    assert "(answered in 100.0 s; target 50 s, 50 s over)" in text and "(answered in 10.0 s; target 50 s)\n" in text
    assert text.endswith("score 2/2\ntime 120.0 s\n")


def test_drill_ask_records_each_answer_with_its_time_and_date():
    h = H.History()
    s = h.new_session("cli", now=0.0)
    ticks = iter([0.0, 5.0, 47.0, 50.0]).__next__
    p = generate("pool", 1)
    ask([p], stdin=io.StringIO("1\n"), stdout=io.StringIO(), history=h, session=s, clock=ticks, wall=lambda: 1e9)
    assert [(a["topic"], a["correct"], a["seconds"], a["at"]) for a in h.attempts] == [("pool", False, 42.0, 1e9)]
