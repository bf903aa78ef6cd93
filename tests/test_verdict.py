"""autograder.verdict on the hostile corpus (tests/hostile): no case scores above its honest score.

Expected scores are sums of the contract's points (q1 3, q2 1, q3 1, q4 2, q5 2, q6 2:
``hostile.POINTS``, against the source notebook's test cells in ``test_layout_matches_the_contract``) for the
exercises whose own code is right and runs: never read from the code under test. The escape cases are canaries
(right answers only when the escape works); ``test_canaries_are_live`` runs
them where nothing is hidden, to show that they do score when they can.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest

import hostile as H
from autograder import sandbox as S
from autograder import verdict as V

LEVEL = S.detect_level()
STRONG = S.rank(LEVEL) >= S.rank("unshare+setpriv")
TIMEOUT_CASES = {"infinite_loop", "swallow_interrupt", "alarm_disabled"}
FAST = dict(step_s=1.0, wall_s=4.0)     # for the cases that are meant to hang
NORMAL = dict(step_s=10.0, wall_s=40.0)


def _world(path: Path, mode_dir=0o755, mode_file=0o644):
    for p in [path, *path.rglob("*")]:
        p.chmod(mode_dir if p.is_dir() else mode_file)


@pytest.fixture(scope="module")
def classroom():
    """A class on disk: alice's honest submission, a gradebook file, an open directory; and targets."""
    base = Path(tempfile.mkdtemp(prefix="kv-class-"))
    base.chmod(0o755)
    kit = H.make_kit()
    alice = base / "submitted" / "alice" / H.ASSIGNMENT / f"{H.ASSIGNMENT}.ipynb"
    alice.parent.mkdir(parents=True)
    alice.write_bytes(H.dump(kit.notebook()))
    gradebook = base / "gradebook.db"
    gradebook.write_bytes(b"SQLite format 3\x00" + b"\x00" * 1000)
    open_dir = base / "open"
    open_dir.mkdir()
    _world(base)
    open_dir.chmod(0o777)
    gradebook.chmod(0o666)
    targets = H.default_targets(
        others=[str(base / "submitted")], gradebooks=[str(gradebook)],
        write_dirs=H.default_targets().write_dirs + [str(open_dir)])
    targets.hidden = [str(H.SOURCE)] + targets.hidden
    kit.targets = targets
    before = {p: p.read_bytes() for p in (alice, gradebook)}
    with H.Listener(targets.nonce) as listener:
        targets.port = listener.port
        yield {"kit": kit, "base": base, "listener": listener, "before": before, "targets": targets}
    H.remove_markers(targets)
    shutil.rmtree(base, ignore_errors=True)


def grade(data, **kw):
    limits = FAST if kw.pop("fast", False) else NORMAL
    return V.grade(data, reference=H.SOURCE, **limits, **kw)


# ---------------------------------------------------------------------------
# The reference, read by the grader
# ---------------------------------------------------------------------------
def test_layout_matches_the_contract():
    lay = V.layout(H.load_source())
    assert lay.answer_ids == [H.ANSWER[q] for q in H.Q]
    assert lay.tests == {H.TEST[q]: float(H.POINTS[q]) for q in H.Q}
    assert sum(lay.tests.values()) == 3 + 1 + 1 + 2 + 2 + 2 == H.FULL
    # the setup cell's imports (chapter 01's: kvlib and kvdisplay), so an answer that uses a name the setup
    # made never loses points in the verdict; no library the setup cell does not import itself
    assert lay.prelude == "import kvlib as kv\nimport kvdisplay as kd"
    assert "matplotlib" not in lay.prelude and "ipywidgets" not in lay.prelude


def test_release_built_here_has_no_solutions_or_hidden_tests():
    release = H.release_from_source(H.load_source())
    text = json.dumps(release)
    assert "BEGIN HIDDEN TESTS" not in text and "BEGIN SOLUTION" not in text
    assert text.count("raise NotImplementedError()") == len(H.Q)


