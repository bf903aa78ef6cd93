"""kvcoach.drill_history (the file, the stats, the review rule with a fake clock), kvcoach.drill_assumptions
(structured answers field by field) and kvcoach.drill_steps (the lines shown after a miss).

Expected values are hand arithmetic: medians and shares of the attempts written here, the review
intervals of the rule as its docstring states them (1, 2, 4, 8, 16 days), and the slipped figures
recomputed from the question's stated inputs.
"""

from __future__ import annotations

import json
import math
import os
import stat

import pytest

from kvcoach import drill_assumptions as A
from kvcoach import drill_history as H
from kvcoach import drill_steps as S
from kvcoach.drills import generate
from drill_terminal import TWO_PLANS

DAY = 86_400.0


@pytest.fixture
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path / "data"


# --- the file --------------------------------------------------------------------------------------
def test_the_path_follows_xdg_data_home_and_defaults_to_local_share(data_home, monkeypatch, tmp_path):
    assert H.history_path() == data_home / "kv-course" / "drills.json"
    monkeypatch.setenv("XDG_DATA_HOME", "  ")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert H.history_path() == tmp_path / "home" / ".local" / "share" / "kv-course" / "drills.json"


def test_recorded_attempts_are_saved_0600_atomically_and_kept_across_writers(data_home):
    first = H.load()
    assert first.attempts == [] and not first.path.exists()
    s1 = first.new_session("cli", now=100.0)
    first.record(s1, "pool", False, 75.5, "label_memory", now=110.0, target=65)
    path = data_home / "kv-course" / "drills.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert os.listdir(path.parent) == ["drills.json"]           # no temporary file left behind
    second = H.load()                                           # another drill (the notebook) meanwhile
    s2 = second.new_session("notebook", now=200.0)
    second.record(s2, "fp8", True, 12.0, now=210.0)
    first.record(s1, "pool", True, 30.0, now=220.0)             # the first drill again: re-reads, keeps fp8
    saved = json.loads(path.read_text())
    assert [(a["topic"], a["correct"], a["slip"]) for a in saved["attempts"]] == [
        ("pool", False, "label_memory"), ("fp8", True, None), ("pool", True, None)]
    assert [(s["source"], s["started"]) for s in saved["sessions"]] == [("cli", 100.0), ("notebook", 200.0)]
    assert saved["attempts"][0]["target"] == 65 and saved["attempts"][1]["target"] == H.READ_SECONDS + H.STEP_SECONDS
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"sessions": [], "attempts": [{"topic": "pool"}]}'])
def test_a_corrupt_file_is_named_in_one_line_and_never_overwritten(data_home, text):
    path = data_home / "kv-course" / "drills.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(H.HistoryError) as info:
        H.load()
    message = str(info.value)
    assert str(path) in message and "\n" not in message and "not overwritten" in message
    h = H.History(path)                                         # one made before the file went bad
    with pytest.raises(H.HistoryError):
        h.record(h.new_session("cli"), "pool", True, 1.0)
    assert path.read_text() == text


def test_no_home_folder_is_one_line(monkeypatch):
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    def no_home():
        raise RuntimeError("Could not determine home directory.")
    monkeypatch.setattr(H.Path, "home", staticmethod(no_home))
    with pytest.raises(H.HistoryError, match="^no place for the drill history: set XDG_DATA_HOME or HOME$"):
        H.load()


def test_an_unreadable_path_is_named(data_home):
    (data_home / "kv-course" / "drills.json").mkdir(parents=True)    # a folder where the file should be
    with pytest.raises(H.HistoryError, match="cannot read the drill history .*drills.json"):
        H.load()


# --- the stats -------------------------------------------------------------------------------------
def _history(*rows, source="cli"):
    """rows: (session, topic, correct, seconds, slip, at)."""
    h = H.History()
    ids = {}
    for session, topic, correct, seconds, slip, at in rows:
        if session not in ids:
            ids[session] = h.new_session(source, now=at)
        h.record(ids[session], topic, correct, seconds, slip, now=at)
    return h, ids


