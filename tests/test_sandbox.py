"""autograder.sandbox: what a job can see, reach and use, at every level this machine offers.

Expected facts come from the operating system, not from the module: the
host's paths exist here but not in the job, errno values, signal numbers,
the reserved uid range (0x71000000 + 4096, sandbox's documented default),
and a listener this test opens itself.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from autograder import sandbox as S
from autograder.kernel_launcher import write_kernelspec
from autograder.packages import package_dirs

REPO = Path(__file__).resolve().parents[1]
KVLIB = REPO / "kvlib"
PY = S.python_executable()
STRONG = [lvl for lvl in ("bwrap", "unshare+setpriv") if S.probe(lvl)[0]]
LIMITED = [lvl for lvl in ("bwrap", "unshare+setpriv", "rlimits") if S.probe(lvl)[0]]
ROOT = os.geteuid() == 0
UID_LO, UID_HI = 0x71000000, 0x71000000 + 4096

if sys.platform != "linux":  # pragma: no cover
    pytest.skip("the sandbox's namespaces and limits are Linux's", allow_module_level=True)


def run(level, code, *, binds=(), stdin=b"", **limits):
    lim = dict(wall_s=30, cpu_s=20)
    lim.update(limits)
    box = S.Sandbox(level=level, limits=S.Limits(**lim), binds=S.python_binds() + [str(b) for b in binds],
                    enforce_minimum=False)
    return box.run([PY, "-I", "-S", "-c", textwrap.dedent(code)], stdin)


def out_json(res) -> dict:
    assert res.returncode == 0, (res.describe(), res.stderr.decode()[-800:])
    return json.loads(res.stdout.decode().strip().splitlines()[-1])


def _token_alive(token: str) -> bool:
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if token.encode() in f.read():
                    return True
        except OSError:
            continue
    return False


# ---------------------------------------------------------------------------
# Choosing a level
# ---------------------------------------------------------------------------
def test_detect_level_is_the_strongest_that_works():
    here = S.available_levels()
    assert here, "at least 'none' always works"
    if not os.environ.get("SANDBOX_LEVEL"):
        assert S.detect_level() == here[0]
    assert S.detect_level() in S.LEVELS
    assert list(S.LEVELS) == ["none", "rlimits", "unshare+setpriv", "bwrap"]


@pytest.mark.skipif(not shutil.which("bwrap"), reason="bubblewrap is not installed here")
def test_bubblewrap_installed_means_bwrap_level():
    # Debian's bubblewrap works both as root and unprivileged (user namespaces), so it is chosen.
    if not os.environ.get("SANDBOX_LEVEL"):
        assert S.detect_level() == "bwrap", S.describe_machine()


def _os_allows(argv) -> bool:
    try:
        return subprocess.run(argv, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def test_every_mechanism_the_os_allows_is_usable():
    """Where the bare tools work, the level built on them must work too (no silent downgrade)."""
    unshare = ["unshare", "--mount", "--pid", "--net", "--ipc", "--uts", "--fork"] + \
        ([] if ROOT else ["--user", "--map-root-user"])
    if shutil.which("unshare") and shutil.which("setpriv") and _os_allows(unshare + ["true"]):
        assert S.probe("unshare+setpriv") == (True, ""), S.probe("unshare+setpriv")
    if shutil.which("bwrap") and _os_allows(["bwrap", "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "true"]):
        assert S.probe("bwrap") == (True, ""), S.probe("bwrap")
    assert S.probe("rlimits") == (True, "")


def test_required_isolation_is_met_where_required():
    if S.require_isolation():  # CI sets REQUIRE_ISOLATION=1
        assert S.rank(S.detect_level()) >= S.rank(S.min_level()), S.describe_machine()


def test_require_isolation_turns_a_weak_level_into_an_error(monkeypatch):
    monkeypatch.setenv("REQUIRE_ISOLATION", "1")
    monkeypatch.setenv("SANDBOX_LEVEL", "rlimits")
    monkeypatch.delenv("SANDBOX_MIN_LEVEL", raising=False)
    with pytest.raises(S.IsolationError, match="REQUIRE_ISOLATION=1 needs at least 'unshare\\+setpriv'"):
        S.Sandbox()
    with pytest.raises(S.IsolationError):
        S.Sandbox(level="none")
    monkeypatch.setenv("SANDBOX_MIN_LEVEL", "rlimits")
    assert S.Sandbox().level == "rlimits"
    monkeypatch.setenv("REQUIRE_ISOLATION", "0")
    monkeypatch.setenv("SANDBOX_MIN_LEVEL", "bwrap")
    assert S.Sandbox(level="none").level == "none"
    monkeypatch.setenv("SANDBOX_LEVEL", "no-such-level")
    with pytest.raises(ValueError, match="unknown isolation level"):
        S.detect_level()


# ---------------------------------------------------------------------------
# What a job sees and can reach (strong levels)
# ---------------------------------------------------------------------------
VIEW = r'''
import errno, json, os
out = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(), "root": sorted(os.listdir("/")),
       "tmp": os.listdir("/tmp"), "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
for name, path in (("course", %(course)r), ("git", %(git)r), ("checkout_file", %(pyproject)r)):
    out[name] = os.path.exists(path)
out["kvlib_readable"] = "def kv_bytes_per_token" in open(%(formulas)r).read()
for name, path in (("write_kvlib", %(kvlib)r + "/sandbox-was-here"), ("write_tmp", "/tmp/ok")):
    try:
        open(path, "w").write("x")
        out[name] = "written"
    except OSError as e:
        out[name] = errno.errorcode[e.errno]
try:
    open(%(formulas)r, "r+b")
    out["open_code_rw"] = "opened"
except OSError as e:
    out["open_code_rw"] = errno.errorcode[e.errno]
cap = [l for l in open("/proc/self/status") if l.startswith("CapEff:")][0].split()[1]
out["capeff"] = int(cap, 16)
print(json.dumps(out))
'''


@pytest.mark.parametrize("level", STRONG)
def test_job_sees_only_its_binds(level):
    code = VIEW % {"course": str(REPO / "course"), "git": str(REPO / ".git"), "pyproject": str(REPO / "pyproject.toml"),
                   "formulas": str(KVLIB / "formulas.py"), "kvlib": str(KVLIB)}
    assert (REPO / "pyproject.toml").exists() and (REPO / ".git").exists()  # on the host they do
    v = out_json(run(level, code, binds=[KVLIB]))
    assert not v["course"] and not v["git"] and not v["checkout_file"]
    assert v["kvlib_readable"]
    assert v["write_kvlib"] in ("EROFS", "EACCES") and v["open_code_rw"] in ("EROFS", "EACCES")
    assert not (KVLIB / "sandbox-was-here").exists()
    # The job's /tmp is private; it shows only the directories leading to its read-only
    # binds when the checkout or the venv itself lives under /tmp (a CI clone may).
    bound_under_tmp = {Path(p).resolve().relative_to("/tmp").parts[0]
                       for p in (KVLIB, sys.prefix) if Path(p).resolve().is_relative_to("/tmp")}
    assert v["write_tmp"] == "written" and set(v["tmp"]) == bound_under_tmp
    # Its root holds the system directories and the first component of each bind, nothing
    # else: wherever the checkout lives (/work, /home, a CI runner's /check), only that top.
    binds = S.python_binds() + [str(KVLIB)]
    bound_tops = {Path(p).resolve().parts[1] for p in binds}
    system = {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "tmp", "proc", "dev"}
    assert set(v["root"]) <= system | bound_tops, v["root"]
    assert REPO.resolve().parts[1] in v["root"]  # kvlib is bound, so the path leading to it exists
    assert "run" not in v["root"] and "sys" not in v["root"]
    assert v["capeff"] == 0
    assert max(v["pids"]) < 100  # its own pid namespace: a handful of processes
    if ROOT:
        assert UID_LO <= v["uid"] < UID_HI and v["gid"] == v["uid"] and v["groups"] == []
    else:
        assert v["uid"] == os.getuid()


@pytest.mark.parametrize("level", STRONG)
def test_job_has_no_network(level):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    res = run(level, f'''
        import socket, json
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=2)
            print(json.dumps("connected"))
        except OSError as e:
            print(json.dumps(type(e).__name__))
    ''')
    try:
        listener.accept()
        reached = True
    except socket.timeout:
        reached = False
    listener.close()
    assert out_json(res) != "connected" and not reached


@pytest.mark.parametrize("level", LIMITED)
def test_limits(level):
    mem = run(level, '''
        try:
            x = bytearray(2 * 1024 ** 3)
            print('"allocated"')
        except MemoryError:
            print('"MemoryError"')
    ''', memory_bytes=1 << 30)
    assert out_json(mem) == "MemoryError"

    fsize = run(level, '''
        import errno, signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        try:
            with open("big", "wb") as f:
                f.write(b"x" * (4 << 20))
            print('"written"')
        except OSError as e:
            print('"%s"' % errno.errorcode[e.errno])
    ''', file_bytes=1 << 20)
    assert out_json(fsize) == "EFBIG"

    t = time.monotonic()
    cpu = run(level, "while True: pass", cpu_s=1, wall_s=20)
    assert cpu.signal in (signal.SIGXCPU, signal.SIGKILL) and not cpu.timed_out, cpu.describe()
    assert time.monotonic() - t < 10

    t = time.monotonic()
    wall = run(level, "import time; time.sleep(100)", wall_s=1)
    assert wall.timed_out and "wall-time" in wall.describe()
    assert time.monotonic() - t < 8

    out = run(level, "import sys\nwhile True: sys.stdout.write('y' * 65536)", stdout_bytes=100_000)
    assert out.overflow and len(out.stdout) == 100_000 and set(out.stdout) == {ord("y")}

    nproc = run(level, '''
        import os, time
        n = 0
        try:
            for _ in range(500):
                if os.fork() == 0:
                    time.sleep(3)
                    os._exit(0)
                n += 1
        except OSError:
            pass
        print(n)
    ''', nproc=16)
    assert int(nproc.stdout) < 16

    segv = run(level, "import ctypes; ctypes.string_at(0)")
    assert segv.signal == signal.SIGSEGV and "SIGSEGV" in segv.describe()


@pytest.mark.parametrize("level", LIMITED)
def test_stdin_reaches_the_job_and_large_output_is_kept_whole(level):
    data = os.urandom(300_000)
    res = run(level, "import sys, hashlib; d = sys.stdin.buffer.read(); print(len(d), hashlib.sha256(d).hexdigest())",
              stdin=data)
    import hashlib
    assert res.stdout.decode().split() == [str(len(data)), hashlib.sha256(data).hexdigest()]


@pytest.mark.parametrize("level", [lvl for lvl in LIMITED if lvl != "rlimits" or ROOT])
def test_no_process_outlives_its_job(level):
    token = f"kv-sandbox-stray-{os.getpid()}-{time.monotonic_ns()}"
    res = run(level, f'''
        import os, subprocess, sys
        # a daemon in its own session, detached from every pipe
        subprocess.Popen(["/bin/sh", "-c", "sleep 60; : {token}"],
                         start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print("started")
    ''')
    assert res.stdout.strip() == b"started", res.stderr[-500:]
    time.sleep(0.3)
    assert not _token_alive(token)


@pytest.mark.parametrize("level", [lvl for lvl in LIMITED if lvl != "rlimits" or ROOT])
def test_kill_minus_one_stays_inside(level):
    sentinel = subprocess.Popen(["sleep", "30"])
    try:
        res = run(level, '''
            import os, signal
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
            print("still here")
        ''')
        assert res.stdout.strip() == b"still here"
        assert sentinel.poll() is None, "kill(-1) in the job reached a process of the grader"
    finally:
        sentinel.kill()
        sentinel.wait()


@pytest.mark.parametrize("level", [lvl for lvl in LIMITED if lvl != "rlimits" or ROOT])
def test_fork_bomb_does_not_starve_a_parallel_job(level):
    bomb = '''
        import os, time
        n = 0
        try:
            for _ in range(1000):
                if os.fork() == 0:
                    time.sleep(3)
                    os._exit(0)
                n += 1
        except OSError:
            pass
        print(n)
        time.sleep(2)
    '''
    honest = '''
        import os, time
        time.sleep(0.7)            # the bomb has used up its processes by now
        kids = []
        for _ in range(8):
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            kids.append(pid)
        for pid in kids:
            os.waitpid(pid, 0)
        print("forked 8")
    '''
    results = {}
    threads = [threading.Thread(target=lambda k=k, c=c: results.__setitem__(k, run(level, c)))
               for k, c in (("bomb", bomb), ("honest", honest))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results["honest"].stdout.strip() == b"forked 8", results["honest"].stderr[-500:]
    assert int(results["bomb"].stdout) < S.Limits().nproc
    if ROOT:
        assert results["bomb"].uid != results["honest"].uid


@pytest.mark.skipif(not ROOT, reason="the reserved uid range is used only as root")
def test_job_uids_are_distinct_and_released():
    with S.job_uid() as a, S.job_uid() as b:
        assert a != b and UID_LO <= a < UID_HI and UID_LO <= b < UID_HI
    # released: taking 50 in a row never runs out
    for _ in range(50):
        with S.job_uid() as c:
            assert UID_LO <= c < UID_HI


# ---------------------------------------------------------------------------
# Unprivileged: root is never required
# ---------------------------------------------------------------------------
UNPRIV = r'''
import json, os, sys, threading
sys.path.insert(0, sys.argv[1])
from autograder import sandbox as S
out = {"levels": S.describe_machine(), "detected": S.detect_level()}
py = S.python_executable()
for lvl in ("bwrap", "unshare+setpriv"):
    if not S.probe(lvl)[0]:
        continue
    box = S.Sandbox(level=lvl, binds=S.python_binds())
    r = box.run([py, "-I", "-S", "-c",
                 "import os, socket, json\n"
                 "try:\n socket.create_connection(('127.0.0.1', 9), timeout=1); net = 'up'\n"
                 "except OSError: net = 'down'\n"
                 "print(json.dumps([os.getuid(), sorted(os.listdir('/')), net]))"])
    res = {}
    bomb = "import os,time\ntry:\n  for i in range(500):\n    if os.fork()==0:\n      time.sleep(3); os._exit(0)\nexcept OSError: pass\ntime.sleep(2)"
    honest = "import os,time\ntime.sleep(0.7)\nk=[]\nfor i in range(8):\n  p=os.fork()\n  if p==0: os._exit(0)\n  k.append(p)\n[os.waitpid(x,0) for x in k]\nprint('forked 8')"
    ts = [threading.Thread(target=lambda n=n, c=c: res.__setitem__(n, box.run([py, "-I", "-S", "-c", c])))
          for n, c in (("bomb", bomb), ("honest", honest))]
    [t.start() for t in ts]; [t.join() for t in ts]
    out[lvl] = {"view": r.stdout.decode(), "rc": r.returncode, "err": r.stderr.decode()[-300:],
                "honest": res["honest"].stdout.decode().strip()}
print(json.dumps(out))
'''  # noqa: E501


def _code_for_everyone(base: Path, script: str) -> Path:
    """``base/code``, readable by every user: ``autograder/sandbox.py`` alone and ``run.py`` holding ``script``
    (another user's Python runs it; the checkout may sit where they cannot read). Skips where ``base`` is out
    of other users' reach."""
    code = base / "code"
    (code / "autograder").mkdir(parents=True)
    shutil.copy(REPO / "autograder" / "sandbox.py", code / "autograder" / "sandbox.py")
    (code / "autograder" / "__init__.py").write_text("")
    (code / "run.py").write_text(script)
    for p in [base, *base.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    for parent in base.parents:
        if not os.stat(parent).st_mode & 0o001:
            pytest.skip(f"{parent} is not searchable by other users")
    return code


@pytest.mark.skipif(not ROOT, reason="needs root to become an unprivileged user for the test")
def test_works_unprivileged():
    system_python = "/usr/bin/python3"
    if not os.access(system_python, os.X_OK):
        pytest.skip("no system python3 an unprivileged user can run")
    import tempfile
    base = Path(tempfile.mkdtemp(prefix="kv-unpriv-"))  # pytest's tmp_path is private to root
    try:
        code = _code_for_everyone(base, UNPRIV)
        proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                               system_python, "-I", str(code / "run.py"), str(code)],
                              capture_output=True, text=True, timeout=120, cwd="/")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-1500:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    strong = [lvl for lvl in ("bwrap", "unshare+setpriv") if lvl in out]
    if not strong:
        pytest.skip(f"no namespaces for unprivileged users here: {out['levels']}")
    for lvl in strong:
        uid, root, net = json.loads(out[lvl]["view"])
        assert uid == 65534 or (lvl == "unshare+setpriv" and uid == 0), out[lvl]  # userns root, no caps
        assert "work" not in root and "home" not in root and net == "down"
        assert out[lvl]["honest"] == "forked 8", out[lvl]  # per-userns process counting


