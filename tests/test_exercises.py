"""Exercises as data: every chapter's notebook and checks agree; answer types; the skeleton chapter.

* Every chapter in course/source (new ones included, with no test to write):
  its test cells and its exercises agree (``autograder.chapter.problems``).
* The skeleton chapter (tests/fixtures/skeleton: one source notebook, one
  checks module of data) has one exercise of each answer type and a two-step
  problem: it builds, its source scores full marks and its release zero
  through the outside check; each type is right, wrong by a named slip, and
  of the wrong type, in the instant check and from JSON records.

Expected figures are hand arithmetic: Llama 3.1 8B (32 layers, 8 KV heads,
head_dim 128, bf16) holds 2 x 32 x 8 x 128 x 2 = 131,072 bytes per token
([build-up] and [kv-math] section 3); 80 GiB = 85,899,345,920 bytes.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import tomllib
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from autograder import chapter, notebook
from autograder import verdict as V
from autograder.checks import CHECKS_PATH_ENV, chapter_exercises, judge, runner
from autograder.checks import answers as A
from autograder.packages import COURSE_PACKAGES

REPO = Path(__file__).resolve().parents[1]
COURSE = REPO / "course"
SKELETON = REPO / "tests" / "fixtures" / "skeleton"
SKELETON_NB = SKELETON / "course" / "source" / "ch99_skeleton" / "ch99_skeleton.ipynb"
SKELETON_POINTS = 2 + 1 + 1 + 1 + 1 + 2      # the six test cells of the fixture notebook
CHAPTERS = chapter.CHAPTER_IDS


def _build_course():
    import importlib.util
    spec = importlib.util.spec_from_file_location("build_course", REPO / "tools" / "build_course.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# --- every chapter of the course -----------------------------------------------------------------
@pytest.mark.parametrize("assignment", CHAPTERS)
def test_notebook_and_checks_agree(assignment):
    assert assignment in chapter.CHAPTER_IDS, f"{assignment} is not one of the fixed chapter ids"
    nb = notebook.read(COURSE / "source" / assignment / f"{assignment}.ipynb")
    assert chapter.problems(nb, assignment) == []
    if notebook.is_graded(nb):
        ids = list(chapter_exercises(assignment))
        assert ids == [gid for gid in notebook.grade_points(nb)]
        # 0 points: practice in a "Deeper (optional)" section (tests/test_optional_sections.py holds where)
        assert all(isinstance(p, (int, float)) and p >= 0 for p in notebook.grade_points(nb).values())
        assert sum(notebook.grade_points(nb).values()) > 0


def test_pyproject_installs_the_course_packages():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    include = project["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted(include) == sorted(f"{name}*" for name in COURSE_PACKAGES)
    assert "pip install --no-cache-dir ." in (REPO / "binder" / "postBuild").read_text()


# --- the skeleton chapter ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def skeleton():
    os.environ[CHECKS_PATH_ENV] = str(SKELETON / "checks")
    try:
        yield chapter_exercises("ch99_skeleton")
    finally:
        os.environ.pop(CHECKS_PATH_ENV, None)


def check(skeleton, q, fn, **kw):
    gid = next(g for g in skeleton if g.startswith(f"ch99_{q}_"))
    runner.check(skeleton[gid], fn, **kw)


def fails(skeleton, q, fn, **kw) -> str:
    with pytest.raises(AssertionError) as info:
        check(skeleton, q, fn, **kw)
    return str(info.value)


def test_skeleton_builds_and_agrees(skeleton, tmp_path):
    build = _build_course()
    assert build.check_source(SKELETON_NB) == []
    files = build.generate(SKELETON / "course", ["ch99_skeleton"])
    release = nbformat.reads(files["chapters/ch99_skeleton.ipynb"].decode(), as_version=4)
    assert sum("raise NotImplementedError()" in c.source for c in release.cells) == 6
    # a test cell with no check is refused by the build's source check
    nb = notebook.read(SKELETON_NB)
    extra = copy.deepcopy(next(c for c in nb["cells"] if notebook.nbgrader_meta(c).get("grade")))
    extra["metadata"]["nbgrader"]["grade_id"] = "ch99_q7_missing"
    extra["id"] = "extra7"
    nb["cells"].append(extra)
    path = tmp_path / "ch99_skeleton.ipynb"
    notebook.write(nb, path)
    assert any("test cell ch99_q7_missing has no check" in p for p in build.check_source(path))


@pytest.mark.kernel
def test_skeleton_source_full_marks_release_zero(skeleton):
    files = _build_course().generate(SKELETON / "course", ["ch99_skeleton"])
    full = V.grade(SKELETON_NB, "ch99_skeleton", reference=SKELETON_NB, exercises=skeleton, student="ada")
    assert (full.status, full.score, full.max_score) == ("graded", SKELETON_POINTS, SKELETON_POINTS), full.as_dict()
    blank = V.grade(files["chapters/ch99_skeleton.ipynb"], "ch99_skeleton", reference=SKELETON_NB, exercises=skeleton)
    assert (blank.status, blank.score) == ("graded", 0)
    assert all("not written yet" in t.feedback for t in blank.tests)


def test_skeleton_prelude_is_the_setup_cells_imports(skeleton):
    prelude = V.layout(notebook.read(SKELETON_NB), skeleton).prelude.splitlines()
    assert prelude == ["import kvlib as kv", "import math", "import struct"]   # not matplotlib


@pytest.mark.kernel
def test_skeleton_source_runs_in_a_kernel(skeleton, tmp_path):
    nb = nbformat.read(SKELETON_NB, as_version=4)
    NotebookClient(nb, timeout=60, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    passed = [o.text for c in nb.cells for o in c.get("outputs", []) if o.output_type == "stream"]
    assert sum(text.count("✓") for text in passed) == 12    # six exercises, visible and hidden


# --- each answer type: right, wrong by a named slip, wrong type ----------------------------------
def bpt(layers, kv_heads, head_dim, dtype_bytes):
    return 2 * layers * kv_heads * head_dim * dtype_bytes


def test_int(skeleton):
    check(skeleton, "q1", bpt)
    check(skeleton, "q1", bpt, hidden=True)
    half = fails(skeleton, "q1", lambda L, K, D, b: L * K * D * b)
    assert "factor 2 for K and V" in half and "131,072" in half      # Llama 3.1 8B's 131,072 expected
    assert "float" in fails(skeleton, "q1", lambda *a: float(bpt(*a)))
    assert "bool" in fails(skeleton, "q1", lambda *a: True)


def test_float(skeleton):
    check(skeleton, "q2", lambda n: n / 2**30)
    check(skeleton, "q2", lambda n: n / 2**30, hidden=True)
    gb = fails(skeleton, "q2", lambda n: n / 10**9)
    assert "GB (10^9) and GiB (2^30)" in gb and "85,899,345,920" in gb       # 80 GiB in bytes
    assert "returned an int" in fails(skeleton, "q2", lambda n: n // 2**30)
    assert "finite" in fails(skeleton, "q2", lambda n: float("nan"))


def test_choice(skeleton):
    def right(answer, layers, kv_heads, head_dim, dtype_bytes, num_heads):
        full = bpt(layers, kv_heads, head_dim, dtype_bytes)
        return {full: "correct", full * num_heads // kv_heads: "query_heads", full // 2: "missing_kv_factor"}.get(
            answer, "bits_not_bytes")
    check(skeleton, "q3", right)
    check(skeleton, "q3", right, hidden=True)
    wrong = fails(skeleton, "q3", lambda *a: "query_heads")
    assert "returned 'query_heads'; expected 'missing_kv_factor'" in wrong
    assert "not one of the choices" in fails(skeleton, "q3", lambda *a: "kv heads")
    hidden = fails(skeleton, "q3", lambda *a: "query_heads", hidden=True)
    assert "bits_not_bytes" not in hidden and "hidden case" in hidden


def test_bytes(skeleton):
    import struct
    check(skeleton, "q4", lambda n, k: struct.pack("<II", n, k))
    big_endian = fails(skeleton, "q4", lambda n, k: struct.pack(">II", n, k))
    assert "returned b'\\x00\\x00\\x00 " in big_endian                # 32 big-endian
    assert "return bytes (encode it" in fails(skeleton, "q4", lambda n, k: f"{n},{k}")


def test_tuple(skeleton):
    def right(layers, kv_heads, head_dim, dtype_bytes, tokens):
        per = bpt(layers, kv_heads, head_dim, dtype_bytes)
        return per, per * tokens / 2**30
    check(skeleton, "q5", right)
    check(skeleton, "q5", right, hidden=True)
    assert "expected (131,072, 128)" in fails(skeleton, "q5", lambda *a: (right(*a)[0], 1.0))  # 2^20 tokens: 128 GiB
    listed = fails(skeleton, "q5", lambda *a: list(right(*a)))
    assert "type list" in listed
    ints = fails(skeleton, "q5", lambda *a: (right(*a)[0], int(right(*a)[1])))
    assert "element 1 is int" in ints


def test_records_round_trip_as_json(skeleton):
    """What the sandbox sends back: each type encodes to JSON and decodes to the same exact value."""
    for value in (131_072, 2.5, "query_heads", b"\x00\x01\xff", (1, 2.0, ("a", b"b"))):
        record = json.loads(json.dumps(A.encode(value)))
        back = A.decode(record)
        assert back == value and type(back) is type(value)
    assert A.encode(float("inf"))["value"] == "inf" and A.decode(A.encode(float("-inf"))) == float("-inf")
    for forged in ({"type": "builtins.int", "value": True}, {"type": "builtins.int", "value": 1.0},
                   {"type": "builtins.bytes", "value": "not base64!"}, {"type": "builtins.str", "value": 3}):
        with pytest.raises(A.RecordError):
            A.decode(forged)
        assert A.clean(forged) is None
    import numpy as np
    assert "value" not in A.encode(np.float64(2.5)) and A.encode(np.float64(2.5))["number"] == 2.5
    assert "value" not in A.encode(True)
    ex = skeleton["ch99_q5_token_and_gib"]
    cases = ex.cases()
    records = json.loads(json.dumps(runner.run_cases(ex, lambda *a: (131_072, 128.0), cases)))
    assert [v.ok for v in judge.verdicts(ex, cases, records)] == [True]


# --- a two-step problem, judged against the learner's own first step -----------------------------
def test_two_steps_judged_against_the_learners_first_step(skeleton):
    def half(layers, kv_heads, head_dim, dtype_bytes):          # step 1 wrong: no factor 2
        return layers * kv_heads * head_dim * dtype_bytes

    def fit_with(step1):
        return lambda budget, L, K, D, b, seq_len: budget // (step1(L, K, D, b) * seq_len)

    assert "factor 2" in fails(skeleton, "q1", half)
    check(skeleton, "q6", fit_with(half))           # consistent with the learner's step 1: no second charge
    check(skeleton, "q6", fit_with(bpt))            # the right step 1 recomputed, not reused: right as well
    # wrong on either: charged, and the message gives both values it would take (Llama 3.1 8B, 70 GB at 8,192
    # tokens: 65,536 B a token from the half step 1 -> 70e9 // (65,536 x 8,192) = 130; the right 131,072 -> 65)
    one_more = fails(skeleton, "q6", lambda *a: fit_with(half)(*a) + 1)
    assert ("returned 131; expected 130 sequences on what your bytes_per_token gives here (65,536 bytes), or 65 on "
            "the right bytes_per_token") in one_more, one_more
    runner._ANSWERS.clear()
    check(skeleton, "q6", fit_with(bpt))            # no step 1 on record: judged against kvlib


def test_two_steps_in_the_outside_check(skeleton):
    nb = notebook.read(SKELETON_NB)
    for cell in nb["cells"]:
        if notebook.nbgrader_meta(cell).get("grade_id") == "ch99_q1_answer":
            cell["source"] = "def bytes_per_token(layers, kv_heads, head_dim, dtype_bytes):\n" \
                             "    return layers * kv_heads * head_dim * dtype_bytes\n"
    v = V.grade(nb, "ch99_skeleton", reference=SKELETON_NB, exercises=skeleton)
    by_id = v.by_grade_id()
    assert not by_id["ch99_q1_bytes_per_token"].passed and "factor 2" in by_id["ch99_q1_bytes_per_token"].feedback
    assert by_id["ch99_q6_sequences"].passed, by_id["ch99_q6_sequences"].feedback
    assert v.score == SKELETON_POINTS - 2 - 1       # q1 (2 points) and q5, which also uses bytes_per_token (1)


def test_per_learner_hidden_cases(skeleton):
    ex = skeleton["ch99_q2_gib"]
    assert ex.cases(True, 5, "ada") == ex.cases(True, 5, "ada") != ex.cases(True, 5, "bob")


# --- diagnosis across cases ------------------------------------------------------------------------
def test_int_wrapped_gb_answer_is_named_as_gb():
    from autograder.checks import ch01
    q3 = functools.partial(runner.check, ch01.EXERCISES["ch01_q3_kv_bytes_per_batch"])

    def in_gb(layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size):
        return int(bpt(layers, kv_heads, head_dim, dtype_bytes) * seq_len * batch_size / 10**9)
    with pytest.raises(AssertionError) as info:
        q3(in_gb)
    assert "looks like GB (bytes / 10^9)" in str(info.value)
    assert "same slip explains all 5 failing cases" in str(info.value)


def test_a_slip_that_fits_some_cases_is_not_the_lead():
    from autograder.checks import ch01
    q2 = ch01.EXERCISES["ch01_q2_kv_bytes_per_sequence"]

    def mixed(layers, kv_heads, head_dim, dtype_bytes, seq_len):
        right = 2 * layers * kv_heads * head_dim * dtype_bytes * seq_len
        return right // 2 if layers == 32 else right * 8     # a missing 2 here, bits there
    with pytest.raises(AssertionError) as info:
        runner.check(q2, mixed)
    message = str(info.value)
    assert "no one known slip explains every case" in message
    assert "factor 2 for K and V" not in message and "bits per element" not in message


def test_combined_slips_are_labelled_combined():
    import dataclasses

    from autograder.checks import ch01
    q2 = ch01.EXERCISES["ch01_q2_kv_bytes_per_sequence"]
    q2 = dataclasses.replace(q2, visible_cases=q2.visible_cases[:3])   # the GQA models (Llama 2 7B is MHA)

    def both(layers, kv_heads, head_dim, dtype_bytes, seq_len):      # query heads and no factor 2
        heads = {32: 32, 80: 64, 28: 28}[layers]                   # Llama 3.1 8B, 3.3 70B, Qwen2.5 7B
        return layers * heads * head_dim * dtype_bytes * seq_len
    with pytest.raises(AssertionError) as info:
        runner.check(q2, both)
    message = str(info.value)
    assert "two slips at once" in message and "query heads" in message and "factor 2" in message


# --- an ungraded chapter (ch00): built and run, never graded ----------------------------------------
@pytest.mark.kernel
def test_ungraded_chapter_is_built_and_runs(tmp_path):
    course = tmp_path / "course"
    (course / "source" / "ch00_orientation").mkdir(parents=True)
    (course / "nbgrader_config.py").write_bytes((COURSE / "nbgrader_config.py").read_bytes())
    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"display_name": "Python 3 (ipykernel)",
                                                           "language": "python", "name": "python3"},
                                            "kv_course": {"graded": False}})
    nb.cells = [nbformat.v4.new_markdown_cell("# Orientation"),
                nbformat.v4.new_code_cell("import kvlib as kv\nprint(kv.kv_bytes_per_token(32, 8, 128, 2))")]
    path = course / "source" / "ch00_orientation" / "ch00_orientation.ipynb"
    nbformat.write(nb, path)
    build = _build_course()
    assert build.check_source(path) == []
    unmarked = copy.deepcopy(nb)
    del unmarked.metadata["kv_course"]
    nbformat.write(unmarked, tmp_path / "ch00_orientation.ipynb")
    assert any("no graded cells" in p for p in build.check_source(tmp_path / "ch00_orientation.ipynb"))
    files = build.generate(course, ["ch00_orientation"])
    release = nbformat.reads(files["chapters/ch00_orientation.ipynb"].decode(), as_version=4)
    NotebookClient(release, timeout=60, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert release.cells[1].outputs[0].text == "131072\n"      # 2 x 32 x 8 x 128 x 2
