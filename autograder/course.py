"""The course directory and throwaway copies of it.

Everything that runs nbgrader (``tools/build_course.py``, ``python -m
autograder``) works on a copy of ``course/`` made in a temp dir, never on the
checkout: ``stage_course`` copies ``nbgrader_config.py`` and the chosen
sources, and ``NbGrader`` drives nbgrader in-process on that copy (one import,
then about 0.2 s per generated release and about 1 s per autograded notebook).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from . import notebook as _notebook
from .notebook import grade_points, nbgrader_cells  # noqa: F401 -- part of this module's API

#: Chapter ids: zero-padded number and a snake_case slug (``ch01_kv_formula``).
ASSIGNMENT_RE = re.compile(r"^ch\d{2}_[a-z0-9_]+$")

REPO_ROOT = Path(__file__).resolve().parent.parent


class CourseError(ValueError):
    """A usage problem: no course directory, unknown assignment, bad source."""


class UsageError(ValueError):
    """Bad command-line input (no such file, unknown assignment): exit 2."""


def inside_checkout(path: Path) -> bool:
    """True when ``path`` lies in this package's checkout (a git work tree)."""
    if not (REPO_ROOT / ".git").exists():
        return False
    path = Path(path).resolve()
    return path == REPO_ROOT or REPO_ROOT in path.parents


def find_course_dir(explicit: str | os.PathLike | None = None) -> Path:
    """The instructor's course directory (the folder holding ``nbgrader_config.py``).

    Order: ``explicit``, then ``$KV_COURSE_DIR``, then ``course/`` next to this
    package (the checkout, editable install), then ``./course``.
    """
    candidates = [explicit, os.environ.get("KV_COURSE_DIR"), REPO_ROOT / "course", Path.cwd() / "course"]
    for i, candidate in enumerate(candidates):
        if not candidate:
            continue
        path = Path(candidate).resolve()
        if (path / "nbgrader_config.py").is_file():
            return path
        if i < 2:  # given explicitly: say what is wrong with it
            raise CourseError(f"{path} is not a course directory (no nbgrader_config.py)")
    raise CourseError("no course directory found (looked for course/nbgrader_config.py); pass --course DIR")


def list_assignments(course_dir: Path) -> list[str]:
    """Assignment ids with a source notebook ``source/<id>/<id>.ipynb``, sorted."""
    source = Path(course_dir) / "source"
    if not source.is_dir():
        return []
    return sorted(p.name for p in source.iterdir()
                  if p.is_dir() and (p / f"{p.name}.ipynb").is_file())


def source_notebook(course_dir: Path, assignment: str) -> Path:
    """The source notebook of ``assignment``; CourseError when there is none."""
    path = Path(course_dir) / "source" / assignment / f"{assignment}.ipynb"
    if not path.is_file():
        known = ", ".join(list_assignments(course_dir)) or "none"
        raise CourseError(f"unknown assignment {assignment!r} (known: {known})")
    return path


