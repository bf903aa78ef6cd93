"""Where a chapter's exercises are: the checks module named by a grade id's prefix.

``exercise("ch01_q2_kv_bytes_per_sequence")`` is the ``Exercise`` of that test cell, from
``autograder/checks/ch01.py``'s ``EXERCISES``. Checks modules outside the package (a test fixture)
are found on ``$KV_COURSE_CHECKS_PATH`` (folders, ``os.pathsep``-separated).
"""

from __future__ import annotations

import os
import sys
from importlib import import_module, util
from pathlib import Path

CHECKS_PATH_ENV = "KV_COURSE_CHECKS_PATH"
PACKAGE = __name__.rpartition(".")[0]       # autograder.checks: the chapter modules' package


def chapter_of(name: str) -> str:
    """``ch01`` from a chapter id, a grade id or ``ch01`` itself."""
    return name.split("_")[0]


def chapter_module(chapter: str):
    """The checks module of ``chapter`` (``ch01``, ``ch01_kv_formula`` or a grade id)."""
    prefix = chapter_of(chapter)
    name = f"{PACKAGE}.{prefix}"
    if name in sys.modules:
        return sys.modules[name]
    if (Path(__file__).parent / f"{prefix}.py").is_file():
        return import_module(name)
    for folder in os.environ.get(CHECKS_PATH_ENV, "").split(os.pathsep):
        path = Path(folder) / f"{prefix}.py" if folder else None
        if path is not None and path.is_file():
            spec = util.spec_from_file_location(name, path)
            module = util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
            return module
    raise LookupError(f"no checks for chapter {prefix} (autograder/checks/{prefix}.py)")


def chapter_exercises(chapter: str) -> dict:
    """``{grade_id: Exercise}`` of a chapter, in notebook order."""
    return dict(chapter_module(chapter).EXERCISES)


def exercise(grade_id: str):
    """The exercise of a test cell's grade id (LookupError when there is none)."""
    found = chapter_exercises(grade_id).get(grade_id)
    if found is None:
        raise LookupError(f"no exercise {grade_id} in autograder/checks/{chapter_of(grade_id)}.py")
    return found
