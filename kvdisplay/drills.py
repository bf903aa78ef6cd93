"""Drill mode and the learner's own graded questions.

Two things a chapter shows with the seeded problems of ``kvlib.drills``:

* **Drill mode**, for practice: ``DrillSession`` is a plain state object (``new_question``,
  ``answer(text) -> Attempt``, ``score``) with an injectable clock, so tests drive it
  without widgets or real time; ``drill_view(session)`` returns its view as HTML, and
  ``drill_mode()`` wires ipywidgets (a topic menu, "new question", an answer box, "check")
  to the two. The feedback is ``Problem.check``'s, which names the slip a wrong answer
  matches (``kvlib.slips``).
* **The graded drills**: every learner gets their own variant of each graded topic, drawn
  from their student id alone (``kvlib.drills.student_problem``). ``use_student_id`` shows
  which id the questions are drawn for (a notebook's ``STUDENT_ID`` is claimed through
  ``autograder.checks.claim_student``; in grading the submission's id wins);
  ``my_questions`` and ``show_question`` show the questions without their answers, and
  ``my_question`` returns one question's public part (its text, units, tolerance and
  inputs) for a worked solution to compute from. Nothing here hands the notebook an
  object that holds the answer of a graded question.

Used in: ch09_interview_drills.
"""

from __future__ import annotations

import html
import random
import time
from dataclasses import dataclass, field

from IPython.display import HTML, Markdown, display

import kvlib.drills as drills

ANY_TOPIC = "any topic"
RIGHT_COLOR = "#2e7d32"
WRONG_COLOR = "#c0392b"
NO_ID_MESSAGE = ("No student id yet: type a name between the quotes of `STUDENT_ID = \"\"` at the top of this "
                 "section (any name, for self-study) and run that cell, then run this one again. On a course "
                 "hub your login is used instead.")
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


