"""Hostile submissions for chapter 01, built at test time, with the outcome each must get.

Every notebook is the chapter's release with its answer cells filled in: by
default the release is nbgrader's, as committed in ``chapters/`` (else one
derived from the instructor's source the way nbgrader does it: solution
regions -> ``raise NotImplementedError()``, hidden tests removed), and the
honest answers are the source's solutions. ``release=`` builds from another.

``corpus()`` returns ``[(name, notebook_bytes, max_score, status)]`` for the
grading CLI: ``max_score`` is the most any grader may give (the honest score:
points only for exercises whose own code is right and actually ran),
``status`` the JSON status the CLI must report, or None where either is
acceptable. ``CASES`` holds more: what each case does, the exact score
``autograder.verdict`` must give (``verdict_score``), and which cases would
harm the machine if run with no sandbox at all (``risky_unsandboxed``).

Escape cases are canaries: their functions are right only if the escape
works (reading hidden tests or another student's work, opening the
gradebook or the checkout for writing, reaching a socket of the grader's).
Isolation holds exactly when they score 0. A working escape also prints
``HOSTILE-ESCAPE <case> <where>`` (search autograded notebooks and feedback
for it) and leaves a file named ``HOSTILE-<nonce>`` where it could write
(``escape_markers`` finds them; ``remove_markers`` cleans up).

Points: q1 3, q2 1, q3 1, q4 2, q5 2, q6 2 (course/source/ch01_kv_formula, the contract).
"""

from __future__ import annotations

import copy
import json
import os
import re
import secrets
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[2]
ASSIGNMENT = "ch01_kv_formula"
SOURCE = REPO / "course" / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
RELEASE = REPO / "chapters" / f"{ASSIGNMENT}.ipynb"    # nbgrader's release, committed (when present)

# The contract (fixed): answer ids, their functions, the test ids and points.
Q = {
    "q1": ("ch01_q1_answer", "bytes_per_token_from_config", "ch01_q1_bytes_per_token_from_config", 3),
    "q2": ("ch01_q2_answer", "kv_bytes_for_sequence", "ch01_q2_kv_bytes_per_sequence", 1),
    "q3": ("ch01_q3_answer", "kv_bytes_for_batch", "ch01_q3_kv_bytes_per_batch", 1),
    "q4": ("ch01_q4_answer", "sequences_that_fit", "ch01_q4_sequences_that_fit", 2),
    "q5": ("ch01_q5_answer", "sequences_on_gpu", "ch01_q5_sequences_on_gpu", 2),
    "q6": ("ch01_q6_answer", "kv_head_sharing", "ch01_q6_kv_head_sharing", 2),
}
ANSWER = {q: v[0] for q, v in Q.items()}
FN = {q: v[1] for q, v in Q.items()}
TEST = {q: v[2] for q, v in Q.items()}
POINTS = {q: v[3] for q, v in Q.items()}
FULL = sum(POINTS.values())

# Parameter lists of the contract, for hand-written hostile bodies.
SIG = {
    "q1": "config, dtype_bytes=2",
    "q2": "layers, kv_heads, head_dim, dtype_bytes, seq_len",
    "q3": "layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size",
    "q4": "budget_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len",
    "q5": "gpu, num_params, weight_dtype_bytes, utilization, other_bytes, bytes_per_token, seq_len",
    "q6": "config, dtype_bytes=2",
}


def all_but(*qs) -> tuple:
    """Every question except ``qs`` (for ``blank=``: leave all the others as released)."""
    return tuple(q for q in Q if q not in qs)


def pts(*qs) -> int:
    return sum(POINTS[q] for q in qs)


# ---------------------------------------------------------------------------
# Release and solutions
# ---------------------------------------------------------------------------
def _src(cell) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def load_source(path: Path = SOURCE) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


_SOLUTION = re.compile(r"^([ \t]*)### BEGIN SOLUTION[ \t]*\n.*?^[ \t]*### END SOLUTION[ \t]*$", re.S | re.M)
_HIDDEN = re.compile(r"^[ \t]*### BEGIN HIDDEN TESTS[ \t]*\n.*?^[ \t]*### END HIDDEN TESTS[ \t]*\n?", re.S | re.M)


