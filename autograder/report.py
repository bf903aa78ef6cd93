"""What did the class get wrong? The slip report of one graded assignment.

``python -m autograder report <out> --assignment ID [--db URL] [--html FILE] [--csv FILE] [--names]``
(and ``grade-class``, beside its CSV) reads a class's grading output folder:

* the points of every student and exercise from the gradebook (nbgrader's
  tables: ``<out>/gradebook.db``, or ``--db`` for a PostgreSQL one), so a grade
  changed by hand in the formgrader counts;
* the diagnosis of every failed test from ``<out>/results/<ID>/<student>.json``
  (one file per student, rewritten by each run: the latest result), by slip
  key (``tests[].slip``, ``tests[].slips``; ``autograder.verdict.slip_summary``),
  never by the text of a message.

It gives, per exercise, the share of students with full marks, partial, zero
and not attempted; per catalogued slip, how many students made it, where, and
one example answer (no student named); the exercises ranked by the share of
the class that lost points there; and a plot of slips per exercise. Students
are named only with ``--names``. ``build`` makes the data, ``to_html``,
``to_csv`` and ``to_text`` render it.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

from .course import UsageError

BUCKETS = ("full", "partial", "zero", "not_attempted")
BUCKET_TITLES = {"full": "full marks", "partial": "partial", "zero": "zero", "not_attempted": "not attempted",
                 "not_graded": "not graded"}


@dataclass
class ExerciseRow:
    grade_id: str
    max_points: float
    counts: dict = field(default_factory=lambda: {b: 0 for b in (*BUCKETS, "not_graded")})
    lost: int = 0                      # students who lost points here (not attempted included)
    points_lost: float = 0.0
    slips: dict = field(default_factory=dict)      # slip key -> students
    unexplained: int = 0               # failed on their value with no one slip explaining every case

    def share(self, bucket: str, total: int) -> float:
        return self.counts[bucket] / total if total else 0.0


@dataclass
class SlipRow:
    key: str
    parts: list
    combined: bool
    students: set = field(default_factory=set)
    exercises: dict = field(default_factory=dict)  # grade id -> students
    example: dict | None = None
    example_exercise: str = ""

    @property
    def words(self) -> str:
        from kvcoach import slips
        return slips.general(self.key)


@dataclass
class ClassReport:
    assignment: str
    students: list                      # graded students (ids, sorted)
    exercises: list                     # ExerciseRow, notebook order
    slips: list                         # SlipRow, most students first
    errors: list = field(default_factory=list)     # students whose result is an error (not graded)
    without_diagnosis: list = field(default_factory=list)  # in the gradebook, no results JSON
    source: str = ""

    @property
    def ranked(self) -> list:
        """The exercises by the share of the class that lost points there, most first."""
        return sorted(self.exercises, key=lambda e: (-e.lost, -e.points_lost, self.exercises.index(e)))


# ---------------------------------------------------------------------------
# Reading a class
# ---------------------------------------------------------------------------
def _read_results(results_dir: Path) -> dict:
    out = {}
    for path in sorted(results_dir.glob("*.json")) if results_dir.is_dir() else []:
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(result, dict) and isinstance(result.get("tests"), list):
            out[str(result.get("student") or path.stem)] = result
    return out


def _gradebook_points(db_url: str, assignment: str) -> dict | None:
    """``{student: {grade_id: (score, max_score, needs_manual)}}`` from nbgrader's tables; None when the
    gradebook does not know the assignment."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(db_url) as gb:
        try:
            found = gb.find_assignment(assignment)
        except MissingEntry:
            return None
        out = {}
        for sub in found.submissions:
            out[sub.student_id] = {g.name: (g.score, g.max_score, bool(g.needs_manual_grade))
                                   for nb in sub.notebooks for g in nb.grades}
        return out


def load(out_dir, assignment: str, db_url: str | None = None) -> tuple[dict, dict | None, str]:
    """(results by student, gradebook points by student or None, where they came from); UsageError
    in one line for a missing folder, an unknown assignment, a gradebook that does not connect."""
    from .database import gradebook_url, shown

    out = Path(out_dir)
    if not out.is_dir():
        raise UsageError(f"no such folder: {out_dir}")
    results_dir = out / "results" / assignment
    results = _read_results(results_dir)
    if db_url:
        db_url = gradebook_url(db_url)
    elif (out / "gradebook.db").is_file():
        db_url = f"sqlite:///{(out / 'gradebook.db').resolve()}"
    book = None
    if db_url:
        try:
            book = _gradebook_points(db_url, assignment)
        except Exception as exc:  # noqa: BLE001 -- a gradebook nbgrader cannot read: one line
            raise UsageError(f"gradebook {shown(db_url)}: cannot be read ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else ''})") from None
    if not results and not book:
        known = sorted(p.name for p in (out / "results").iterdir() if p.is_dir()) if (out / "results").is_dir() else []
        raise UsageError(f"--assignment {assignment}: nothing graded in {out} (no {results_dir}"
                         + (f"; graded there: {', '.join(known)}" if known else "") + ")")
    where = f"{results_dir}" + (f" and the gradebook {shown(db_url)}" if book is not None else "")
    return results, book, where


