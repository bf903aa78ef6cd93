"""Every public kvdisplay helper names the chapters that use it, and those chapters do use it.

d2l-style back-links: a helper's docstring ends with "Used in: <chapter id>[, ...]" (or
"(none yet)"); the named chapter's source must exist and call ``kd.<name>`` (or, for
"<chapter> (through <helper>)", call that helper)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import kvdisplay

REPO = Path(__file__).resolve().parents[1]
CHAPTER_ID = re.compile(r"\bch\d\d_[a-z0-9_]+")
HELPERS = [name for name in kvdisplay.__all__ if callable(getattr(kvdisplay, name))]


def _used_in_line(name):
    doc = inspect.getdoc(getattr(kvdisplay, name)) or ""
    line = next((text for text in doc.splitlines() if text.startswith("Used in:")), None)
    assert line, f"kvdisplay.{name}: the docstring has no 'Used in:' line"
    return line


def _used_in(name):
    return CHAPTER_ID.findall(_used_in_line(name))


@pytest.mark.parametrize("name", HELPERS)
def test_helper_links_back_to_the_chapters_that_call_it(name):
    through = re.search(r"\(through (\w+)\)", _used_in_line(name))
    caller = through.group(1) if through else name
    for chapter in _used_in(name):
        source = REPO / "course" / "source" / chapter / f"{chapter}.ipynb"
        assert source.is_file(), f"kvdisplay.{name} names {chapter}, which has no source notebook"
        assert f"kd.{caller}(" in source.read_text(encoding="utf-8"), f"{chapter} does not call kd.{caller}"


def test_every_call_in_a_chapter_is_linked_back():
    for source in sorted((REPO / "course" / "source").glob("ch*/ch*.ipynb")):
        for name in sorted(set(re.findall(r"\bkd\.([a-z_]+)\(", source.read_text(encoding="utf-8")))):
            assert name in kvdisplay.__all__, f"{source.stem} calls kd.{name}, which kvdisplay does not export"
            assert source.stem in _used_in(name), f"kvdisplay.{name}'s 'Used in:' omits {source.stem}"
