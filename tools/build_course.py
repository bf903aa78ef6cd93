#!/usr/bin/env python3
"""Regenerate the student release and the solutions from the course sources.

    python tools/build_course.py            # write chapters/<id>.ipynb and solutions/<id>.ipynb
    python tools/build_course.py --check    # exit 1 naming every file that is stale or wrong
    python tools/build_course.py ch01_kv_formula --out /tmp/x   # one chapter, elsewhere
    python tools/build_course.py --integrity --out ../class-release   # a class's release: no solutions

For each ``course/source/<id>/<id>.ipynb``:

* ``chapters/<id>.ipynb`` is nbgrader's student release: ``nbgrader
  generate_assignment`` run on a throwaway copy of the course in a temp dir
  (solutions replaced by stubs, hidden tests removed, cells locked, outputs
  cleared).
* ``solutions/<id>.ipynb`` is the source with the hidden tests and mark schemes
  removed (nbgrader's ``ClearHiddenTests``, ``ClearMarkScheme``) and outputs
  cleared; the solutions stay.

``--integrity`` builds the release for a class run from a private fork
(docs/instructors.md, "Integrity mode"): ``<out>/chapters/`` only, no
``solutions/``, and no sentence pointing at it (``without_solutions_pointer``:
chapter 00 says where the solutions are). It never writes into the checkout,
whose ``chapters/`` and ``solutions/`` stay the public course's.

Both are written the same way every time (nbformat's sorted JSON, no outputs,
no execution counts, no timestamps), so the same sources give byte-identical
files. ``--check`` also checks each source: no outputs, nbgrader metadata
intact. Run it with the course venv's Python (``./dev.sh build``).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import re
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO_ROOT))

import nbformat  # noqa: E402

from autograder import chapter, notebook  # noqa: E402
from autograder.course import (  # noqa: E402
    ASSIGNMENT_RE,
    CourseError,
    NbGrader,
    find_course_dir,
    list_assignments,
    read_notebook,
    source_notebook,
    stage_course,
)

GENERATED_DIRS = ("chapters", "solutions")
SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")
HIDDEN_MARKERS = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
MARK_SCHEME_MARKERS = ("=== BEGIN MARK SCHEME ===", "=== END MARK SCHEME ===")


# --- source checks ----------------------------------------------------------------
def check_source(path: Path) -> list[str]:
    """Problems with one source notebook (empty list: fine).

    A source carries no outputs or execution counts, pins the ``python3``
    kernel, and its nbgrader metadata is intact: every cell with solution or
    hidden-test markers is an nbgrader cell of the right kind, grade ids are
    unique, graded cells have points (0 only for practice in a "Deeper (optional)"
    section, and only there) and are locked. Its test cells and the
    chapter's exercises agree (``autograder.chapter.problems``: no test cell
    without a check). A chapter marked ``"kv_course": {"graded": false}`` has
    no graded cells and is still generated.
    """
    name = path.name
    try:
        plain = notebook.read(path)
        nb = notebook.as_nbformat(plain)
    except Exception as exc:  # unreadable is a problem to report, not a crash
        return [f"{name}: cannot be read as a notebook: {exc}"]
    problems = []
    try:
        nbformat.validate(nb)
    except nbformat.ValidationError as exc:
        problems.append(f"{name}: not a valid nbformat 4 notebook: {str(exc).splitlines()[0]}")
    kernel = nb.metadata.get("kernelspec", {}).get("name")
    if kernel != "python3":
        problems.append(f"{name}: kernelspec name is {kernel!r}, expected 'python3'")
    if "widgets" in nb.metadata:
        problems.append(f"{name}: notebook metadata holds saved widget state (clear it)")
    seen = {}
    graded = 0
    optional = False          # inside a "## Deeper (optional): ..." section (tests/test_optional_sections.py)
    for index, cell in enumerate(nb.cells):
        where = f"{name} cell {index}"
        if cell.cell_type == "markdown":
            for heading in re.findall(r"^##\s+(.+?)\s*$", cell.source, re.M):
                optional = heading.startswith("Deeper (optional):")
        if cell.cell_type == "code":
            if cell.get("outputs"):
                problems.append(f"{where}: has outputs (sources carry none; clear them)")
            if cell.get("execution_count") is not None:
                problems.append(f"{where}: has an execution count (clear outputs)")
        meta = cell.metadata.get("nbgrader")
        text = cell.source
        has_solution = any(m in text for m in SOLUTION_MARKERS)
        has_hidden = any(m in text for m in HIDDEN_MARKERS)
        if meta is None:
            if has_solution or has_hidden:
                problems.append(f"{where}: has nbgrader markers but no nbgrader metadata "
                                "(was the metadata stripped?)")
            continue
        gid = meta.get("grade_id")
        where = f"{name} cell {index} ({gid})"
        if not gid:
            problems.append(f"{where}: nbgrader metadata without a grade_id")
            continue
        if gid in seen:
            problems.append(f"{where}: grade_id also used by cell {seen[gid]}")
        seen[gid] = index
        if meta.get("schema_version") != 3:
            problems.append(f"{where}: nbgrader schema_version is {meta.get('schema_version')!r}, expected 3")
        for key in ("grade", "solution", "locked"):
            if not isinstance(meta.get(key), bool):
                problems.append(f"{where}: nbgrader metadata lacks the boolean {key!r}")
        if meta.get("grade"):
            graded += 1
            points = meta.get("points")
            if not isinstance(points, (int, float)) or isinstance(points, bool) or points < 0:
                problems.append(f"{where}: graded cell without positive points ({points!r})")
            elif optional and points:     # practice in an optional section: checked, worth nothing
                problems.append(f"{where}: a test cell in an optional section gives points ({points!r}); "
                                "practice there gives 0")
            elif not optional and not points:
                problems.append(f"{where}: graded cell without positive points ({points!r}); only practice in "
                                "a 'Deeper (optional)' section gives 0")
            if cell.cell_type == "code" and not meta.get("solution") and not meta.get("locked"):
                problems.append(f"{where}: test cell is not locked")
        if has_hidden and not meta.get("grade"):
            problems.append(f"{where}: hidden tests in a cell that is not graded")
        if has_hidden and text.count(HIDDEN_MARKERS[0]) != text.count(HIDDEN_MARKERS[1]):
            problems.append(f"{where}: unbalanced BEGIN/END HIDDEN TESTS")
        if has_solution and not meta.get("solution"):
            problems.append(f"{where}: solution markers in a cell not marked as a solution")
        if has_solution and text.count(SOLUTION_MARKERS[0]) != text.count(SOLUTION_MARKERS[1]):
            problems.append(f"{where}: unbalanced BEGIN/END SOLUTION")
        if cell.cell_type == "code" and meta.get("solution") and not has_solution:
            problems.append(f"{where}: code answer cell without ### BEGIN/END SOLUTION "
                            "(the whole cell would be replaced by a stub)")
    if not graded and notebook.is_graded(plain):
        problems.append(f"{name}: no graded cells (nbgrader metadata missing?; a chapter without exercises "
                        f'sets the notebook metadata "{notebook.COURSE_META}": {{"graded": false}})')
    try:
        problems += chapter.problems(plain, path.stem)
    except Exception as exc:  # noqa: BLE001 -- a checks module that does not load is a problem to report
        problems.append(f"{name}: the chapter's checks do not load: {type(exc).__name__}: {exc}")
    return problems


# --- generation -------------------------------------------------------------------
def _normalize(nb):
    """Strip everything run- or machine-specific, deterministically."""
    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("execution", None)
        cell.metadata.pop("ExecuteTime", None)
        if nb.nbformat_minor >= 5 and not cell.get("id"):
            gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            cell.id = hashlib.sha1(f"{index}:{gid}:{cell.source}".encode()).hexdigest()[:8]
    return nb


def render(nb) -> bytes:
    """A notebook as bytes, the same bytes for the same notebook."""
    text = nbformat.writes(_normalize(nb), version=4)
    return (text if text.endswith("\n") else text + "\n").encode("utf-8")


#: The tag that lets Run All go past a failing check (JupyterLab and nbclient honour it).
RUN_ON_TAG = "raises-exception"


def fails_when_blank(cell) -> bool:
    """A cell that raises in a blank release: a test cell (its check fails), or a code answer cell
    (a value exercise's stub, ``answer_pool = ...``, raises NotImplementedError where it stands)."""
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "code" and (bool(meta.get("grade")) or bool(meta.get("solution")))


def tag_test_cells(nb):
    """Tag every test and answer cell ``raises-exception``: a failing check shows its message and
    Run All goes on (an untagged error stops JupyterLab's Run All at that cell).

    Only the student release gets it (a solution's checks must pass, and nbclient would
    let a tagged failure through); nbgrader grades by the error output, not the tag.
    """
    for cell in nb.cells:
        if fails_when_blank(cell):
            tags = cell.metadata.setdefault("tags", [])
            if RUN_ON_TAG not in tags:
                tags.append(RUN_ON_TAG)
    return nb


def _tag_staged_source(root: Path, assignment: str) -> None:
    path = source_notebook(root, assignment)
    nbformat.write(tag_test_cells(read_notebook(path)), path)


def solution_notebook(source_nb):
    """The source with hidden tests and mark schemes removed, solutions kept."""
    from nbgrader.preprocessors import ClearHiddenTests, ClearMarkScheme

    nb = copy.deepcopy(source_nb)
    nb, _ = ClearHiddenTests().preprocess(nb, {})
    nb, _ = ClearMarkScheme().preprocess(nb, {})
    return nb


def _assert_no_leak(rel: str, nb, solutions_allowed: bool):
    """A last guard: hidden tests never ship; solutions only in solutions/."""
    forbidden = list(HIDDEN_MARKERS) + list(MARK_SCHEME_MARKERS)
    if not solutions_allowed:
        forbidden += list(SOLUTION_MARKERS)
    for cell in nb.cells:
        for marker in forbidden:
            if marker in cell.source:
                raise CourseError(f"{rel}: generated notebook still contains {marker!r}")


#: What a sentence that points at the worked solutions names: the repository's folder of them.
SOLUTIONS_FOLDER = "solutions/"


def without_solutions_pointer(nb):
    """The release without a word of where the solutions are (``--integrity``): in every Markdown cell, a paragraph
    that names the ``solutions/`` folder ends before the sentence that does (the rest of that paragraph says when
    to open them). Chapter 00's "Answers." paragraph keeps its first sentence, on folded worked problems."""
    for cell in nb.cells:
        if cell.cell_type != "markdown" or SOLUTIONS_FOLDER not in cell.source:
            continue
        kept = []
        for paragraph in cell.source.split("\n\n"):
            at = paragraph.find(SOLUTIONS_FOLDER)
            if at >= 0:
                start = max(paragraph.rfind(". ", 0, at), paragraph.rfind(".\n", 0, at)) + 1
                paragraph = paragraph[:start].rstrip()
            if paragraph:
                kept.append(paragraph)
        cell.source = "\n\n".join(kept)
    return nb


def _assert_no_pointer(rel: str, nb):
    for cell in nb.cells:
        if SOLUTIONS_FOLDER in cell.source:
            raise CourseError(f"{rel}: the integrity release still names {SOLUTIONS_FOLDER!r}")


def generate(course_dir: Path, assignments: list[str], integrity: bool = False) -> dict[str, bytes]:
    """``{"chapters/<id>.ipynb": bytes, "solutions/<id>.ipynb": bytes}`` for ``assignments``; with ``integrity``,
    the chapters only, without the solutions' pointer (``without_solutions_pointer``)."""
    files = {}
    with tempfile.TemporaryDirectory(prefix="kv-course-build-") as tmp:
        root = stage_course(course_dir, Path(tmp) / "course", assignments)
        grader = NbGrader(root)
        for assignment in assignments:
            _tag_staged_source(root, assignment)   # nbgrader keeps the tag through generate and autograde
            release = read_notebook(grader.generate(assignment))
            rel = f"chapters/{assignment}.ipynb"
            _assert_no_leak(rel, release, solutions_allowed=False)
            if integrity:
                release = without_solutions_pointer(release)
                _assert_no_pointer(rel, release)
                files[rel] = render(release)
                continue
            files[rel] = render(release)
            solution = solution_notebook(read_notebook(source_notebook(course_dir, assignment)))
            rel = f"solutions/{assignment}.ipynb"
            _assert_no_leak(rel, solution, solutions_allowed=True)
            files[rel] = render(solution)
    return files


def compare(files: dict[str, bytes], out_dir: Path, complete: bool, dirs=GENERATED_DIRS) -> list[str]:
    """Lines naming each generated file that differs from what is in ``out_dir``."""
    out_dir = Path(out_dir)
    lines = []
    for rel, data in sorted(files.items()):
        path = out_dir / rel
        if not path.exists():
            lines.append(f"{rel}: missing (run ./dev.sh build)")
        elif path.read_bytes() != data:
            lines.append(f"{rel}: differs from what the source generates (run ./dev.sh build; "
                         "never edit it by hand)")
    if complete:
        for rel in _stale(files, out_dir, dirs):
            lines.append(f"{rel}: has no source notebook (remove it, or run ./dev.sh build)")
    return lines


def _stale(files: dict[str, bytes], out_dir: Path, dirs=GENERATED_DIRS) -> list[str]:
    stale = []
    for folder in dirs:
        for path in sorted((Path(out_dir) / folder).glob("*.ipynb")):
            rel = f"{folder}/{path.name}"
            if ASSIGNMENT_RE.match(path.stem) and rel not in files:
                stale.append(rel)
    return stale


def write(files: dict[str, bytes], out_dir: Path, complete: bool, dirs=GENERATED_DIRS) -> list[str]:
    """Write what changed (and drop stale generated notebooks); returns the lines to print."""
    out_dir = Path(out_dir)
    lines = []
    for rel, data in sorted(files.items()):
        path = out_dir / rel
        if path.exists() and path.read_bytes() == data:
            lines.append(f"{rel}: up to date")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        lines.append(f"{rel}: written")
    if complete:
        for rel in _stale(files, out_dir, dirs):
            (out_dir / rel).unlink()
            lines.append(f"{rel}: removed (no source)")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="build_course", description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*", help="chapter ids (default: every source notebook)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming each file that is stale or wrong")
    parser.add_argument("--course", help="course directory (default: course/ in this checkout)")
    parser.add_argument("--out", default=None,
                        help="where chapters/ and solutions/ live (default: the checkout)")
    parser.add_argument("--integrity", action="store_true",
                        help="a class's release, for a private fork: chapters/ only, no solutions/ and no pointer "
                             "to them (needs --out, outside this checkout's chapters/)")
    args = parser.parse_args(argv)
    try:
        out = Path(args.out) if args.out else REPO_ROOT
        if args.integrity and out.resolve() == REPO_ROOT:
            raise CourseError("--integrity writes a class's release: give --out DIR (this checkout's chapters/ and "
                              "solutions/ are the public course's)")
        if args.integrity and not args.check and list((out / "solutions").glob("*.ipynb")):
            raise CourseError(f"--integrity: {out / 'solutions'} holds notebooks; a class's release has none "
                              "(remove that folder first)")
        course_dir = find_course_dir(args.course)
        assignments = args.assignments or list_assignments(course_dir)
        if not assignments:
            raise CourseError(f"no source notebooks under {course_dir / 'source'}")
        for assignment in assignments:
            source_notebook(course_dir, assignment)  # unknown id: usage error
    except CourseError as exc:
        print(f"build_course: error: {exc}", file=sys.stderr)
        return 2
    problems = []
    for assignment in assignments:
        problems += check_source(source_notebook(course_dir, assignment))
    if problems and not args.check:
        print("\n".join(problems), file=sys.stderr)
        return 1
    try:
        files = generate(course_dir, assignments, integrity=args.integrity)
    except CourseError as exc:
        print("\n".join(problems + [str(exc)]), file=sys.stderr)
        return 1
    complete = not args.assignments
    dirs = ("chapters",) if args.integrity else GENERATED_DIRS
    if args.check:
        lines = problems + compare(files, out, complete, dirs)
        if lines:
            print("\n".join(lines), file=sys.stderr)
            return 1
        print(f"build_course: {len(files)} generated notebooks up to date")
        return 0
    print("\n".join(write(files, out, complete, dirs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