def _bucket(points: float, max_points: float, attempted: bool) -> str:
    if max_points and points >= max_points - 1e-9:
        return "full"
    if points > 1e-9:
        return "partial"
    return "zero" if attempted else "not_attempted"


def build(results: dict, book: dict | None, assignment: str, source: str = "") -> ClassReport:
    """The report's numbers from the stored results and the gradebook's points (see the module doc)."""
    students = sorted(set(results) | set(book or {}))
    order: list = []
    maxima: dict = {}
    for r in results.values():
        for t in r["tests"]:
            if t["grade_id"] not in maxima:
                order.append(t["grade_id"])
            maxima.setdefault(t["grade_id"], float(t.get("max_points") or 0))
    for grades in (book or {}).values():
        for gid, (_, maximum, _) in grades.items():
            if gid not in maxima:
                order.append(gid)
            maxima.setdefault(gid, float(maximum or 0))
    rows = {gid: ExerciseRow(gid, maxima[gid]) for gid in order}
    slips: dict = {}
    errors, without, graded = [], [], []
    for student in students:
        result = results.get(student)
        grades = (book or {}).get(student)
        if result is None and grades is None:
            continue
        if result is not None and result.get("status") == "error":
            errors.append(student)
            for row in rows.values():
                row.counts["not_graded"] += 1
            continue
        if result is None:
            without.append(student)
        graded.append(student)
        tests = {t["grade_id"]: t for t in (result or {}).get("tests", [])}
        for gid, row in rows.items():
            t = tests.get(gid, {})
            if grades is not None and gid in grades:
                score = grades[gid][0]
            else:
                score = t.get("points")
            if score is None:        # waiting for a manual grade
                row.counts["not_graded"] += 1
                continue
            points = float(score)
            bucket = _bucket(points, row.max_points, t.get("attempted", True) is not False)
            row.counts[bucket] += 1
            if bucket != "full":
                row.lost += 1
                row.points_lost += row.max_points - points
            if bucket in ("full", "not_attempted"):
                continue
            key = t.get("slip")
            if not key:
                if (t.get("failures") or {}).get("value"):   # wrong values, no one slip behind them all
                    row.unexplained += 1
                continue
            row.slips[key] = row.slips.get(key, 0) + 1
            entry = next((e for e in t.get("slips") or [] if e.get("key") == key), {})
            slip = slips.get(key)
            if slip is None:
                slip = slips[key] = SlipRow(key, entry.get("parts") or key.split("+"), "+" in key,
                                            example=entry.get("example"), example_exercise=gid)
            slip.students.add(student)
            slip.exercises[gid] = slip.exercises.get(gid, 0) + 1
    ranked_slips = sorted(slips.values(), key=lambda s: (-len(s.students), s.key))
    return ClassReport(assignment, graded, list(rows.values()), ranked_slips, errors, without, source)


def class_report(out_dir, assignment: str, db_url: str | None = None) -> ClassReport:
    results, book, where = load(out_dir, assignment, db_url)
    return build(results, book, assignment, where)


# ---------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------
def _pct(n: int, total: int) -> str:
    return f"{100 * n / total:.0f}%" if total else "-"


def _num(x) -> str:
    x = float(x)
    return f"{int(x)}" if x.is_integer() else f"{x:g}"


def _value(v) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        return f"{v:,.6g}"
    if isinstance(v, list):
        return "(" + ", ".join(_value(x) for x in v) + ")"
    return str(v)


def example_text(slip: SlipRow) -> str:
    """One anonymised example: the exercise, the answer given, the right one, the case (visible only)."""
    e = slip.example or {}
    if "answer" not in e:
        return ""
    text = f"{slip.example_exercise}: answered {_value(e['answer'])}"
    if "expected" in e:
        text += f" (expected {_value(e['expected'])})"
    if e.get("case"):
        text += f" on \"{e['case']}\""
    elif e.get("hidden"):
        text += " on a hidden case"
    return text