@dataclass
class DrillSession:
    """Drill mode without widgets: ask, check, keep the time and the score.

    ``topics`` limits the draw (default: every topic of ``kvlib.drills.TOPICS``); ``seed``
    makes the sequence of questions repeatable; ``clock`` returns seconds (default
    ``time.monotonic``; a test passes its own). Only the first answer to a question is
    scored, as in an interview; later tries still get feedback.

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
    _scored_current: bool = False
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self):
        self.topics = tuple(self.topics)
        unknown = [t for t in self.topics if t not in drills.TOPICS]
        if unknown or not self.topics:
            raise drills.DrillError(f"unknown topic(s) {unknown} (known: {', '.join(drills.TOPICS)})")
        self._rng = random.Random(self.seed)

    def new_question(self, topic: str | None = None):
        """Draw a question (of ``topic``, or of a random one of ``topics``) and start its clock."""
        if topic in (None, "", ANY_TOPIC):
            topic = self._rng.choice(self.topics)
        elif topic not in drills.TOPICS:
            raise drills.DrillError(f"unknown topic {topic!r} (known: {', '.join(drills.TOPICS)})")
        self.problem = drills.generate(topic, self._rng.getrandbits(63))
        self.asked_at = self.clock()
        self._scored_current = False
        return self.problem

    def elapsed(self) -> float:
        """Seconds since the current question was asked (0 before the first)."""
        return 0.0 if self.asked_at is None else self.clock() - self.asked_at

    def answer(self, text) -> Attempt:
        """Check ``text`` against the current question; the first number typed is scored."""
        if self.problem is None:
            return Attempt("", str(text), False, "press “new question” first.", 0.0, False)
        text = str(text).strip()
        seconds = self.elapsed()
        if not text:
            return Attempt(self.problem.topic, text, False, "type a number first (units optional).", seconds, False)
        correct, feedback = self.problem.check(text)
        is_number = feedback.startswith(("correct", "not quite"))
        if not is_number:   # bad input: say so, without giving the answer away or counting it
            feedback = feedback.split(" The answer is ")[0]
        scored = is_number and not self._scored_current
        if scored:
            self._scored_current = True
            self.asked += 1
            self.correct += correct
        attempt = Attempt(self.problem.topic, text, correct, feedback, seconds, scored)
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
            if a.scored and not a.correct and "[" in a.feedback.split(":")[0]:
                key = a.feedback.split("[", 1)[1].split("]", 1)[0]
                out[key] = out.get(key, 0) + 1
        return out


# --- drill mode: the view ----------------------------------------------------------------
def drill_view(session: DrillSession) -> str:
    """Drill mode's view as HTML: the question, the last feedback and its time, the score.

    >>> ticks = iter([0.0, 30.0, 31.0])
    >>> s = DrillSession(seed=1, clock=lambda: next(ticks))
    >>> _ = s.new_question("kv_per_token"); _ = s.answer("1")
    >>> view = drill_view(s)
    >>> "score: <b>0 / 1</b>" in view and "answered in 30 s" in view
    True

    Used in: ch09_interview_drills (through drill_mode).
    """
    p = session.problem
    parts = ["<div style='font-family:sans-serif;font-size:13px;line-height:1.6;max-width:1000px'>"]
    if p is None:
        parts.append("Press <b>new question</b> to draw one. Answer in the box (units optional: "
                     "“1.07 GB”, “131,072”), then press <b>check</b>.")
    else:
        tol = f"; to within {p.tolerance:.1%}" if p.tolerance else "; exact"
        parts.append(f"<div><b>{html.escape(TOPIC_TITLES.get(p.topic, p.topic))}</b> "
                     f"<span style='color:#666'>(topic <code>{p.topic}</code>; answer in "
                     f"{html.escape(p.units)}{tol})</span></div>"
                     f"<div style='margin:4px 0 6px 0'>{html.escape(p.question)}</div>")
    last = session.attempts[-1] if session.attempts else None
    if last is not None and p is not None and last.topic == p.topic:
        color = RIGHT_COLOR if last.correct else WRONG_COLOR
        mark = "✓" if last.correct else "✗"
        note = "" if last.scored else " <span style='color:#666'>(not scored)</span>"
        parts.append(f"<div style='color:{color}'>{mark} {html.escape(last.feedback)}{note}</div>"
                     f"<div style='color:#555'>answered in {last.seconds:.0f} s</div>")
    correct, asked = session.score
    times = [a.seconds for a in session.attempts if a.scored]
    average = f", {sum(times) / len(times):.0f} s per question on average" if times else ""
    slips = session.slips()
    slip_text = ("; slips so far: " + ", ".join(f"{k} ×{v}" for k, v in sorted(slips.items()))) if slips else ""
    parts.append(f"<div style='margin-top:4px'>score: <b>{correct} / {asked}</b>{average}{html.escape(slip_text)}"
                 "</div></div>")
    return "".join(parts)


def drill_mode(topics=None, *, seed: int | None = None, clock=time.monotonic):
    """Drill mode as ipywidgets: a topic menu, "new question", an answer box, "check", the view.

    A thin wrapper: every button calls the ``DrillSession`` and redraws ``drill_view``.
    Returns the ``VBox``; ``box.session`` is the session and ``box.view`` the HTML widget.

    Used in: ch09_interview_drills.
    """
    import ipywidgets as widgets

    session = DrillSession(tuple(topics or drills.TOPICS), seed=seed, clock=clock)
    topic_w = widgets.Dropdown(options=[ANY_TOPIC, *session.topics], value=ANY_TOPIC, description="topic",
                               layout=widgets.Layout(width="320px"))
    new_w = widgets.Button(description="new question", button_style="primary")
    answer_w = widgets.Text(placeholder="your answer, e.g. 131072 or 1.07 GB", description="answer",
                            layout=widgets.Layout(width="420px"))
    check_w = widgets.Button(description="check")
    view = widgets.HTML(drill_view(session))

    def redraw():
        view.value = drill_view(session)

    def on_new(_=None):
        session.new_question(topic_w.value)
        answer_w.value = ""
        redraw()

    def on_check(_=None):
        session.answer(answer_w.value)
        redraw()

    new_w.on_click(on_new)
    check_w.on_click(on_check)
    box = widgets.VBox([widgets.HBox([topic_w, new_w]), widgets.HBox([answer_w, check_w]), view])
    box.session, box.view = session, view
    return box


# --- the graded drills: the learner's own questions -----------------------------------------------
def _current_student():
    """The id the graded questions are drawn for (autograder's resolution), or None."""
    from autograder import checks
    return checks.current_student()


def use_student_id(name: str = "") -> Markdown:
    """Claim ``name`` as this notebook's student id (if not empty) and say which id is in use.

    The id in use comes from ``autograder.checks.current_student()``: in grading the
    submission's, on a hub the login, else ``KV_COURSE_STUDENT``, else the claimed name.

    Used in: ch09_interview_drills.
    """
    from autograder import checks

    name = (name or "").strip()
    if name:
        checks.claim_student(name)
    used = _current_student()
    if used is None:
        return Markdown(f"**{NO_ID_MESSAGE.replace('run this one again', 'run the cells below')}**")
    if name and used != name:
        return Markdown(f"Your questions are drawn for **{html.escape(used)}**, the id this session already has "
                        f"(a hub login or the grader's), not for “{html.escape(name)}”.")
    return Markdown(f"Your questions are drawn for **{html.escape(used)}**. Keep this id: another id gives "
                    "other questions.")


def my_question(topic: str):
    """The public part of this learner's question on ``topic``: text, units, tolerance, inputs; no answer.

    Raises one line (``LookupError``) when no student id is set. A worked solution computes
    its answer from ``.params``.

    Used in: ch09_interview_drills.
    """
    from autograder import checks

    if topic not in drills.GRADED_TOPICS:
        raise drills.DrillError(f"{topic!r} is not a graded topic (graded: {', '.join(drills.GRADED_TOPICS)})")
    return checks.my_question(topic)


def _exercise_number(topic: str) -> int:
    """Graded topics are Exercises 2 to 9, in ``GRADED_TOPICS`` order (Exercise 1 is the formula)."""
    return drills.GRADED_TOPICS.index(topic) + 2


def _question_html(question, number: int) -> str:
    tol = f", to within {question.tolerance:.1%}" if question.tolerance else ", exact"
    return (f"<b>Exercise {number} · {html.escape(TOPIC_TITLES.get(question.topic, question.topic))}</b> "
            f"<span style='color:#666'>(answer in {html.escape(question.units)}{tol})</span><br>"
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