# ---------------------------------------------------------------------------
# The corpus, case by case
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("case", H.CASES, ids=[c.name for c in H.CASES])
def test_hostile_case(case, classroom):
    if case.kind == "escape" and not STRONG:
        pytest.skip(f"isolation here is {LEVEL!r}: the escapes are not contained")
    if case.risky_unsandboxed and LEVEL == "none":
        pytest.skip("no sandbox here")
    data = H.build(case, classroom["kit"])
    v = grade(data, fast=case.name in TIMEOUT_CASES)
    assert v.max_score == H.FULL and len(v.tests) == len(H.Q)
    assert v.score <= case.max_score, v.as_dict()
    assert v.score == case.verdict_score, json.dumps(v.as_dict(), indent=1)[:3000]
    assert v.status == ("error" if case.status == "error" else "graded"), v.reason
    for t in v.tests:
        assert t.points in (0, t.max_points) and t.feedback
    if case.status != "error":
        assert v.isolation == LEVEL
    # nothing escaped: no marker, the class's files unchanged, no connection to the grader
    assert H.escape_markers(classroom["targets"]) == []
    assert all(p.read_bytes() == b for p, b in classroom["before"].items())
    assert classroom["listener"].connections == 0
    assert not list((H.REPO / "kvlib").glob("HOSTILE-*")) and not list(H.REPO.glob("HOSTILE-*"))


def test_feedback_names_what_went_wrong(classroom):
    kit = classroom["kit"]

    def fb(name, gid_q, **kw):
        v = grade(H.build(H.BY_NAME[name], kit), **kw)
        return v.by_grade_id()[H.TEST[gid_q]].feedback

    assert "did not return within 1 s" in fb("infinite_loop", "q1", fast=True)
    assert "stopped early" in fb("os_exit", "q3") and "answer cell ch01_q3_answer" in fb("os_exit", "q3")
    assert "SIGSEGV" in fb("segfault", "q4")
    assert "numpy.int64" in fb("numpy_scalar", "q2")
    assert "not int" in fb("always_equal", "q1") and "_Anything" in fb("always_equal", "q1")
    assert "must not call kvlib" in fb("calls_kvlib", "q2")
    assert "MemoryError" in fb("memory_bomb", "q2")
    assert "float" in fb("float_and_bool", "q1") and "bool" in fb("float_and_bool", "q4")
    assert "could not be" in fb("huge_int", "q3")
    assert "NameError" in fb("other_assignment", "q1")


def test_visible_feedback_shows_the_slip_hidden_does_not_show_inputs(classroom):
    kit = classroom["kit"]
    # q2 multiplies by query heads where it has them: a wrong answer on visible cases.
    nb = kit.notebook({"q2": H._body("q2", "return layers * kv_heads * head_dim * dtype_bytes * seq_len")})
    v = grade(H.dump(nb))
    text = v.by_grade_id()[H.TEST["q2"]].feedback
    assert not v.by_grade_id()[H.TEST["q2"]].passed and v.score == H.FULL - H.POINTS["q2"]
    assert "factor 2 for K and V is missing" in text and "2x too small" in text
    # right on the visible cases only (batches of 32 or fewer): only a hidden case can catch it
    nb = kit.notebook({"q3": H._body("q3", "if batch_size > 32:\n    return 0\n"
                                            "return 2 * layers * kv_heads * head_dim * dtype_bytes * seq_len * batch_size")})
    v = grade(H.dump(nb))
    t = v.by_grade_id()[H.TEST["q3"]]
    assert not t.passed and "hidden case" in t.feedback


