"""How a failed instant check looks in the notebook: its message, never the checker's frames.

A failing ``check`` raises ``CheckFailed``, an ``AssertionError`` whose
``_render_traceback_`` IPython uses for the traceback it shows (and stores in
the cell's error output): a header ``✗ <grade id>``, then the message (the
diagnosis and the hint), then, when the learner's own code raised, the
learner's frames only. The cell still gets an error output, so nbgrader still
records the test as failed; its ``ename`` stays ``AssertionError`` and its
``evalue`` is the message, which is what ``autograder.results`` and the
feedback read.

>>> exc = CheckFailed("✗ ch01_q1_x: f(...) returns 3, expected 4.\\nHint: recount.", ["  Cell In[3], line 2, in f"])
>>> exc._render_traceback_()
['✗ ch01_q1_x', 'f(...) returns 3, expected 4.', 'Hint: recount.', '', 'Where your code raised it:', '  Cell In[3], line 2, in f']
>>> isinstance(exc, AssertionError), type(exc).__name__
(True, 'AssertionError')
"""

from __future__ import annotations

import traceback
from pathlib import Path

#: The folder of the checking machinery; its frames are never shown to the learner.
CHECKER_DIR = Path(__file__).resolve().parent.parent
TRIPWIRE_FILE = "<kvlib tripwire>"


class CheckFailed(AssertionError):
    """A check's verdict: the message is all the learner sees."""

    def __init__(self, message: str, where=()):
        super().__init__(message)
        self.where = list(where)

    def _render_traceback_(self) -> list:
        first, *rest = str(self).splitlines() or [""]
        head, sep, tail = first.partition(": ")
        lines = [head, tail] if sep and head.startswith("✗ ") else [first]
        lines += rest
        if self.where:
            lines += ["", "Where your code raised it:"] + self.where
        return lines


# The error output's ename: the name the grader's results, nbgrader's feedback and the tests
# read for "the check failed" (a learner's own exception keeps its own name).
CheckFailed.__name__ = CheckFailed.__qualname__ = "AssertionError"


def _is_checker(filename: str) -> bool:
    if filename == TRIPWIRE_FILE:
        return True
    try:
        return Path(filename).resolve().is_relative_to(CHECKER_DIR)
    except (OSError, ValueError):
        return False


def _label(filename: str) -> str:
    """``Cell In[7]`` for a notebook cell (as IPython names it), else the file."""
    try:
        from IPython import get_ipython
        shell = get_ipython()
        named = shell.compile.format_code_name(filename) if shell is not None else None
    except Exception:  # noqa: BLE001 -- outside IPython, or an IPython without the method
        named = None
    return " ".join(named) if named else f'File "{filename}"'


def learner_frames(exc: BaseException) -> list:
    """The traceback of ``exc`` without the checker's frames: the learner's code, and what it called."""
    lines = []
    for frame in traceback.extract_tb(exc.__traceback__):
        if _is_checker(frame.filename):
            continue
        lines.append(f"  {_label(frame.filename)}, line {frame.lineno}, in {frame.name}")
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    if lines:
        lines.append(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    return lines
