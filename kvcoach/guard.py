"""Whose code read an answer: the learner's, or the course's own.

Chapter 09's graded drills are value exercises: the learner binds a number, the check compares it
with the learner's own problem. That problem object holds its answer, so reading it from a notebook
(``p.answer``, the answer in ``p.check``'s feedback, ``repr(p)``) must not score: ``GuardedField``
is a field that notes each read made from outside the course's packages, and the autograder refuses
a value read that way (``autograder.checks.tripwires.drill_reads``). The course's own code reads it
freely: drill mode, ``kvlib drill``, the checks' expected values.

``COURSE_PACKAGES`` is the one list of the course's packages: reads from their code are the
course's, the autograder's sandbox binds the same packages read-only (``autograder.packages``
imports the list from here) and pyproject.toml installs them (``tests/test_exercises.py`` checks
that the two agree).
"""

from __future__ import annotations

import sys

__all__ = ["COURSE_PACKAGES", "GuardedField", "read_from_outside"]

#: The course's own top-level packages, lowest layer first (kvlib, the reference, imports none of the others).
COURSE_PACKAGES = ("kvlib", "kvcoach", "kvdisplay", "autograder")
#: Standard-library helpers that read a field on their caller's behalf: the caller is the one that counts.
_HELPER_MODULES = ("dataclasses", "copy", "pprint", "reprlib", "functools", "operator")


def read_from_outside(owner: type, depth: int = 1) -> bool:
    """Whether the code that reads a field of an ``owner`` instance is the learner's (none of COURSE_PACKAGES).

    ``depth`` frames up from the caller is the code that read the field (1: the caller's caller, as from a
    descriptor's ``__get__``). ``owner``'s own methods running on an instance of it (``check``, the
    dataclass's ``__repr__`` and ``__eq__``) and the standard library's helpers (``dataclasses.asdict``,
    ``copy``, ``pprint``) are skipped: what counts is who called them, so ``p.check(x)`` from a notebook (its
    feedback shows the answer) and ``repr(p)`` count too.
    """
    frame = sys._getframe(depth + 1)
    while frame is not None:
        module = str(frame.f_globals.get("__name__", ""))
        if module == owner.__module__ and isinstance(frame.f_locals.get("self"), owner):
            frame = frame.f_back
        elif module in _HELPER_MODULES:
            frame = frame.f_back
        else:
            return module.split(".")[0] not in COURSE_PACKAGES
    return False


class GuardedField:
    """A dataclass field whose reads from outside the course's packages are noted in ``reads``.

    ``key(instance)`` names what was read (a drill problem's ``(topic, seed)``). Set on the class after the
    dataclass is made (a frozen dataclass's ``__init__`` sets the value once, through ``__set__``)::

        Problem.answer = GuardedField(lambda p: (p.topic, p.seed))
        Problem.answer.__set_name__(Problem, "answer")
    """

    def __init__(self, key):
        self.key = key
        self.reads: set = set()

    def __set_name__(self, owner, name):
        self.owner, self.name = owner, name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = obj.__dict__[self.name]
        if read_from_outside(self.owner):
            self.reads.add(self.key(obj))
        return value

    def __set__(self, obj, value):
        obj.__dict__[self.name] = value
