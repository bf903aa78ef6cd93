"""What every tests/test_checks_chNN.py needs: a failing check's message, and the points the
source notebook states (once, on its test cells)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autograder import notebook
from autograder.checks import check

REPO = Path(__file__).resolve().parents[1]


def fails(grade_id: str, fn, **kwargs) -> str:
    """The message of ``check(grade_id, fn)``, which must fail."""
    with pytest.raises(AssertionError) as info:
        check(grade_id, fn, **kwargs)
    return str(info.value)


def source_points(chapter: str) -> dict:
    """``{grade_id: points}`` of the chapter's test cells, read from its source notebook."""
    return notebook.grade_points(notebook.read(REPO / "course" / "source" / chapter / f"{chapter}.ipynb"))