def test_topic_and_session_stats_by_hand():
    h, ids = _history((1, "pool", True, 30.0, None, 10.0), (1, "pool", False, 90.0, "label_memory", 20.0),
                      (1, "fp8", True, 12.0, None, 30.0), (2, "pool", False, 50.0, "label_memory", 100.0),
                      (2, "pool", False, 70.0, "gb_for_gib", 110.0))
    rows = h.topic_stats()
    assert list(rows) == ["fp8", "pool"]
    pool = rows["pool"]
    # 4 answers, 1 right: 25%; median of 30, 50, 70, 90 s is (50 + 70) / 2 = 60 s
    assert (pool.attempts, pool.correct, pool.accuracy, pool.median_seconds) == (4, 1, 0.25, 60.0)
    assert pool.slips == {"gb_for_gib": 1, "label_memory": 2}
    by_session = h.session_stats()
    assert [sid for sid, _, _ in by_session] == [ids[1], ids[2]]
    first = by_session[0][2]
    assert first["pool"].accuracy == 0.5 and first["pool"].median_seconds == 60.0 and first["fp8"].correct == 1
    assert by_session[1][2]["pool"].accuracy == 0.0 and "fp8" not in by_session[1][2]


def test_stats_table_rows():
    h, _ = _history((1, "pool", True, 30.0, None, 10.0), (1, "pool", False, 90.0, "label_memory", 20.0),
                    (1, "fp8", True, 12.0, None, 30.0))
    lines = H.stats_table(h).splitlines()
    assert lines[0].split() == ["topic", "asked", "right", "accuracy", "median", "time", "slips", "made"]
    assert lines[1].split() == ["fp8", "1", "1", "100%", "12", "s", "-"]
    assert lines[2].split() == ["pool", "2", "1", "50%", "60", "s", "label_memory", "x1"]
    assert lines[3] == "3 answer(s) over 1 session(s), 67% right"       # 2 of 3
    assert H.stats_table(H.History()) == "no drills recorded yet."


def test_target_is_read_time_plus_a_step_time_per_worked_step():
    p = generate("step_time", 3)
    assert len(p.steps()) == 5                          # bytes per layer, per token, KV read, all read, the time
    assert H.target_seconds(p) == 20 + 15 * 5 == 95
    assert H.target_seconds(generate("kv_per_token", 3)) == 20 + 15 * 2


# --- the review rule, on a fake clock ----------------------------------------------------------------
TOPICS = ("kv_per_token", "pool", "fp8", "crossover")


def test_a_missed_topic_returns_at_once_and_twice_when_a_slip_was_named():
    h, _ = _history((1, "pool", False, 20.0, "label_memory", 0.0), (1, "fp8", False, 20.0, None, 0.0),
                    (1, "kv_per_token", True, 20.0, None, 0.0))
    # pool (a slip) twice, fp8 (missed, no slip) once, crossover (never tried), then kv_per_token (due in a day)
    assert H.review_topics(h, TOPICS, 5, now=60.0) == ["pool", "pool", "fp8", "crossover", "kv_per_token"]
    assert H.review_topics(h, TOPICS, 7, now=60.0)[5:] == ["pool", "pool"]      # the queue repeats
    assert H.review_topics(H.History(), TOPICS, 2) == ["kv_per_token", "pool"]    # nothing tried: in order


def test_a_mastered_topic_comes_back_later_than_a_learning_one():
    # fp8 right within its target five times: box 5, due 16 days after its last answer;
    # pool right once: box 1, due after 1 day
    rows = [(1, "fp8", True, 20.0, None, float(t)) for t in range(5)] + [(1, "pool", True, 20.0, None, 10.0)]
    h, _ = _history(*rows)
    assert H._box([a for a in h.attempts if a["topic"] == "fp8"]) == H.MASTERED_BOX == 5
    only = ("pool", "fp8")
    assert H.review_topics(h, only, 2, now=10.0 + DAY - 1) == ["pool", "fp8"]   # neither due: soonest first
    assert H.review_topics(h, only, 2, now=4 + 16 * DAY) == ["pool", "fp8"]     # both due: pool fell due first
    # a miss puts fp8 back in box 0: due at once, ahead of pool
    h.record(h.new_session("cli"), "fp8", False, 20.0, None, now=5 * DAY)
    assert H.review_topics(h, only, 1, now=5 * DAY) == ["fp8"]


def test_intervals_double_with_each_answer_within_the_target():
    due = []
    for n in range(1, 7):
        h, _ = _history(*[(1, "pool", True, 10.0, None, 0.0)] * n)
        box = H._box(h.attempts)
        due.append(H.REVIEW_DAYS[box])
    assert due == [1, 2, 4, 8, 16, 16]


def test_a_right_but_slow_answer_does_not_move_the_box():
    h = H.History()
    s = h.new_session("cli", now=0.0)
    h.record(s, "pool", True, 30.0, now=0.0, target=65)       # within: box 1
    h.record(s, "pool", True, 200.0, now=1.0, target=65)      # right, 135 s over: still box 1
    assert H._box(h.attempts) == 1
    slow = H.History()
    slow.record(slow.new_session("cli", now=0.0), "pool", True, 200.0, now=0.0, target=65)
    assert H._box(slow.attempts) == 0 and H.review_topics(slow, ("fp8", "pool"), 1, now=1.0) == ["pool"]


