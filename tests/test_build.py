"""The generated course: chapters/ and solutions/ are what the sources generate.

Regenerates every chapter into memory (nbgrader in a temp dir, as
``./dev.sh build`` does) and compares byte for byte with what is committed;
checks that the sources carry no outputs and intact nbgrader metadata, that
hidden tests ship nowhere, and that solutions ship only in solutions/.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
COURSE = REPO / "course"


def _load_build_course():
    spec = importlib.util.spec_from_file_location("build_course", REPO / "tools" / "build_course.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build_course = _load_build_course()
ASSIGNMENTS = build_course.list_assignments(COURSE)

#: The grading contract for chapter 01: grade ids and points (see autograder/checks/ch01.py).
CH01_TESTS = {
    "ch01_q1_bytes_per_token_from_config": 3,
    "ch01_q2_kv_bytes_per_sequence": 1,
    "ch01_q3_kv_bytes_per_batch": 1,
    "ch01_q4_sequences_that_fit": 2,
    "ch01_q5_sequences_on_gpu": 2,
    "ch01_q6_kv_head_sharing": 2,
}


@pytest.fixture(scope="module")
def generated() -> dict:
    return build_course.generate(COURSE, ASSIGNMENTS)


def _read(data: bytes):
    return nbformat.reads(data.decode("utf-8"), as_version=4)


def _source(assignment):
    return nbformat.read(COURSE / "source" / assignment / f"{assignment}.ipynb", as_version=4)


def _graded(assignment) -> bool:
    """False for a chapter marked ``"kv_course": {"graded": false}`` (autograder.notebook.is_graded)."""
    return _source(assignment).metadata.get("kv_course", {}).get("graded", True) is not False


def _region(text: str, begin: str, end: str) -> list[str]:
    """Stripped, non-blank lines between ``begin`` and ``end`` markers."""
    lines, inside = [], False
    for line in text.splitlines():
        if begin in line:
            inside = True
        elif end in line:
            inside = False
        elif inside and line.strip():
            lines.append(line.strip())
    return lines


def _cells_by_id(nb) -> dict:
    return {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells
            if c.metadata.get("nbgrader", {}).get("grade_id")}


def _all_lines(nb) -> set[str]:
    return {line.strip() for cell in nb.cells for line in cell.source.splitlines() if line.strip()}


def test_there_is_a_course():
    assert (COURSE / "nbgrader_config.py").is_file()
    assert "ch01_kv_formula" in ASSIGNMENTS, f"no course/source/ch01_kv_formula/ch01_kv_formula.ipynb ({ASSIGNMENTS})"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_source_has_no_outputs_and_intact_metadata(assignment):
    path = COURSE / "source" / assignment / f"{assignment}.ipynb"
    assert build_course.check_source(path) == []


def test_committed_files_match_the_sources(generated):
    """If this fails: ./dev.sh build, then commit chapters/ and solutions/."""
    problems = build_course.compare(generated, REPO, complete=True)
    assert problems == [], "\n".join(problems)


def test_build_is_deterministic(generated):
    # A second build in the same process, of two chapters (the graded one every grading test uses and the
    # largest): the drift test above already compares every chapter with a build made in another process.
    some = ["ch01_kv_formula", "ch09_interview_drills"]
    again = build_course.generate(COURSE, some)
    assert again == {rel: data for rel, data in generated.items() if rel.split("/")[1][:-len(".ipynb")] in some}
    assert len(again) == 4


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_generated_notebooks_carry_no_outputs(assignment, generated):
    for folder in ("chapters", "solutions"):
        nb = _read(generated[f"{folder}/{assignment}.ipynb"])
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None
        assert "widgets" not in nb.metadata


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_hidden_tests_ship_nowhere(assignment, generated):
    source = _source(assignment)
    visible_lines = _all_lines(build_course.solution_notebook(source))  # the source minus hidden tests
    hidden = [line for cell in source.cells
              for line in _region(cell.source, "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
              if line not in visible_lines]
    if not _graded(assignment):  # a chapter marked ungraded (ch00) has no exercises at all
        assert hidden == [], f"{assignment}: marked ungraded but has hidden tests"
        return
    assert hidden, f"{assignment}: no hidden tests in the source"
    for folder in ("chapters", "solutions"):
        text = generated[f"{folder}/{assignment}.ipynb"].decode("utf-8")
        nb = _read(generated[f"{folder}/{assignment}.ipynb"])
        assert "HIDDEN TESTS" not in text
        leaked = [line for line in hidden if line in _all_lines(nb)]
        assert leaked == [], f"{folder}/{assignment}.ipynb carries hidden test lines: {leaked}"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solutions_only_in_solutions(assignment, generated):
    source = _source(assignment)
    release = _cells_by_id(_read(generated[f"chapters/{assignment}.ipynb"]))
    solutions = _cells_by_id(_read(generated[f"solutions/{assignment}.ipynb"]))
    answers = {gid: c for gid, c in _cells_by_id(source).items() if c.metadata["nbgrader"].get("solution")}
    if not _graded(assignment):  # a chapter marked ungraded (ch00) has no exercises at all
        assert answers == {}, f"{assignment}: marked ungraded but has answer cells"
        return
    assert answers, f"{assignment}: no answer cells"
    for gid, cell in answers.items():
        lines = _region(cell.source, "BEGIN SOLUTION", "END SOLUTION")
        assert gid in release and gid in solutions, f"{gid} missing from a generated notebook"
        release_lines = {line.strip() for line in release[gid].source.splitlines()}
        assert not [line for line in lines if line in release_lines], f"chapters/: {gid} shows its solution"
        if cell.cell_type == "code":
            assert "raise NotImplementedError()" in release[gid].source, f"chapters/: {gid} has no stub"
        assert all(line in solutions[gid].source for line in lines), f"solutions/: {gid} lost its solution"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_only_the_release_exercise_cells_let_run_all_go_on(assignment, generated):
    """Every test and code answer cell of chapters/ carries ``raises-exception`` (Run All goes past a
    failing check and past a value answer's stub); no other cell does, and no cell of solutions/
    (a failing solution check must stop nbclient)."""
    release = _read(generated[f"chapters/{assignment}.ipynb"])
    solution = _read(generated[f"solutions/{assignment}.ipynb"])

    def tagged(nb):
        return [i for i, c in enumerate(nb.cells) if "raises-exception" in c.metadata.get("tags", [])]

    exercises = [i for i, c in enumerate(release.cells) if c.cell_type == "code"
                 and (c.metadata.get("nbgrader", {}).get("grade") or c.metadata.get("nbgrader", {}).get("solution"))]
    assert tagged(release) == exercises and (exercises or not _graded(assignment)), \
        (assignment, tagged(release), exercises)
    assert tagged(solution) == []


#: Cells that show a worked problem or an erratum are generators: a learner must not see their code
#: (which computes the answer) before trying, so their input is hidden and must stay hidden.
GENERATOR_CALLS = ("kd.worked_problem(", "kd.erratum(")


def _hidden(cell) -> bool:
    return bool(cell.metadata.get("jupyter", {}).get("source_hidden"))


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_generator_cells_keep_their_inputs_hidden(assignment, generated):
    source = _source(assignment)
    generators = [i for i, c in enumerate(source.cells) if any(call in c.source for call in GENERATOR_CALLS)]
    unhidden = [i for i in generators if not _hidden(source.cells[i])]
    assert unhidden == [], f"{assignment}: generator cells {unhidden} show their input (set source_hidden)"
    hidden = [i for i, c in enumerate(source.cells) if _hidden(c)]
    assert hidden, f"{assignment}: no cell has a hidden input"
    # JupyterLab previews a hidden input's first line: a caption comment, never a figure.
    uncaptioned = [i for i in hidden if source.cells[i].cell_type == "code"
                   and not source.cells[i].source.startswith("# ")]
    assert uncaptioned == [], f"{assignment}: hidden cells {uncaptioned} do not start with a '# ' caption"
    for folder in ("chapters", "solutions"):
        nb = _read(generated[f"{folder}/{assignment}.ipynb"])
        assert len(nb.cells) == len(source.cells)
        lost = [i for i in hidden if not _hidden(nb.cells[i]) or nb.cells[i].source != source.cells[i].source]
        assert lost == [], f"{folder}/{assignment}.ipynb: cells {lost} lost their hidden input"


#: Labels of the source documents a learner cannot open (a chapter cites papers, docs, engines instead).
SOURCE_LABEL = re.compile(r"\bseeds?\s*0\d\d\b|\b00\d_[0-9a-f]{6,}|seeds/", re.IGNORECASE)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_source_file_labels_in_a_chapter(assignment, generated):
    texts = {f"source/{assignment}": (COURSE / "source" / assignment / f"{assignment}.ipynb").read_text("utf-8")}
    texts.update({rel: data.decode("utf-8") for rel, data in generated.items() if assignment in rel})
    for where, text in texts.items():
        found = SOURCE_LABEL.findall(text)
        assert found == [], f"{where} names source files a learner cannot open: {found}"


def test_ch01_grading_contract(generated):
    """Grade ids and points are a contract with the grader and autograder/checks/ch01.py."""
    for nb in (_source("ch01_kv_formula"), _read(generated["chapters/ch01_kv_formula.ipynb"])):
        tests = {gid: c.metadata["nbgrader"]["points"] for gid, c in _cells_by_id(nb).items()
                 if c.metadata["nbgrader"].get("grade")}
        assert tests == CH01_TESTS
        ids = set(_cells_by_id(nb))
        assert {f"ch01_q{n}_answer" for n in range(1, 7)} <= ids
    assert nb.metadata["kernelspec"]["name"] == "python3"


def test_check_source_names_each_problem(tmp_path):
    """A source with outputs, a stripped test cell and a duplicate id is refused, cell by cell."""
    source = _source("ch01_kv_formula")
    broken = copy.deepcopy(source)
    code = [c for c in broken.cells if c.cell_type == "code"]
    code[0].outputs = [nbformat.v4.new_output("stream", text="hello\n")]
    code[0].execution_count = 1
    tests = [c for c in broken.cells if c.metadata.get("nbgrader", {}).get("grade")]
    del tests[0].metadata["nbgrader"]  # metadata lost: its hidden tests would be unprotected
    tests[1].metadata["nbgrader"]["grade_id"] = tests[2].metadata["nbgrader"]["grade_id"]
    path = tmp_path / "ch01_kv_formula.ipynb"
    nbformat.write(broken, path)
    problems = "\n".join(build_course.check_source(path))
    assert "has outputs" in problems and "execution count" in problems
    assert "no nbgrader metadata" in problems
    assert "grade_id also used" in problems


def test_zero_points_only_for_practice_in_an_optional_section(tmp_path):
    """ch08's practice cells (after "## Deeper (optional): ...") give 0 points; a point there, or 0 points above, is
    refused."""
    source = _source("ch08_vllm_lab")
    assert build_course.check_source(COURSE / "source" / "ch08_vllm_lab" / "ch08_vllm_lab.ipynb") == []
    tests = {c.metadata["nbgrader"]["grade_id"]: c for c in source.cells
             if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")}
    assert tests["ch08_q3_block_range"].metadata["nbgrader"]["points"] == 0
    tests["ch08_q3_block_range"].metadata["nbgrader"]["points"] = 1
    tests["ch08_q1_available_gib"].metadata["nbgrader"]["points"] = 0
    path = tmp_path / "ch08_vllm_lab.ipynb"
    nbformat.write(source, path)
    problems = "\n".join(build_course.check_source(path))
    assert "(ch08_q3_block_range): a test cell in an optional section gives points (1)" in problems
    assert "(ch08_q1_available_gib): graded cell without positive points (0)" in problems


def test_check_mode_names_the_stale_files(tmp_path, generated):
    # A course of two chapters (its config and two sources), so the whole-course check runs in seconds.
    course, out = tmp_path / "course", tmp_path / "out"
    kept = ["ch00_orientation", "ch01_kv_formula"]
    shutil.copytree(COURSE, course, ignore=lambda folder, names: [
        n for n in names if Path(folder) == COURSE / "source" and n not in kept])
    for rel, data in generated.items():
        if rel.split("/")[1][:-len(".ipynb")] in kept:
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_bytes(data)
    stale = "solutions/ch01_kv_formula.ipynb"
    nb = json.loads((out / stale).read_text())
    nb["cells"][0]["source"] = ["edited by hand\n"]
    (out / stale).write_text(json.dumps(nb))
    (out / "chapters" / "ch99_orphan.ipynb").write_text("{}")
    run = subprocess.run([sys.executable, str(REPO / "tools" / "build_course.py"), "--check", "--course", str(course),
                          "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stdout + run.stderr
    assert stale in run.stderr and "chapters/ch99_orphan.ipynb" in run.stderr
    assert "chapters/ch01_kv_formula.ipynb" not in run.stderr


# --- integrity mode: a class's release, for a private fork ---------------------------------------------------------
ANSWERS_KEPT = ("**Answers.** Worked problems stay folded until you open them, because reading an answer first feels "
                "like\nunderstanding and is not.")


def test_integrity_release_has_no_solutions_and_no_pointer_to_them(tmp_path, generated):
    out = tmp_path / "class-release"
    assert build_course.main(["--integrity", "--out", str(out), "ch00_orientation", "ch01_kv_formula"]) == 0
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == \
        ["chapters/ch00_orientation.ipynb", "chapters/ch01_kv_formula.ipynb"]
    ch00 = _read((out / "chapters" / "ch00_orientation.ipynb").read_bytes())
    text = "\n".join(c.source for c in ch00.cells)
    assert "solutions" not in text.lower() and ANSWERS_KEPT in text
    public = _read(generated["chapters/ch00_orientation.ipynb"])
    assert "`solutions/` folder" in "\n".join(c.source for c in public.cells)       # the default build keeps it
    changed = [i for i, (a, b) in enumerate(zip(ch00.cells, public.cells)) if a.source != b.source]
    assert len(ch00.cells) == len(public.cells) and len(changed) == 1 and ANSWERS_KEPT in ch00.cells[changed[0]].source
    # every other chapter is the public release, byte for byte
    assert (out / "chapters" / "ch01_kv_formula.ipynb").read_bytes() == generated["chapters/ch01_kv_formula.ipynb"]
    assert build_course.main(["--integrity", "--check", "--out", str(out), "ch00_orientation",
                              "ch01_kv_formula"]) == 0


def test_integrity_release_refuses_the_checkout_and_a_solutions_folder(tmp_path, capsys):
    assert build_course.main(["--integrity"]) == 2
    assert "give --out DIR" in capsys.readouterr().err
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "ch01_kv_formula.ipynb").write_text("{}")
    assert build_course.main(["--integrity", "--out", str(tmp_path), "ch01_kv_formula"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds notebooks" in err
