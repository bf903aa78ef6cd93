"""A real class on JupyterHub, on this machine: the steps of course/jupyterhub/GUIDE.md marked "tested".

One test, ``test_a_class_on_jupyterhub``, runs a whole assignment cycle:

* Unix accounts for one instructor and three students (``useradd``, homes
  0700 in the test's temp dir; removed afterwards, on failure too);
* nbgrader's exchange in a temp dir with a shared volume's permissions (root
  0777 + sticky bit); ``course/jupyterhub/student/nbgrader_config.py`` on
  every server, ``grader/nbgrader_config.py`` on top for the instructor;
* JupyterHub (PyPI, ``tests/hub/requirements.txt``) with
  configurable-http-proxy (npm, ``.hub/node_modules``; both installed by
  ``./dev.sh hub``), loading ``course/jupyterhub/jupyterhub_config.py`` (groups,
  roles, the local process spawner) on 127.0.0.1 only, with the dummy
  authenticator in place of PAM (the test drives the hub with API tokens);
* the instructor, as their own uid with their own hub token (what a terminal
  in their server has): ``nbgrader generate_assignment`` and
  ``release_assignment`` (the assignment lands in the PostgreSQL gradebook of
  ``tests/pg_server.py``), later ``collect``, ``python -m autograder
  grade-class ... --db URL --feedback feedback`` with a fixed
  ``KV_COURSE_GRADING_SEED``, and ``release_feedback``;
* the students through their own single-user servers (spawned by the hub as
  their uids), each with their own token: nbgrader's assignment-list API
  (``/user/<name>/assignments/fetch|submit|fetch_feedback``) and Jupyter's
  contents API to save their answers;
* one student tries to read another's submission (the exchange's inbound, the
  other's home, the other's server) and the instructor's source, and fails;
* each student fetches feedback: exactly their own, with their own score;
* the class slip report grade-class wrote, and ``autograder.report`` on the PostgreSQL gradebook,
  count the slips these three notebooks make by construction.

Scores are sums of the contract's points (course/source/ch01_kv_formula: q1 3, q2 1,
q3 1, q4 2, q5 2, q6 2; ``hostile.FULL``): the solutions all 11, a q2 without the factor 2
for K and V all but q2's 1 (q3 and q4 do not call q2 in these notebooks;
tests/test_class_gradebook.py), the blank release 0.

Time budget (limits that fail the test, not speed targets): the hub is up
within HUB_UP_S, the three servers within SERVERS_UP_S, the hub and its
servers stopped within STOP_S, each command within COMMAND_S; the phases'
times and the servers' memory are printed (``-s``). Measured on 2 cores
shared with other jobs (load about 12): 300 s in all, of which the hub up
14 s, three servers 51 s, generate + release 52 s, grade-class of three
notebooks 105 s, hub stopped 12 s; each server about 160 MB resident.

Paths: the spawned users run the venv's Python and import the checkout's
packages, so every directory above the venv, its interpreter and the
checkout gets o+x (traversal, never read) for the test's duration where it
lacks it (e.g. ``/root`` under a pyenv), and gets its mode back afterwards.

Missing pieces (root, jupyterhub, configurable-http-proxy, node, useradd,
setpriv, PostgreSQL) skip with one line; ``REQUIRE_HUB=1`` (CI) makes that a
failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

import hostile as H
import pg_server as P
from procs import grant_traversal, restore_modes

pytestmark = pytest.mark.slow

REPO = H.REPO
ASSIGNMENT = H.ASSIGNMENT
COURSE = "kv-course"
WORK = f"{COURSE}/{ASSIGNMENT}"       # where a student's server fetches to (Exchange.path_includes_course)
HUB_CONFIG = REPO / "course" / "jupyterhub" / "jupyterhub_config.py"
STUDENT_CONFIG = REPO / "course" / "jupyterhub" / "student" / "nbgrader_config.py"
GRADER_CONFIG = REPO / "course" / "jupyterhub" / "grader" / "nbgrader_config.py"
VENV_BIN = Path(sys.executable).parent          # the venv's bin/ (not resolved: the venv, not its base)
CHP = REPO / ".hub" / "node_modules" / ".bin" / "configurable-http-proxy"
SEED = "kv-course hub test: a fixed class secret"
HUB_UP_S, SERVERS_UP_S, STOP_S, COMMAND_S = 60, 180, 30, 300
FULL = H.FULL


def _require_hub() -> bool:
    return os.environ.get("REQUIRE_HUB", "").strip().lower() in ("1", "true", "yes", "on")


def missing() -> str | None:
    """None when the hub test can run here, else what is missing (one line)."""
    if os.geteuid() != 0:
        return "needs root (it creates Unix accounts and the hub spawns servers as them)"
    for tool in ("useradd", "userdel", "setpriv", "node"):
        if shutil.which(tool) is None:
            return f"{tool} not found"
    if not (VENV_BIN / "jupyterhub").exists() or not (VENV_BIN / "jupyterhub-singleuser").exists():
        return "jupyterhub is not installed in the venv (./dev.sh hub)"
    if not CHP.exists():
        return "configurable-http-proxy is not installed in .hub/ (./dev.sh hub)"
    node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
    if int(node.lstrip("v").split(".")[0] or 0) < 20:
        return f"configurable-http-proxy 5.3.0 needs node 20 or newer, found {node or 'none'}"
    return P.missing()


# ---------------------------------------------------------------------------
# Pieces: paths other users can reach, accounts, commands as a user, HTTP
# ---------------------------------------------------------------------------
def _free_ports(n: int) -> list:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class Account:
    def __init__(self, name: str, homes: Path):
        self.name, self.home = name, homes / name
        run = subprocess.run(["useradd", "--create-home", "--home-dir", str(self.home), "--shell", "/bin/sh",
                              "--user-group", name], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, f"useradd {name}: {run.stderr.strip()}"
        os.chmod(self.home, 0o700)
        pw = pwd.getpwnam(name)
        self.uid, self.gid = pw.pw_uid, pw.pw_gid
        self.token = None

    def env(self, **extra) -> dict:
        return {"HOME": str(self.home), "USER": self.name, "LOGNAME": self.name, "LANG": "C.UTF-8",
                "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin", **extra}

    def run(self, argv, cwd=None, env=None, timeout=COMMAND_S) -> subprocess.CompletedProcess:
        """``argv`` as this account (setpriv: its uid, gid and groups), with ``env`` only."""
        cmd = ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups", "--", *map(str, argv)]
        return subprocess.run(cmd, cwd=cwd or self.home, env=env or self.env(), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def remove(self):
        _kill_uid(self.uid)
        subprocess.run(["userdel", "--remove", self.name], capture_output=True, timeout=60)
        with contextlib.suppress(KeyError, subprocess.SubprocessError):
            pwd.getpwnam(self.name)
            subprocess.run(["userdel", "--force", self.name], capture_output=True, timeout=60)


def _kill_uid(uid: int):
    """SIGKILL every process of ``uid`` (an account this test made: all of them are the test's)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    os.kill(int(entry), signal.SIGKILL)


def _rss_bytes(uid: int) -> int:
    """Resident memory of every process of ``uid`` (a student's server and what it started)."""
    total = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    with open(f"/proc/{entry}/statm") as f:
                        total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return total


def _http(method: str, url: str, token: str, data=None, form=None, timeout=120):
    """(status, parsed JSON or text) of one request with ``Authorization: token``."""
    headers = {"Authorization": f"token {token}"}
    body = None
    if form is not None:
        body = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    elif data is not None:
        body = json.dumps(data).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(req, timeout=timeout) as resp:
            status, text = resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode(errors="replace")
    with contextlib.suppress(ValueError):
        return status, json.loads(text)
    return status, text


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # a redirect (to a login page) is an answer, not a hop
        return None


def _wait(what: str, budget_s: float, probe, log=lambda: ""):
    deadline = time.monotonic() + budget_s
    while True:
        result = probe()
        if result:
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not within {budget_s} s\n{log()[-4000:]}")
        time.sleep(0.25)


# ---------------------------------------------------------------------------
# The class
# ---------------------------------------------------------------------------
class Hub:
    """JupyterHub loading course/jupyterhub/jupyterhub_config.py, and everything it needs, in one temp dir."""

    def __init__(self, root: Path, instructor: Account, students: list, exchange: Path, etc: Path):
        self.root = root / "hub"
        self.root.mkdir(mode=0o700)
        self.port, self.hub_port, self.api_port = _free_ports(3)
        self.url = f"http://127.0.0.1:{self.port}"
        self.api = f"{self.url}/hub/api"
        self.token = secrets.token_hex(32)
        roster = self.root / "roster.txt"
        roster.write_text("# the class\n" + "".join(f"{s.name}\n" for s in students))
        config = self.root / "jupyterhub_config.py"
        config.write_text(f"""
c = get_config()
load_subconfig({HUB_CONFIG.name!r}, path={str(HUB_CONFIG.parent)!r})
assert c.JupyterHub.load_groups, "course/jupyterhub/jupyterhub_config.py was not loaded"
# What the test changes: loopback only, free ports, the dummy authenticator (the test logs in with
# API tokens), its own state, and a service token for the test itself.
c.JupyterHub.authenticator_class = "dummy"
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = {self.port}
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = {self.hub_port}
c.ConfigurableHTTPProxy.api_url = "http://127.0.0.1:{self.api_port}"
c.ConfigurableHTTPProxy.command = [{str(CHP)!r}]
c.JupyterHub.db_url = "sqlite:///{self.root}/jupyterhub.sqlite"
c.JupyterHub.cookie_secret_file = "{self.root}/cookie_secret"
c.JupyterHub.services.append({{"name": "kv-hub-test", "api_token": {self.token!r}}})
c.JupyterHub.load_roles.append({{
    "name": "kv-hub-test", "services": ["kv-hub-test"],
    "scopes": ["admin:users", "admin:servers", "tokens", "list:groups", "read:groups", "read:roles"]}})
c.Spawner.environment = {{"KV_COURSE_EXCHANGE": {str(exchange)!r}, "JUPYTER_CONFIG_PATH": {str(etc / "student")!r}}}
c.Spawner.start_timeout = {SERVERS_UP_S}
c.Spawner.http_timeout = {SERVERS_UP_S}
""")
        env = {"PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(self.root),
               "KV_COURSE_INSTRUCTORS": instructor.name, "KV_COURSE_ROSTER": str(roster),
               "KV_COURSE_SINGLEUSER": str(VENV_BIN / "jupyterhub-singleuser")}
        self.log_path = self.root / "hub.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([str(VENV_BIN / "jupyterhub"), "-f", str(config)], cwd=self.root, env=env,
                                     stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     start_new_session=True)

    def log(self) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")
        return ""

    def call(self, method, path, data=None, token=None):
        return _http(method, self.api + path, token or self.token, data=data)

    def wait_up(self):
        def up():
            assert self.proc.poll() is None, f"jupyterhub exited {self.proc.returncode}\n{self.log()[-4000:]}"
            with contextlib.suppress(OSError):
                return self.call("GET", "/")[0] == 200
        _wait("the hub answering", HUB_UP_S, up, self.log)

    def stop(self) -> float:
        """SIGTERM (the hub stops the users' servers and the proxy), SIGKILL after STOP_S; seconds taken."""
        t0 = time.monotonic()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(STOP_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)      # the proxy, if it outlived the hub
        self._log.close()
        return time.monotonic() - t0