def plot_png(report: ClassReport) -> bytes:
    """A bar per exercise, stacked by slip: the students whose failure that slip explains."""
    import matplotlib
    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    gids = [e.grade_id for e in report.exercises]
    keys = [s.key for s in report.slips]
    fig = Figure(figsize=(max(6.0, 1.1 * len(gids) + 3), 4.2), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    bottom = [0] * len(gids)
    cmap = matplotlib.colormaps["tab20"]
    for n, key in enumerate(keys):
        heights = [e.slips.get(key, 0) for e in report.exercises]
        ax.bar(range(len(gids)), heights, bottom=bottom, label=key, color=cmap(n % 20))
        bottom = [b + h for b, h in zip(bottom, heights)]
    unexplained = [e.unexplained for e in report.exercises]
    if any(unexplained):
        ax.bar(range(len(gids)), unexplained, bottom=bottom, label="no one slip explains it", color="#bbbbbb")
    ax.set_xticks(range(len(gids)))
    ax.set_xticklabels([g.split("_", 2)[1] if g.count("_") >= 2 else g for g in gids])
    ax.set_ylabel("students")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))   # students come whole
    ax.set_title(f"{report.assignment}: slips per exercise ({len(report.students)} students)")
    if keys or any(unexplained):
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def to_dict(report: ClassReport, names: bool = False) -> dict:
    """The figures as plain data (``--json``); student ids only with ``names``."""
    n = len(report.students)
    out = {"assignment": report.assignment, "students": n, "not_graded": len(report.errors),
           "exercises": [{"grade_id": e.grade_id, "max_points": e.max_points, **e.counts, "lost_points": e.lost,
                          "points_lost": e.points_lost, "slips": dict(e.slips), "unexplained": e.unexplained}
                         for e in report.exercises],
           "ranked": [e.grade_id for e in report.ranked],
           "slips": [{"key": s.key, "parts": s.parts, "combined": s.combined, "students": len(s.students),
                      "exercises": dict(s.exercises), "example": example_text(s)} for s in report.slips]}
    if names:
        for entry, s in zip(out["slips"], report.slips):
            entry["names"] = sorted(s.students)
    return out


def to_text(report: ClassReport, names: bool = False) -> str:
    n = len(report.students)
    lines = [f"{report.assignment}: {n} students graded"
             + (f", {len(report.errors)} not graded (error)" if report.errors else "")]
    width = max([len(e.grade_id) for e in report.exercises] + [8])
    lines.append(f"  {'exercise':<{width}}  {'full':>5} {'partial':>7} {'zero':>5} {'not att.':>8}  lost points")
    for e in report.exercises:
        c = e.counts
        lines.append(f"  {e.grade_id:<{width}}  {_pct(c['full'], n):>5} {_pct(c['partial'], n):>7} "
                     f"{_pct(c['zero'], n):>5} {_pct(c['not_attempted'], n):>8}  {_pct(e.lost, n)}")
    lines.append("most points lost: " + ", ".join(f"{e.grade_id} ({_pct(e.lost, n)})" for e in report.ranked[:3]))
    if report.slips:
        lines.append("slips (students):")
        for s in report.slips:
            lines.append(f"  {len(s.students):>4} ({_pct(len(s.students), n)})  {s.key}"
                         + ("  [two at once]" if s.combined else "") + f"  in {', '.join(s.exercises)}"
                         + (f": {', '.join(sorted(s.students))}" if names else ""))
    else:
        lines.append("slips: none recorded")
    return "\n".join(lines)


_CSV_HEADER = ["section", "grade_id", "slip", "combined", "students", "share", "full", "partial", "zero",
               "not_attempted", "not_graded", "lost_points", "points_lost", "rank", "example", "names"]


def to_csv(report: ClassReport, path, names: bool = False) -> None:
    """One row per exercise, per (slip, exercise) and per slip; ``names`` only with ``--names``."""
    n = len(report.students)
    rank = {e.grade_id: k + 1 for k, e in enumerate(report.ranked)}
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(_CSV_HEADER)
        for e in report.exercises:
            c = e.counts
            w.writerow(["exercise", e.grade_id, "", "", n, "", c["full"], c["partial"], c["zero"],
                        c["not_attempted"], c["not_graded"], e.lost, _num(e.points_lost), rank[e.grade_id], "", ""])
        for s in report.slips:
            w.writerow(["slip", " ".join(s.exercises), s.key, int(s.combined), len(s.students),
                        f"{len(s.students) / n:.4f}" if n else "", "", "", "", "", "", "", "", "",
                        example_text(s), " ".join(sorted(s.students)) if names else ""])
            for gid, k in s.exercises.items():
                w.writerow(["slip_exercise", gid, s.key, int(s.combined), k, f"{k / n:.4f}" if n else "",
                            "", "", "", "", "", "", "", "", "", ""])


