"""A drill that remembers: one learner's attempts, per topic and per session, and what to review next.

The history is one JSON file per learner, ``$XDG_DATA_HOME/kv-course/drills.json``
(``~/.local/share/kv-course/drills.json`` when ``XDG_DATA_HOME`` is unset), shared by
``kvlib drill`` and the notebook's drill mode. It is written atomically (a temporary file in
the same folder, then ``os.replace``) with mode 0600. A file that cannot be read or parsed
raises ``HistoryError``, one line naming the path, and is never overwritten: the learner
moves it away or fixes it.

Each scored answer is one attempt: ``{"session", "topic", "correct", "seconds", "slips", "slip", "at",
"target"}`` (``at`` in seconds since the epoch, ``slips`` the list of ``kvcoach.slips`` keys the
feedback named, empty when none, ``slip`` the first of them or null (files written before ``slips``
have only ``slip``), ``target`` the clock's target in seconds). A plan (``kvlib drill --plan``, plan mode)
adds ``rubric`` (``{assumptions, steps, binding, sanity}``, each from 0 to 1) and ``scenario``, a one-line
label of what was asked (``plan_rows`` and ``plans_table`` list them). A session is one ``kvlib drill``
run or one drill-mode widget: ``{"id", "started", "source"}``. Nothing of a question's answer is stored.

>>> h = History()
>>> s = h.new_session("cli", now=0.0)
>>> h.record(s, "pool", True, 40.0, now=10.0); h.record(s, "pool", False, 80.0, "label_memory", now=20.0)
>>> row = h.topic_stats()["pool"]
>>> row.attempts, row.accuracy, row.median_seconds, row.slips
(2, 0.5, 60.0, {'label_memory': 1})

**The review rule** (``review_topics``), a Leitner box per topic. Each topic starts in box 0;
a right answer within its target time (``target_seconds``) moves it up a box (to at most
``MASTERED_BOX``), a right but slow answer leaves it where it is, and a miss puts it back in box
0. A topic in box 0 (missed last, or never yet answered within its target) is due at once; in
box ``n`` it is due ``REVIEW_DAYS[n]`` days after its last attempt (1, 2, 4, 8, then 16 days: a
mastered topic comes back least often). A review asks the topics in box 0, those with the most
slips first (one whose last miss named a slip twice), then topics never tried, then the others
by the time they fall due, soonest first, due or not. So a missed topic returns sooner, a
mastered one later.

Taught in ch09_interview_drills (drill mode, its history and review button); ``kvlib drill
--review`` and ``--stats``.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["FILE_NAME", "HistoryError", "History", "TopicStats", "history_path", "load", "review_topics",
           "review_reasons", "target_seconds", "stats_table", "REVIEW_DAYS", "MASTERED_BOX", "READ_SECONDS",
           "STEP_SECONDS", "RUBRIC_KEYS", "PlanRow", "plan_rows", "plans_table"]

FILE_NAME = "drills.json"
VERSION = 1
DAY = 86_400.0
#: Days before a topic in box n is due again (box 0: at once).
REVIEW_DAYS = (0, 1, 2, 4, 8, 16)
MASTERED_BOX = len(REVIEW_DAYS) - 1

#: The clock's target, the course's rule of thumb (not a measured figure): an interviewer expects the
#: first figure of a back-of-the-envelope answer about half a minute after the question (reading it and
#: naming the formula), and each further step of the worked chain a quarter of a minute more.
READ_SECONDS = 20
STEP_SECONDS = 15
#: A plan's rubric, as the history records it ([interview 2026 §3-4]): each a score from 0 to 1.
RUBRIC_KEYS = ("assumptions", "steps", "binding", "sanity")


class HistoryError(ValueError):
    """The history file cannot be read, parsed or written; one line that names its path."""


def history_path() -> Path:
    """``$XDG_DATA_HOME/kv-course/drills.json`` (default ``~/.local/share/kv-course/drills.json``)."""
    base = os.environ.get("XDG_DATA_HOME", "").strip()
    if not base:
        try:
            base = str(Path.home() / ".local" / "share")
        except (RuntimeError, KeyError):        # no home folder to be found (a bare sandbox)
            raise HistoryError("no place for the drill history: set XDG_DATA_HOME or HOME") from None
    return Path(base).expanduser() / "kv-course" / FILE_NAME


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError as e:                        # a folder on the way that cannot be entered
        raise HistoryError(f"cannot read the drill history {path}: {e.strerror or e}") from None


def target_seconds(problem) -> int:
    """The clock's target for one question: ``READ_SECONDS + STEP_SECONDS x steps`` of its worked chain.

    ``problem`` has ``steps()`` (``kvcoach.drills.Problem``); without it, one step is assumed.

    >>> class OneStep:
    ...     def steps(self): return ("2 L K D b",)
    >>> target_seconds(OneStep())
    35
    """
    steps = problem.steps() if hasattr(problem, "steps") else (None,)
    return READ_SECONDS + STEP_SECONDS * max(1, len(steps))


@dataclass(frozen=True)
class TopicStats:
    """One topic's row of ``--stats``: first answers only."""

    topic: str
    attempts: int
    correct: int
    median_seconds: float
    slips: dict = field(hash=False)

    @property
    def accuracy(self) -> float:
        return self.correct / self.attempts if self.attempts else 0.0