def _assignments(status_value) -> dict:
    """{assignment_id: entry} of the assignment-list API's answer (it fails with success: false)."""
    status, body = status_value
    assert status == 200 and isinstance(body, dict) and body.get("success"), (status, str(body)[:2000])
    return {a["assignment_id"]: a for a in body["value"]}


@pytest.fixture
def scratch():
    """A temp dir every account can traverse (pytest's own is 0700 under /tmp/pytest-of-root)."""
    root = Path(tempfile.mkdtemp(prefix="kv-hub-"))
    os.chmod(root, 0o711)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_class_on_jupyterhub(scratch):
    why = missing()
    if why:
        (pytest.fail if _require_hub() else pytest.skip)(
            f"{'REQUIRE_HUB=1 but ' if _require_hub() else 'JupyterHub class skipped: '}{why}")
    times = {}
    t_start = time.monotonic()
    tag = secrets.token_hex(2)
    homes = scratch / "home"
    homes.mkdir(mode=0o711)
    accounts, traversal, hub, pg, rss_mb = [], [], None, None, []
    try:
        # -- accounts, paths, exchange, configs, gradebook ------------------------------------
        instructor = Account(f"kvh{tag}in", homes)
        accounts.append(instructor)
        students = []
        for n in (1, 2, 3):
            students.append(Account(f"kvh{tag}s{n}", homes))
            accounts.append(students[-1])
        traversal = grant_traversal([VENV_BIN.parent, Path(sys.executable).resolve().parent, REPO])
        probe = students[0].run([VENV_BIN / "python", "-c", "import jupyterhub, nbgrader, kvlib, autograder"])
        assert probe.returncode == 0, f"a student cannot run the venv's Python: {probe.stderr[-1500:]}"

        exchange = scratch / "exchange"
        exchange.mkdir()
        os.chmod(exchange, 0o1777)          # GUIDE.md, "The exchange volume": world-writable, sticky
        etc = scratch / "etc"
        for role, src in (("student", STUDENT_CONFIG), ("grader", GRADER_CONFIG)):
            (etc / role).mkdir(parents=True)
            shutil.copy(src, etc / role / "nbgrader_config.py")
        os.chmod(etc, 0o755)

        pg = P.PgServer()
        url = pg.start()
        os.chmod(pg.dir, 0o711)             # the instructor reaches the server's socket, nothing else
        db_url = P.new_database(url, "kv_course_hub")

        course = instructor.home / COURSE
        shutil.copytree(REPO / "course" / "source" / ASSIGNMENT, course / "source" / ASSIGNMENT)
        shutil.copy(REPO / "course" / "nbgrader_config.py", course / "nbgrader_config.py")
        subprocess.run(["chown", "-R", f"{instructor.uid}:{instructor.gid}", str(course)], check=True)
        times["accounts, exchange, PostgreSQL"] = time.monotonic() - t_start

        # -- the hub ---------------------------------------------------------------------------
        t0 = time.monotonic()
        hub = Hub(scratch, instructor, students, exchange, etc)
        hub.wait_up()
        times["hub up"] = time.monotonic() - t0
        status, groups = hub.call("GET", "/groups")
        assert status == 200, groups
        members = {g["name"]: sorted(g["users"]) for g in groups}
        assert members[f"nbgrader-{COURSE}"] == sorted(s.name for s in students)
        assert members[f"formgrade-{COURSE}"] == [instructor.name]
        for account in accounts:
            status, body = hub.call("POST", f"/users/{account.name}/tokens", {"note": "kv hub test"})
            assert status in (200, 201), body
            account.token = body["token"]
        t0 = time.monotonic()
        for s in students:
            status, body = hub.call("POST", f"/users/{s.name}/server")
            assert status in (201, 202), (s.name, status, body)

        def servers_ready():
            ready = [hub.call("GET", f"/users/{s.name}")[1].get("servers", {}).get("", {}).get("ready")
                     for s in students]
            return all(ready)
        _wait("the students' servers ready", SERVERS_UP_S, servers_ready, hub.log)
        times["3 student servers up"] = time.monotonic() - t0
        rss_mb = [_rss_bytes(s.uid) / 1e6 for s in students]

        # -- the instructor releases (as their uid, with what a terminal in their server has) ---
        t0 = time.monotonic()
        grader_env = instructor.env(
            JUPYTER_CONFIG_PATH=f"{etc / 'grader'}:{etc / 'student'}", KV_COURSE_EXCHANGE=str(exchange),
            KV_COURSE_DB_URL=db_url, JUPYTERHUB_API_URL=f"http://127.0.0.1:{hub.hub_port}/hub/api",
            JUPYTERHUB_USER=instructor.name, JUPYTERHUB_API_TOKEN=instructor.token,
            KV_COURSE_GRADING_SEED=SEED,
            **{k: os.environ[k] for k in ("REQUIRE_ISOLATION", "SANDBOX_MIN_LEVEL") if k in os.environ})

        def instruct(*argv):
            run = instructor.run(argv, cwd=course, env=grader_env)
            assert run.returncode == 0, (argv, run.stdout[-2000:], run.stderr[-3000:])
            return run
        instruct("nbgrader", "generate_assignment", ASSIGNMENT)
        instruct("nbgrader", "release_assignment", ASSIGNMENT)
        times["instructor: generate + release"] = time.monotonic() - t0

        # -- students: fetch, answer, submit, through their own servers ---------------------------
        t0 = time.monotonic()
        kit = H.make_kit()
        answers = {students[0].name: kit.notebook(),                                  # the solutions: FULL
                   students[1].name: kit.notebook({"q2": H._body(                     # no 2 for K and V: FULL - 1
                       "q2", "return layers * kv_heads * head_dim * dtype_bytes * seq_len")}),
                   students[2].name: kit.notebook(blank=tuple(H.Q))}                  # nothing: 0
        expected = {students[0].name: FULL, students[1].name: FULL - H.POINTS["q2"], students[2].name: 0}
        form = {"course_id": COURSE, "assignment_id": ASSIGNMENT}
        for s in students:
            base = f"{hub.url}/user/{s.name}"
            listed = _assignments(_http("GET", f"{base}/assignments?course_id={COURSE}", s.token))
            assert listed[ASSIGNMENT]["status"] == "released", listed
            fetched = _assignments(_http("POST", f"{base}/assignments/fetch", s.token, form=form))
            assert fetched[ASSIGNMENT]["status"] == "fetched", fetched
            assert fetched[ASSIGNMENT]["path"] == WORK, fetched      # path_includes_course: <course>/<id>
            nb_path = f"{WORK}/{ASSIGNMENT}.ipynb"
            status, body = _http("PUT", f"{base}/api/contents/{nb_path}", s.token,
                                 data={"type": "notebook", "format": "json", "content": answers[s.name]})
            assert status == 200, (s.name, status, str(body)[:2000])
            assert (s.home / nb_path).stat().st_uid == s.uid          # written by their server, as them
            submitted = _assignments(_http("POST", f"{base}/assignments/submit", s.token, form=form))
            assert submitted[ASSIGNMENT]["status"] == "submitted", submitted
        times["students: fetch + save + submit"] = time.monotonic() - t0

        # -- one student tries to read another's work and the instructor's source -----------------
        mallory, alice = students[1], students[0]
        inbound = exchange / COURSE / "inbound"
        targets = {
            "inbound listing": ("list", inbound),
            "another's notebook": ("read", alice.home / WORK / f"{ASSIGNMENT}.ipynb"),
            "another's submission cache": ("list", alice.home / ".local/share/jupyter/nbgrader_cache"),
            "the instructor's source": ("read", course / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"),
            "the instructor's course": ("list", course),
            "own notebook (control)": ("read", mallory.home / WORK / f"{ASSIGNMENT}.ipynb"),
        }
        outcome = _try_as(mallory, targets)
        assert outcome == {name: ("ok" if "control" in name else "PermissionError") for name in targets}, outcome
        names = [p.name for p in inbound.iterdir()]                      # root sees all three ...
        assert sorted(n.split("+")[0] for n in names) == sorted(s.name for s in students)
        guessed = inbound / names[[n.split("+")[0] for n in names].index(alice.name)]
        assert _try_as(mallory, {"glob": ("glob", inbound / f"{alice.name}+*")}) == {"glob": "[]"}
        assert len(guessed.name.rsplit("+", 1)[1]) >= 12     # ... behind a random name (nbgrader's submit)
        status, _ = _http("GET", f"{hub.url}/user/{alice.name}/api/contents/{WORK}", mallory.token)
        assert status in (302, 403, 404), status                         # another's server: refused

        # -- the instructor collects, grades into PostgreSQL, releases feedback ----------------------
        t0 = time.monotonic()
        instruct("nbgrader", "collect", "--update", ASSIGNMENT)   # GUIDE.md step 6: the latest submission
        times["instructor: collect"] = time.monotonic() - t0
        t0 = time.monotonic()
        run = instruct("python", "-m", "autograder", "grade-class", "submitted", "--assignment", ASSIGNMENT,
                       "--db", db_url, "--feedback", "feedback", "--json")     # GUIDE.md, step 6, as written
        summary = json.loads(run.stdout)
        times["instructor: grade-class (3 students)"] = time.monotonic() - t0
        assert summary["consistent"] and summary["graded_now"] == 3, summary
        assert summary["seed"]["source"] == "$KV_COURSE_GRADING_SEED"
        assert summary["out"] == str(course)       # the course folder it was run in: nbgrader's own layout
        book = _scores(db_url)
        assert book == expected, book
        _check_slip_report(summary, course, db_url, students)
        t0 = time.monotonic()
        restored = _dump_and_restore(pg, "kv_course_hub", "kv_course_restored")   # GUIDE.md, "back up"
        assert _scores(restored) == expected
        times["pg_dump + pg_restore"] = time.monotonic() - t0
        t0 = time.monotonic()
        instruct("nbgrader", "release_feedback", ASSIGNMENT)
        times["instructor: release_feedback"] = time.monotonic() - t0

        # -- each student fetches feedback: their own, only ---------------------------------------
        t0 = time.monotonic()
        for s in students:
            got = _assignments(_http("POST", f"{hub.url}/user/{s.name}/assignments/fetch_feedback", s.token,
                                     form=form))
            htmls = sorted((s.home / WORK / "feedback").rglob("*.html"))
            assert [h.name for h in htmls] == [f"{ASSIGNMENT}.html"], (s.name, htmls, got)
            html = htmls[0].read_text(encoding="utf-8")
            assert _feedback_score(html) == expected[s.name], (s.name, _feedback_score(html))
            assert htmls[0].stat().st_uid == s.uid
        assert _try_as(mallory, {"feedback listing": ("list", exchange / COURSE / "feedback")}) == \
            {"feedback listing": "PermissionError"}
        times["students: fetch_feedback"] = time.monotonic() - t0
    finally:
        t0 = time.monotonic()
        if hub is not None:
            times["hub stop"] = hub.stop()
        for account in accounts:
            account.remove()
        restore_modes(traversal)
        if pg is not None:
            pg.stop()
        times["teardown"] = time.monotonic() - t0
        times["total"] = time.monotonic() - t_start
        print("\nhub test phases (s): " + ", ".join(f"{k} {v:.1f}" for k, v in times.items()))
        if rss_mb:
            print("students' servers, resident memory after start (MB): " + ", ".join(f"{m:.0f}" for m in rss_mb))
    for account in accounts:
        with pytest.raises(KeyError):
            pwd.getpwnam(account.name)


def _check_slip_report(summary: dict, out: Path, db_url: str, students: list):
    """grade-class wrote the slip report beside its CSV, and the report (from the PostgreSQL gradebook)
    says what the three notebooks do by construction: the first right everywhere, the second without
    the factor 2 for K and V in q2 (slip missing_kv_factor), the third blank (nothing attempted)."""
    from autograder import report as R

    assert Path(summary["report"]["html"]).is_file(), summary["report"]
    page = Path(summary["report"]["html"]).read_text(encoding="utf-8")
    assert not any(s.name in page for s in students)                      # nobody named
    built = R.class_report(out, ASSIGNMENT, db_url=db_url)
    got = {e.grade_id: (e.counts["full"], e.counts["zero"], e.counts["not_attempted"], e.slips)
           for e in built.exercises}
    want = {H.TEST[q]: (2, 0, 1, {}) for q in H.Q}
    want[H.TEST["q2"]] = (1, 1, 1, {"missing_kv_factor": 1})
    assert got == want, got
    assert [(s.key, sorted(s.students)) for s in built.slips] == [("missing_kv_factor", [students[1].name])]
    assert built.ranked[0].grade_id == H.TEST["q2"]


def _dump_and_restore(pg: P.PgServer, name: str, new_name: str) -> str:
    """GUIDE.md's backup and restore: ``pg_dump --format=custom`` of ``name``, ``pg_restore`` into a new
    database; its URL."""
    dump = pg.dir / f"{name}.dump"
    socket_args = ["--host", pg.dir, "--port", P.PORT, "--username", "postgres"]
    pg._run(pg.bindir / "pg_dump", "--format=custom", f"--file={dump}", *socket_args, name)
    pg._run(pg.bindir / "createdb", *socket_args, new_name)
    pg._run(pg.bindir / "pg_restore", "--no-owner", f"--dbname={new_name}", *socket_args, dump)
    return pg.url.replace(f"/{P.DB_NAME}?", f"/{new_name}?")


def _scores(url: str) -> dict:
    from nbgrader.api import Gradebook

    with Gradebook(url, COURSE) as gb:
        return {s.id: gb.find_submission(ASSIGNMENT, s.id).score for s in gb.students}


def _feedback_score(html: str) -> float:
    """The total nbgrader's feedback template prints: 'Score: X / Y'."""
    import re

    m = re.search(r"Score:\s*([0-9.]+)\s*/\s*([0-9.]+)", html)
    assert m, "no 'Score: X / Y' in the feedback"
    assert float(m.group(2)) == FULL
    return float(m.group(1))


_PROBE = r"""
import glob, json, os, sys
out = {}
for name, (how, path) in json.loads(sys.argv[1]).items():
    try:
        if how == "read":
            open(path, "rb").read(1); out[name] = "ok"
        elif how == "list":
            os.listdir(path); out[name] = "ok"
        else:
            out[name] = str(glob.glob(path))
    except OSError as exc:
        out[name] = type(exc).__name__
print(json.dumps(out))
"""


def _try_as(account: Account, targets: dict) -> dict:
    """{name: "ok" | the OSError's class | glob's list} for each (how, path), tried as ``account``."""
    run = account.run([VENV_BIN / "python", "-c", _PROBE,
                       json.dumps({k: (how, str(p)) for k, (how, p) in targets.items()})])
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)
