"""Drill mode and the learner's own graded questions.

Two things a chapter shows with the seeded problems of ``kvcoach.drills``:

* **Drill mode**, for practice: ``DrillSession`` is a plain state object (``new_question``,
  ``answer(text) -> Attempt``, ``score``) with an injectable clock, so tests drive it
  without widgets or real time; ``drill_view(session)`` returns its view as HTML, and
  ``drill_mode()`` wires ipywidgets (a topic menu, "new question", an answer box, "check")
  to the two. The feedback is ``Problem.check``'s, which names the slip a wrong answer
  matches (``kvcoach.slips``).
* **The graded drills**: every learner gets their own variant of each graded topic, drawn
  from their student id alone (``kvcoach.drills.student_problem``). ``use_student_id`` shows
  which id the questions are drawn for (a notebook's ``STUDENT_ID`` is claimed through
  ``kvcoach.learner.claim_student`` and comes before a hub login, which Binder's never is; in
  grading the submission's id wins);
  ``my_questions`` and ``show_question`` show the questions without their answers, and
  ``my_question`` returns one question's public part (its text, units, tolerance and
  inputs) for a worked solution to compute from. Nothing here hands the notebook an
  object that holds the answer of a graded question.

Used in: ch09_interview_drills.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import random
import time
from dataclasses import dataclass, field

from IPython.display import HTML, Markdown, display

import kvcoach.drills as drills
from kvcoach import drill_assumptions, drill_history, drill_steps, learner

ANY_TOPIC = "any topic"
RIGHT_COLOR = "#2e7d32"
WRONG_COLOR = "#c0392b"
NO_ID_MESSAGE = ("No student id yet: type a name between the quotes of `STUDENT_ID = \"\"` at the top of this "
                 "section (in a class, the id you are graded by; any name, for self-study) and run that cell, then "
                 "run this one again. On a course hub, an empty STUDENT_ID uses your login; on Binder it never "
                 "does (Binder's user name is made up for the session).")
TOPIC_TITLES = {
    "kv_per_token": "bytes per token from a config",
    "per_sequence": "bytes of one sequence",
    "concurrency": "sequences that fit in a budget",
    "pool": "the KV pool an engine reserves",
    "block_waste": "slots wasted in last blocks",
    "mla_vs_gqa": "MLA bytes per token",
    "tp_per_gpu": "bytes per token on one GPU under TP",
    "crossover": "the weight/KV crossover context",
    "step_time": "a decode step at the bandwidth limit",
    "fp8": "tokens in an fp8 cache",
    "plan_step": "nodes for a load, by memory",
    "ttft": "prefill time to the first token",
    "ridge_batch": "the batch where decode turns compute-bound",
    "decode_rate": "decode tokens per second",
    "chunked_prefill": "a chunked prefill sharing a step with decodes",
    "batching": "continuous against static batching",
    "prefix_hit": "prefill saved by prefix-cache hits",
    "spec_decode": "speculative decoding: its memory or its speed-up",
    "quant_speedup": "weight-only quantization at batch 1",
    "allreduce": "tensor-parallel all-reduce bytes per step",
    "cost": "cost per million tokens",
    "long_ttft": "a long prompt's time to first token",
    "moe_decode": "a mixture of experts at decode",
    "requests_concurrency": "requests in flight and chunked prefill",
    "disagg_transfer": "disaggregated prefill and decode",
    "expert_parallel": "expert parallelism's all-to-all",
    "eagle_mtp": "draft heads: EAGLE and multi-token prediction",
    "low_precision_compute": "FP8 and FP4 compute",
    "hybrid_state": "a hybrid's constant state",
    "indexer_cache": "a sparse-attention indexer's cache",
}


# --- drill mode: the state ---------------------------------------------------------------
@dataclass(frozen=True)
class Attempt:
    """One checked answer: what was typed, the verdict, the feedback and the seconds it took."""

    topic: str
    text: str
    correct: bool
    feedback: str
    seconds: float
    scored: bool          # False for a retry, or for input that is not a number (nothing counted)
    steps: tuple = ()     # after a miss: the worked steps and where the number went wrong (kvcoach.drill_steps)
    fields: tuple = ()    # a structured answer: one kvcoach.drill_assumptions.FieldVerdict per field
    slip: str | None = None
    slips: tuple = ()     # every slip key the feedback named (recorded in the history)
    seed: int | None = None   # the problem it answered (a new question clears the view of the last one)


@dataclass
class DrillSession:
    """Drill mode without widgets: ask, check, keep the time and the score.

    ``topics`` limits the draw (default: every topic of ``kvcoach.drills.TOPICS``); ``seed``
    makes the sequence of questions repeatable; ``clock`` returns seconds (default
    ``time.monotonic``; a test passes its own). Only the first answer to a question is
    scored, as in an interview; later tries still get feedback. A miss comes with the
    worked steps for the question's numbers and where the number went wrong.

    ``history`` (a ``kvcoach.drill_history.History``; None: nothing kept) records each scored
    answer, dated by ``wall``; ``review_question()`` draws the topic its review rule picks.
    ``assumptions=True`` asks a structured answer (``tokens=... memory=cuda``) where an
    assumption changes the figure, checked field by field (``kvcoach.drill_assumptions``).

    >>> ticks = iter([0.0, 42.0])
    >>> s = DrillSession(seed=1, clock=lambda: next(ticks))
    >>> p = s.new_question("kv_per_token")
    >>> a = s.answer(str(p.answer))
    >>> a.correct, a.seconds, s.score
    (True, 42.0, (1, 1))

    Used in: ch09_interview_drills (through drill_mode).
    """

    topics: tuple = tuple(drills.TOPICS)
    seed: int | None = None
    clock: object = time.monotonic
    problem: object = None
    asked_at: float | None = None
    attempts: list = field(default_factory=list)
    correct: int = 0
    asked: int = 0
    history: object = None
    wall: object = time.time
    assumptions: bool = False
    review_reason: str | None = None     # why "review" picked the current question's topic (None: not a review)
    _scored_current: bool = False
    _rng: random.Random = field(init=False, repr=False)
    _session_id: str | None = field(init=False, default=None, repr=False)

    def __post_init__(self):
        self.topics = tuple(self.topics)
        unknown = [t for t in self.topics if t not in drills.TOPICS]
        if unknown or not self.topics:
            raise drills.DrillError(f"unknown topic(s) {unknown} (known: {', '.join(drills.TOPICS)})")
        self._rng = random.Random(self.seed)
        if self.history is not None:
            self._session_id = self.history.new_session("notebook", now=self.wall())

    def new_question(self, topic: str | None = None):
        """Draw a question (of ``topic``, or of a random one of ``topics``) and start its clock."""
        if topic in (None, "", ANY_TOPIC):
            topic = self._rng.choice(self.topics)
        elif topic not in drills.TOPICS:
            raise drills.DrillError(f"unknown topic {topic!r} (known: {', '.join(drills.TOPICS)})")
        self.problem = drills.generate(topic, self._rng.getrandbits(63))
        self.asked_at = self.clock()
        self._scored_current = False
        self.review_reason = None
        return self.problem

    def review_question(self):
        """Draw a question on the topic the history's review rule asks next (missed topics first); ``review_reason``
        says why it was picked ("missed twice, last 3 days ago: due")."""
        history = self.history if self.history is not None else drill_history.History()
        now = self.wall()
        topic = drill_history.review_topics(history, self.topics, 1, now=now)[0]
        reason = drill_history.review_reasons(history, [topic], now=now)[topic]
        problem = self.new_question(topic)
        self.review_reason = reason
        return problem

    def elapsed(self) -> float:
        """Seconds since the current question was asked (0 before the first)."""
        return 0.0 if self.asked_at is None else self.clock() - self.asked_at

    def target(self) -> int:
        """The clock's target for the current question (``kvcoach.drill_history.target_seconds``; 0 before one)."""
        return drill_history.target_seconds(self.problem) if self.problem is not None else 0

    def structured(self) -> bool:
        """Whether the current question asks a structured answer (assumptions on, and it has some)."""
        return (self.assumptions and self.problem is not None
                and len(drill_assumptions.fields(self.problem)) > 1)

    def answered(self) -> bool:
        """Whether the current question has had its scored answer (the clock stops then)."""
        return self._scored_current

    def answer(self, text) -> Attempt:
        """Check ``text`` against the current question; the first number typed is scored."""
        if self.problem is None:
            return Attempt("", str(text), False, "press “new question” first.", 0.0, False)
        text = str(text).strip()
        seconds = self.elapsed()
        p = self.problem
        if not text:
            return Attempt(p.topic, text, False, "type a number first (units optional).", seconds, False, seed=p.seed)
        verdicts, figure = (), text
        if self.structured():
            verdict = drill_assumptions.check(p, text)
            verdicts, figure = verdict.fields, verdict.fields[0].stated or ""
            correct, named = verdict.correct, verdict.slips
            feedback = "every field right." if correct else "not quite: see each field."
            is_number = bool(figure) and verdict.fields[0].message.startswith(("correct", "not quite"))
        else:
            judged = p.verdict(text)
            correct, feedback, named = judged.correct, judged.feedback, judged.slips
            is_number = judged.value is not None
        if not is_number:   # bad input: say so, without giving the answer away or counting it
            feedback = (verdicts[0].message if verdicts else feedback).split(" The answer is ")[0]
            verdicts = ()
        scored = is_number and not self._scored_current
        figure_wrong = is_number and not (verdicts[0].ok if verdicts else correct)
        shown = drill_assumptions.as_stated(p, text) if verdicts else p     # the steps on the stated premise
        steps = tuple(drill_steps.worked_lines(shown) + drill_steps.where_lines(shown, figure)) if figure_wrong else ()
        if scored:
            self._scored_current = True
            self.asked += 1
            self.correct += correct
            if self.history is not None:
                self.history.record(self._session_id, p.topic, correct, seconds, slips=named, now=self.wall(),
                                    target=self.target())
        attempt = Attempt(p.topic, text, correct, feedback, seconds, scored, steps, verdicts,
                          named[0] if named else None, tuple(named), p.seed)
        self.attempts.append(attempt)
        return attempt

    @property
    def score(self) -> tuple:
        """``(correct, asked)``: first answers only."""
        return self.correct, self.asked

    def slips(self) -> dict:
        """``{slip key: count}`` over the scored wrong answers (the key in brackets in the feedback)."""
        out: dict = {}
        for a in self.attempts:
            if a.scored and not a.correct:
                for key in a.slips or ((a.slip,) if a.slip else ()):
                    out[key] = out.get(key, 0) + 1
        return out


