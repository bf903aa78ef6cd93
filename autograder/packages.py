"""The course's own top-level packages: installed with the project, visible in every sandbox.

``COURSE_PACKAGES`` is the one list, kept in ``kvcoach.guard`` (the lowest layer that needs it: the
coach counts reads of a drill's answer from these packages as the course's own). pyproject.toml
installs exactly these (``[tool.setuptools.packages.find] include``; ``binder/postBuild`` installs
the project, so Binder follows), the sandboxed kernel and the verdict's runner see them read-only,
and the verdict's prelude keeps a setup cell's imports of them. A new package is added there, in
pyproject's ``include``, and nowhere else (``tests/test_exercises.py`` checks the two agree).
"""

from __future__ import annotations

import os
from importlib import util

from kvcoach.guard import COURSE_PACKAGES

__all__ = ["COURSE_PACKAGES", "package_dir", "package_dirs"]


def package_dir(name: str) -> str:
    """The real folder of an importable package."""
    spec = util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"package {name} not found")
    return os.path.realpath(list(spec.submodule_search_locations)[0])


def package_dirs() -> list:
    """The folders of ``COURSE_PACKAGES`` (read-only binds of the sandboxes)."""
    return [package_dir(name) for name in COURSE_PACKAGES]
