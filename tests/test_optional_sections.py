"""Optional "deeper" sections: at a chapter's end, and nothing a learner must do depends on them.

A chapter may keep material beyond its exercises (an engine's page layout, a parallelism mode most deployments
never turn on) in sections whose heading reads ``## Deeper (optional): <title>``. A learner who stops before
them must have met every exercise's lesson, so:

* every ``##`` section after the first optional one is optional too (they sit at the chapter's end, after the
  exercises and "What next");
* no exercise (its prompt, the markdown of the Exercises section) and no worked problem (the question a code
  cell draws with ``kd.worked_problem`` or as ``**Question n.**`` text) outside them names one: by its title, or
  as "the deeper section" / "an optional section";
* every point is earned outside them: a test cell inside one is ungraded practice (0 points), and a test cell
  with 0 points sits inside one.

Read from the source JSON, in process.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOURCES = sorted((REPO / "course" / "source").glob("ch*/ch*.ipynb"))
OPTIONAL = re.compile(r"^##\s+Deeper \(optional\):\s*(.+?)\s*$", re.M)
SECTION = re.compile(r"^##\s+(.+?)\s*$", re.M)
#: Chapters whose optional sections [learner screen] asked for; a test below makes sure they keep them.
EXPECTED = {"ch02_gqa_tp": ["decode context parallelism"], "ch03_mla": ["how vLLM stores the latent"],
            "ch08_vllm_lab": ["a printed figure is a range of blocks"]}
GENERIC = re.compile(r"\b(?:deeper|optional) section", re.I)


def _cells(notebook: dict):
    for cell in notebook["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        yield cell, source


def problems(notebook: dict) -> list[str]:
    """What breaks the rules above in ``notebook`` (nbformat JSON)."""
    found, titles, section, optional_seen, in_exercises = [], [], "", False, False
    must_not_refer = []                                    # (cell index, text) read by a learner who stops early
    for index, (cell, source) in enumerate(_cells(notebook)):
        if cell["cell_type"] == "markdown":
            for heading in SECTION.findall(source):
                optional = OPTIONAL.match(f"## {heading}")
                if optional:
                    titles.append(optional.group(1))
                    optional_seen = True
                elif optional_seen and not heading.lower().startswith("what next"):
                    found.append(f"cell {index}: section {heading!r} comes after an optional section")
                in_exercises = bool(re.match(r"(?:\d+\.\s*)?Exercises\b", heading))
                section = heading
        grader = cell.get("metadata", {}).get("nbgrader", {})
        if grader.get("grade") and cell["cell_type"] == "code":
            points, optional_here = grader.get("points", 0), bool(OPTIONAL.match(f"## {section}"))
            if optional_here and points:
                found.append(f"cell {index}: test cell {grader.get('grade_id')} gives {points} points in an optional "
                             "section")
            elif not optional_here and not points:
                found.append(f"cell {index}: test cell {grader.get('grade_id')} gives no points outside an optional "
                             "section")
        if OPTIONAL.match(f"## {section}"):
            continue
        graded = "nbgrader" in cell.get("metadata", {})
        if cell["cell_type"] == "markdown" and (in_exercises or graded):
            must_not_refer.append((index, source))
        elif cell["cell_type"] == "code" and ("worked_problem(" in source or "**Question" in source) \
                and not graded:
            must_not_refer.append((index, source))
    for index, text in must_not_refer:
        flat = " ".join(text.split()).lower()
        named = [t for t in titles if " ".join(t.split()).lower() in flat]
        if named or GENERIC.search(text):
            found.append(f"cell {index}: an exercise or question refers to an optional section "
                         f"({', '.join(named) or GENERIC.search(text).group(0)})")
    return found


def optional_titles(notebook: dict) -> list[str]:
    return [m.group(1) for _, source in _cells(notebook) for m in OPTIONAL.finditer(source)]


@pytest.mark.parametrize("path", SOURCES, ids=[p.parent.name for p in SOURCES])
def test_optional_sections_are_last_and_needed_by_nothing(path):
    found = problems(json.loads(path.read_text(encoding="utf-8")))
    assert found == [], f"{path.parent.name}:\n" + "\n".join(found)


@pytest.mark.parametrize("chapter", sorted(EXPECTED))
def test_the_chapters_keep_their_optional_sections(chapter):
    notebook = json.loads((REPO / "course" / "source" / chapter / f"{chapter}.ipynb").read_text(encoding="utf-8"))
    assert optional_titles(notebook) == EXPECTED[chapter]


def test_the_rules_can_fail():
    def md(text, **metadata):
        return {"cell_type": "markdown", "source": text, "metadata": metadata}

    def code(text, **metadata):
        return {"cell_type": "code", "source": text, "metadata": metadata}

    good = {"cells": [md("## 1. Pages"), code('kd.worked_problem(1, "How many pages?", "a", "f", [], "r", "s")'),
                      md("## 2. Exercises"), md("### Exercise 1 · Pages"), md("## What next"),
                      md("## Deeper (optional): fp8 formats\n\nThe scales."), code("x = 1")]}
    assert problems(good) == [] and optional_titles(good) == ["fp8 formats"]
    bad = json.loads(json.dumps(good))
    bad["cells"][1]["source"] = 'kd.worked_problem(1, "With the fp8 formats of the last section?", "a", "f", [], "r", "s")'
    bad["cells"][3]["source"] = "### Exercise 1 · Pages\n\nThe deeper section has the table you need."
    bad["cells"].append(md("## 3. Explore"))
    assert problems(bad) == ["cell 7: section '3. Explore' comes after an optional section",
                             "cell 1: an exercise or question refers to an optional section (fp8 formats)",
                             "cell 3: an exercise or question refers to an optional section (deeper section)"]
    # points: earned outside the optional sections only; a 0-point test cell is practice inside one
    def test(gid, points):
        return code(f'check("{gid}", f)', nbgrader={"grade": True, "grade_id": gid, "points": points})

    scored = json.loads(json.dumps(good))
    scored["cells"][3:3] = [test("ch99_q1_pages", 2)]
    scored["cells"] += [test("ch99_q2_scales", 0)]
    assert problems(scored) == []
    scored["cells"][3], scored["cells"][-1] = test("ch99_q1_pages", 0), test("ch99_q2_scales", 1)
    assert problems(scored) == ["cell 3: test cell ch99_q1_pages gives no points outside an optional section",
                                "cell 8: test cell ch99_q2_scales gives 1 points in an optional section"]