# --- drill mode: the view ----------------------------------------------------------------
def clock_text(session: DrillSession) -> str:
    """The clock drill mode shows while a question waits: seconds so far against the question's target.

    >>> ticks = iter([0.0, 12.0, 80.0])
    >>> s = DrillSession(seed=1, clock=lambda: next(ticks))
    >>> _ = s.new_question("kv_per_token")
    >>> clock_text(s), clock_text(s)
    ('time 12 s (target 50 s)', 'time 80 s (target 50 s, 30 s over)')

    Used in: ch09_interview_drills (through drill_mode).
    """
    if session.problem is None:
        return "time –"
    if session.answered():
        last = next(a for a in reversed(session.attempts) if a.scored)
        seconds = last.seconds
    else:
        seconds = session.elapsed()
    target = session.target()
    over = f", {seconds - target:.0f} s over" if seconds > target else ""
    return f"time {seconds:.0f} s (target {target} s{over})"


def _steps_html(lines) -> str:
    return ("<pre style='font-size:12px;background:#f6f6f6;padding:4px 8px;margin:4px 0;white-space:pre-wrap'>"
            + html.escape("\n".join(lines)) + "</pre>")


def drill_view(session: DrillSession) -> str:
    """Drill mode's view as HTML: the question, the last feedback and its time, the worked steps after a miss,
    the score.

    >>> ticks = iter([0.0, 30.0, 31.0])
    >>> s = DrillSession(seed=1, clock=lambda: next(ticks))
    >>> _ = s.new_question("kv_per_token"); _ = s.answer("1")
    >>> view = drill_view(s)
    >>> "score: <b>0 / 1</b>" in view and "answered in 30 s" in view and "worked steps:" in view
    True

    Used in: ch09_interview_drills (through drill_mode).
    """
    p = session.problem
    parts = ["<div style='font-family:sans-serif;font-size:13px;line-height:1.6;max-width:1000px'>"]
    if p is None:
        parts.append("Press <b>new question</b> to draw one (or <b>review</b>: the topics your history says "
                     "to practise). Answer in the box (units optional: “1.07 GB”, “131,072”), then press "
                     "<b>check</b>.")
    else:
        parts.append(f"<div><b>{html.escape(TOPIC_TITLES.get(p.topic, p.topic))}</b> "
                     f"<span style='color:#666'>(topic <code>{p.topic}</code>; {html.escape(p.units_line())}; "
                     f"target {session.target()} s)</span></div>"
                     + (f"<div style='color:#555'>review: {html.escape(session.review_reason)}</div>"
                        if session.review_reason else "")
                     + f"<div style='margin:4px 0 6px 0'>"
                     f"{html.escape(drill_assumptions.open_question(p) if session.structured() else p.question)}</div>")
        if session.structured():
            parts.append("<div style='color:#555'>Answer as key=value pairs: <code>"
                         f"{html.escape(drill_assumptions.prompt(p))}</code></div>")
    last = session.attempts[-1] if session.attempts else None
    # only the verdict on the question shown: after "new question" or "review" (even on the same topic), the last
    # question's verdict and worked steps would answer another question's numbers
    if last is not None and p is not None and last.topic == p.topic and last.seed in (None, p.seed):
        color = RIGHT_COLOR if last.correct else WRONG_COLOR
        mark = "✓" if last.correct else "✗"
        note = "" if last.scored else " <span style='color:#666'>(not scored)</span>"
        parts.append(f"<div style='color:{color}'>{mark} {html.escape(last.feedback)}{note}</div>")
        for f in last.fields:
            parts.append(f"<div style='color:{RIGHT_COLOR if f.ok else WRONG_COLOR};margin-left:1em'>"
                         f"{'✓' if f.ok else '✗'} <b>{html.escape(f.name)}</b>: {html.escape(f.message)}</div>")
        if last.steps:
            parts.append(_steps_html(last.steps))
        target = session.target()
        over = f", {last.seconds - target:.0f} s over" if last.seconds > target else ""
        parts.append(f"<div style='color:#555'>answered in {last.seconds:.0f} s (target {target} s{over})</div>")
    correct, asked = session.score
    times = [a.seconds for a in session.attempts if a.scored]
    average = f", {sum(times) / len(times):.0f} s per question on average" if times else ""
    slips = session.slips()
    slip_text = ("; slips so far: " + ", ".join(f"{k} ×{v}" for k, v in sorted(slips.items()))) if slips else ""
    parts.append(f"<div style='margin-top:4px'>score: <b>{correct} / {asked}</b>{average}{html.escape(slip_text)}"
                 "</div></div>")
    return "".join(parts)