# ---------------------------------------------------------------------------
# rlimits unprivileged: every job shares the grader's uid, and RLIMIT_NPROC counts it machine-wide
# ---------------------------------------------------------------------------
def test_a_shared_uids_limit_leaves_room_for_every_job_sharing_it(monkeypatch):
    monkeypatch.setattr(S, "_threads_of_uid", lambda uid: 10)     # what the uid runs at launch
    box = S.Sandbox(level="rlimits", limits=S.Limits(nproc=16), enforce_minimum=False)
    monkeypatch.delenv("SANDBOX_SHARED_JOBS", raising=False)
    assert (box._nproc(shared_uid=True), box._nproc(shared_uid=False)) == (16 + 10, 16)
    monkeypatch.setenv("SANDBOX_SHARED_JOBS", "3")
    assert (box._nproc(shared_uid=True), box._nproc(shared_uid=False)) == (3 * 16 + 10, 16)
    for bad in ("0", "two", "-1", "1.5"):
        monkeypatch.setenv("SANDBOX_SHARED_JOBS", bad)
        with pytest.raises(S.IsolationError) as caught:
            S.check_level("rlimits")
        assert str(caught.value) == f"SANDBOX_SHARED_JOBS must be a whole number of at least 1 (got {bad!r})"


SHARED = r'''
import json, os, sys, threading, time
sys.path.insert(0, sys.argv[1])
from autograder import sandbox as S
meet = sys.argv[2]                  # a folder both jobs see: the rlimits level hides nothing
box = S.Sandbox(level="rlimits", limits=S.Limits(wall_s=60, cpu_s=30, nproc=16), binds=S.python_binds(),
                enforce_minimum=False)
py = S.python_executable()
def until(name):
    return f"while not os.path.exists({meet!r} + '/{name}'): time.sleep(0.02)\n"
# the first job launches, waits until the second (launched after it) holds 12 threads, then starts 8
first = ("import os, threading, time\n" f"open({meet!r} + '/first', 'w').close()\n" + until("second") +
         "go = threading.Event(); n = 0\n"
         "try:\n  for _ in range(8):\n    threading.Thread(target=go.wait).start(); n += 1\n"
         "except RuntimeError: pass\n"
         "go.set(); print(n)\n" f"open({meet!r} + '/done', 'w').close()\n")
second = ("import os, threading, time\n" "go = threading.Event()\n"
          "for _ in range(12): threading.Thread(target=go.wait, daemon=True).start()\n"
          f"open({meet!r} + '/second', 'w').close()\n" + until("done") + "go.set(); print(12)\n")
res = {}
one = threading.Thread(target=lambda: res.__setitem__("first", box.run([py, "-I", "-S", "-c", first])))
one.start()
deadline = time.monotonic() + 30
while not os.path.exists(meet + "/first") and time.monotonic() < deadline and one.is_alive():
    time.sleep(0.02)
res["second"] = box.run([py, "-I", "-S", "-c", second])
one.join()
bomb = ("import os, time\nn = 0\ntry:\n  for _ in range(500):\n    if os.fork() == 0:\n"
        "      time.sleep(3); os._exit(0)\n    n += 1\nexcept OSError: pass\nprint(n)\n")
res["bomb"] = box.run([py, "-I", "-S", "-c", bomb])
print(json.dumps({k: [r.stdout.decode().strip(), r.describe(), r.stderr.decode()[-300:]] for k, r in res.items()}))
'''