def test_parallel_runs_do_not_starve_each_other(classroom):
    kit = classroom["kit"]
    results = {}

    def go(name):
        results[name] = grade(H.build(H.BY_NAME[name], kit))

    threads = [threading.Thread(target=go, args=(n,)) for n in ("fork_bomb", "honest", "memory_bomb")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["honest"].score == H.FULL
    assert results["fork_bomb"].score == H.BY_NAME["fork_bomb"].verdict_score
    assert results["memory_bomb"].score == H.BY_NAME["memory_bomb"].verdict_score


@pytest.mark.parametrize("level", [lvl for lvl in ("bwrap", "unshare+setpriv") if lvl != LEVEL and S.probe(lvl)[0]])
def test_other_strong_levels(level, classroom):
    kit = classroom["kit"]
    for name in ("honest", "os_exit", "forged_output", "read_hidden_tests", "write_checkout", "network",
                 "monkeypatch_checks", "swallow_interrupt"):
        case = H.BY_NAME[name]
        limits = FAST if name in TIMEOUT_CASES else NORMAL
        box = V.make_sandbox(level=level, wall_s=limits["wall_s"])
        v = V.grade(H.build(case, kit), reference=H.SOURCE, sandbox=box, step_s=limits["step_s"])
        assert v.isolation == level and v.score == case.verdict_score, (name, v.as_dict())
    assert H.escape_markers(classroom["targets"]) == [] and classroom["listener"].connections == 0


def test_canaries_are_live(classroom):
    """Where nothing is hidden (rlimits: limits only) every escape canary scores: they can detect an escape."""
    if not S.probe("rlimits")[0]:
        pytest.skip("no rlimits level here")
    import copy
    kit = copy.copy(classroom["kit"])
    kit.targets = copy.copy(classroom["targets"])
    open_dir = str(classroom["base"] / "open")
    kit.targets.write_dirs, kit.targets.write_files = [open_dir], []   # never the real checkout
    box = V.make_sandbox(level="rlimits", enforce_minimum=False, wall_s=60)
    scores = {c.name: V.grade(H.build(c, kit), reference=H.SOURCE, sandbox=box, step_s=30).score
              for c in H.CASES if c.kind == "escape"}
    try:
        assert scores == {name: H.FULL for name in ("read_hidden_tests", "read_other_students", "write_gradebook",
                                                     "write_checkout", "network")}
        assert classroom["listener"].connections >= 1
        assert H.escape_markers(kit.targets) == [os.path.join(open_dir, f"HOSTILE-{kit.targets.nonce}")]
    finally:
        H.remove_markers(kit.targets)
        classroom["listener"].connections = 0


# ---------------------------------------------------------------------------
# The grader's own failures are reported, never raised
# ---------------------------------------------------------------------------
def test_missing_reference_or_checks_is_an_error_not_a_crash(classroom, tmp_path):
    data = H.build(H.BY_NAME["honest"], classroom["kit"])
    v = V.grade(data, reference=tmp_path / "nope.ipynb")
    assert v.status == "error" and "cannot load the reference" in v.reason and v.score == 0
    v = V.grade(data, reference=H.SOURCE, exercises={})
    assert v.status == "error" and "no automatic check" in v.reason and v.score == 0
    assert all(not t.passed for t in v.tests)


def test_isolation_error_is_reported(monkeypatch, classroom):
    monkeypatch.setenv("REQUIRE_ISOLATION", "1")
    monkeypatch.setenv("SANDBOX_MIN_LEVEL", "bwrap")
    monkeypatch.setenv("SANDBOX_LEVEL", "rlimits")
    v = V.grade(H.build(H.BY_NAME["honest"], classroom["kit"]), reference=H.SOURCE)
    assert v.status == "error" and "REQUIRE_ISOLATION" in v.reason and v.score == 0


def test_json_shape(classroom):
    v = grade(H.build(H.BY_NAME["honest"], classroom["kit"]))
    d = json.loads(json.dumps(v.as_dict()))
    assert {"assignment", "score", "max_score", "status", "reason", "tests", "isolation"} <= set(d)
    assert [set(t) for t in d["tests"]] == [{"grade_id", "points", "max_points", "passed", "feedback", "slips",
                                             "attempted", "failures"}] * len(H.Q)
    assert all(t["slips"] == [] and t["attempted"] and t["failures"] == {} for t in d["tests"])   # all passed
    assert d["score"] == d["max_score"] == H.FULL and d["status"] == "graded" and d["isolation"] == LEVEL


def test_corpus_contract():
    rows = H.corpus(targets=H.default_targets())
    assert len(rows) == len(H.CASES) >= 25
    for name, data, max_score, status in rows:
        assert isinstance(data, bytes) and 0 <= max_score <= H.FULL and status in (None, "graded", "needs_manual", "error")
        assert H.BY_NAME[name].verdict_score <= max_score


def test_an_answer_that_raises_is_attempted_a_stub_or_an_empty_cell_is_not():
    """The slip report's "not attempted" (``attempted``): only the release's stub (NotImplementedError) or an
    empty answer cell. q1's cell does not compile (a SyntaxError: the function never exists), q2's function
    raises NameError on a name of its own, q3's cell is emptied, q4..q6 are the release's stubs."""
    kit = H.make_kit()
    nb = kit.notebook({"q1": _syntax_error_q1(), "q2": H._body("q2", "return per_token * seq_len"), "q3": "\n"},
                      blank=("q4", "q5", "q6"))
    v = grade(H.dump(nb))
    assert v.status == "graded" and v.score == 0, v.as_dict()
    attempted = {q: v.by_grade_id()[H.TEST[q]].attempted for q in H.Q}
    assert attempted == {"q1": True, "q2": True, "q3": False, "q4": False, "q5": False, "q6": False}
    assert "NameError" in v.by_grade_id()[H.TEST["q2"]].feedback


def _syntax_error_q1() -> str:
    return H._body("q1", "return 2 * config['num_hidden_layers'] *") + "\n"
