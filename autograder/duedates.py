"""Due dates on the ``grade-class`` path: nbgrader's late policy, applied to the class gradebook as nbgrader does.

nbgrader keeps an assignment's due date in the gradebook (``nbgrader db assignment add ID --duedate ...``, or
the formgrader's "Manage Assignments"), a student's extension on their submission, and the time a student
submitted in ``timestamp.txt`` beside the notebook (``nbgrader submit`` writes it; ``nbgrader collect`` keeps
it). ``nbgrader autograde`` then runs ``AssignLatePenalties``: a submission later than its due date gets, on
each notebook, the penalty the course's ``AssignLatePenalties.plugin_class`` (default ``LateSubmissionPlugin``,
``penalty_method`` ``"none"`` or ``"zero"``) gives for the notebook's score. ``apply`` does the same on the class
gradebook after every ``grade-class`` run, for every student graded so far, with the plugin the course config
names: so a due date set or an extension granted after grading counts at the next run. The score is
never changed: nbgrader's ``score`` minus ``late_submission_penalty`` is what counts (``nbgrader export``'s
``score`` column, the feedback page).
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

TIMESTAMP = "timestamp.txt"


def read_timestamp(folder: Path):
    """The submission time in ``folder/timestamp.txt`` (naive UTC, as nbgrader stores it), or None when there
    is none, it is not a small regular file (a link a student planted) or nbgrader cannot read it."""
    from nbgrader.utils import parse_utc

    path = Path(folder) / TIMESTAMP
    if path.is_symlink() or not path.is_file() or path.stat().st_size > 4096:
        return None
    try:
        text = path.read_text(encoding="utf-8").strip()
        return parse_utc(text) if text else None
    except Exception:  # noqa: BLE001 -- nbgrader's parser raises several kinds; unreadable is "no time"
        return None


def iso_utc(moment) -> str:
    """A naive UTC datetime in ISO 8601 with its zone: ``2027-03-01T18:30:00Z``."""
    if moment is None:
        return ""
    return moment.replace(tzinfo=_dt.timezone.utc).isoformat().replace("+00:00", "Z")


def late_policy(course_dir: Path):
    """The course config's ``AssignLatePenalties`` preprocessor with its plugin (nbgrader's own classes)."""
    from nbgrader.preprocessors import AssignLatePenalties
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(course_dir)).load_config()
    policy = AssignLatePenalties(config=config)
    policy.init_plugin()
    return policy


def apply(gb, course_dir: Path, assignment: str, submitted: Path, students) -> dict:
    """Each student's submission time (from ``timestamp.txt``, when there is one), lateness and penalty, written
    into the gradebook ``gb`` as ``nbgrader autograde`` writes them; ``{student: {"submitted_at", "late_seconds",
    "late_penalty"}}``."""
    from nbgrader.api import MissingEntry

    policy = late_policy(course_dir)
    out = {}
    for student in students:
        try:
            submission = gb.find_submission(assignment, student)
        except MissingEntry:       # graded into another gradebook: nothing of theirs here to apply it to
            continue
        moment = read_timestamp(Path(submitted) / student / assignment)
        if moment is not None and submission.timestamp != moment:
            submission.timestamp = moment
            gb.db.commit()
        late = float(submission.total_seconds_late or 0)
        penalty = 0.0
        for notebook in submission.notebooks:
            notebook.late_submission_penalty = None
            if late > 0:
                given = policy.plugin_inst.late_submission_penalty(student, notebook.score, late)
                if given is not None:
                    notebook.late_submission_penalty = policy._check_late_penalty(notebook, given)
                    penalty += float(notebook.late_submission_penalty)
        gb.db.commit()
        out[student] = {"submitted_at": iso_utc(submission.timestamp), "late_seconds": late,
                        "late_penalty": penalty}
    return out