def test_jobs_sharing_a_uid_at_rlimits_do_not_starve_each_other():
    """Two jobs at once at level rlimits as one unprivileged uid (as root: uid 65534, what grading as a user
    does; otherwise as we are), with ``SANDBOX_SHARED_JOBS=2`` and 16 processes and threads each: the first,
    launched before the second, still starts its 8 threads while the second holds 12 (with a limit of 16
    over the uid's count at its launch alone, the second's 13 and its own 8 passed it: it started 2); a
    fork bomb, alone, is stopped below 2 x 16, past 16."""
    system_python = "/usr/bin/python3"
    if not os.access(system_python, os.X_OK):
        pytest.skip("no system python3 an unprivileged user can run")
    import tempfile
    base = Path(tempfile.mkdtemp(prefix="kv-shared-"))  # pytest's tmp_path is private to root
    try:
        code, meet = _code_for_everyone(base, SHARED), base / "meet"
        meet.mkdir(mode=0o777)
        meet.chmod(0o777)                    # both jobs write their marks here (mkdir's mode passes the umask)
        as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"] if ROOT else []
        proc = subprocess.run([*as_user, system_python, "-I", str(code / "run.py"), str(code), str(meet)],
                              capture_output=True, text=True, timeout=180, cwd="/",
                              env={"PATH": "/usr/bin:/bin", "SANDBOX_SHARED_JOBS": "2"})
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-1500:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["second"][0] == "12", out
    assert out["first"][0] == "8", out
    assert 16 <= int(out["bomb"][0]) < 2 * 16, out