# --- structured answers -------------------------------------------------------------------------------
def test_fields_follow_what_changes_the_figure():
    assert A.fields(generate("pool", 1)) == ("tokens", "utilization", "memory")
    assert A.fields(generate("fp8", 1)) == ("tokens", "dtype")
    assert A.fields(generate("kv_per_token", 1)) == ("bytes", "dtype")
    assert A.fields(generate("block_waste", 1)) == ("slots",)        # nothing to assume
    assert A.prompt(generate("pool", 1)) == "tokens=<your figure> utilization=<share of GPU memory> memory=cuda|label"


def test_an_mfu_field_where_the_question_assumes_one():
    p = generate("ttft", 1)
    assert A.fields(p) == ("ms", "mfu")
    i = p.inputs
    v = A.check(p, f"ms=1 mfu={i['mfu'] * 100:g}%")
    assert v.fields[1].ok and not v.fields[0].ok
    # the MFU is the learner's to state (the structured question withholds it): 0.99 is past any prefill's
    v = A.check(p, "ms=1 mfu=0.99")
    assert not v.fields[1].ok and "0.99 is outside the plausible range 0.1 to 0.9" in v.fields[1].message
    # a plausible MFU other than the question's is right, and the figure is judged with it: 2 P T / (F x 0.45)
    ms = 2 * i["num_params"] * i["prompt_tokens"] / (i["peak_flop_per_s"] * 0.45) * 1e3
    assert [f.ok for f in A.check(p, f"ms={ms:.6g} mfu=0.45").fields] == [True, True]


def _pool_by_hand(i, memory):
    return math.floor((math.floor(memory * i["utilization"]) - i["weight_bytes"] - i["other_bytes"])
                      / i["bytes_per_token"])


def test_pool_fields_each_get_their_message():
    p = generate("pool", 1)
    i = p.inputs
    right = _pool_by_hand(i, i["gpu_bytes"])
    v = A.check(p, f"tokens={right:,} utilization={i['utilization']} memory=cuda")
    assert v.correct and v.slip is None and [f.name for f in v.fields] == ["tokens", "utilization", "memory"]
    # the label's memory stated, and the figure computed from it: the premise is off, not the arithmetic
    from_label = _pool_by_hand(i, i["label_bytes"])
    v = A.check(p, f"tokens={from_label} utilization={i['utilization']:.0%} memory=label")
    assert not v.correct and [f.ok for f in v.fields] == [False, True, False]
    assert v.slip == "label_memory" and "[label_memory]" in v.fields[0].message
    assert "follows from the label's memory" in v.fields[2].message
    assert f"CUDA reports ({i['gpu_bytes'] / 2**30:,.2f} GiB)" in v.fields[2].message
    # the right figure, an implausible utilization (judged with the question's own) and no memory said
    v = A.check(p, f"{right} utilization=0.3")
    assert [f.ok for f in v.fields] == [True, False, False]
    assert "0.3 is outside the plausible range 0.5 to 0.99" in v.fields[1].message
    assert v.fields[2].stated is None and v.fields[2].message.startswith("missing")
    # a plausible share other than the question's is the learner's premise: the figure follows it, not the question's
    at_half = math.floor((math.floor(i["gpu_bytes"] * 0.5) - i["weight_bytes"] - i["other_bytes"]) / i["bytes_per_token"])
    assert [f.ok for f in A.check(p, f"tokens={at_half} utilization=0.5 memory=cuda").fields] == [True, True, True]
    assert [f.ok for f in A.check(p, f"tokens={right} utilization=0.5 memory=cuda").fields] == [False, True, True]


def test_dtype_field_and_a_figure_that_follows_from_the_dtype_stated():
    p = generate("fp8", 1)
    i = p.inputs
    as_bf16 = i["budget_bytes"] // (2 * i["layers"] * i["kv_heads"] * i["head_dim"] * 2)
    v = A.check(p, f"tokens={as_bf16} dtype=bf16")
    assert [f.ok for f in v.fields] == [False, False]
    assert "fp8 (1 byte per element), not bf16 (2 bytes per element)" in v.fields[1].message
    assert "follows from the element size you stated" in v.fields[1].message
    right = i["budget_bytes"] // (2 * i["layers"] * i["kv_heads"] * i["head_dim"] * 1)
    for said in ("fp8", "FP8", "e4m3", "1"):
        assert A.check(p, f"tokens={right}; dtype={said}").correct, said
    assert A.check(p, f"tokens={right} dtype=int3").fields[1].message.startswith("expected bf16")