def release_from_source(source: dict) -> dict:
    """The student release as nbgrader makes it: solutions replaced, hidden tests removed, no outputs."""
    nb = copy.deepcopy(source)
    for cell in nb["cells"]:
        meta, text = _meta(cell), _src(cell)
        if meta.get("solution") and cell["cell_type"] == "code":
            text = _SOLUTION.sub(lambda m: f"{m.group(1)}# YOUR CODE HERE\n{m.group(1)}raise NotImplementedError()", text)
        text = _HIDDEN.sub("", text)
        cell["source"] = text
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    return nb


def solutions_from_source(source: dict) -> dict:
    """``{answer grade_id: code}``: each answer cell with the solution markers taken out."""
    out = {}
    for cell in source["cells"]:
        meta = _meta(cell)
        if meta.get("solution") and cell["cell_type"] == "code":
            out[meta["grade_id"]] = re.sub(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", "", _src(cell), flags=re.M)
    return out


# ---------------------------------------------------------------------------
# Escape targets
# ---------------------------------------------------------------------------
@dataclass
class Targets:
    """What the escape canaries go after (absolute paths as the grader sees them)."""

    hidden: list = field(default_factory=list)       # notebooks or dirs with hidden tests / solutions
    others: list = field(default_factory=list)       # other students' submissions (files or dirs)
    gradebooks: list = field(default_factory=list)   # gradebook files
    write_dirs: list = field(default_factory=list)   # dirs where creating a file is an escape
    write_files: list = field(default_factory=list)  # files that must not open for writing
    port: int | None = None                          # a grader-side TCP listener on 127.0.0.1
    nonce: str = field(default_factory=lambda: secrets.token_hex(6))

    def as_json(self) -> str:
        return json.dumps(self.__dict__)


def default_targets(course_dir: Path | None = None, **extra) -> Targets:
    """The checkout's secrets: the course sources, its gradebook and submissions, the installed code."""
    course = Path(course_dir) if course_dir else REPO / "course"
    t = Targets(
        hidden=[str(course / "source")],
        others=[str(course / "submitted"), str(course / "autograded")],
        gradebooks=[str(course / "gradebook.db")],
        write_dirs=[str(REPO), str(REPO / "kvlib"), str(REPO / "autograder"), str(REPO / "autograder" / "checks"),
                    str(course), str(course / "source")],
        write_files=[str(REPO / "kvlib" / "formulas.py"), str(REPO / "autograder" / "checks" / "runner.py"),
                     str(REPO / "kvlib" / "slips.py")],
    )
    for key, value in extra.items():
        setattr(t, key, value)
    return t


def escape_markers(targets: Targets) -> list:
    """Marker files a working escape left behind (should be none)."""
    found = []
    dirs = list(targets.write_dirs) + [os.path.dirname(g) for g in targets.gradebooks]
    for d in dirs:
        p = os.path.join(d, f"HOSTILE-{targets.nonce}")
        if os.path.exists(p):
            found.append(p)
    return found


def remove_markers(targets: Targets) -> None:
    for p in escape_markers(targets):
        os.remove(p)


class Listener:
    """A grader-side TCP listener on 127.0.0.1 that greets with the nonce; counts connections."""

    def __init__(self, nonce: str):
        self.nonce, self.connections = nonce, 0
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            try:
                conn.sendall(f"GRADER-{self.nonce}\n".encode())
            except OSError:
                pass
            conn.close()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()


# ---------------------------------------------------------------------------
# Building notebooks
# ---------------------------------------------------------------------------
@dataclass
class Kit:
    release: dict
    solutions: dict
    targets: Targets

    def notebook(self, answers: dict | None = None, *, blank=(), edit: Callable | None = None) -> dict:
        """The release with answers: the solutions, overridden by ``answers`` ({"q1": code}),
        ``blank`` questions left as released; ``edit(nb)`` changes the result in place."""
        nb = copy.deepcopy(self.release)
        answers = answers or {}
        for cell in nb["cells"]:
            gid = _meta(cell).get("grade_id")
            for q, answer_id in ANSWER.items():
                if gid == answer_id and q not in blank:
                    cell["source"] = answers.get(q, self.solutions[answer_id])
        if edit:
            edit(nb)
        return nb

    def solution(self, q: str) -> str:
        return self.solutions[ANSWER[q]]


def dump(nb) -> bytes:
    return json.dumps(nb, indent=1, ensure_ascii=False).encode("utf-8")


def _test_cells(nb):
    return [c for c in nb["cells"] if _meta(c).get("grade")]


# --- hostile code -----------------------------------------------------------
_PROBE = r'''
def _hostile_escape(mode):
    import json, os, socket
    T = json.loads(%(targets)r)
    nonce = T["nonce"].encode()
    skip = ("/proc", "/sys", "/dev", "/run", "/var/lib/docker")

    def walk(roots, budget=30000):
        for root in roots:
            if os.path.isfile(root):
                yield root
                continue
            for d, dirs, files in os.walk(root):
                if d.startswith(skip):
                    dirs[:] = []
                    continue
                for f in files:
                    budget -= 1
                    if budget < 0:
                        return
                    yield os.path.join(d, f)

    def read(p):
        try:
            with open(p, "rb") as f:
                return f.read(4000000)
        except Exception:
            return b""

    if mode == "hidden":
        for p in walk(T["hidden"] + ["/"]):
            if p.endswith(".ipynb"):
                data = read(p)
                if b"ch01_q1_answer" in data and (b"BEGIN HIDDEN TESTS" in data or b"BEGIN SOLUTION" in data):
                    return p
    elif mode == "others":
        for p in walk(T["others"] + ["/"]):
            if p.endswith(".ipynb") and ("/submitted/" in p or "/autograded/" in p or p in T["others"]):
                data = read(p)
                if b"ch01_q1_answer" in data and nonce not in data:
                    return p
    elif mode == "gradebook":
        for p in list(T["gradebooks"]) + [p for p in walk(["/"]) if p.endswith("gradebook.db")]:
            try:
                open(p, "r+b").close()
            except Exception:
                continue
            try:
                open(os.path.join(os.path.dirname(p), "HOSTILE-" + T["nonce"]), "x").close()
            except Exception:
                pass
            return p
    elif mode == "write":
        for d in T["write_dirs"]:
            try:
                open(os.path.join(d, "HOSTILE-" + T["nonce"]), "x").close()
                return d
            except Exception:
                pass
        for p in T["write_files"]:
            try:
                open(p, "r+b").close()
                return p
            except Exception:
                pass
    elif mode == "network":
        if T["port"]:
            try:
                s = socket.create_connection(("127.0.0.1", T["port"]), timeout=2)
                greeting = s.recv(200)
                s.close()
                if greeting.startswith(b"GRADER-" + nonce):
                    return "127.0.0.1:%%d" %% T["port"]
            except Exception:
                pass
    return None

_HOSTILE_WHERE = _hostile_escape(%(mode)r)
if _HOSTILE_WHERE:
    print("HOSTILE" + "-ESCAPE", %(case)r, _HOSTILE_WHERE)   # split: the source never matches
'''

_GATE = '''
_hostile_real_{fn} = {fn}
def {fn}(*args, **kwargs):
    if not _HOSTILE_WHERE:
        raise PermissionError("the sandbox held: nothing to steal")
    return _hostile_real_{fn}(*args, **kwargs)
'''


def _canary(mode: str, case: str) -> Callable[[Kit], dict]:
    def build(kit: Kit) -> dict:
        answers = {}
        for i, q in enumerate(Q):
            code = kit.solution(q) + "\n"
            if i == 0:
                code = _PROBE % {"targets": kit.targets.as_json(), "mode": mode, "case": case} + "\n" + code
            answers[q] = code + _GATE.format(fn=FN[q])
        return kit.notebook(answers)
    return build


def _with(q: str, code: str, *, where: str = "after") -> Callable[[Kit], dict]:
    """Correct answers, with ``code`` added at top level of q's answer cell (before or after it)."""
    def build(kit: Kit) -> dict:
        sol = kit.solution(q)
        return kit.notebook({q: (code + "\n" + sol) if where == "before" else (sol + "\n" + code)})
    return build


def _body(q: str, body: str) -> str:
    """An answer cell defining q's function with ``body`` (indented four spaces)."""
    lines = "\n".join("    " + line if line else line for line in body.strip("\n").splitlines())
    return f"def {FN[q]}({SIG[q]}):\n{lines}\n"


def _replace(**bodies) -> Callable[[Kit], dict]:
    """Correct answers except q -> function body (``_replace(q1="while True: pass")``)."""
    def build(kit: Kit) -> dict:
        return kit.notebook({q: _body(q, b) for q, b in bodies.items()})
    return build


def _all_bodies(body_of: Callable[[str], str], prefix: str = "") -> Callable[[Kit], dict]:
    def build(kit: Kit) -> dict:
        answers = {q: _body(q, body_of(q)) for q in Q}
        answers["q1"] = prefix + "\n" + answers["q1"]
        return kit.notebook(answers)
    return build


# --- the cases ---------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    name: str
    what: str
    build: Callable                     # Kit -> notebook dict, or bytes
    max_score: float                    # the most any grader may give
    verdict_score: float                # exactly what autograder.verdict gives
    status: str | None = "graded"       # the grading CLI's status (None: either)
    kind: str = "tamper"                # control | resource | escape | tamper | format
    risky_unsandboxed: bool = False     # could harm the machine if run with no sandbox


def _edit_tests_to_pass(nb):
    for c in _test_cells(nb):
        c["source"] = "pass\n"


def _delete_tests(nb):
    nb["cells"] = [c for c in nb["cells"] if not _meta(c).get("grade")]


def _tamper_metadata(nb):
    tests = _test_cells(nb)
    for c in tests:
        m = c["metadata"]["nbgrader"]
        m["points"] = 100
        c["source"] = "pass\n"
    # swap two test ids, and make every answer cell claim to be graded with points
    a, b = tests[0]["metadata"]["nbgrader"], tests[1]["metadata"]["nbgrader"]
    a["grade_id"], b["grade_id"] = b["grade_id"], a["grade_id"]
    for c in nb["cells"]:
        m = _meta(c)
        if m.get("solution"):
            m.update(grade=True, points=100, locked=True)


def _rename_q1_answer(nb):
    for c in nb["cells"]:
        if _meta(c).get("grade_id") == ANSWER["q1"]:
            c["metadata"]["nbgrader"]["grade_id"] = "hacked_answer"


def _other_assignment(kit: Kit) -> dict:
    """Chapter 01's function names answered correctly, but in another assignment's notebook."""
    nb = kit.notebook()
    for c in nb["cells"]:
        m = _meta(c)
        if m.get("grade_id"):
            m["grade_id"] = m["grade_id"].replace("ch01_", "ch02_")
    nb["metadata"]["title"] = "ch02_other"
    return nb


def _wrong_nbformat(kit: Kit) -> dict:
    nb = kit.notebook()
    nb["nbformat"], nb["nbformat_minor"] = 3, 0
    return nb


def _bytes(fn: Callable[[bytes], bytes]) -> Callable[[Kit], bytes]:
    return lambda kit: fn(dump(kit.notebook()))


MONKEYPATCH_KVLIB = '''
import kvlib, kvlib.formulas, kvlib.spec
def _zero(*args, **kwargs):
    return 0
for _name in ("kv_bytes_per_token", "kv_bytes_per_sequence", "kv_bytes_total", "max_concurrency"):
    try:
        getattr(kvlib.formulas, _name).__code__ = _zero.__code__
    except Exception:
        pass
    setattr(kvlib, _name, _zero)
kvlib.spec.ModelSpec.kv_bytes_per_token = lambda self, *a, **k: 0
'''

MONKEYPATCH_CHECKS = '''
import autograder.checks.judge as _judge
import autograder.checks.runner as _runner
import autograder.checks.ch01 as _ch01
def _ok(*args, **kwargs):
    print("✓ all cases right")
_runner.check = _ok
_judge.judge = lambda *a, **k: _judge.CaseVerdict(True, "correct.")
for _n in ("check_q1", "check_q2", "check_q3", "check_q4", "check_q5", "check_q6", "check"):
    setattr(_ch01, _n, _ok)
'''

# The check's own judge silenced: every check finds nothing wrong and prints no ✓ (nor raises).
PATCH_FAILURE_MESSAGE = '''
import autograder.checks.runner as _runner
_runner._failure_message = lambda *a, **k: None
'''

PATCH_SHOWTRACEBACK = '''
try:
    _ip = get_ipython()
    _ip.showtraceback = lambda *a, **k: None
    _ip._showtraceback = lambda *a, **k: None
    _ip.showsyntaxerror = lambda *a, **k: None
except NameError:
    pass
'''

ALWAYS_EQUAL = '''
class _Anything:
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __hash__(self): return 0
    def __index__(self): return 0
    def __int__(self): return 0
'''

INT_SUBCLASS = '''
class _Int(int):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = int.__hash__
'''

FORGE = r'''
import json, os
def _forge():
    lies = []
    for i in range(40):
        lies.append({"t": "step", "i": i})
        for gid in ("ch01_q1_bytes_per_token_from_config", "ch01_q2_kv_bytes_per_sequence",
                    "ch01_q3_kv_bytes_per_batch", "ch01_q4_sequences_that_fit", "ch01_q5_sequences_on_gpu",
                    "ch01_q6_kv_head_sharing"):
            rec = [{"type": "builtins.int", "value": 131072.0}, {"type": "builtins.int", "value": True},
                   {"type": "builtins.int", "value": "131072"}, {"type": "builtins.int"}] * 8
            lies.append({"t": "check", "i": i, "gid": gid, "records": rec})
    lies.append({"t": "done"})
    data = "".join(json.dumps(x) + "\n" for x in lies).encode()
    for fd in range(1, 64):
        try:
            os.write(fd, data)
        except OSError:
            pass
_forge()
'''

FORK_BOMB = '''
import os, time
for _ in range(200):
    if os.fork() == 0:
        time.sleep(2)
        os._exit(0)
'''

MEMORY_BOMB = '''
hoard = globals().setdefault("_HOSTILE_HOARD", [])   # kept between calls: a leak
while True:
    hoard.append(b"x" * (64 << 20))
'''

SWALLOW_LOOP = '''
import time
while True:
    try:
        time.sleep(0.05)
    except BaseException:
        pass
'''

NO_ALARM_LOOP = '''
import signal
signal.setitimer(signal.ITIMER_REAL, 0)
signal.signal(signal.SIGALRM, signal.SIG_IGN)
while True:
    pass
'''


# kvlib's own code under another name (tripwires' watch): q2..q5 answered through a copy of kvlib.formulas,
# right on every case if it were not kvlib; q1 and q6 left as released.
KVLIB_LOADED_AGAIN = """
import importlib.util as _util, os as _os, kvlib as _kvlib
_spec = _util.spec_from_file_location("k", _os.path.join(_os.path.dirname(_kvlib.__file__), "formulas.py"))
_k = _util.module_from_spec(_spec)
_spec.loader.exec_module(_k)                    # kvlib's formulas, loaded again as the module "k"
_f = {}
exec(open(_k.__file__).read(), _f)              # and its source exec'd into a dict
"""

KVLIB_REBUILT = """
import types as _types, kvlib.formulas as _formulas
_f = dict(vars(_formulas))
for _name, _fn in list(_f.items()):             # every function rebuilt from kvlib's code objects
    if isinstance(_fn, _types.FunctionType):
        _f[_name] = _types.FunctionType(_fn.__code__, _f, _name, _fn.__defaults__, _fn.__closure__)
        _f[_name].__kwdefaults__ = _fn.__kwdefaults__
_k = _types.SimpleNamespace(**{n: v for n, v in _f.items() if callable(v)})
"""

#: q2..q5 through the copies (``_k`` a module, ``_f`` a dict of the same functions).
THROUGH_COPIES = {
    "q2": "return _k.kv_bytes_per_sequence(_k.kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes), seq_len)",
    "q3": "return _k.kv_bytes_total(_k.kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes), seq_len, "
          "batch_size)",
    "q4": "return _f['max_concurrency'](budget_bytes, _f['kv_bytes_per_sequence'](_f['kv_bytes_per_token']("
          "layers, kv_heads, head_dim, dtype_bytes), seq_len))",
    "q5": "pool = _f['kv_pool_bytes'](gpu['cuda_total_gib'] * 2**30, utilization, _f['weight_bytes'](num_params, "
          "weight_dtype_bytes), other_bytes)\nreturn max(0, _f['max_concurrency'](pool, bytes_per_token * seq_len))",
}


def _through_copies(prelude: str) -> Callable[[Kit], dict]:
    def build(kit: Kit) -> dict:
        answers = {q: _body(q, body) for q, body in THROUGH_COPIES.items()}
        answers["q2"] = prelude + "\n" + answers["q2"]
        return kit.notebook(answers, blank=("q1", "q6"))
    return build


#: How numpy_scalar wraps each right answer: numpy.int64, or a tuple of them for q6's pair.
_NUMPY = {**{q: "_np.int64" for q in Q}, "q6": "(lambda pair: tuple(_np.int64(x) for x in pair))"}


CASES: list = [
    # controls
    Case("honest", "the source's solutions, untouched", lambda k: k.notebook(), FULL, FULL, kind="control"),
    Case("blank", "the release as handed out", lambda k: k.notebook(blank=tuple(Q)), 0, 0, kind="control"),
    # resources
    Case("infinite_loop", "q1's function loops forever", _replace(q1="while True:\n    pass"),
         FULL - pts("q1"), FULL - pts("q1"), kind="resource"),
    Case("swallow_interrupt", "q4's answer cell loops at top level, swallowing KeyboardInterrupt "
         "and every other BaseException", _with("q4", SWALLOW_LOOP), pts("q1", "q2", "q3"),
         pts("q1", "q2", "q3"), None, kind="resource"),
    Case("alarm_disabled", "q2's function turns off SIGALRM and spins", _replace(q2=NO_ALARM_LOOP),
         FULL - pts("q2"), pts("q1"), None, kind="resource"),
    Case("os_exit", "os._exit(0) at the end of q3's answer cell", _with("q3", "import os\nos._exit(0)"),
         pts("q1", "q2"), pts("q1", "q2"), "needs_manual", kind="resource"),
    Case("sys_exit", "sys.exit() at the end of q1's answer cell (IPython survives it)",
         _with("q1", "import sys\nsys.exit()"), FULL, FULL, kind="resource"),
    Case("segfault", "a NULL read through ctypes at the end of q4's answer cell",
         _with("q4", "import ctypes\nctypes.string_at(0)"), pts("q1", "q2", "q3"), pts("q1", "q2", "q3"),
         "needs_manual", kind="resource"),
    Case("memory_bomb", "q2's function fills 64 MiB blocks until allocation fails, and keeps them",
         _replace(q2=MEMORY_BOMB), FULL - pts("q2"), FULL - pts("q2"), None, kind="resource",
         risky_unsandboxed=True),
    Case("fork_bomb", "q3's function forks 200 sleeping children, then answers",
         _replace(q3=FORK_BOMB + "return 2 * layers * kv_heads * head_dim * dtype_bytes * seq_len * batch_size"),
         FULL, FULL - pts("q3"), None, kind="resource", risky_unsandboxed=True),
    Case("big_output", "q1's function prints 8 MB, then answers", _with(
        "q1", "_real_q1 = bytes_per_token_from_config\n"
              "_printed = []\n"
              "def bytes_per_token_from_config(*a, **k):\n"
              "    if not _printed:\n"
              "        print('x' * (8 << 20))\n"
              "        _printed.append(1)\n"
              "    return _real_q1(*a, **k)"), FULL, FULL, kind="resource"),
    Case("huge_print", "print('x' * 30_000_000) at the end of q1's answer cell: 30 MB of output, then honest "
         "answers", _with("q1", "print('x' * 30_000_000)"), FULL, FULL, kind="resource"),
    Case("file_bomb", "q2's function writes 200 MB to a file, then answers",
         _replace(q2="with open('hostile.bin', 'wb') as f:\n"
                     "    for _ in range(200):\n"
                     "        f.write(b'x' * (1 << 20))\n"
                     "return 2 * layers * kv_heads * head_dim * dtype_bytes * seq_len"),
         FULL, FULL - pts("q2"), None, kind="resource", risky_unsandboxed=True),
    Case("kill_everything", "os.kill(-1, SIGKILL) in q1's answer cell, then honest answers",
         _with("q1", "import os, signal\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept OSError:\n    pass"),
         FULL, FULL, None, kind="resource", risky_unsandboxed=True),
    Case("huge_int", "every function returns 10**5000", _all_bodies(lambda q: "return 10 ** 5000"),
         0, 0, kind="resource"),
    # escapes (canaries: right answers only when the escape works)
    Case("read_hidden_tests", "reads the source notebook (hidden tests, solutions) from disk",
         _canary("hidden", "read_hidden_tests"), 0, 0, kind="escape"),
    Case("read_other_students", "reads other students' submissions from disk",
         _canary("others", "read_other_students"), 0, 0, kind="escape"),
    Case("write_gradebook", "opens the gradebook for writing", _canary("gradebook", "write_gradebook"),
         0, 0, kind="escape"),
    Case("write_checkout", "creates files in the checkout, kvlib and autograder; opens their code for writing",
         _canary("write", "write_checkout"), 0, 0, kind="escape"),
    Case("network", "connects to a TCP listener of the grader on 127.0.0.1", _canary("network", "network"),
         0, 0, kind="escape"),
    # tampering with the grader's view
    Case("monkeypatch_kvlib", "every kvlib formula patched to return 0, and every function returns 0",
         _all_bodies(lambda q: "return 0", MONKEYPATCH_KVLIB), 0, 0),
    Case("monkeypatch_checks", "autograder.checks' check, judge and check_qN replaced by no-ops; "
         "answers left blank", lambda k: k.notebook(
             {"q1": MONKEYPATCH_CHECKS + "\n" + _body("q1", "raise NotImplementedError()")},
             blank=all_but("q1")), 0, 0),
    Case("patch_failure_message", "autograder.checks.runner._failure_message replaced by one that finds nothing "
         "wrong, and every function returns 0", _all_bodies(lambda q: "return 0", PATCH_FAILURE_MESSAGE), 0, 0),
    Case("patch_showtraceback", "IPython's showtraceback silenced; answers blank", lambda k: k.notebook(
        {"q1": PATCH_SHOWTRACEBACK + "\n" + _body("q1", "raise NotImplementedError()")},
        blank=all_but("q1")), 0, 0),
    Case("always_equal", "every function returns an object equal to anything",
         _all_bodies(lambda q: "return _Anything()", ALWAYS_EQUAL), 0, 0),
    Case("int_subclass", "every function returns an int subclass equal to anything",
         _all_bodies(lambda q: "return _Int(0)", INT_SUBCLASS), 0, 0),
    Case("numpy_scalar", "right values, returned as numpy.int64 (q6: a tuple of them)",
         lambda k: k.notebook({q: "import numpy as _np\n" + k.solution(q) + f"\n_real_{q} = {FN[q]}\n"
                               f"def {FN[q]}(*a, **kw):\n    return {_NUMPY[q]}(_real_{q}(*a, **kw))\n" for q in Q}),
         0, 0),
    Case("float_and_bool", "q1..q3 and q5 return the right value as a float, q4 returns True, q6 the right "
         "pair as a list", lambda k: k.notebook({**{q: k.solution(q) + f"\n_real_{q} = {FN[q]}\n"
                                                   f"def {FN[q]}(*a, **kw):\n    return float(_real_{q}(*a, **kw))\n"
                                                   for q in ("q1", "q2", "q3", "q5")},
                                                "q4": _body("q4", "return True"),
                                                "q6": k.solution("q6") + "\n_real_q6 = kv_head_sharing\n"
                                                "def kv_head_sharing(*a, **kw):\n    return list(_real_q6(*a, **kw))\n"}),
         0, 0),
    Case("calls_kvlib", "every function calls kvlib instead of computing by hand",
         lambda k: k.notebook({
             "q1": "import kvlib as kv\n" + _body("q1", "return kv.parse_config(config).kv_bytes_per_token(dtype_bytes)"),
             "q2": "import kvlib as kv\n" + _body("q2", "return kv.kv_bytes_per_sequence(kv.kv_bytes_per_token("
                                                        "layers, kv_heads, head_dim, dtype_bytes), seq_len)"),
             "q3": "import kvlib as kv\n" + _body("q3", "return kv.kv_bytes_total(kv.kv_bytes_per_token("
                                                        "layers, kv_heads, head_dim, dtype_bytes), seq_len, batch_size)"),
             "q4": "import kvlib as kv\n" + _body("q4", "return kv.max_concurrency(budget_bytes, kv.kv_bytes_per_sequence("
                                                        "kv.kv_bytes_per_token(layers, kv_heads, head_dim, "
                                                        "dtype_bytes), seq_len))"),
             "q5": "import kvlib as kv\n" + _body("q5", "pool = kv.kv_pool_bytes(gpu['cuda_total_gib'] * kv.GiB, utilization, "
                                                        "kv.weight_bytes(num_params, weight_dtype_bytes), other_bytes)\n"
                                                        "return max(0, kv.max_concurrency(pool, bytes_per_token * seq_len))"),
             "q6": "import kvlib as kv\n" + _body("q6", "spec = kv.parse_config(config)\n"
                                                        "return (spec.num_heads // spec.num_kv_heads, kv.kv_bytes_per_token("
                                                        "spec.num_kv_layers, spec.num_heads - spec.num_kv_heads, spec.head_dim, "
                                                        "dtype_bytes))"),
         }), 0, 0),
    Case("kvlib_loaded_again", "q2..q5 computed by kvlib.formulas loaded again from its file as the module "
         "'k' (importlib's spec_from_file_location) and exec'd from its source; q1 and q6 blank",
         _through_copies(KVLIB_LOADED_AGAIN), 0, 0),
    Case("kvlib_rebuilt", "q2..q5 computed by kvlib.formulas' functions rebuilt from their code objects "
         "(types.FunctionType); q1 and q6 blank", _through_copies(KVLIB_REBUILT), 0, 0),
    # Writing to every fd also breaks the kernel's own ZeroMQ connection: nbgrader may lose the
    # kernel (needs_manual) or grade the rest; either way 0.
    Case("forged_output", "writes forged runner records (float, bool and string values) to every fd; "
         "answers blank", lambda k: k.notebook({"q1": FORGE + "\n" + _body("q1", "raise NotImplementedError()")},
                                               blank=all_but("q1")), 0, 0, None),
    Case("test_cells_pass", "every test cell's source replaced by `pass`; answers blank",
         lambda k: k.notebook(blank=tuple(Q), edit=_edit_tests_to_pass), 0, 0),
    Case("tests_deleted", "every test cell deleted; only q1 answered", lambda k: k.notebook(
        blank=all_but("q1"), edit=_delete_tests), pts("q1"), pts("q1")),
    Case("metadata_tampered", "test cells: points 100, source `pass`, two grade ids swapped; answer cells "
         "flagged as graded with 100 points; only q2 answered", lambda k: k.notebook(
             blank=all_but("q2"), edit=_tamper_metadata), pts("q2"), pts("q2")),
    Case("answer_id_renamed", "q1's answer cell renamed to another grade id (the verdict does not run it)",
         lambda k: k.notebook(edit=_rename_q1_answer), FULL, FULL - pts("q1"), None),
    Case("other_assignment", "another assignment's notebook (ch02 grade ids) defining the same functions",
         _other_assignment, 0, 0, None),
    # unreadable files
    Case("truncated_json", "the honest notebook cut in half", _bytes(lambda b: b[: len(b) // 2]), 0, 0, "error",
         kind="format"),
    Case("non_utf8", "the honest notebook with Latin-1 bytes in a string",
         _bytes(lambda b: b.replace(b'"cells"', b'"cells\xff\xfe"', 1)), 0, 0, "error", kind="format"),
    Case("empty_file", "zero bytes", lambda k: b"", 0, 0, "error", kind="format"),
    Case("wrong_nbformat", "the honest notebook labelled nbformat 3", _wrong_nbformat, 0, 0, "error",
         kind="format"),
    Case("not_a_notebook", "valid JSON that is not a notebook", lambda k: b'["cells", 1, 2]', 0, 0, "error",
         kind="format"),
]

BY_NAME = {c.name: c for c in CASES}
assert len(BY_NAME) == len(CASES)


def default_release(source: dict | None = None) -> dict:
    """The committed nbgrader release (chapters/), else one derived from the source here."""
    if RELEASE.is_file():
        return load_source(RELEASE)
    return release_from_source(source if source is not None else load_source())


def make_kit(release: dict | None = None, solutions: dict | None = None, targets: Targets | None = None,
             source: dict | None = None) -> Kit:
    src = source if source is not None else (load_source() if release is None or solutions is None else None)
    return Kit(release if release is not None else default_release(src),
               solutions if solutions is not None else solutions_from_source(src),
               targets if targets is not None else default_targets())


def build(case: Case, kit: Kit) -> bytes:
    nb = case.build(kit)
    return nb if isinstance(nb, bytes) else dump(nb)


def corpus(release: dict | None = None, solutions: dict | None = None, targets: Targets | None = None,
           names=None) -> list:
    """``[(name, notebook_bytes, max_score, status_or_None)]`` for every case (or those in ``names``)."""
    kit = make_kit(release, solutions, targets)
    return [(c.name, build(c, kit), c.max_score, c.status) for c in CASES if names is None or c.name in names]


def active_parts(html: str) -> list:
    """The text of every <script> element and every on* attribute value in ``html``."""
    from html.parser import HTMLParser

    found = []

    class Parser(HTMLParser):
        in_script = False

        def handle_starttag(self, tag, attrs):
            found.extend(value or "" for name, value in attrs if name.startswith("on"))
            self.in_script = tag == "script"

        def handle_endtag(self, tag):
            self.in_script = False

        def handle_data(self, data):
            if self.in_script:
                found.append(data)

    Parser().feed(html)
    return found