def _open_history(history):
    """(History or None, a one-line problem or ''): True opens the learner's file, None/False keeps nothing."""
    if history is True:
        try:
            return drill_history.load(), ""
        except drill_history.HistoryError as e:
            return None, f"{e} This drill keeps no history until then."
    if history in (None, False):
        return None, ""
    if isinstance(history, drill_history.History):
        return history, ""
    return drill_history.load(history), ""


async def _tick(session, clock_w, seconds):
    """Redraw the clock every ``seconds`` until the current question is answered (or another is drawn)."""
    problem = session.problem
    while session.problem is problem and not session.answered():
        clock_w.value = clock_text(session)
        await asyncio.sleep(seconds)
    clock_w.value = clock_text(session)


def drill_mode(topics=None, *, seed: int | None = None, clock=time.monotonic, history=True, tick: float | None = 1.0):
    """Drill mode as ipywidgets: a topic menu, "new question", "review", "state assumptions", an answer box,
    "check", a clock and the view.

    A thin wrapper: every button calls the ``DrillSession`` and redraws ``drill_view``. ``history``:
    True keeps the learner's history (``kvcoach.drill_history``, shared with ``kvlib drill``; an unreadable
    file is named in the view and left alone), False none, or a ``History``/path. ``tick``: seconds
    between clock redraws while a question waits (None: only on each click). Returns the ``VBox``;
    ``box.session`` is the session, ``box.view`` the HTML widget and ``box.clock`` the clock.

    Used in: ch09_interview_drills.
    """
    import ipywidgets as widgets

    kept, problem_text = _open_history(history)
    session = DrillSession(tuple(topics or drills.TOPICS), seed=seed, clock=clock, history=kept)
    topic_w = widgets.Dropdown(options=[ANY_TOPIC, *session.topics], value=ANY_TOPIC, description="topic",
                               layout=widgets.Layout(width="320px"))
    new_w = widgets.Button(description="new question", button_style="primary")
    review_w = widgets.Button(description="review", tooltip="a question on the topic your history says to practise")
    state_w = widgets.Checkbox(value=False, description="state assumptions", indent=False)
    answer_w = widgets.Text(placeholder="your answer, e.g. 131072 or 1.07 GB", description="answer",
                            layout=widgets.Layout(width="420px"))
    check_w = widgets.Button(description="check")
    clock_w = widgets.HTML(clock_text(session))
    note = (f"<div style='color:{WRONG_COLOR}'>{html.escape(problem_text)}</div>" if problem_text else "")
    view = widgets.HTML(note + drill_view(session))

    def redraw():
        view.value = note + drill_view(session)
        clock_w.value = clock_text(session)

    def start_clock():
        if tick:
            with contextlib.suppress(RuntimeError):      # no running loop (not a kernel): it redraws on clicks only
                asyncio.get_running_loop().create_task(_tick(session, clock_w, tick))

    def on_new(_=None):
        session.new_question(topic_w.value)
        answer_w.value = ""
        redraw()
        start_clock()

    def on_review(_=None):
        session.review_question()
        answer_w.value = ""
        redraw()
        start_clock()

    def on_state(change):
        session.assumptions = bool(change["new"])
        redraw()

    def on_check(_=None):
        session.answer(answer_w.value)
        redraw()

    new_w.on_click(on_new)
    review_w.on_click(on_review)
    check_w.on_click(on_check)
    state_w.observe(on_state, names="value")
    box = widgets.VBox([widgets.HBox([topic_w, new_w, review_w, state_w]), widgets.HBox([answer_w, check_w, clock_w]),
                        view])
    box.session, box.view, box.clock = session, view, clock_w
    return box