def to_html(report: ClassReport, names: bool = False) -> str:
    """One self-contained page (inline CSS, the plot as a base64 PNG): nothing fetched, nothing run."""
    esc = html.escape
    n = len(report.students)
    rank = {e.grade_id: k + 1 for k, e in enumerate(report.ranked)}
    rows = []
    for e in report.exercises:
        c = e.counts
        cells = "".join(f"<td>{_pct(c[b], n)} <small>({c[b]})</small></td>" for b in BUCKETS)
        rows.append(f"<tr><td>{rank[e.grade_id]}</td><td><code>{esc(e.grade_id)}</code></td>"
                    f"<td>{_num(e.max_points)}</td>{cells}<td>{_pct(e.lost, n)} <small>({e.lost})</small></td>"
                    f"<td>{_num(e.points_lost)}</td></tr>")
    ranked = "".join(f"<li><code>{esc(e.grade_id)}</code>: {_pct(e.lost, n)} of the class lost points "
                     f"({_num(e.points_lost)} points in all)</li>" for e in report.ranked if e.lost)
    slip_rows = []
    for s in report.slips:
        where = ", ".join(f"<code>{esc(g)}</code> {k}" for g, k in s.exercises.items())
        kind = f" <small>(two at once: {esc(' and '.join(s.parts))})</small>" if s.combined else ""
        who = f"<td>{esc(', '.join(sorted(s.students)))}</td>" if names else ""
        slip_rows.append(f"<tr><td><code>{esc(s.key)}</code>{kind}</td><td>{esc(s.words)}</td>"
                         f"<td>{len(s.students)} ({_pct(len(s.students), n)})</td><td>{where}</td>"
                         f"<td>{esc(example_text(s))}</td>{who}</tr>")
    png = base64.b64encode(plot_png(report)).decode("ascii")
    notes = []
    if report.errors:
        notes.append(f"{len(report.errors)} submission(s) could not be graded (status error) and are left out"
                     + (f": {esc(', '.join(report.errors))}" if names else "") + ".")
    if report.without_diagnosis:
        notes.append(f"{len(report.without_diagnosis)} student(s) are in the gradebook without a stored result "
                     "(graded by plain nbgrader): their points count, their slips are unknown.")
    unexplained = sum(e.unexplained for e in report.exercises)
    if unexplained:
        notes.append(f"{unexplained} failed answer(s) matched no one catalogued slip across all their cases "
                     "(grey in the plot).")
    names_head = "<th>students</th>" if names else ""
    slips_table = (f"<table id=\"slips\"><thead><tr><th>slip</th><th>what it is</th><th>students</th>"
                   f"<th>exercises (students)</th><th>example</th>{names_head}</tr></thead>"
                   f"<tbody>{''.join(slip_rows)}</tbody></table>" if slip_rows else "<p>No slip recorded.</p>")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{esc(report.assignment)}: class slip report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; max-width: 72em; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
th, td {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }}
th {{ background: #f0f0f0; }} small {{ color: #666; }} img {{ max-width: 100%; }}
</style></head><body>
<h1>{esc(report.assignment)}: what the class got wrong</h1>
<p>{n} student(s) graded. Shares are of the graded students; a slip is counted for a student when it
reproduces every failing case of that exercise (the autograder's diagnosis, by slip key).
{"" if names else "No student is named (<code>--names</code> names them)."}</p>
<h2>Exercises</h2>
<table id="exercises"><thead><tr><th>rank</th><th>exercise</th><th>points</th><th>full marks</th><th>partial</th>
<th>zero</th><th>not attempted</th><th>lost points</th><th>points lost</th></tr></thead>
<tbody>{''.join(rows)}</tbody></table>
<h2>Where the class lost points</h2>
<ol id="ranked">{ranked or '<li>nowhere: everyone has full marks</li>'}</ol>
<h2>Slips</h2>
{slips_table}
<h2>Slips per exercise</h2>
<img id="plot" alt="slips per exercise: students per slip, stacked, for each exercise" src="data:image/png;base64,{png}">
{''.join(f'<p>{t}</p>' for t in notes)}
<p><small>From {esc(report.source) if names else "the class's stored results and gradebook"}.</small></p>
</body></html>
"""


def write(report: ClassReport, html_path=None, csv_path=None, names: bool = False) -> dict:
    """Write the HTML and CSV (0600: student data); their paths."""
    import os

    written = {}
    for kind, path in (("html", html_path), ("csv", csv_path)):
        if not path:
            continue
        path = Path(path)
        if not path.parent.is_dir():
            raise UsageError(f"--{kind} {path}: no such folder: {path.parent}")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.close(fd)
        if kind == "html":
            path.write_text(to_html(report, names), encoding="utf-8")
        else:
            to_csv(report, path, names)
        written[kind] = str(path)
    return written
