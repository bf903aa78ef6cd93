"""The slip the text warns about is the slip the check names.

Every warning in a chapter's prose carries a marker naming the slip catalogue's key
(``<!-- slip: KEY -->``, several keys comma-separated; ``<!-- slip: none -->`` says the
sentence is not a warning). Warnings are found by their phrasing ("by mistake", "a common
slip", "the usual slip", "instead of", "not ... but", "watch", "careful"). A marked key must be
in the catalogue (``kvcoach.slips``) and told: a learner who makes that slip on the visible cases
of one of the chapter's exercises (the catalogue's recomputed values) is told it by that
exercise's check. Reads the source notebooks only (no kernels).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import pytest

from autograder.checks import answers, diagnosis, judge, registry
from autograder.checks.judge import slip_inputs_for
from kvcoach import slips

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "course/source").glob("ch*/ch*.ipynb"))

WARNING = re.compile(r"by mistake|a common slip|the usual slip|instead of|\bnot\b.*\bbut\b|\bwatch|careful",
                     re.IGNORECASE | re.DOTALL)
MARKER = re.compile(r"<!--\s*slip:\s*([^>]*?)\s*-->")
#: a sentence ends at . ! ? followed by space, at a blank line, a list item, a heading or a table row
_BREAK = re.compile(r"(?<=[.!?])\s+|\n\s*\n|\n(?=\s*(?:[*-]|\d+\.)\s)|\n(?=#)|\n(?=\s*\|)|(?<=\|)\n")
_FENCE = re.compile(r"```.*?```", re.DOTALL)


def sentences(markdown: str) -> list:
    """``[(text, marker keys)]``: the cell's sentences, each with the keys of the markers inside it or right
    after its end (before the next sentence's words). Fenced code is left out."""
    out: list = []
    for chunk in _BREAK.split(_FENCE.sub(" ", markdown)):
        lead = re.match(r"\s*((?:<!--\s*slip:[^>]*-->\s*)+)", chunk)
        if lead and out:        # a marker just after the sentence's full stop belongs to that sentence
            text, keys = out[-1]
            out[-1] = (text, keys + _keys(lead.group(1)))
            chunk = chunk[lead.end():]
        if chunk.strip():
            out.append((MARKER.sub("", chunk).strip(), _keys(chunk)))
    return out


def _keys(text: str) -> list:
    return [key.strip() for found in MARKER.findall(text) for key in found.split(",") if key.strip()]


def warnings(path: Path) -> list:
    """``[(cell index, sentence, marker keys)]``: every sentence of the notebook's markdown that warns (by its
    phrasing) or carries a marker."""
    cells = json.loads(path.read_text())["cells"]
    found = []
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        for text, keys in sentences("".join(cell["source"])):
            if keys or WARNING.search(text):
                found.append((index, text, keys))
    return found


@lru_cache(maxsize=None)
def told(chapter: str, key: str) -> bool:
    """A learner who makes ``key`` on every visible case of one of the chapter's exercises (the catalogue's own
    recomputed value where the slip changes the answer, the right value where it does not) is told ``key`` by
    that exercise's check: its message names it (``diagnosis.summary``)."""
    try:
        exercises = registry.chapter_exercises(chapter)
    except LookupError:
        return False
    for exercise in exercises.values():
        if not exercise.quantity or exercise.value:
            continue
        cases = exercise.cases()
        records, made = [], False
        for case in cases:
            expected, ways = slips.variants(exercise.quantity, unit=exercise.unit, **slip_inputs_for(exercise, case))
            wrong = next((v for k, v in ways if slips.base_key(k) == key and v is not None), None)
            made = made or wrong is not None
            records.append(answers.encode(expected if wrong is None else wrong))
        if not made:
            continue
        results = judge.verdicts(exercise, cases, records)
        if key in diagnosis.summary(exercise, cases, results, records=records).slips:
            return True
    return False


def _problems(path: Path) -> list:
    chapter = path.stem.split("_")[0]
    problems = []
    for index, text, keys in warnings(path):
        where = f"{path.stem} cell {index}: {text[:90]!r}"
        if not keys:
            problems.append(f"{where}: warns without a marker <!-- slip: KEY --> (or <!-- slip: none -->)")
        for key in keys:
            if key == "none":
                continue
            if key not in slips.SLIPS:
                problems.append(f"{where}: {key!r} is not a slip of the catalogue (kvcoach.slips)")
            elif not told(chapter, key):
                problems.append(f"{where}: a learner making {key!r} is not told it by any of {chapter}'s checks")
    return problems


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_every_warning_names_a_slip_the_checks_tell(path):
    problems = _problems(path)
    assert not problems, "\n".join(problems)


def test_warnings_are_found_by_their_phrasing():
    found = sentences("Multiply by the query heads instead of the KV heads. Then divide.\n\n"
                      "It is not the label but what CUDA reports. <!-- slip: label_memory -->\n"
                      "* watch the bar <!-- slip: none -->\n* a plain item")
    assert found == [("Multiply by the query heads instead of the KV heads.", []), ("Then divide.", []),
                     ("It is not the label but what CUDA reports.", ["label_memory"]),
                     ("* watch the bar", ["none"]), ("* a plain item", [])]
    assert [bool(WARNING.search(text)) for text, _ in found] == [True, False, True, True, False]


def test_an_unmarked_warning_and_an_untold_key_fail(tmp_path):
    cells = [{"cell_type": "markdown", "metadata": {}, "source": [text]} for text in (
        "Multiplying by H instead of K inflates every figure.",
        "A common slip is to forget the weights. <!-- slip: no_such_slip -->",
        "Careful: the query heads are not the KV heads. <!-- slip: query_heads -->",
        "Careful: a fraction of a sequence is not admitted. <!-- slip: ceil_not_floor -->")]
    path = tmp_path / "ch01_example.ipynb"
    path.write_text(json.dumps({"cells": cells}))
    problems = _problems(path)
    assert len(problems) == 2, problems
    assert "warns without a marker" in problems[0] and "'no_such_slip' is not a slip" in problems[1]
    # ch01's checks tell query_heads and ceil_not_floor; ch00 has no checks, so it tells no slip
    assert told("ch01", "query_heads") and told("ch01", "ceil_not_floor") and not told("ch00", "query_heads")
    # a slip of another chapter's quantities is not told by ch01's checks
    assert not told("ch01", "gpu_as_replica") and told("ch07", "gpu_as_replica")