# --- the history: a table and a plot over sessions ---------------------------------------------------
def topic_colors(topics=None) -> dict:
    """One distinct colour per topic, the same in the table and the plot: matplotlib's tab20, then tab20b
    (40 colours), in the order of ``kvcoach.drills.TOPICS`` (a topic keeps its colour whatever was asked).

    >>> colors = topic_colors()
    >>> len(set(colors.values())) == len(colors) == len(drills.TOPICS)
    True
    """
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    palette = [to_hex(colormaps[name](i)) for name in ("tab20", "tab20b") for i in range(20)]
    order = list(drills.TOPICS) + [t for t in (topics or ()) if t not in drills.TOPICS]
    return {t: palette[i % len(palette)] for i, t in enumerate(order)}


def history_view(history, topics=None, *, now: float | None = None) -> str:
    """The learner's drill history as HTML: every topic's coverage (asked, right, accuracy, median time, slips
    made) and its next review with the reason, a colour swatch per topic as in the plot. A topic never asked
    counts as due. ``topics`` default: every drill topic.

    Used in: ch09_interview_drills (through drill_stats).
    """
    topics = list(topics or drills.TOPICS)
    rows = history.topic_stats()
    reasons = drill_history.review_reasons(history, topics, now=now)
    colors = topic_colors(topics)
    where = f" (<code>{html.escape(str(history.path))}</code>)" if history.path else ""
    cells = []
    for t in topics:
        r = rows.get(t)
        swatch = (f"<span style='display:inline-block;width:10px;height:10px;background:{colors[t]};"
                  "margin-right:4px'></span>")
        figures = (f"<td>{r.attempts}</td><td>{r.correct}</td><td>{r.accuracy:.0%}</td>"
                   f"<td>{r.median_seconds:.0f} s</td>"
                   f"<td>{html.escape(', '.join(f'{k} ×{v}' for k, v in r.slips.items()) or '–')}</td>"
                   if r else "<td>0</td><td>0</td><td>–</td><td>–</td><td>–</td>")
        cells.append(f"<tr><td>{swatch}{html.escape(TOPIC_TITLES.get(t, t))} <code>{t}</code></td>{figures}"
                     f"<td>{html.escape(reasons[t])}</td></tr>")
    sessions = len(history.data["sessions"])
    asked = sum(1 for t in topics if t in rows)
    intro = (f"Your drill history over {sessions} session(s){where}: {asked} of {len(topics)} topics asked."
             if rows else f"No drills recorded yet{where}: answer a few in drill mode above, or with "
                          "<code>kvlib drill</code> in a terminal (both keep the same history). Every topic is due.")
    return ("<div style='font-family:sans-serif;font-size:13px'>"
            f"<div>{intro}</div>"
            "<table><tr><th>topic</th><th>asked</th><th>right</th><th>accuracy</th><th>median time</th>"
            f"<th>slips made</th><th>next review</th></tr>{''.join(cells)}</table>{plans_view(history)}</div>")


