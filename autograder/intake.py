"""Submission intake: what is handed in, before nbgrader sees it.

A submission folder is copied without links or special files
(``copy_submission``); its notebook is read once, by the one reader
(``autograder.notebook``), and refused in one line when it cannot be graded
(``inspect_submission``); the nbgrader flags of its cells are reset to the
instructor's (``restore_metadata``). The student's id comes from
``submitted/<student>/<id>/`` (``student_from_path``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

from . import notebook as _nb

_STUDENT_RE = re.compile(r"[^A-Za-z0-9_.@-]+")


def _sha256(path: Path) -> str:
    """The file's hash; never follows a link (a submission is graded without it)."""
    if path.is_symlink():
        return "symlink"
    if not path.is_file():
        return "missing"
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def inspect_notebook(path: Path, assignment: str, expected_ids: set) -> tuple[dict | None, str | None]:
    """(the notebook, None) when ``path`` can be graded as ``assignment``; else (None, why in one line).

    The submission is read here once (``autograder.notebook.read``); the grader
    hands the same dict on to ``restore_metadata`` and the verdict.
    """
    path = Path(path)
    if not path.is_file():
        return None, f"no {assignment}.ipynb in the submission folder"
    try:
        nb = _nb.read(path)
    except _nb.NotebookError as exc:
        return None, str(exc)
    ids = set(_nb.nbgrader_cells(nb))
    if ids and not ids & expected_ids:
        prefixes = sorted({gid.split("_")[0] for gid in ids})
        return None, (f"another assignment's notebook (its nbgrader cells are {', '.join(sorted(ids)[:3])}"
                      f"{' ...' if len(ids) > 3 else ''}; chapter {', '.join(prefixes)}), not {assignment}")
    return nb, None


def inspect_submission(path: Path, assignment: str, expected_ids: set) -> str | None:
    """Why ``path`` cannot be graded as ``assignment`` (one line), or None if it looks fine."""
    return inspect_notebook(path, assignment, expected_ids)[1]


_FLAGS = ("grade", "solution", "locked", "task", "points", "schema_version")


def restore_metadata(nb: dict, reference: dict, path: Path | None = None, repointed: dict | None = None) -> list:
    """Put the assignment's nbgrader flags back on the submission's cells; the ids it changed.

    A cell that claims a grade id of the assignment gets that cell's flags
    (grade, solution, locked, task, points) from the instructor's source; a
    cell whose nbgrader metadata names no such id (a renamed or invented id)
    loses it and becomes a plain cell (its code still runs). Tampered flags
    would otherwise make nbgrader fail on the whole notebook (an answer cell
    flagged as a test with 100 points) instead of grading it. ``nb`` is
    changed in place; ``path``, when given, is rewritten only when something
    changed.

    A cell whose flags differ only in ``points`` is the instructor's doing (the source's points were
    edited after the release went out): it is put right like the others, but recorded in
    ``repointed`` (``{grade_id: (released points, the source's)}``) instead of the ids returned.
    """
    wanted = {}
    for cell in reference.get("cells", []):
        meta = (cell.get("metadata") or {}).get("nbgrader")
        if isinstance(meta, dict) and meta.get("grade_id"):
            wanted[meta["grade_id"]] = (cell.get("cell_type"), {k: meta[k] for k in _FLAGS if k in meta})
    changed, rewrite = [], False
    for cell in nb.get("cells", []):
        meta = cell.get("metadata") if isinstance(cell, dict) else None
        if not isinstance(meta, dict) or "nbgrader" not in meta:
            continue
        nbg = meta["nbgrader"]
        gid = nbg.get("grade_id") if isinstance(nbg, dict) else None
        if not isinstance(gid, str) or gid not in wanted or wanted[gid][0] != cell.get("cell_type"):
            del meta["nbgrader"]
            changed.append(str(gid)[:60] if gid else "(no id)")
            rewrite = True
            continue
        flags = wanted[gid][1]
        differ = {k for k in _FLAGS if nbg.get(k) != flags.get(k) or (k in nbg) != (k in flags)}
        if differ:
            old = nbg.get("points")
            for k in _FLAGS:
                nbg.pop(k, None)
            nbg.update(flags)
            if differ == {"points"} and repointed is not None:
                repointed[gid] = (old, flags.get("points"))
            else:
                changed.append(gid)
        rewrite = rewrite or bool(differ)
    if rewrite and path is not None:
        _nb.write(nb, path)
    return changed


def copy_submission(folder: Path, target: Path) -> list:
    """Copy a submission folder: regular files and folders only; the names of what was left out.

    Symbolic links and special files (fifos, devices, sockets) are not copied:
    nbgrader, running here (as root, when grading as root), would follow them
    to whatever they point at (another student, /dev/zero).
    """
    import stat

    dropped = []

    def ignore(directory, names):
        out = []
        for name in names:
            if name == ".ipynb_checkpoints":
                out.append(name)
                continue
            mode = os.lstat(os.path.join(directory, name)).st_mode
            if stat.S_ISLNK(mode) or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                out.append(name)
                dropped.append(os.path.relpath(os.path.join(directory, name), folder))
        return out

    shutil.copytree(folder, target, ignore=ignore, symlinks=True)
    return sorted(dropped)


def student_from_path(path: Path, assignment: str) -> str:
    """``submitted/<student>/<id>/<id>.ipynb`` -> ``<student>``; otherwise ``student``."""
    parts = Path(path).resolve().parts
    if len(parts) >= 3 and parts[-2] == assignment and parts[-3] not in ("", "/"):
        name = _STUDENT_RE.sub("_", parts[-3]).strip("_.")
        if name and parts[-4:-3] == ("submitted",):
            return name
    return "student"
