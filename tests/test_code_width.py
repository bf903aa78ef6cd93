"""Code cells fit the page: no line of a source notebook's code cell is wider than 99 characters.

JupyterLab at 1,400 px shows about 100 characters of a code cell before it clips the line (a reader must
scroll sideways, and a printed or HTML page cuts it). Every code cell counts: the learner's own, the graded
ones, and the hidden generator cells, which a learner can unhide. Read from the source JSON, in process.

Chapters are added to WRAPPED as they are wrapped; the others still have wider lines ([corrections 00-04]).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "course" / "source"
LIMIT = 99
WRAPPED = ("ch03_mla", "ch04_pool_paging")


def wide_lines(notebook: dict, limit: int = LIMIT) -> list[str]:
    """``"cell N line M: K characters"`` for every code line of ``notebook`` (nbformat JSON) over ``limit``."""
    found = []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        for number, line in enumerate(source.splitlines(), 1):
            if len(line) > limit:
                found.append(f"cell {index} line {number}: {len(line)} characters")
    return found


@pytest.mark.parametrize("chapter", WRAPPED)
def test_code_lines_fit_the_page(chapter):
    notebook = json.loads((SOURCE / chapter / f"{chapter}.ipynb").read_text(encoding="utf-8"))
    found = wide_lines(notebook)
    assert found == [], f"{chapter}: code lines over {LIMIT} characters:\n" + "\n".join(found)


def test_a_wide_line_is_found_in_any_code_cell():
    # a hidden generator cell and a learner's cell; markdown is prose, wrapped by the browser
    long = "x = " + "1 + " * 30 + "1"
    notebook = {"cells": [
        {"cell_type": "markdown", "source": long, "metadata": {}},
        {"cell_type": "code", "source": ["y = 2\n", long], "metadata": {"jupyter": {"source_hidden": True}}},
        {"cell_type": "code", "source": "z = 3\n" + "w" * 99, "metadata": {}},
    ]}
    assert wide_lines(notebook) == [f"cell 1 line 2: {len(long)} characters"]
    assert wide_lines(notebook, limit=98) == [f"cell 1 line 2: {len(long)} characters",
                                              "cell 2 line 2: 99 characters"]


def test_the_wrapped_chapters_exist():
    assert all((SOURCE / chapter / f"{chapter}.ipynb").exists() for chapter in WRAPPED)