def plans_view(history) -> str:
    """The plans the learner ran (plan mode, ``kvlib drill --plan``) as an HTML table: date, scenario, the
    four rubric scores (each from 0 to 1) and their total of 4; empty when there is none.

    Used in: ch09_interview_drills (through drill_stats).
    """
    rows = drill_history.plan_rows(history)
    if not rows:
        return ""
    keys = drill_history.RUBRIC_KEYS
    cells = "".join(f"<tr><td>{html.escape(r.date)}</td><td>{html.escape(r.scenario)}</td>"
                    + "".join(f"<td>{round(r.rubric[k], 2):g}</td>" for k in keys)
                    + f"<td><b>{round(r.total, 2):g}</b> / {len(keys)}</td></tr>" for r in rows)
    heads = "".join(f"<th>{k}</th>" for k in keys)
    return (f"<div style='margin-top:8px'>Your plans ({len(rows)}), each scored from 0 to 1 on the rubric: "
            "assumptions stated, steps right, the binding constraint named, the sanity line.</div>"
            f"<table><tr><th>date</th><th>scenario</th>{heads}<th>total</th></tr>{cells}</table>")


def history_figure(history):
    """Accuracy and median time per topic, one point per session that asked it; None without any history.

    Used in: ch09_interview_drills (through drill_stats).
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    sessions = history.session_stats()
    topics = sorted({t for _, _, rows in sessions for t in rows})
    if not topics:
        return None
    colors = topic_colors(topics)           # one colour per topic, never cycled (11 or more topics)
    fig, (acc_ax, time_ax) = plt.subplots(1, 2, figsize=(11, 3.6))
    for topic in topics:
        xs = [n for n, (_, _, rows) in enumerate(sessions, 1) if topic in rows]
        acc_ax.plot(xs, [100 * sessions[n - 1][2][topic].accuracy for n in xs], marker="o", label=topic,
                    color=colors[topic])
        time_ax.plot(xs, [sessions[n - 1][2][topic].median_seconds for n in xs], marker="o", label=topic,
                     color=colors[topic])
    acc_ax.set(xlabel="session", ylabel="first answers right (%)", title="accuracy per topic", ylim=(-5, 105))
    time_ax.set(xlabel="session", ylabel="median time per answer (s)", title="time per topic")
    time_ax.set_ylim(bottom=0)
    for ax in (acc_ax, time_ax):
        ax.set_xlim(0.5, len(sessions) + 0.5)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    time_ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    plt.close(fig)
    return fig


def drill_stats(path=None) -> None:
    """Show the learner's drill history (``kvcoach.drill_history``): the topics' table and the plans' rubric
    scores (``history_view``), then the plot over sessions.

    Reads the file again each time it runs, so after a kernel restart it shows what drill mode and
    ``kvlib drill`` recorded before. An unreadable file is named in one line (and left alone).

    Used in: ch09_interview_drills.
    """
    try:
        history = drill_history.load(path)
    except drill_history.HistoryError as e:
        display(HTML(f"<div style='color:{WRONG_COLOR}'>{html.escape(str(e))}</div>"))
        return
    display(HTML(history_view(history, drills.TOPICS)))
    fig = history_figure(history)
    if fig is not None:
        display(fig)


# --- the graded drills: the learner's own questions -----------------------------------------------
def _current_student():
    """The id the graded questions are drawn for (``kvcoach.learner``'s resolution), or None."""
    return learner.current_student()


def use_student_id(name: str = "") -> Markdown:
    """Claim ``name`` as this notebook's student id (if not empty) and say which id is in use.

    The id in use comes from ``kvcoach.learner.current_student()``: in grading the
    submission's, else the claimed name, else a hub login (never Binder's), else
    ``KV_COURSE_STUDENT``. On a course hub, a claimed name other than the login is
    shown with the login it sets aside (a class that collects through the hub grades
    by the login).

    Used in: ch09_interview_drills.
    """
    name = (name or "").strip()
    if name:
        learner.claim_student(name)
    used = _current_student()
    if used is None:
        return Markdown(f"**{NO_ID_MESSAGE.replace('run this one again', 'run the cells below')}**")
    if name and used != name:
        return Markdown(f"Your questions are drawn for **{html.escape(used)}**, the id the grader gives this "
                        f"submission, not for “{html.escape(name)}”.")
    hub = learner.hub_user()
    if hub and used != hub:
        return Markdown(f"Your questions are drawn for **{html.escape(used)}**. You are signed in to this hub as "
                        f"**{html.escape(hub)}**: if your class collects notebooks through the hub, you are graded "
                        f"as {html.escape(hub)}, on {html.escape(hub)}'s questions; empty the quotes to use them.")
    return Markdown(f"Your questions are drawn for **{html.escape(used)}**. Keep this id: another id gives "
                    "other questions.")


def my_question(topic: str):
    """The public part of this learner's question on ``topic``: text, units, tolerance, inputs; no answer.

    Raises one line (``LookupError``) when no student id is set. A worked solution computes
    its answer from ``.params``.

    Used in: ch09_interview_drills.
    """
    if topic not in drills.GRADED_TOPICS:
        raise drills.DrillError(f"{topic!r} is not a graded topic (graded: {', '.join(drills.GRADED_TOPICS)})")
    return learner.my_question(topic)


def _exercise_number(topic: str) -> int:
    """Graded topics are Exercises 2 to 18, in ``GRADED_TOPICS`` order (Exercise 1 is the formula)."""
    return drills.GRADED_TOPICS.index(topic) + 2


def _question_html(question, number: int) -> str:
    return (f"<b>Exercise {number} · {html.escape(TOPIC_TITLES.get(question.topic, question.topic))}</b> "
            f"<span style='color:#666'>({html.escape(question.units_line())})</span><br>"
            f"{html.escape(question.question)}")


def question_view(topic: str) -> HTML:
    """This learner's question on ``topic``, answer-free, or what to do when no id is set (never raises)."""
    try:
        question = my_question(topic)
    except LookupError:
        return HTML(f"<div style='color:{WRONG_COLOR}'>{html.escape(NO_ID_MESSAGE)}</div>")
    return HTML("<div style='border-left:4px solid #4c72b0;padding:2px 10px;margin:4px 0'>"
                f"{_question_html(question, _exercise_number(topic))}</div>")


def show_question(topic: str) -> None:
    """Display this learner's question on ``topic`` (``question_view``), from anywhere in a cell.

    An answer cell's first line calls it, so the question shows above the learner's number.

    Used in: ch09_interview_drills.
    """
    display(question_view(topic))


def my_questions() -> HTML:
    """All of this learner's graded questions, answer-free, one block each (or what to do without an id).

    Used in: ch09_interview_drills.
    """
    student = _current_student()
    if student is None:
        return HTML(f"<div style='color:{WRONG_COLOR}'>{html.escape(NO_ID_MESSAGE)}</div>")
    blocks = [f"<li style='margin-bottom:6px'>{_question_html(my_question(t), _exercise_number(t))}</li>"
              for t in drills.GRADED_TOPICS]
    return HTML(f"<div>Questions drawn for <b>{html.escape(student)}</b>:<ul style='list-style:none;"
                f"padding-left:0'>{''.join(blocks)}</ul></div>")
