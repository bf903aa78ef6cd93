"""A chapter id is a promise: every piece a chapter needs exists for every id of ``CHAPTER_IDS``.

``autograder.chapter.CHAPTER_IDS`` is the one list of chapters; the tests, the benchmarks and the browser
plans derive theirs from it (``tests/course_chapters.py``). Each test here checks one piece of the recipe in
``docs/contributing.md`` ("How to add a chapter") for every id, and fails naming the id and the file to write
or the entry to add. The reverse holds too: no chapter folder or notebook outside the list.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from autograder.chapter import CHAPTER_IDS
from autograder.checks import chapter_of
from course_chapters import GRADED, REPO, release, solution, source

BROWSER_PLANS = REPO / "tests" / "browser" / "test_lab.py"
BENCHMARKS = REPO / "benchmarks" / "run.py"
MAP = source(CHAPTER_IDS[0])        # chapter 00: the map of the course


def _dict_literal(path: Path, name: str) -> dict:
    """``{key: value node}`` of the module-level ``name = {...}`` in ``path`` (read, not imported)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets) \
                and isinstance(node.value, ast.Dict):
            return {ast.literal_eval(k): v for k, v in zip(node.value.keys, node.value.values)}
    raise AssertionError(f"{path.relative_to(REPO)} has no {name} = {{...}}")


def _without_explorer(plan: ast.AST) -> bool:
    """A browser plan that says why its chapter has no explorer (``Plan(without=...)``)."""
    return isinstance(plan, ast.Call) and any(k.arg == "without" for k in plan.keywords)


@pytest.mark.parametrize("chapter_id", CHAPTER_IDS)
def test_the_source_and_the_generated_notebooks_exist(chapter_id):
    assert source(chapter_id).is_file(), f"{chapter_id}: write its source, {source(chapter_id).relative_to(REPO)}"
    for path in (release(chapter_id), solution(chapter_id)):
        assert path.is_file(), f"{chapter_id}: run ./dev.sh build and commit {path.relative_to(REPO)}"


@pytest.mark.parametrize("chapter_id", GRADED)
def test_a_graded_chapter_has_its_checks_and_their_tests(chapter_id):
    prefix = chapter_of(chapter_id)
    for path in (REPO / "autograder" / "checks" / f"{prefix}.py", REPO / "tests" / f"test_checks_{prefix}.py"):
        assert path.is_file(), f"{chapter_id}: write {path.relative_to(REPO)}"


@pytest.mark.parametrize("chapter_id", CHAPTER_IDS)
def test_the_map_and_the_readme_list_it(chapter_id):
    cells = json.loads(MAP.read_text(encoding="utf-8"))["cells"]
    text = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert f"]({chapter_id}.ipynb)" in text, f"{chapter_id}: add its row to the chapter map in " \
                                             f"{MAP.relative_to(REPO)} (a link to {chapter_id}.ipynb)"
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert f"| `{chapter_id}` |" in readme, f"{chapter_id}: add its row to the chapter table in README.md"


@pytest.mark.parametrize("chapter_id", CHAPTER_IDS)
def test_the_browser_plan_and_the_explorer_benchmark_name_it(chapter_id):
    plans = _dict_literal(BROWSER_PLANS, "PLANS")
    assert chapter_id in plans, f"{chapter_id}: add its plan to PLANS in {BROWSER_PLANS.relative_to(REPO)} " \
                                "(its slider, number, a wrong answer and its slip; or without=<why not>)"
    if not _without_explorer(plans[chapter_id]):
        views = _dict_literal(BENCHMARKS, "EXPLORER_VIEWS")
        assert chapter_id in views, f"{chapter_id}: name its explorer view in EXPLORER_VIEWS in " \
                                    f"{BENCHMARKS.relative_to(REPO)} (or give its browser plan without=<why not>)"


def test_no_chapter_outside_the_list():
    folders = {p.name for p in (REPO / "course" / "source").iterdir() if p.is_dir() and p.name.startswith("ch")}
    generated = {p.stem for folder in ("chapters", "solutions") for p in (REPO / folder).glob("ch*.ipynb")}
    outside = sorted((folders | generated) - set(CHAPTER_IDS))
    assert not outside, f"chapters that are not in autograder/chapter.py's CHAPTER_IDS: {outside}"