@pytest.mark.parametrize("text, message", [
    ("tokens=1 colour=blue", "unknown field 'colour': this question asks tokens, dtype"),
    ("tokens=1 tokens=2", "field 'tokens' is given twice"),
])
def test_unreadable_structured_answers_name_the_field(text, message):
    v = A.check(generate("fp8", 1), text)
    assert not v.correct and v.fields[0].message == message


def test_a_structured_graded_figure_reveals_nothing():
    p = generate("fp8", 1)
    v = A.check(p, "tokens=1 dtype=fp8", reveal=False)
    assert f"{p.answer:,}" not in v.text() and "The answer is" not in v.text()


# --- the lines after a miss ------------------------------------------------------------------------------
def test_worked_lines_substitute_this_questions_numbers():
    p = generate("concurrency", 4)
    i = p.inputs
    per_token = 2 * i["layers"] * i["kv_heads"] * i["head_dim"] * i["dtype_bytes"]
    lines = S.worked_lines(p)
    assert lines[0] == "worked steps:" and len(lines) == 1 + len(p.steps())
    assert f"2 · {i['layers']} · {i['kv_heads']} · {i['head_dim']} · {i['dtype_bytes']} = {per_token:,} bytes" in lines[2]
    fit = i["budget_bytes"] // (per_token * i["seq_len"])
    assert lines[-1].endswith(f"= {fit:,} sequences")


def test_where_lines_name_the_step_of_the_slip():
    p = generate("kv_per_token", 1)
    i = p.inputs
    with_query_heads = 2 * i["layers"] * i["num_heads"] * i["head_dim"] * i["dtype_bytes"]
    assert S.where_lines(p, f"{with_query_heads:,}") == [
        f"your {with_query_heads:,}: the slip [query_heads] enters at step 1 (bytes per token, one layer)."]
    assert S.where_lines(p, "7") == []


# --- coverage and the review's reasons ([interview 2026 §4]) -----------------------------------------------------
def test_review_reasons_say_why_by_hand():
    h, _ = _history((1, "pool", False, 20.0, "label_memory", 0.0), (1, "pool", False, 20.0, "gb_for_gib", DAY),
                    (1, "fp8", True, 20.0, None, 0.0), (1, "fp8", True, 20.0, None, DAY),
                    (1, "fp8", True, 20.0, None, 2 * DAY), (1, "crossover", True, 500.0, None, 0.0))
    reasons = H.review_reasons(h, TOPICS, now=4 * DAY)
    assert reasons["pool"] == "missed twice, last 3 days ago (slip gb_for_gib): due"
    # three right within the target: box 3, due 4 days after the last (2 days): at day 4, in 2 days
    assert reasons["fp8"] == "right 3 times in a row within the target, last 2 days ago: due in 2 days"
    assert reasons["crossover"] == "right but over its target time, last 4 days ago: due"     # 500 s > 35 s
    assert reasons["kv_per_token"] == "never asked: due"
    assert H.review_reasons(h, ["fp8"], now=6 * DAY)["fp8"].endswith(": due")


def test_stats_cover_every_topic_a_topic_never_asked_is_due():
    h, _ = _history((1, "pool", True, 30.0, None, 10.0), (1, "pool", False, 90.0, "label_memory", 20.0))
    lines = H.stats_table(h, TOPICS, now=30.0).splitlines()
    assert lines[0].split() == ["topic", "asked", "right", "accuracy", "median", "time", "slips", "made", "next",
                                "review"]
    assert [line.split()[0] for line in lines[1:5]] == list(TOPICS)
    assert lines[1].split() == ["kv_per_token", "0", "0", "-", "-", "-", "never", "asked:", "due"]
    assert lines[2].split()[:7] == ["pool", "2", "1", "50%", "60", "s", "label_memory"]
    assert lines[2].endswith("missed once, last just now (slip label_memory): due")
    assert lines[-1] == "coverage: 1 of 4 topics asked; 2 answer(s) over 1 session(s), 50% right"


