"""Who the learner is: the id their own questions are drawn for, and their question on a topic.

The student id (``current_student``), first found wins:

1. ``KV_COURSE_GRADING_STUDENT``: set only by the grader (the submission's
   student: ``submitted/<id>/``, ``--student``, or nbgrader's own student via
   the course preprocessor ``autograder.nbgrader_setup.GradingStudentExecute``);
2. the id the notebook claimed with ``claim_student(name)`` (its ``STUDENT_ID`` cell);
3. ``JUPYTERHUB_USER`` (a hub login), except on Binder (``BINDER_LAUNCH_HOST``
   set): Binder's hub user is made up for the session, never a learner's id;
4. ``KV_COURSE_STUDENT`` (set by the tools that run a chapter headless);
5. ``STUDENT_ID`` in the environment.

So in grading, an id the notebook claims never replaces the submission's, and
on Binder a learner's questions are those of the id they typed, the one their
class grades them by.

The grader's environment variable is set by ``autograder.nbgrader_setup``, ``autograder.sandbox`` and
``autograder.verdict_runner`` under the same name (a test holds them equal).
"""

from __future__ import annotations

import os

NO_STUDENT = ("there is no student id, so there is no question of yours to check against: set STUDENT_ID = "
              "\"<your id>\" in the cell near the top of the notebook and run it (the id your class grades you "
              "by; on a course hub an empty STUDENT_ID uses your login, on Binder it never does).")


GRADING_STUDENT_ENV = "KV_COURSE_GRADING_STUDENT"   # set by the grader only (the submission's student)
HUB_USER_ENV = "JUPYTERHUB_USER"                     # a hub login: after a claimed id
BINDER_ENV = "BINDER_LAUNCH_HOST"                    # set by Binder, whose hub user is never a learner's id
STUDENT_ENVS = ("KV_COURSE_STUDENT",)                # after the hub login
STUDENT_ID_ENV = "STUDENT_ID"                        # last

_claimed: str | None = None


def _env(name: str) -> str:
    return os.environ.get(name, "").strip()


def hub_user() -> str | None:
    """The hub login that names the learner: ``JUPYTERHUB_USER``, unless the hub is Binder's."""
    if _env(BINDER_ENV):
        return None
    return _env(HUB_USER_ENV) or None


def current_student() -> str | None:
    """The learner's id, or None when nothing names one (the order is in the module doc)."""
    found = _env(GRADING_STUDENT_ENV) or _claimed or hub_user()
    if found:
        return found
    for var in (*STUDENT_ENVS, STUDENT_ID_ENV):
        if _env(var):
            return _env(var)
    return None


def claim_student(name) -> str | None:
    """Record the id the learner states in the notebook (``STUDENT_ID = "ada"``); returns ``current_student()``.

    A claim comes after the grader's id only (so in grading it changes nothing) and before a hub login
    (Binder's generated one is never used); ``None`` or ``""`` withdraws it.
    """
    global _claimed
    if name is not None and not isinstance(name, str):
        raise TypeError(f"STUDENT_ID must be text, such as \"ada\", not {type(name).__name__} {name!r}")
    _claimed = (name or "").strip() or None
    return current_student()


def my_question(topic: str):
    """The learner's own question on ``topic`` (a ``kvcoach.drills.Question``: no answer in it).

    Raises ``LookupError`` with the STUDENT_ID message when no id is known.
    """
    from kvcoach.drills import student_problem

    student = current_student()
    if student is None:
        raise LookupError(NO_STUDENT)
    return student_problem(student, topic).public()
