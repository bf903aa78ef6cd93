"""Code a learner is not meant to edit is folded: every code cell of a chapter source is short, hidden, an
exercise, or marked as code the lesson is in.

A chapter shows its code for two reasons: the code *is* the lesson (a sympy derivation built step by step, an
object or toy the text asks the learner to change and run again), or the learner writes it (an exercise). All
else is plumbing: the loop that fills a table, the f-strings that word a result, the parsing of a log. Its
output is what the learner reads; 30 lines of it above a table push the table off the screen, and read as
something to study. So a visible code cell longer than ``SHORT`` lines must carry the tag ``LESSON`` in its
metadata (the author's statement that the code is to be read), and the rest are hidden (``source_hidden``:
JupyterLab folds the input to its first line, a ``# `` caption, which tests/test_build.py requires and keeps
through the build). Read from the source JSON, in process.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = sorted((REPO / "course" / "source").glob("ch*/ch*.ipynb"))
#: The lines of code a 1,400 px screen shows beside its text before a cell's output scrolls out of view.
SHORT = 15
#: The tag of a visible code cell whose code is the lesson (a derivation, an object the text asks to change).
LESSON = "lesson-code"
#: Even a lesson's code fits on a screen and a half.
LONGEST_LESSON = 50


def unfolded_plumbing(notebook: dict) -> list[str]:
    """``"cell N: K lines"`` for every visible code cell of ``notebook`` (nbformat JSON) longer than ``SHORT``
    lines that is neither an exercise (nbgrader) nor tagged ``LESSON``, and every lesson cell over
    ``LONGEST_LESSON`` lines."""
    found = []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        metadata = cell.get("metadata", {})
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        lines = len(source.strip().splitlines())
        if metadata.get("jupyter", {}).get("source_hidden") or "nbgrader" in metadata:
            continue
        if LESSON in metadata.get("tags", []):
            if lines > LONGEST_LESSON:
                found.append(f"cell {index}: {lines} lines of lesson code (over {LONGEST_LESSON})")
        elif lines > SHORT:
            found.append(f"cell {index}: {lines} lines, shown")
    return found


@pytest.mark.parametrize("path", SOURCES, ids=[p.parent.name for p in SOURCES])
def test_plumbing_is_folded(path):
    found = unfolded_plumbing(json.loads(path.read_text(encoding="utf-8")))
    assert found == [], (f"{path.parent.name}: code cells a learner is not meant to edit, in view (hide them with "
                         f"source_hidden and a '# ' caption, or tag them {LESSON!r} if the code is the lesson):\n"
                         + "\n".join(found))


def test_unfolded_plumbing_is_found():
    def code(lines, **metadata):
        return {"cell_type": "code", "source": "\n".join(f"x{i} = {i}" for i in range(lines)), "metadata": metadata}

    notebook = {"cells": [
        {"cell_type": "markdown", "source": "text\n" * 40, "metadata": {}},          # prose is not code
        code(SHORT),                                                                   # short: fine
        code(SHORT + 1),                                                               # long, shown: found
        code(40, jupyter={"source_hidden": True}),                                     # hidden: fine
        code(40, nbgrader={"solution": True, "grade_id": "q1_answer"}),                # an exercise: fine
        code(40, tags=[LESSON]),                                                       # the lesson: fine
        code(LONGEST_LESSON + 1, tags=[LESSON]),                                       # too long even so
    ]}
    assert unfolded_plumbing(notebook) == [f"cell 2: {SHORT + 1} lines, shown",
                                           f"cell 6: {LONGEST_LESSON + 1} lines of lesson code (over 50)"]


def test_the_tag_survives_the_build():
    """The student release keeps the tag and the fold of the source (the build copies cell metadata)."""
    chapters = {p.stem: p for p in (REPO / "chapters").glob("ch*.ipynb")}
    for path in SOURCES:
        source = json.loads(path.read_text(encoding="utf-8"))["cells"]
        release = json.loads(chapters[path.stem].read_text(encoding="utf-8"))["cells"]
        assert len(source) == len(release), path.stem
        for index, (ours, theirs) in enumerate(zip(source, release)):
            if LESSON in ours.get("metadata", {}).get("tags", []):
                assert LESSON in theirs.get("metadata", {}).get("tags", []), f"{path.stem} cell {index}"
