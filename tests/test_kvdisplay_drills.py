"""kvdisplay.drills (drill mode, the learner's own questions) and kvdisplay.interview (the card).

Drill mode is driven without widgets through ``DrillSession`` with a fake clock; the widget
wrapper is clicked through ipywidgets' own ``Button.click``. Expected values are hand
arithmetic on the question's stated inputs (bytes per token = 2 x L x K x D x b, chapter 01),
never the problem's own answer field.
"""

from __future__ import annotations

import math

import pytest
from pinned import pinned

import kvdisplay
from kvdisplay import drills as D
from kvdisplay import interview as I
from kvcoach.drills import DrillError


class FakeClock:
    """Seconds that move only when the test says so."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _by_hand_bytes_per_token(params) -> int:
    # 2 (K and V) x layers x KV heads x head_dim x bytes per element
    return 2 * params["layers"] * params["kv_heads"] * params["head_dim"] * params["dtype_bytes"]


def _session(**kw):
    clock = FakeClock()
    return D.DrillSession(seed=7, clock=clock, **kw), clock


# --- DrillSession -------------------------------------------------------------------------------
def test_right_answer_is_scored_with_its_time():
    s, clock = _session()
    p = s.new_question("kv_per_token")
    assert p.topic == "kv_per_token"
    clock.now += 12.5
    a = s.answer(f"{_by_hand_bytes_per_token(p.params):,}")
    assert a.correct and a.scored and a.seconds == 12.5
    assert s.score == (1, 1)
    assert a.feedback.startswith("correct")


def test_wrong_answer_names_the_slip_and_counts():
    s, _ = _session()
    p = s.new_question("kv_per_token")
    without_two = _by_hand_bytes_per_token(p.params) // 2       # the factor 2 for K and V dropped
    a = s.answer(str(without_two))
    assert not a.correct and a.scored
    assert "[missing_kv_factor]" in a.feedback and "factor 2 for K and V is missing" in a.feedback
    # half the bytes is also bf16 read as fp8 (2 bytes per element halved): the feedback names it too ("Or: ..."),
    # and every slip it names is counted ([interview 2026 §1])
    assert "Or: " in a.feedback and "fp8" in a.feedback.split("Or: ")[1]
    assert s.score == (0, 1) and s.slips() == {"missing_kv_factor": 1, "wrong_16bit_vs_fp8": 1}
    assert a.slips == ("missing_kv_factor", "wrong_16bit_vs_fp8")


def test_only_the_first_answer_to_a_question_is_scored():
    s, _ = _session()
    p = s.new_question("kv_per_token")
    s.answer("1")
    retry = s.answer(str(_by_hand_bytes_per_token(p.params)))
    assert retry.correct and not retry.scored
    assert s.score == (0, 1)
    s.new_question("kv_per_token")
    assert s.score == (0, 1)           # a new question scores nothing until answered


def test_empty_or_non_numeric_input_counts_nothing_and_reveals_nothing():
    s, _ = _session()
    p = s.new_question("kv_per_token")
    right = f"{_by_hand_bytes_per_token(p.params):,}"
    for text in ("", "   ", "lots", "12 parsecs"):
        a = s.answer(text)
        assert not a.scored and not a.correct, text
        assert right not in a.feedback and "The answer is" not in a.feedback, a.feedback
    assert s.score == (0, 0)


def test_answer_before_any_question():
    s, _ = _session()
    a = s.answer("131072")
    assert not a.scored and "new question" in a.feedback and s.score == (0, 0)


def test_same_seed_same_questions_and_random_topics_stay_in_the_list():
    a, _ = _session(topics=("crossover", "step_time"))
    b, _ = _session(topics=("crossover", "step_time"))
    qa = [a.new_question().question for _ in range(5)]
    qb = [b.new_question().question for _ in range(5)]
    assert qa == qb
    assert {a.new_question().topic for _ in range(20)} <= {"crossover", "step_time"}
    assert a.new_question(D.ANY_TOPIC).topic in ("crossover", "step_time")


def test_unknown_topics_are_refused():
    with pytest.raises(DrillError, match="unknown topic"):
        D.DrillSession(topics=("nope",))
    s, _ = _session()
    with pytest.raises(DrillError, match="'nope'"):
        s.new_question("nope")


def test_time_per_question_uses_the_clock():
    s, clock = _session()
    s.new_question("kv_per_token")
    clock.now += 3.0
    assert s.elapsed() == 3.0
    s.answer("1")
    s.new_question("kv_per_token")            # the clock restarts with each question
    clock.now += 40.0
    assert s.answer("1").seconds == 40.0


def test_step_time_answer_in_ms_by_hand():
    s, _ = _session()
    p = s.new_question("step_time")
    q = p.params
    # (W + 2 L K D b x T x B) / BW, in milliseconds
    ms = (q["weight_bytes"] + _by_hand_bytes_per_token(q) * q["seq_len"] * q["batch_size"]) \
        / q["bandwidth_bytes_per_s"] * 1e3
    assert s.answer(f"{ms:.4f} ms").correct
    s.new_question("step_time")
    assert not s.answer(f"{ms * 1e6:.1f}").correct     # another question


# --- the view and the widget ----------------------------------------------------------------------
def test_view_before_and_after():
    s, clock = _session()
    assert "Press <b>new question</b>" in D.drill_view(s)
    p = s.new_question("kv_per_token")
    view = D.drill_view(s)
    assert p.question.split("(")[0].strip() in view and "score: <b>0 / 0</b>" in view
    clock.now += 9
    s.answer(str(_by_hand_bytes_per_token(p.params) // 2))
    view = D.drill_view(s)
    assert "✗" in view and "missing_kv_factor" in view and "answered in 9 s" in view
    assert "score: <b>0 / 1</b>" in view and "9 s per question" in view


def test_widget_buttons_drive_the_session():
    pinned("ipywidgets")
    box = D.drill_mode(("kv_per_token",), seed=3, clock=FakeClock(), history=False, tick=None)
    (_, new, _, _), (answer, check, clock), view = (box.children[0].children, box.children[1].children,
                                                     box.children[2])
    assert view is box.view and clock is box.clock and "Press" in view.value
    new.click()
    p = box.session.problem
    assert p is not None and p.question.split("(")[0].strip() in view.value
    answer.value = str(_by_hand_bytes_per_token(p.params))
    check.click()
    assert "✓" in view.value and "score: <b>1 / 1</b>" in view.value
    assert answer.value                       # the typed answer stays until the next question
    new.click()
    assert answer.value == ""


def test_exported_additively():
    for name in ("DrillSession", "drill_view", "drill_mode", "use_student_id", "my_question", "my_questions",
                 "show_question", "interview_sheet", "interview_sheet_view", "clock_text", "drill_stats",
                 "history_view", "history_figure"):
        assert name in kvdisplay.__all__ and getattr(kvdisplay, name)


# --- after a miss: the worked steps; the clock; structured answers; the history ----------------------
def test_a_miss_shows_the_worked_steps_with_this_questions_numbers():
    s, _ = _session()
    p = s.new_question("kv_per_token")
    q = p.params
    with_query_heads = 2 * q["layers"] * q["num_heads"] * q["head_dim"] * q["dtype_bytes"]
    a = s.answer(str(with_query_heads))
    assert a.slip == "query_heads" and a.steps[0] == "worked steps:"
    assert (f"2. bytes per token, all layers: 2 · L · K · D · b = 2 · {q['layers']} · {q['kv_heads']} · "
            f"{q['head_dim']} · {q['dtype_bytes']} = {_by_hand_bytes_per_token(q):,} bytes") in a.steps[2]
    assert a.steps[-1] == f"your {with_query_heads:,}: the slip [query_heads] enters at step 1 (bytes per token, one layer)."
    view = D.drill_view(s)
    assert "worked steps:" in view and "enters at step 1" in view
    right = s.answer(str(_by_hand_bytes_per_token(q)))                    # a retry, right: no steps
    assert right.steps == () and "worked steps:" not in D.drill_view(s)


def test_bad_input_shows_no_steps():
    s, _ = _session()
    s.new_question("kv_per_token")
    assert s.answer("lots").steps == () and "worked steps" not in D.drill_view(s)


def test_the_clock_counts_against_the_target_and_stops_at_the_answer():
    s, clock = _session()
    assert D.clock_text(s) == "time –"
    s.new_question("step_time")                       # 5 worked steps: 20 + 15 x 5 = 95 s
    clock.now += 30
    assert D.clock_text(s) == "time 30 s (target 95 s)"
    clock.now += 70
    assert D.clock_text(s) == "time 100 s (target 95 s, 5 s over)"
    s.answer("1")
    clock.now += 500                                  # answered: the clock shows the answer's time
    assert D.clock_text(s) == "time 100 s (target 95 s, 5 s over)"
    assert "answered in 100 s (target 95 s, 5 s over)" in D.drill_view(s) and "target 95 s)" in D.drill_view(s)


def test_a_structured_answer_is_checked_field_by_field():
    s, _ = _session(assumptions=True)
    p = s.new_question("fp8")
    q = p.params
    right = q["budget_bytes"] // _by_hand_bytes_per_token(q)
    assert s.structured() and "tokens=&lt;your figure&gt; dtype=bf16|fp8|fp32" in D.drill_view(s)
    a = s.answer(f"tokens={right:,} dtype=bf16")
    assert not a.correct and a.scored and [f.ok for f in a.fields] == [True, False]
    assert a.steps == ()                               # the figure is right: no worked steps
    view = D.drill_view(s)
    assert "✗ <b>dtype</b>: the question&#x27;s cache is fp8 (1 byte per element)" in view
    s.new_question("fp8")
    assert not s.answer("colour=blue").scored            # an unreadable structured answer counts nothing
    s.new_question("block_waste")                      # nothing to assume: a plain number
    assert not s.structured()


def test_scored_answers_are_recorded_and_review_asks_the_missed_topic(tmp_path):
    from kvcoach import drill_history as H
    history = H.load(tmp_path / "drills.json")
    clock = FakeClock()
    s = D.DrillSession(seed=7, clock=clock, history=history, wall=lambda: 5000.0)
    p = s.new_question("crossover")
    clock.now += 20
    s.answer("1")
    s.answer("2")                                       # a retry: not recorded
    saved = H.load(tmp_path / "drills.json")
    assert [(a["topic"], a["correct"], a["seconds"], a["at"]) for a in saved.attempts] == [
        ("crossover", False, 20.0, 5000.0)]
    assert saved.data["sessions"][0]["source"] == "notebook"
    assert s.review_question().topic == "crossover"     # missed: it comes back first
    assert p is not s.problem


def test_drill_mode_history_file_and_a_corrupt_one(tmp_path, monkeypatch):
    pinned("ipywidgets")
    from kvcoach import drill_history as H
    path = tmp_path / "drills.json"
    box = D.drill_mode(("kv_per_token",), seed=3, clock=FakeClock(), history=path, tick=None)
    (_, _, review, state), (answer, check, _), view = (box.children[0].children, box.children[1].children,
                                                       box.children[2])
    review.click()
    answer.value = "1"
    check.click()
    assert path.exists() and "answered in" in view.value
    state.value = True                                  # state assumptions: the view asks key=value
    assert box.session.assumptions and "key=value" in view.value
    path.write_text("{oops")
    with pytest.raises(H.HistoryError, match="not valid JSON"):   # a path passed in: the error is the caller's
        D.drill_mode(history=path, tick=None)
    broken = tmp_path / "data"
    (broken / "kv-course").mkdir(parents=True)
    (broken / "kv-course" / "drills.json").write_text("{oops")
    monkeypatch.setenv("XDG_DATA_HOME", str(broken))
    box = D.drill_mode(history=True, tick=None)           # the learner's own file, unreadable: named, left alone
    assert "is not valid JSON" in box.view.value and box.session.history is None
    assert (broken / "kv-course" / "drills.json").read_text() == "{oops"


def test_history_table_and_plot_over_sessions(tmp_path):
    from kvcoach import drill_history as H
    from kvdisplay.plots import figure_text
    path = tmp_path / "drills.json"
    assert "No drills recorded yet" in D.history_view(H.load(path)) and D.history_figure(H.load(path)) is None
    h = H.load(path)
    for n, (topic, ok, sec) in enumerate([("pool", False, 90.0), ("pool", True, 30.0), ("fp8", True, 10.0)]):
        sid = h.new_session("notebook", now=float(n))
        h.record(sid, topic, ok, sec, "label_memory" if not ok else None, now=float(n))
    view = D.history_view(H.load(path))
    assert "over 3 session(s)" in view
    assert "<td>2</td><td>1</td><td>50%</td><td>60 s</td><td>label_memory ×1</td>" in view   # (90 + 30) / 2
    fig = D.history_figure(H.load(path))
    assert [ax.get_xlabel() for ax in fig.axes] == ["session", "session"]
    assert figure_text(fig) == "figure: accuracy per topic | time per topic | legend: fp8; pool"
    pool_line = next(line for line in fig.axes[0].get_lines() if line.get_label() == "pool")
    assert list(pool_line.get_xdata()) == [1, 2] and list(pool_line.get_ydata()) == [0.0, 100.0]


def test_the_history_view_lists_the_plans_with_their_rubric_scores(tmp_path):
    import json
    from kvcoach import drill_history as H
    from drill_terminal import TWO_PLANS
    path = tmp_path / "drills.json"
    path.write_text(json.dumps(TWO_PLANS))
    view = D.history_view(H.load(path))
    assert "Your plans (2)" in view
    plans = view[view.index("Your plans"):]
    # oldest first: 1 + 0.8 + 1 + 0 = 2.8 of 4; then 0.6667 + 0.4 + 0 + 1 = 2.07 of 4
    first = "<tr><td>2027-01-15 08:01 UTC</td><td>-</td><td>1</td><td>0.8</td><td>1</td><td>0</td><td><b>2.8</b> / 4</td></tr>"
    second = ("<tr><td>2027-01-16 09:00 UTC</td><td>scenario 3: Qwen/Qwen2.5-7B, 8 x H200 (TP 1), 50 requests/s</td>"
              "<td>0.67</td><td>0.4</td><td>0</td><td>1</td><td><b>2.07</b> / 4</td></tr>")
    assert plans.index(first) < plans.index(second)
    assert "<th>assumptions</th><th>steps</th><th>binding</th><th>sanity</th><th>total</th>" in plans
    assert "Your plans" not in D.history_view(H.History())


# --- the interview card ---------------------------------------------------------------------------
def test_interview_sheet_figures_by_hand():
    view = I.interview_sheet_view("llama-3.1-8b", "H100-SXM", 8192, 32)
    # Llama 3.1 8B: 32 layers, 8 KV heads of 128, bf16; 8,030,261,248 parameters -> 16,060,522,496 B of weights.
    # H100 as CUDA reports it: 79.18 GiB = 85,018,877,624 B (kvlib's GPU table, from vLLM logs).
    per_token = 2 * 32 * 8 * 128 * 2
    weights = 8_030_261_248 * 2
    pool = math.ceil(85_018_877_624 * 0.92) - weights - 3 * 10**9
    fit = pool // (per_token * 8192)
    assert (per_token, fit) == (131_072, 55)
    assert "bytes per token: <b>131,072 B (128 KiB)</b>" in view
    assert f"that fit: <b>{fit}</b> (at 131,072 tokens: {pool // (per_token * 131072)})" in view
    step_ms = (weights + per_token * 8192 * 32) / 3.35e12 * 1e3
    ref_ms = (weights + per_token * 4096 * 32) / 3.35e12 * 1e3
    assert f"<b>{step_ms:,.2f} ms</b> at 8,192 tokens, {ref_ms:,.2f} ms at 4,096" in view
    assert f"B × T = <b>{weights / per_token:,.0f} token-slots</b>" in view


def test_interview_sheet_flags_what_does_not_fit():
    # 8 x 131,072 x 131,072 B = 137.44 GB of cache against the 59.16 GB pool of one H100
    assert "does not fit: KV for 8 sequences of 131,072 tokens is 137.44 GB" in I.interview_sheet_view(
        "llama-3.1-8b", "H100-SXM", 131072, 8)
    assert "fits in the pool" in I.interview_sheet_view("llama-3.1-8b", "H100-SXM", 8192, 32)
    no_pool = I.interview_sheet_view("llama-3.3-70b", "L40S", 8192, 1)
    assert "no KV pool" in no_pool and "weights are 141.11 GB" in no_pool
    fp8 = I.interview_sheet_view("llama-3.1-8b", "H100-SXM", 8192, 32, kv_dtype_bytes=1)
    assert "65,536 B (64 KiB)" in fp8                 # half of 131,072 with a 1-byte cache


def test_interview_sheet_widget_redraws():
    pinned("ipywidgets")
    box = I.interview_sheet(["llama-3.1-8b", "llama-3.3-70b"])
    before = box.view.value
    context = next(c for c in box.children if getattr(c, "description", "") == "context T (tokens)")
    context.value = 32768
    assert box.view.value != before and "one sequence of 32,768 tokens" in box.view.value


# --- the learner's own graded questions ----------------------------------------------------------
ID_VARS = ("KV_COURSE_GRADING_STUDENT", "JUPYTERHUB_USER", "KV_COURSE_STUDENT", "STUDENT_ID")


@pytest.fixture
def no_id(monkeypatch):
    """No id anywhere: no environment variable, nothing claimed (and nothing left claimed afterwards)."""
    from autograder import checks
    for var in ID_VARS:
        monkeypatch.delenv(var, raising=False)
    checks.claim_student(None)
    yield checks
    checks.claim_student(None)


def test_without_an_id_every_view_says_what_to_do(no_id):
    assert "No student id yet" in D.use_student_id("").data
    for view in (D.my_questions().data, D.question_view("pool").data):
        assert "STUDENT_ID" in view and "Exercise" not in view
    with pytest.raises(LookupError, match="STUDENT_ID"):
        D.my_question("pool")


def test_a_claimed_id_draws_answer_free_questions(no_id):
    assert "drawn for **ada**" in D.use_student_id("  ada ").data
    q = D.my_question("kv_per_token")
    assert not hasattr(q, "answer") and not hasattr(q, "check")
    p = q.params
    by_hand = 2 * p["layers"] * p["kv_heads"] * p["head_dim"] * p["dtype_bytes"]
    listed = D.my_questions().data
    assert "Questions drawn for <b>ada</b>" in listed
    assert [f"Exercise {n} ·" in listed for n in range(2, 10)] == [True] * 8
    assert f"{by_hand:,}" not in listed and str(by_hand) not in listed       # the answer is nowhere on the page
    assert f"num_key_value_heads {p['kv_heads']}" in D.question_view("kv_per_token").data   # what it states


def test_another_id_draws_other_questions(no_id):
    D.use_student_id("ada")
    ada = [D.my_question(t).question for t in D.drills.GRADED_TOPICS]
    D.use_student_id("alan")
    alan = [D.my_question(t).question for t in D.drills.GRADED_TOPICS]
    assert ada != alan
    D.use_student_id("ada")
    assert [D.my_question(t).question for t in D.drills.GRADED_TOPICS] == ada     # the same id, the same draw


def test_the_notebooks_id_comes_before_a_hub_login_which_is_named(no_id, monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "hubuser")
    shown = D.use_student_id("ada").data
    assert "drawn for **ada**" in shown and "signed in to this hub as **hubuser**" in shown
    no_id.claim_student(None)
    assert "drawn for **hubuser**" in D.use_student_id("").data and "signed in" not in D.use_student_id("").data


def test_the_graders_id_wins_over_the_notebook(no_id, monkeypatch):
    monkeypatch.setenv("KV_COURSE_GRADING_STUDENT", "graded")
    shown = D.use_student_id("ada").data
    assert "**graded**" in shown and "not for “ada”" in shown and "grader" in shown


def test_on_binder_the_generated_user_is_never_used(no_id, monkeypatch):
    from ch09_drill_answers import BINDER_ENV, BINDER_USER

    for name, value in BINDER_ENV.items():
        monkeypatch.setenv(name, value)
    empty = D.use_student_id("").data
    assert "No student id yet" in empty and "Binder" in empty and BINDER_USER not in empty
    assert BINDER_USER not in D.my_questions().data
    shown = D.use_student_id("p1").data
    assert "drawn for **p1**" in shown and "signed in" not in shown and BINDER_USER not in shown


def test_only_graded_topics_are_questions(no_id):
    D.use_student_id("ada")
    with pytest.raises(DrillError, match="not a graded topic"):
        D.my_question("fp8")


def test_a_new_question_clears_the_last_verdict_and_steps():
    # [interview 2026 §1]: after "review" (or "new question") on the same topic, the last question's verdict and worked
    # steps -- whose numbers answer another question -- are no longer shown
    s, _ = _session(topics=("kv_per_token",))
    first = s.new_question()
    s.answer("1")
    view = D.drill_view(s)
    assert "worked steps:" in view and "✗" in view
    second = s.review_question()          # the only topic: the same topic, another draw
    assert second.topic == first.topic and second.seed != first.seed
    view = D.drill_view(s)
    assert "worked steps:" not in view and "✗" not in view and "answered in" not in view
    assert "score: <b>0 / 1</b>" in view  # the score stays
    s.answer(str(_by_hand_bytes_per_token(second.params)))
    assert "✓" in D.drill_view(s)


def test_history_shows_every_topics_coverage_and_why_with_one_colour_each(tmp_path):
    # [interview 2026 §4]: the notebook shows what --stats shows (coverage, reasons), a distinct colour per topic
    from kvcoach import drill_history as H
    from kvcoach.drills import TOPICS
    h = H.History(tmp_path / "drills.json")
    day = 86_400.0
    for n, topic in enumerate(TOPICS):                   # every topic asked once, in its own session: 21 lines
        h.record(h.new_session("notebook", now=float(n)), topic, n % 2 == 0, 10.0, None if n % 2 == 0 else
                 "label_memory", now=float(n))
    h.record(h.new_session("notebook", now=day), "pool", False, 10.0, slips=("gb_for_gib",), now=day)
    view = D.history_view(H.load(tmp_path / "drills.json"), now=4 * day)
    assert f"{len(TOPICS)} of {len(TOPICS)} topics asked" in view
    assert "missed twice, last 3 days ago (slip gb_for_gib): due" in view        # pool: missed at 3 and at day 1
    assert view.count("<tr>") == 1 + len(TOPICS)
    colors = D.topic_colors()
    assert len(set(colors.values())) == len(TOPICS)     # never cycled: 21 topics, 21 colours
    fig = D.history_figure(H.load(tmp_path / "drills.json"))
    lines = {line.get_label(): line.get_color() for line in fig.axes[0].get_lines()}
    assert len(lines) == len(TOPICS) and len(set(lines.values())) == len(TOPICS)
    assert all(lines[t] == colors[t] and f"background:{colors[t]}" in view for t in TOPICS)   # table and plot agree
    empty = D.history_view(H.History(), ("pool", "fp8"))
    assert empty.count("never asked: due") == 2 and "Every topic is due" in empty


def test_review_says_why_the_topic_was_picked(tmp_path):
    from kvcoach import drill_history as H
    history = H.History()
    s0 = history.new_session("cli", now=0.0)
    history.record(s0, "crossover", False, 20.0, "missing_batch", now=0.0)
    history.record(s0, "crossover", False, 20.0, "missing_batch", now=86_400.0)
    s = D.DrillSession(seed=7, clock=FakeClock(), history=history, wall=lambda: 4 * 86_400.0)
    assert s.review_question().topic == "crossover"
    assert s.review_reason == "missed twice, last 3 days ago (slip missing_batch): due"
    assert "review: missed twice, last 3 days ago" in D.drill_view(s)
    s.new_question("pool")
    assert s.review_reason is None and "review:" not in D.drill_view(s)


def test_a_graded_question_states_the_drills_units_line():
    from autograder.checks import claim_student
    from kvcoach.drills import student_problem
    claim_student("ada")
    try:
        html_text = D.question_view("pool").data
    finally:
        claim_student(None)
    # the same line as kvlib drill and drill mode print: the units, the one tolerance, the notations read
    assert "answer in tokens, within 0.5% (any notation: 12800, 1.28e4, 12,800 or 12,800 tokens)" in html_text
    assert student_problem("ada", "pool").public().units_line() in html_text.replace("&#x27;", "'")


def test_drill_mode_records_both_slips_a_stated_figure_s_feedback_names():
    # as tests/test_drill_assumptions.py: Qwen2.5-32B's bf16 figure halved (2 x 64 x 8 x 128 x 2 / 2 = 131,072) is
    # missing_kv_factor, "Or:" wrong_16bit_vs_fp8; drill mode with "state assumptions" keeps both
    from kvcoach import drill_history
    from kvcoach.drills import generate

    history = drill_history.History()
    s = D.DrillSession(("kv_per_token",), seed=0, clock=lambda: 0.0, history=history)
    s.assumptions = True
    s.new_question("kv_per_token")
    s.problem = generate("kv_per_token", 2)
    a = s.answer("bytes=131072 dtype=bf16")
    assert a.slips == ("missing_kv_factor", "wrong_16bit_vs_fp8")
    assert history.attempts[-1]["slips"] == ["missing_kv_factor", "wrong_16bit_vs_fp8"]
    assert s.slips() == {"missing_kv_factor": 1, "wrong_16bit_vs_fp8": 1}
