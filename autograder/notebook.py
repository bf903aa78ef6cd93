"""The one notebook reader: the build, the grader and the verdict read notebooks here.

``read(data)`` takes bytes, text, a path or a dict and returns the notebook as
a plain dict, or raises ``NotebookError`` with one line saying what is wrong
(empty, not UTF-8, not JSON, not a notebook, not nbformat 4, a malformed
cell). It is strict in the same way for everyone: no nbformat upgrades, no
repairs. ``as_nbformat`` turns the dict into the ``NotebookNode`` nbgrader and
nbconvert want, without reading the file again.

What a notebook says to the course: ``Layout`` (answer and test cells in
order, each test's points; the setup cell's imports), ``grade_points`` (and its two parts:
``autograded_points``, the tests, and ``manual_points``, written answers and tasks),
``nbgrader_cells``, ``is_graded`` (a chapter marked ``"kv_course": {"graded":
false}`` has no exercises and is still built and run).
"""

from __future__ import annotations

import ast
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

#: Notebook metadata key of the course's own flags (``{"graded": false}`` for a chapter without exercises).
COURSE_META = "kv_course"
SETUP_TAG = "setup"


class NotebookError(ValueError):
    """Not a readable nbformat-4 notebook (the message says why, in one line)."""


def read(data) -> dict:
    """A notebook dict from bytes, text, a path or a dict; ``NotebookError`` says what is wrong."""
    if isinstance(data, dict):
        nb = data
    else:
        if isinstance(data, os.PathLike) or (isinstance(data, str) and not data.lstrip().startswith("{")):
            try:
                data = Path(data).read_bytes()
            except OSError as exc:
                raise NotebookError(f"cannot read {Path(data).name}: {exc.strerror}") from None
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogatepass")
        if not data.strip():
            raise NotebookError(f"the file is empty ({len(data)} bytes): nothing was submitted")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise NotebookError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}): "
                                "not a notebook as Jupyter saves it") from None
        try:
            nb = json.loads(text)
        except json.JSONDecodeError as exc:
            raise NotebookError(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): "
                                "the file is truncated or corrupted") from None
        except (ValueError, RecursionError) as exc:
            raise NotebookError(f"not valid JSON ({str(exc)[:120]}): the file is truncated or corrupted") from None
    if not isinstance(nb, dict) or "nbformat" not in nb:
        raise NotebookError("valid JSON but not a Jupyter notebook (no 'nbformat' key)")
    if nb.get("nbformat") != 4:
        raise NotebookError(f"an nbformat {nb.get('nbformat')!r} notebook; the course reads nbformat 4 "
                            "(open and save it in JupyterLab)")
    if not isinstance(nb.get("cells"), list):
        raise NotebookError("an nbformat 4 notebook without a list of cells")
    for cell in nb["cells"]:
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise NotebookError("a cell of the notebook is malformed")
        if cell.get("metadata") is not None and not isinstance(cell["metadata"], dict):
            raise NotebookError("a cell's metadata is malformed")
        source(cell)
    return nb


def as_nbformat(nb: dict):
    """The notebook as nbformat's ``NotebookNode``, built as ``nbformat.read`` builds it (sources
    joined into strings, transient fields dropped), from the dict already read here."""
    import nbformat  # 1-2 s to import: only where a NotebookNode is needed

    return nbformat.reads(json.dumps(nb), as_version=4)


def read_nbformat(path):
    """``as_nbformat(read(path))``: for nbgrader and nbconvert."""
    return as_nbformat(read(Path(path)))


def write(nb: dict, path) -> None:
    """Write a notebook dict as Jupyter does (indent 1, UTF-8, final newline)."""
    Path(path).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def source(cell: dict) -> str:
    src = cell.get("source", "")
    if isinstance(src, list) and all(isinstance(s, str) for s in src):
        return "".join(src)
    if isinstance(src, str):
        return src
    raise NotebookError("a cell's source is malformed")


def nbgrader_meta(cell: dict) -> dict:
    meta = (cell.get("metadata") or {}).get("nbgrader")
    return meta if isinstance(meta, dict) else {}


