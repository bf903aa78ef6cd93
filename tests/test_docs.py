"""The README and docs/ (the README's four pointers) name only commands that exist.

Every `./dev.sh X`, `kvlib X` and `python -m autograder X` quoted in code (a code span or a
fenced block) of README.md or docs/*.md is a command of dev.sh's dispatcher or a subcommand of
the two CLIs' own argparse parsers; every docs/ file the README points to exists, and every doc
is pointed to from the README; docs/kvlib.md names every function of SGLang's rules and of vLLM's
hybrid pages. In process, well under a second.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _code(text: str) -> str:
    blocks = re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.S)
    spans = re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
    return "\n".join(blocks + spans)


def _dev_sh_commands() -> set:
    body = (REPO / "dev.sh").read_text().split('case "$command" in', 1)[1].split("esac", 1)[0]
    return {name for name in re.findall(r"^\s+([a-z]+)\)", body, flags=re.M)}


def _subcommands(parser: argparse.ArgumentParser) -> set:
    return {name for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name in action.choices}


def test_the_helpers_see_the_real_commands():
    from autograder.__main__ import build_parser as grader
    from kvlib.cli import build_parser as kvlib_cli
    assert {"open", "test", "quick", "build", "site"} <= _dev_sh_commands()
    assert {"info", "plan", "drill"} <= _subcommands(kvlib_cli())
    assert {"grade", "grade-class"} <= _subcommands(grader())
    assert _code("see `./dev.sh nope` and\n```\nkvlib x\n```\n") == "kvlib x\n\n./dev.sh nope"


@pytest.mark.parametrize("doc", DOCS, ids=[str(p.relative_to(REPO)) for p in DOCS])
def test_quoted_commands_exist(doc):
    from autograder.__main__ import build_parser as grader
    from kvlib.cli import build_parser as kvlib_cli
    code = _code(doc.read_text(encoding="utf-8"))
    known = {"./dev.sh": _dev_sh_commands(), "kvlib": _subcommands(kvlib_cli()),
             "python -m autograder": _subcommands(grader())}
    unknown = []
    for tool, pattern in (("./dev.sh", r"\./dev\.sh ([a-z][a-z-]*)"),
                          ("kvlib", r"(?:^|\|) *kvlib ([a-z][a-z-]*)"),
                          ("python -m autograder", r"python -m autograder ([a-z][a-z-]*)")):
        unknown += [f"{tool} {name}" for name in re.findall(pattern, code, flags=re.M)
                    if name not in known[tool]]
    assert not unknown, unknown


def test_readme_points_to_every_doc():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", readme))
    on_disk = {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")}
    assert {"docs/instructors.md", "docs/kvlib.md", "docs/engine.md", "docs/contributing.md"} <= linked
    assert linked == on_disk, (linked - on_disk, on_disk - linked)


def test_readme_is_read_in_a_minute():
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) < 120


def test_the_drill_topics_are_all_listed():
    """docs/kvlib.md's topic table names every kvcoach.drills topic, once, marks exactly the graded ones, and
    names each one's formula by a kvlib function that exists."""
    import importlib

    from kvcoach.drills import GRADED_TOPICS, TOPICS
    text = (REPO / "docs" / "kvlib.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([a-z0-9_]+)`( \(\*\*graded\*\*\))? \| [^|]+ \| ([^|]+) \|$", text, flags=re.M)
    assert sorted(name for name, _, _ in rows) == sorted(TOPICS)
    assert {name for name, graded, _ in rows if graded} == set(GRADED_TOPICS)
    assert f"{len(TOPICS)} of them" in text
    for _, _, formula in rows:
        for dotted in re.findall(r"`(kvlib\.[a-z_.]+)`", formula):
            module, _, name = dotted.rpartition(".")
            assert hasattr(importlib.import_module(module), name), dotted


def _course_points() -> dict:
    """``{chapter: (tests, points)}`` of every graded chapter, from its source notebook's test cells."""
    import json

    from autograder.notebook import grade_points
    out = {}
    for path in sorted((REPO / "course" / "source").glob("*/*.ipynb")):
        points = grade_points(json.loads(path.read_text(encoding="utf-8")))
        if points:
            out[path.stem] = (len(points), sum(points.values()))
    return out


def test_the_point_totals_the_docs_state_are_the_notebooks():
    """docs/instructors.md's table lists every graded chapter with its tests and points; the hub guide and
    BENCHMARKS.md state chapter 01's total (a measured "Scores out of N" too)."""
    course = _course_points()
    assert course["ch01_kv_formula"] == (6, 11)           # the contract (tests/hostile: 3 + 1 + 1 + 2 + 2 + 2)
    text = (REPO / "docs" / "instructors.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(ch\d{2}_[a-z0-9_]+)` \| (\d+) \| (\d+) \|$", text, flags=re.M)
    assert {name: (int(n), int(p)) for name, n, p in rows} == course and len(rows) == len(course)
    ch01 = course["ch01_kv_formula"][1]
    guide = (REPO / "course" / "jupyterhub" / "GUIDE.md").read_text(encoding="utf-8")
    assert [int(n) for n in re.findall(r"and 0\s+of (\d+) for the three notebooks", guide)] == [ch01]
    bench = (REPO / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert [int(n) for n in re.findall(r"Scores out of (\d+) by kind", bench)] == [ch01]


@pytest.mark.parametrize("module", ["kvlib.sglang", "kvlib.sglang_log", "kvlib.vllm.hybrid"])
def test_kvlib_md_names_every_engine_rule(module):
    """docs/kvlib.md names every public function of SGLang's rules and vLLM's hybrid pages, in code."""
    mod = importlib.import_module(module)
    code = _code((REPO / "docs" / "kvlib.md").read_text(encoding="utf-8"))
    functions = [n for n in mod.__all__ if inspect.isfunction(getattr(mod, n))]
    assert functions, f"{module} exports no function"
    # `name(` on its own, or `module.name(`: kv.vllm.parse_log does not document kvlib.sglang_log.parse_log
    missing = [n for n in functions if not re.search(rf"(?:(?<![\w.])|{re.escape(module)}\.){n}\(", code)]
    assert missing == [], f"docs/kvlib.md does not name {module}'s {missing}"