# ---------------------------------------------------------------------------
# A Jupyter kernel in the sandbox (what nbgrader's autograde needs)
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("level", STRONG)
def test_sandboxed_jupyter_kernel(level, tmp_path):
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    write_kernelspec(tmp_path / "kernels", ro=package_dirs(), level=level)   # every course package
    ipc = Path("/tmp") / f"kv-ipc-test-{os.getpid()}-{level.replace('+', '-')}"  # short: a socket path has 108 bytes
    ipc.mkdir(exist_ok=True)
    km = KernelManager(kernel_name="kv-sandboxed", transport="ipc", ip=str(ipc / "kernel"),
                       kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(tmp_path / "kernels")]))
    km.start_kernel()
    kc = km.client()
    kc.start_channels()

    def run(code, timeout=60):
        msg_id = kc.execute(code)
        out = []
        while True:
            msg = kc.get_iopub_msg(timeout=timeout)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append(f"{msg['content']['ename']}\n")
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return "".join(out)

    try:
        kc.wait_for_ready(timeout=60)
        got = run("import os, socket\n"
                  "from autograder.checks import ch01\n"
                  "import kvlib\n"
                  "print(os.getuid(), kvlib.kv_bytes_per_token(32, 8, 128, 2))\n"
                  f"print(os.path.exists({str(REPO / 'course')!r}), os.path.exists({str(REPO / '.git')!r}))\n"
                  "try:\n    socket.create_connection(('127.0.0.1', 9), timeout=1)\nexcept OSError as e:\n"
                  "    print(type(e).__name__)\n").split()
        assert got[1:] == ["131072", "False", "False", "ConnectionRefusedError"] or \
            got[1:] == ["131072", "False", "False", "OSError"], got
        if ROOT:
            assert UID_LO <= int(got[0]) < UID_HI
        msg_id = kc.execute("import time\nwhile True:\n    time.sleep(0.05)")
        time.sleep(1)
        km.interrupt_kernel()  # as a message: it crosses the sandbox
        while True:
            msg = kc.get_iopub_msg(timeout=20)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "error":
                assert msg["content"]["ename"] == "KeyboardInterrupt"
                break
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        shutil.rmtree(ipc, ignore_errors=True)
    assert not km.is_alive()