def nbgrader_cells(nb: dict) -> dict:
    """``{grade_id: cell}`` for every cell that carries nbgrader metadata with a grade id."""
    out = {}
    for cell in nb.get("cells", []):
        gid = nbgrader_meta(cell).get("grade_id") if isinstance(cell, dict) else None
        if isinstance(gid, str) and gid:
            out[gid] = cell
    return out


def grade_points(nb: dict) -> dict:
    """``{grade_id: points}`` for every cell that carries points (tests, written answers, tasks), in
    notebook order: what nbgrader's gradebook holds a grade for."""
    return {gid: nbgrader_meta(cell).get("points", 0) for gid, cell in nbgrader_cells(nb).items()
            if nbgrader_meta(cell).get("grade") or nbgrader_meta(cell).get("task")}


def is_manual(cell: dict) -> bool:
    """A cell a person grades: a manually graded answer (``solution`` and ``grade``: written, or code
    read by hand) or a task cell. Every other graded cell is a test the checks grade."""
    meta = nbgrader_meta(cell)
    return bool((meta.get("grade") and meta.get("solution")) or meta.get("task"))


def autograded_points(nb: dict) -> dict:
    """``{grade_id: points}`` of the tests graded automatically (test cells: code, ``grade``, no
    ``solution``), in notebook order."""
    cells = nbgrader_cells(nb)
    return {gid: p for gid, p in grade_points(nb).items()
            if cells[gid].get("cell_type") == "code" and not is_manual(cells[gid])}


def manual_points(nb: dict) -> dict:
    """``{grade_id: points}`` of the cells a person grades in the formgrader (``is_manual``)."""
    tests = autograded_points(nb)
    return {gid: p for gid, p in grade_points(nb).items() if gid not in tests}


def is_graded(nb: dict) -> bool:
    """False for a chapter marked ``"kv_course": {"graded": false}`` in its notebook metadata."""
    meta = (nb.get("metadata") or {}).get(COURSE_META) or {}
    return meta.get("graded", True) is not False


def setup_cells(nb: dict) -> list:
    """The setup: the code cells tagged ``setup``, else the first code cell without nbgrader flags."""
    code = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    tagged = [c for c in code if SETUP_TAG in ((c.get("metadata") or {}).get("tags") or [])]
    if tagged:
        return tagged
    plain = [c for c in code if not nbgrader_meta(c).get("solution") and not nbgrader_meta(c).get("grade")]
    return plain[:1]


def setup_imports(nb: dict, allowed) -> list:
    """The setup cells' top-level ``import``/``from ... import`` lines of modules in ``allowed``
    (top-level names; the standard library is always allowed)."""
    allowed = set(allowed) | set(getattr(sys, "stdlib_module_names", ()))
    out = []
    for cell in setup_cells(nb):
        try:
            tree = ast.parse(source(cell))
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.Import) and all(a.name.split(".")[0] in allowed for a in node.names):
                out.append(ast.unparse(node))
            elif (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                  and node.module.split(".")[0] in allowed):
                out.append(ast.unparse(node))
    return list(dict.fromkeys(out))


@dataclass
class Layout:
    """What the reference notebook says: answer and test cells, in order, and the setup imports."""

    steps: list            # [("answer", grade_id) | ("test", grade_id, points)]
    prelude: str           # the setup cell's imports an answer may rely on, one per line

    @property
    def answer_ids(self) -> list:
        return [s[1] for s in self.steps if s[0] == "answer"]

    @property
    def tests(self) -> dict:
        return {s[1]: s[2] for s in self.steps if s[0] == "test"}


def layout(reference: dict, modules=()) -> Layout:
    """Answer cells (code, solution) and test cells (grade, points) of the reference notebook.

    ``modules``: top-level modules besides the standard library whose imports
    in the setup cell make the prelude (the course's packages, and what the
    exercises allow).
    """
    from .packages import COURSE_PACKAGES

    steps = []
    for cell in reference["cells"]:
        meta = nbgrader_meta(cell)
        gid = meta.get("grade_id")
        if cell.get("cell_type") != "code" or not gid:
            continue
        if meta.get("solution"):
            steps.append(("answer", gid))
        elif meta.get("grade"):
            steps.append(("test", gid, float(meta.get("points", 0) or 0)))
    prelude = setup_imports(reference, set(COURSE_PACKAGES) | set(modules))
    return Layout(steps, "\n".join(prelude))