def _checked_rubric(rubric) -> dict:
    """A plan's rubric as recorded: exactly ``RUBRIC_KEYS``, each a number from 0 to 1 (a one-line error naming
    the field otherwise)."""
    if not isinstance(rubric, dict) or set(rubric) != set(RUBRIC_KEYS):
        raise HistoryError(f"rubric: expected the keys {', '.join(RUBRIC_KEYS)}, got {rubric!r}")
    out = {}
    for key in RUBRIC_KEYS:
        value = rubric[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise HistoryError(f"rubric.{key}: expected a score from 0 to 1, got {value!r}")
        out[key] = float(value)
    return out


def _slips_of(attempt) -> list:
    """The slip keys one attempt recorded: its ``slips`` list, or its ``slip`` in a file written before it."""
    if isinstance(attempt.get("slips"), list):
        return [k for k in attempt["slips"] if isinstance(k, str)]
    return [attempt["slip"]] if attempt.get("slip") else []


def _median(values) -> float:
    return float(statistics.median(values)) if values else 0.0


def _rows(attempts) -> dict:
    by_topic: dict = {}
    for a in attempts:
        by_topic.setdefault(a["topic"], []).append(a)
    out = {}
    for topic in sorted(by_topic):
        rows = by_topic[topic]
        slips: dict = {}
        for a in rows:
            for key in _slips_of(a):
                slips[key] = slips.get(key, 0) + 1
        out[topic] = TopicStats(topic, len(rows), sum(bool(a["correct"]) for a in rows),
                                _median([a["seconds"] for a in rows]), dict(sorted(slips.items())))
    return out


class History:
    """The attempts and sessions of one learner; ``path`` None keeps them in memory only."""

    def __init__(self, path: Path | None = None, data: dict | None = None):
        self.path = None if path is None else Path(path)
        self.data = data or {"version": VERSION, "sessions": [], "attempts": []}
        self._pending: dict = {}     # sessions started, saved with their first attempt

    # -- writing -----------------------------------------------------------------------------
    def new_session(self, source: str, now: float | None = None) -> str:
        """Start a session (``source`` 'cli' or 'notebook'); its id. Saved with its first attempt."""
        session = {"id": uuid.uuid4().hex[:12], "started": time.time() if now is None else now, "source": source}
        self._pending[session["id"]] = session
        return session["id"]

    def record(self, session: str, topic: str, correct: bool, seconds: float, slip: str | None = None,
               now: float | None = None, target: int | None = None, slips=None, rubric: dict | None = None,
               scenario: str | None = None) -> None:
        """Add one scored answer (``target``: the clock's target for it) and save.

        ``slips``: every slip key the feedback named (``slip`` alone: that one). ``rubric``: a plan's
        scores, ``{assumptions, steps, binding, sanity}`` each from 0 to 1 (``RUBRIC_KEYS``); ``scenario``:
        its one-line label. The file is read again first, so the attempts another drill saved meanwhile stay."""
        named = list(dict.fromkeys(slips if slips is not None else ([slip] if slip else [])))
        if rubric is not None:
            rubric = _checked_rubric(rubric)
        if scenario is not None and (not isinstance(scenario, str) or not scenario.strip() or "\n" in scenario):
            raise HistoryError(f"scenario: expected a one-line label, got {scenario!r}")
        attempt = {"session": session, "topic": topic, "correct": bool(correct), "seconds": round(float(seconds), 2),
                   "slips": named, "slip": named[0] if named else None, "at": time.time() if now is None else now,
                   "target": READ_SECONDS + STEP_SECONDS if target is None else int(target)}
        if rubric is not None:
            attempt["rubric"] = rubric
        if scenario is not None:
            attempt["scenario"] = scenario.strip()
        if self.path is not None and _exists(self.path):
            self.data = _read(self.path)
        pending = self._pending.pop(session, None)
        if pending is not None:
            self.data["sessions"].append(pending)
        self.data["attempts"].append(attempt)
        if self.path is not None:
            _write(self.path, self.data)

    # -- reading -----------------------------------------------------------------------------
    @property
    def attempts(self) -> list:
        return list(self.data["attempts"])

    def topic_stats(self) -> dict:
        """``{topic: TopicStats}`` over every session, topics sorted."""
        return _rows(self.data["attempts"])

    def session_stats(self) -> list:
        """``[(session id, started, {topic: TopicStats})]`` in the order the sessions started (for plots)."""
        sessions = sorted(self.data["sessions"], key=lambda s: s["started"])
        return [(s["id"], s["started"], _rows([a for a in self.data["attempts"] if a["session"] == s["id"]]))
                for s in sessions]


def _read(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise HistoryError(f"cannot read the drill history {path}: {e.strerror or e}") from None
    try:
        data = json.loads(text)
    except ValueError:
        raise HistoryError(f"the drill history {path} is not valid JSON: move it away or fix it "
                           "(it is not overwritten)") from None
    ok = (isinstance(data, dict) and isinstance(data.get("sessions"), list) and isinstance(data.get("attempts"), list)
          and all(isinstance(a, dict) and {"session", "topic", "correct", "seconds"} <= set(a)
                  for a in data["attempts"]))
    if not ok:
        raise HistoryError(f"the drill history {path} is not a kv-course drill history: move it away or fix it "
                           "(it is not overwritten)")
    return data


def _write(path: Path, data: dict) -> None:
    """Atomically: a 0600 temporary file in the same folder, then ``os.replace``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".drills-", suffix=".tmp", dir=path.parent)   # mkstemp makes it 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=1)
                f.write("\n")
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as e:
        raise HistoryError(f"cannot write the drill history {path}: {e.strerror or e}") from None


def load(path: Path | str | None = None) -> History:
    """The history at ``path`` (default ``history_path()``); empty when the file does not exist yet."""
    path = history_path() if path is None else Path(path)
    return History(path, _read(path) if _exists(path) else None)


# --- what to ask next --------------------------------------------------------------------------
def _box(rows) -> int:
    box = 0
    for a in rows:
        if not a["correct"]:
            box = 0
        elif a["seconds"] <= a.get("target", READ_SECONDS + STEP_SECONDS):
            box = min(box + 1, MASTERED_BOX)
    return box


def review_topics(history: History, topics, count: int, *, now: float | None = None) -> list:
    """``count`` topics to ask next, by the review rule of this module's docstring.

    ``topics`` are the topics that may be asked (their order breaks ties); each attempt is judged
    against the target recorded with it; ``now`` defaults to the real time (a test passes its own).

    >>> h = History()
    >>> s = h.new_session("cli", now=0.0)
    >>> h.record(s, "pool", False, 20.0, "label_memory", now=0.0)
    >>> h.record(s, "fp8", True, 20.0, now=0.0)
    >>> review_topics(h, ["fp8", "pool", "crossover"], 4, now=3600.0)
    ['pool', 'pool', 'crossover', 'fp8']
    """
    now = time.time() if now is None else now
    order = {t: i for i, t in enumerate(topics)}
    by_topic: dict = {}
    for a in sorted(history.attempts, key=lambda a: a["at"]):
        if a["topic"] in order:
            by_topic.setdefault(a["topic"], []).append(a)
    missed, fresh, later = [], [], []
    for topic in topics:
        rows = by_topic.get(topic)
        if not rows:
            fresh.append(topic)
            continue
        box = _box(rows)
        if box == 0:
            slips = sum(1 for a in rows if a.get("slip"))
            missed.append((-slips, order[topic], topic, rows[-1].get("slip") is not None))
        else:
            later.append((rows[-1]["at"] + REVIEW_DAYS[box] * DAY, order[topic], topic))
    queue = []
    for _, _, topic, slipped in sorted(missed):
        queue += [topic, topic] if slipped else [topic]
    queue += fresh
    queue += [topic for due, _, topic in sorted(later) if due <= now]
    queue += [topic for due, _, topic in sorted(later) if due > now]
    if not queue:
        return []
    return [queue[i % len(queue)] for i in range(count)]


_COUNTS = {1: "once", 2: "twice"}


def _times(n: int) -> str:
    return _COUNTS.get(n, f"{n} times")


def _ago(seconds: float) -> str:
    """'just now', '5 minutes ago', '1 hour ago', '3 days ago'.

    >>> _ago(30), _ago(300), _ago(3600), _ago(3 * DAY + 5)
    ('just now', '5 minutes ago', '1 hour ago', '3 days ago')
    """
    for size, word in ((DAY, "day"), (3600.0, "hour"), (60.0, "minute")):
        n = int(seconds // size)
        if n >= 1:
            return f"{n} {word}{'s' if n > 1 else ''} ago"
    return "just now"


def _until(seconds: float) -> str:
    days = seconds / DAY
    if days >= 1:
        n = round(days)
        return f"in {n} day{'s' if n > 1 else ''}"
    hours = max(1, round(seconds / 3600))
    return f"in {hours} hour{'s' if hours > 1 else ''}"


def review_reasons(history: History, topics, *, now: float | None = None) -> dict:
    """``{topic: why the review rule places it where it does}``, in words, for every topic of ``topics``.

    "never asked: due", "missed twice, last 3 days ago (slip gb_for_gib): due", "right 3 times in a row within
    the target, last 2 days ago: due in 2 days" -- the rule of this module's docstring, said for each topic.

    >>> h = History()
    >>> s = h.new_session("cli", now=0.0)
    >>> h.record(s, "pool", False, 20.0, "label_memory", now=0.0)
    >>> h.record(s, "pool", False, 20.0, now=DAY)
    >>> h.record(s, "fp8", True, 20.0, now=0.0)
    >>> reasons = review_reasons(h, ["pool", "fp8", "crossover"], now=4 * DAY)
    >>> reasons["pool"], reasons["fp8"], reasons["crossover"]
    ('missed twice, last 3 days ago: due', 'right once within the target, last 4 days ago: due', 'never asked: due')
    """
    now = time.time() if now is None else now
    by_topic: dict = {}
    for a in sorted(history.attempts, key=lambda a: a["at"]):
        by_topic.setdefault(a["topic"], []).append(a)
    out = {}
    for topic in topics:
        rows = by_topic.get(topic)
        if not rows:
            out[topic] = "never asked: due"
            continue
        last = rows[-1]
        ago = _ago(max(0.0, now - last["at"]))
        box = _box(rows)
        if box == 0:
            missed = sum(1 for a in rows if not a["correct"])
            slip = _slips_of(last)
            if not last["correct"]:
                why = f"missed {_times(missed)}, last {ago}" + (f" (slip {', '.join(slip)})" if slip else "")
            else:
                why = f"right but over its target time, last {ago}"
            out[topic] = f"{why}: due"
            continue
        streak = 0
        for a in reversed(rows):
            if not a["correct"]:
                break
            streak += 1
        due = last["at"] + REVIEW_DAYS[box] * DAY
        when = "due" if due <= now else f"due {_until(due - now)}"
        mastered = " (mastered)" if box == MASTERED_BOX else ""
        out[topic] = f"right {_times(streak)}{' in a row' if streak > 1 else ''} within the target{mastered}, " \
                     f"last {ago}: {when}"
    return out


@dataclass(frozen=True)
class PlanRow:
    """One plan a learner ran: when (seconds since the epoch), what was asked, its rubric and their sum."""

    at: float | None
    scenario: str
    rubric: dict = field(hash=False)

    @property
    def total(self) -> float:
        """The rubric's four scores summed: out of ``len(RUBRIC_KEYS)`` = 4."""
        return sum(self.rubric.values())

    @property
    def date(self) -> str:
        """``at`` as a UTC date and minute (``-`` when the file has no time for it)."""
        if not isinstance(self.at, (int, float)) or isinstance(self.at, bool):
            return "-"
        return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(self.at))


def plan_rows(history: History) -> list:
    """Every plan in the history (an attempt with a ``rubric``), oldest first: a ``PlanRow`` each.

    A plan recorded before plans carried their scenario reads ``-`` for it; a rubric edited out of range
    is one line naming the attempt and the field (``HistoryError``).

    >>> h = History()
    >>> s = h.new_session("cli", now=0.0)
    >>> h.record(s, "plan", False, 420.0, now=86_400.0, scenario="scenario 7",
    ...          rubric={"assumptions": 1, "steps": 0.6, "binding": 1, "sanity": 0})
    >>> [(r.date, r.scenario, r.total) for r in plan_rows(h)]
    [('1970-01-02 00:00 UTC', 'scenario 7', 2.6)]
    """
    rows = []
    for n, a in enumerate(history.data["attempts"]):
        if "rubric" not in a:
            continue
        try:
            rubric = _checked_rubric(a["rubric"])
        except HistoryError as e:
            where = f"the drill history {history.path}" if history.path else "the drill history"
            raise HistoryError(f"{where}, attempt {n + 1}: {e}") from None
        label = a.get("scenario")
        rows.append(PlanRow(a.get("at"), label if isinstance(label, str) and label.strip() else "-", rubric))
    return sorted(rows, key=lambda r: r.at if isinstance(r.at, (int, float)) else 0.0)


def _score(value: float) -> str:
    return f"{round(value, 2):g}"


def plans_table(history: History) -> str:
    """The plans a learner ran, one line each: date, scenario, the four rubric scores and their total (of 4).

    Empty text when the history holds no plan. ``kvlib drill --stats`` prints it under the topics.
    """
    rows = plan_rows(history)
    if not rows:
        return ""
    header = ("plan (date)", "scenario", *RUBRIC_KEYS, "total")
    body = [(r.date, r.scenario, *(_score(r.rubric[k]) for k in RUBRIC_KEYS), f"{_score(r.total)}/{len(RUBRIC_KEYS)}")
            for r in rows]
    widths = [max(len(row[i]) for row in (header, *body)) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in (header, *body)]
    return "\n".join(lines + [f"{len(rows)} plan(s); each score from 0 to 1 (the rubric of kvlib drill --plan)"])


def stats_table(history: History, topics=None, *, now: float | None = None) -> str:
    """``kvlib drill --stats``: one row per topic (attempts, right, accuracy, median time, slips), plain text.

    ``topics`` (the drills' topics): coverage -- a row for each, a topic never asked too (it counts as due),
    and the next review with its reason (``review_reasons``). Without it, the topics the history holds.
    The plans the learner ran follow, with their rubric scores (``plans_table``).
    """
    plans = plans_table(history)
    return _topics_table(history, topics, now=now) + (f"\n\n{plans}" if plans else "")


def _topics_table(history: History, topics=None, *, now: float | None = None) -> str:
    """The topics' part of ``stats_table``: one row per topic and the coverage line."""
    rows = history.topic_stats()
    if not rows and topics is None:
        where = f" in {history.path}" if history.path else ""
        return f"no drills recorded yet{where}."
    sessions = len(history.data["sessions"])
    header = ("topic", "asked", "right", "accuracy", "median time", "slips made")
    body = [(t, str(r.attempts), str(r.correct), f"{r.accuracy:.0%}", f"{r.median_seconds:.0f} s",
             ", ".join(f"{k} x{v}" for k, v in r.slips.items()) or "-") for t, r in rows.items()]
    if topics is not None:
        reasons = review_reasons(history, topics, now=now)
        known = {row[0]: row for row in body}
        header += ("next review",)
        body = [(*known.get(t, (t, "0", "0", "-", "-", "-")), reasons[t]) for t in topics]
        body += [(*row, "-") for t, row in known.items() if t not in reasons]   # a topic no longer drilled
    widths = [max(len(row[i]) for row in (header, *body)) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in (header, *body)]
    total = sum(r.attempts for r in rows.values())
    right = sum(r.correct for r in rows.values())
    where = f"; history: {history.path}" if history.path else ""
    if topics is not None:
        asked = sum(1 for t in topics if t in rows)
        lines.append(f"coverage: {asked} of {len(topics)} topics asked"
                     + (f"; {total} answer(s) over {sessions} session(s), {right / total:.0%} right" if total else
                        "; no drills recorded yet") + where)
        return "\n".join(lines)
    lines.append(f"{total} answer(s) over {sessions} session(s), {right / total:.0%} right" + where)
    return "\n".join(lines)