def stage_course(course_dir: Path, dest: Path, assignments: list[str]) -> Path:
    """Copy the config and the sources of ``assignments`` into ``dest`` (a fresh course root)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(Path(course_dir) / "nbgrader_config.py", dest / "nbgrader_config.py")
    ignore = shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "*.pyc")
    for assignment in assignments:
        src = source_notebook(course_dir, assignment).parent
        shutil.copytree(src, dest / "source" / assignment, ignore=ignore, dirs_exist_ok=True)
    return dest


def _quiet_nbgrader():
    """Silence log noise that says nothing about the submission (see toolchain notes)."""
    import logging
    import warnings

    warnings.filterwarnings("ignore", message=".*not in session.*")  # SQLAlchemy 2.1 vs nbgrader 0.9
    try:
        from sqlalchemy.exc import SAWarning
        warnings.filterwarnings("ignore", category=SAWarning)
    except ImportError:  # pragma: no cover
        pass
    logging.getLogger("traitlets").setLevel(logging.ERROR)


_REVISION_RE = re.compile(r"^(down_revision|revision)\s*=\s*['\"]?([0-9a-f]+|None)['\"]?", re.M)


def _alembic_head() -> str:
    """nbgrader's newest gradebook schema revision, read from its migration files.

    nbgrader asks for it by running ``alembic heads`` in a subprocess each time
    it creates a gradebook (3.3 s here, most of a one-notebook grade); the
    files say the same thing in a millisecond.
    """
    import nbgrader.dbutil

    revisions, parents = set(), set()
    for path in Path(nbgrader.dbutil.ALEMBIC_DIR, "versions").glob("*.py"):
        found = dict(_REVISION_RE.findall(path.read_text(encoding="utf-8")))
        if "revision" in found:
            revisions.add(found["revision"])
            parents.add(found.get("down_revision"))
    heads = revisions - parents
    if len(heads) != 1:
        raise RuntimeError(f"cannot tell nbgrader's schema head from {sorted(heads)}")
    return heads.pop()


def _patch_alembic_version():
    import nbgrader.api

    original = getattr(nbgrader.api.get_alembic_version, "__wrapped__", nbgrader.api.get_alembic_version)
    try:
        head = _alembic_head()
    except Exception:  # unknown layout: keep nbgrader's own (slow) way
        return

    def get_alembic_version() -> str:
        return head

    get_alembic_version.__wrapped__ = original
    nbgrader.api.get_alembic_version = get_alembic_version


def prepare_environment():
    """Make subprocesses that nbgrader starts find this interpreter's tools.

    nbgrader runs ``alembic`` by name when it creates a gradebook (we answer
    that from the migration files instead, see ``_alembic_head``), and kernels
    must be this interpreter's; put its ``bin/`` first on PATH. Kernels write
    no bytecode into the checkout.
    """
    bindir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if path.split(os.pathsep)[0] != bindir:
        os.environ["PATH"] = bindir + (os.pathsep + path if path else "")
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    _quiet_nbgrader()
    _patch_alembic_version()


class NbGrader:
    """nbgrader's API on one course root, with the course's config file loaded.

    ``overrides`` are ``{"Section.name": value}`` pairs applied after the
    file (``{"Execute.timeout": 5}``, ``{"CourseDirectory.db_url": url}``).
    """

    def __init__(self, root: Path, overrides: dict | None = None):
        prepare_environment()
        from nbgrader.apps import NbGraderAPI
        from nbgrader.coursedir import CourseDirectory
        from traitlets.config.loader import PyFileConfigLoader

        self.root = Path(root).resolve()
        config = PyFileConfigLoader("nbgrader_config.py", path=str(self.root)).load_config()
        config.CourseDirectory.root = str(self.root)
        for key, value in (overrides or {}).items():
            section, name = key.split(".")
            setattr(config[section], name, value)
        self.config = config
        self.coursedir = CourseDirectory(config=config)
        self.api = NbGraderAPI(coursedir=self.coursedir, config=config)

    @property
    def db_url(self) -> str:
        return self.coursedir.db_url

    @property
    def course_id(self) -> str:
        return self.coursedir.course_id

    def generate(self, assignment: str) -> Path:
        """``nbgrader generate_assignment``; returns the release notebook's path."""
        result = self.api.generate_assignment(assignment, force=True, create=True)
        if not result["success"]:
            raise CourseError(f"nbgrader generate_assignment {assignment} failed:\n"
                              + _last_lines(result.get("log", "") + result.get("error", "")))
        return self.root / "release" / assignment / f"{assignment}.ipynb"

    def autograde(self, assignment: str, student: str) -> dict:
        """``nbgrader autograde --student``: nbgrader's result dict (success, log, error)."""
        return self.api.autograde(assignment, student, force=True, create=True)


def _last_lines(text: str, n: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-n:])


# The one notebook reader (autograder.notebook), under the names the build and the grader use.
read_notebook = _notebook.read_nbformat     # a NotebookNode, for nbgrader and nbconvert
read_json = _notebook.read                  # a plain dict