def test_every_answer_records_its_slips_and_a_plan_its_rubric(tmp_path):
    h = H.History(tmp_path / "drills.json")
    s = h.new_session("cli", now=0.0)
    h.record(s, "pool", True, 10.0, now=0.0)
    h.record(s, "kv_per_token", False, 10.0, slips=("missing_kv_factor", "wrong_16bit_vs_fp8"), now=1.0)
    h.record(s, "plan", False, 300.0, now=2.0, rubric={"assumptions": 1, "steps": 0.5, "binding": 0, "sanity": 1})
    saved = json.loads((tmp_path / "drills.json").read_text())["attempts"]
    assert [a["slips"] for a in saved] == [[], ["missing_kv_factor", "wrong_16bit_vs_fp8"], []]
    assert saved[2]["rubric"] == {"assumptions": 1.0, "steps": 0.5, "binding": 0.0, "sanity": 1.0}
    assert "rubric" not in saved[0]
    assert H.load(tmp_path / "drills.json").topic_stats()["kv_per_token"].slips == {"missing_kv_factor": 1,
                                                                                      "wrong_16bit_vs_fp8": 1}
    for bad, field in (({"assumptions": 1}, "rubric"), ({**dict.fromkeys(H.RUBRIC_KEYS, 1), "steps": 2}, "rubric.steps"),
                       ({**dict.fromkeys(H.RUBRIC_KEYS, 1), "sanity": True}, "rubric.sanity")):
        with pytest.raises(H.HistoryError, match=f"^{field}"):
            h.record(s, "plan", True, 1.0, now=3.0, rubric=bad)
    assert len(json.loads((tmp_path / "drills.json").read_text())["attempts"]) == 3    # nothing half-written


def test_the_plans_a_learner_ran_show_their_rubric_scores(tmp_path):
    path = tmp_path / "drills.json"
    path.write_text(json.dumps(TWO_PLANS))
    h = H.load(path)
    rows = H.plan_rows(h)
    # oldest first; the plan written before plans carried their scenario reads "-"
    assert [(r.date, r.scenario) for r in rows] == [
        ("2027-01-15 08:01 UTC", "-"),
        ("2027-01-16 09:00 UTC", "scenario 3: Qwen/Qwen2.5-7B, 8 x H200 (TP 1), 50 requests/s")]
    assert [round(r.total, 4) for r in rows] == [1 + 0.8 + 1 + 0, round(0.6667 + 0.4 + 0 + 1, 4)]    # 2.8, 2.0667
    lines = H.plans_table(h).splitlines()
    assert lines[0].split() == ["plan", "(date)", "scenario", "assumptions", "steps", "binding", "sanity", "total"]
    assert lines[1].split() == ["2027-01-15", "08:01", "UTC", "-", "1", "0.8", "1", "0", "2.8/4"]
    assert lines[2].split()[-5:] == ["0.67", "0.4", "0", "1", "2.07/4"]
    assert "scenario 3: Qwen/Qwen2.5-7B, 8 x H200 (TP 1), 50 requests/s" in lines[2]
    assert lines[3] == "2 plan(s); each score from 0 to 1 (the rubric of kvlib drill --plan)"
    stats = H.stats_table(h, ("pool", "fp8"), now=1_800_100_000.0)
    assert stats.endswith("\n\n" + H.plans_table(h)) and "coverage: 1 of 2 topics asked" in stats
    assert H.plans_table(H.History()) == "" and "plan (date)" not in H.stats_table(H.History(), ("pool",))


def test_a_plan_s_scenario_label_and_an_edited_rubric_are_named_in_one_line(tmp_path):
    h = H.History(tmp_path / "drills.json")
    s = h.new_session("cli", now=0.0)
    full = dict.fromkeys(H.RUBRIC_KEYS, 1)
    for bad in ("", "two\nlines", 7):
        with pytest.raises(H.HistoryError, match="^scenario: expected a one-line label"):
            h.record(s, "plan", True, 1.0, now=1.0, rubric=full, scenario=bad)
    assert not (tmp_path / "drills.json").exists()                          # nothing half-written
    edited = json.loads(json.dumps(TWO_PLANS))
    edited["attempts"][2]["rubric"]["steps"] = 8
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(edited))
    with pytest.raises(H.HistoryError) as e:
        H.plan_rows(H.load(path))
    assert str(e.value) == f"the drill history {path}, attempt 3: rubric.steps: expected a score from 0 to 1, got 8"


def test_a_file_written_before_slips_lists_still_counts_its_slip(tmp_path):
    path = tmp_path / "drills.json"
    path.write_text(json.dumps({"version": 1, "sessions": [{"id": "a", "started": 0.0, "source": "cli"}],
                                "attempts": [{"session": "a", "topic": "pool", "correct": False, "seconds": 5.0,
                                              "slip": "label_memory", "at": 0.0, "target": 65}]}))
    assert H.load(path).topic_stats()["pool"].slips == {"label_memory": 1}
