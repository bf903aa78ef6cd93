"""Run an untrusted command isolated, with hard limits, and say how isolated it was.

The grader runs a student's code through ``Sandbox.run``. What "isolated"
means depends on what the machine offers; ``detect_level()`` probes and picks
the strongest of these levels (weakest first in ``LEVELS``):

``"bwrap"``
    bubblewrap (Debian package ``bubblewrap``). A new root that holds only
    read-only binds of ``/usr``, the interpreter and the paths the caller
    names, a fresh ``/tmp`` (tmpfs), a minimal ``/dev`` and the job's own
    ``/proc``; new pid, network, ipc and uts namespaces (so no network, and
    every process of the job dies with it), a new session (no terminal).
    As root, bwrap sets up the mounts and ``setpriv`` then drops to a uid/gid
    of its own for this job (see the limits below); as another user, bwrap
    runs unprivileged in a new user namespace.
``"unshare+setpriv"``
    The same layout built by hand with util-linux: ``unshare`` (mount, pid,
    net, ipc, uts namespaces; a user namespace when not root), a tmpfs root
    with ``mount --bind`` + read-only remounts, ``chroot``, ``prlimit`` and
    ``setpriv`` (a job uid as root; no capabilities otherwise).
``"rlimits"``
    Resource limits only (``prlimit``, or ``resource`` in the child), in a
    fresh temporary directory, as a job uid when root. The file system and
    the network are NOT hidden: the student's code can read whatever that
    uid can read.
``"none"``
    Nothing (no POSIX resource limits available).

Limits (``Limits``): CPU seconds, wall seconds (enforced from outside),
address space, file size, processes, open files, and caps on the stdout and
stderr kept. ``RLIMIT_NPROC`` counts processes per user, so a fork bomb must
not share a uid with the other jobs of a parallel class run: as root every
job gets its own uid/gid from a reserved range (``SANDBOX_UID_BASE``,
default 1895825408 = 0x71000000, ``SANDBOX_UID_COUNT`` slots, locked with
``flock`` so concurrent graders never share one). Unprivileged, bwrap's
user namespace gives the same separation: since Linux 5.14 the limit is
counted per user namespace. Only ``rlimits`` run unprivileged has neither:
every job runs as the grader's own uid, so their processes and threads draw
on one count; ``SANDBOX_SHARED_JOBS`` (default 1; ``grade-class`` raises it to
its ``--jobs``) says how many jobs may run at once as that uid, and each job's
limit leaves room for all of them (``Sandbox._nproc``).

``REQUIRE_ISOLATION=1`` turns a level weaker than ``SANDBOX_MIN_LEVEL``
(default ``"unshare+setpriv"``, so bwrap or unshare+setpriv) into an
``IsolationError`` instead of a silent downgrade. ``SANDBOX_LEVEL`` forces a
level (it must be one the machine offers), e.g. to test a fallback.

Jupyter kernels (nbgrader's autograde): ``autograder.kernel_launcher``
(next to ``autograder.kernel``, the grader's side) holds the launcher;
its ``write_kernelspec`` writes a
kernelspec whose argv is ``python -I -m autograder.kernel_launcher --kernel ... --
python -m ipykernel_launcher -f {connection_file}``; the kernel talks to the
grader over ``ipc`` (Unix sockets in a directory bound read-write), since it
has no network, and is interrupted by message. The launcher (``-I``: never
code from the notebook's folder) kills the job when its ``--wall`` time is
up or when the grader that started it dies.

Root is never required. Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

LEVELS = ("none", "rlimits", "unshare+setpriv", "bwrap")  # weakest first
DEFAULT_MIN_LEVEL = "unshare+setpriv"
UID_BASE = 0x71000000          # above systemd's container ranges, below 2**31
UID_COUNT = 4096
SHARED_JOBS_ENV = "SANDBOX_SHARED_JOBS"   # jobs that may run at once as one shared uid (``shared_jobs``)
LOCK_DIRS = ("/run/kv-sandbox", os.path.join(tempfile.gettempdir(), "kv-sandbox-root"))

SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


#: The one variable of the grader's environment that reaches sandboxed code (the kernel's launcher and
#: the verdict pass it on): the student being graded (``kvcoach.learner.current_student``).
GRADING_STUDENT_ENV = "KV_COURSE_GRADING_STUDENT"


class IsolationError(RuntimeError):
    """The isolation this machine offers is weaker than required (REQUIRE_ISOLATION=1)."""


@dataclass(frozen=True)
class Limits:
    """Per-job limits. Byte sizes in bytes [B], times in seconds [s]."""

    cpu_s: int = 20                 # RLIMIT_CPU per process (SIGXCPU, then SIGKILL one second later)
    wall_s: float = 30.0            # whole job, enforced from outside (SIGKILL)
    memory_bytes: int = 1 << 30     # RLIMIT_AS per process
    file_bytes: int = 16 << 20      # RLIMIT_FSIZE
    nproc: int = 32                 # RLIMIT_NPROC (processes and threads of the job's uid)
    nofile: int = 128               # RLIMIT_NOFILE
    tmp_bytes: int = 64 << 20       # size of the job's /tmp (bwrap, unshare)
    stdout_bytes: int = 1 << 20     # stdout kept; past it the job is killed (kill_on_overflow)
    stderr_bytes: int = 64 << 10    # stderr kept (the rest is read and dropped)
    kill_on_overflow: bool = True


@dataclass
class Result:
    """What came out of one job."""

    level: str
    returncode: int | None          # the outermost process's status (negative: a signal)
    stdout: bytes
    stderr: bytes
    timed_out: bool = False         # killed at the wall-time limit
    overflow: bool = False          # stdout passed Limits.stdout_bytes
    wall_s: float = 0.0
    uid: int | None = None          # the job's uid outside, when one was allocated

    @property
    def signal(self) -> int | None:
        """The signal that ended the command (wrappers report it as 128 + N)."""
        rc = self.returncode
        if rc is None:
            return None
        if rc < 0:
            return -rc
        if self.level in ("bwrap", "unshare+setpriv") and 128 < rc < 128 + 65:
            return rc - 128
        return None

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.overflow

    def describe(self) -> str:
        """One line a person can read: how the job ended."""
        if self.timed_out:
            return f"killed after the wall-time limit ({self.wall_s:.1f} s)"
        if self.overflow:
            return "killed: it printed more than the output cap"
        sig = self.signal
        if sig is not None:
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = f"signal {sig}"
            why = {"SIGKILL": " (memory, CPU time or a kill)", "SIGXCPU": " (CPU time limit)",
                   "SIGSEGV": " (segmentation fault)", "SIGXFSZ": " (file size limit)",
                   "SIGABRT": " (abort)"}.get(name, "")
            return f"killed by {name}{why}"
        return f"exited with status {self.returncode}"


# ---------------------------------------------------------------------------
# What the machine offers
# ---------------------------------------------------------------------------
def _threads_of_uid(uid: int) -> int:
    """Processes and threads whose real uid is ``uid`` (what RLIMIT_NPROC counts), from /proc; 0 where unreadable."""
    count = 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                count += int(fields["Threads"].strip())
        except (OSError, KeyError, ValueError, IndexError):
            continue
    return count


def shared_jobs() -> int:
    """How many sandboxed jobs may run at once as one uid (``$SANDBOX_SHARED_JOBS``, default 1): the grader's
    own uid at level ``rlimits`` unprivileged. ``IsolationError`` when it is not a whole number of at least 1."""
    raw = os.environ.get(SHARED_JOBS_ENV, "").strip()
    if not raw:
        return 1
    if not raw.isdigit() or int(raw) < 1:
        raise IsolationError(f"{SHARED_JOBS_ENV} must be a whole number of at least 1 (got {raw!r})")
    return int(raw)


def _which(name: str) -> str | None:
    for d in ("/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        p = os.path.join(d, name)
        if os.access(p, os.X_OK):
            return p
    return shutil.which(name)


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def rank(level: str) -> int:
    if level not in LEVELS:
        raise ValueError(f"unknown isolation level {level!r} (known: {', '.join(LEVELS)})")
    return LEVELS.index(level)


_PROBED: dict = {}
_PROBE_LOCK = threading.Lock()


def _probe(level: str) -> tuple[bool, str]:
    """Run a trivial Python under ``level``; (works, why not)."""
    if level == "none":
        return True, ""
    if level == "rlimits":
        if os.name != "posix":
            return False, "not a POSIX system"
        try:
            import resource  # noqa: F401
        except ImportError:
            return False, "no resource module"
        if is_root() and not _which("setpriv"):
            return False, "running as root and setpriv is missing (cannot drop privileges)"
        return True, ""
    if sys.platform != "linux":
        return False, "namespaces need Linux"
    needs = {"bwrap": ["bwrap", "prlimit"], "unshare+setpriv": ["unshare", "setpriv", "prlimit", "chroot", "mount"]}
    missing = [n for n in needs[level] if not _which(n)]
    if is_root() and level == "bwrap" and not _which("setpriv"):
        missing.append("setpriv")
    if missing:
        return False, "missing: " + ", ".join(missing)
    box = Sandbox(level=level, limits=Limits(wall_s=20, cpu_s=10), binds=python_binds(), enforce_minimum=False)
    code = "import os,sys; print(os.getuid(), len(os.listdir('/')))"
    res = box.run([python_executable(), "-I", "-S", "-c", code])
    if res.returncode != 0:
        tail = res.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        return False, f"probe failed ({res.describe()}): " + " | ".join(tail)
    return True, ""


def probe(level: str) -> tuple[bool, str]:
    with _PROBE_LOCK:
        if level not in _PROBED:
            _PROBED[level] = _probe(level)
        return _PROBED[level]


def available_levels() -> list[str]:
    """Every level that works here, strongest first."""
    return [lvl for lvl in reversed(LEVELS) if probe(lvl)[0]]


def detect_level() -> str:
    """The level ``Sandbox()`` uses: ``$SANDBOX_LEVEL`` if set (it must work), else the strongest."""
    forced = os.environ.get("SANDBOX_LEVEL", "").strip()
    if forced:
        rank(forced)
        works, why = probe(forced)
        if not works:
            raise IsolationError(f"SANDBOX_LEVEL={forced} does not work here: {why}")
        return forced
    for lvl in reversed(LEVELS):
        if probe(lvl)[0]:
            return lvl
    return "none"


def min_level() -> str:
    lvl = os.environ.get("SANDBOX_MIN_LEVEL", "").strip() or DEFAULT_MIN_LEVEL
    rank(lvl)
    return lvl


def require_isolation() -> bool:
    return os.environ.get("REQUIRE_ISOLATION", "").strip().lower() in ("1", "true", "yes", "on")


def check_level(level: str) -> None:
    """Raise IsolationError when REQUIRE_ISOLATION is set and ``level`` is below SANDBOX_MIN_LEVEL, or when
    SANDBOX_SHARED_JOBS is malformed (here, in one line, before any kernel reads it)."""
    shared_jobs()
    if require_isolation() and rank(level) < rank(min_level()):
        why = {lvl: probe(lvl)[1] for lvl in LEVELS[rank(level) + 1:]}
        reasons = "; ".join(f"{k}: {v}" for k, v in why.items() if v)
        raise IsolationError(
            f"REQUIRE_ISOLATION=1 needs at least {min_level()!r}, but this machine offers only "
            f"{level!r} ({reasons}). Install bubblewrap (apt-get install -y bubblewrap) or run "
            f"where user namespaces are allowed.")


# ---------------------------------------------------------------------------
# Paths the sandbox sees
# ---------------------------------------------------------------------------
def python_executable() -> str:
    return os.path.realpath(sys.executable)


def python_binds(site_packages: bool = True) -> list[str]:
    """Read-only paths the current interpreter needs: its prefix and (optionally) site-packages."""
    paths = [os.path.realpath(sys.base_prefix)]
    exe = python_executable()
    if not exe.startswith(paths[0] + os.sep):
        paths.append(os.path.dirname(exe))
    if site_packages:
        import sysconfig
        for key in ("purelib", "platlib"):
            p = os.path.realpath(sysconfig.get_paths()[key])
            if os.path.isdir(p) and p not in paths:
                paths.append(p)
    return paths


def _system_layout() -> tuple[list[str], list[tuple[str, str]]]:
    """(read-only dirs, [(symlink path, target)]) for the basic system: /usr and its links."""
    dirs, links = ["/usr"], []
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            links.append((top, os.readlink(top)))
        elif os.path.isdir(top):
            dirs.append(top)
    for f in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
              "/etc/alternatives", "/etc/fonts"):
        if os.path.exists(f):
            dirs.append(f)
    return dirs, links


def _ancestors(path: str) -> list[str]:
    parts = Path(path).parts[1:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def _pairs(paths) -> list:
    """[(host path, path inside)] from paths or pairs; host paths resolved, missing ones dropped."""
    out = []
    for p in paths:
        if isinstance(p, (str, os.PathLike)):
            src, dst = os.path.realpath(p), os.path.abspath(p)
        else:
            src, dst = os.path.realpath(p[0]), os.path.abspath(p[1])
        if os.path.exists(src) and (src, dst) not in out:
            out.append((src, dst))
    return out


def _under(path: str, roots) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


# ---------------------------------------------------------------------------
# Job uids (root only)
# ---------------------------------------------------------------------------
def _uid_range() -> tuple[int, int]:
    base = int(os.environ.get("SANDBOX_UID_BASE", UID_BASE))
    count = int(os.environ.get("SANDBOX_UID_COUNT", UID_COUNT))
    if base < 1000 or base + count >= 2 ** 31:
        raise ValueError("SANDBOX_UID_BASE/COUNT must stay within [1000, 2**31)")
    return base, count


def _uid_in_use(uid: int) -> bool:
    """Is any process running with this real uid? (``/proc`` scan)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        return False
    for pid in entries:
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"State:") and b"Z" in line.split()[1:2]:
                        break  # a zombie holds no resources; its parent reaps it
                    if line.startswith(b"Uid:"):
                        if int(line.split()[1]) == uid:
                            return True
                        break
        except (OSError, ValueError, IndexError):
            continue
    return False


@contextlib.contextmanager
def job_uid():
    """Hold one uid of the reserved range for the duration of a job (flock'ed)."""
    base, count = _uid_range()
    lock_dir = None
    for d in LOCK_DIRS:
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
            lock_dir = d
            break
        except OSError:
            continue
    if lock_dir is None:
        raise IsolationError("no directory for the job-uid locks")
    start = random.randrange(count)
    for i in range(count):
        uid = base + (start + i) % count
        fd = os.open(os.path.join(lock_dir, f"uid-{uid}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        try:
            if _uid_in_use(uid):
                _kill_uid(uid)
                if _uid_in_use(uid):
                    continue
            yield uid
            return
        finally:
            os.close(fd)  # releases the lock
    raise IsolationError(f"all {count} job uids from {base} are busy")


def _kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid`` (root only): ``kill(-1)`` run as that uid."""
    if not is_root():
        return
    pid = os.fork()
    if pid == 0:  # only system calls between fork and _exit
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)  # every process of uid, never the caller
        except BaseException:  # noqa: BLE001
            pass
        os._exit(0)
    os.waitpid(pid, 0)


# ---------------------------------------------------------------------------
# The sandbox
# ---------------------------------------------------------------------------
@dataclass
class Sandbox:
    """Where and how to run untrusted commands.

    ``binds``: host paths made visible read-only at the same path (the
    interpreter, the code the command needs), or ``(host path, path inside)``
    pairs. ``writable``: the same, read-write (avoid; the job's /tmp is private
    and writable). ``level``:
    None = ``detect_level()``. A level below ``SANDBOX_MIN_LEVEL`` raises
    IsolationError under REQUIRE_ISOLATION=1 unless ``enforce_minimum=False``.
    """

    level: str | None = None
    limits: Limits = field(default_factory=Limits)
    binds: list = field(default_factory=python_binds)
    writable: list = field(default_factory=list)
    env: dict = field(default_factory=lambda: dict(SANDBOX_ENV))
    enforce_minimum: bool = True   # False: skip the REQUIRE_ISOLATION check (tests of weaker levels)
    tmp_base: str | None = None    # where the launcher's own temp dirs go (default: the system's)

    def __post_init__(self):
        if self.level is None:
            self.level = detect_level()
        rank(self.level)
        if self.enforce_minimum:
            check_level(self.level)
        self.binds = _pairs(self.binds)
        self.writable = _pairs(self.writable)

    def _mounts(self) -> list:
        """[(host path, path inside, writable)], parents before children."""
        dirs, _ = _system_layout()
        out = {dst: (src, dst, False) for src, dst in _pairs(dirs) + self.binds}
        out.update({dst: (src, dst, True) for src, dst in self.writable})
        kept: list = []
        for src, dst, rw in (out[k] for k in sorted(out)):
            if src == dst and any(s2 == d2 and rw2 == rw and _under(dst, [d2]) for s2, d2, rw2 in kept):
                continue  # already visible through a bind of a parent directory
            kept.append((src, dst, rw))
        return kept

    # -- command lines -----------------------------------------------------
    def _rlimit_args(self, shared_uid: bool = False) -> list[str]:
        lim = self.limits
        cpu = max(1, int(lim.cpu_s))
        return [_which("prlimit"), f"--cpu={cpu}:{cpu + 1}", f"--as={lim.memory_bytes}",
                f"--fsize={lim.file_bytes}", f"--nproc={self._nproc(shared_uid)}", f"--nofile={lim.nofile}",
                "--core=0", "--"]

    def _nproc(self, shared_uid: bool) -> int:
        """RLIMIT_NPROC for the job. It counts every process and thread of the job's real uid, machine-wide.

        A job with a uid of its own (or a user namespace) gets ``nproc``. A job that shares the grader's own uid
        (level rlimits run unprivileged) gets what that uid runs at its launch plus ``nproc`` for each of the
        ``shared_jobs()`` jobs that may run at once as that uid. The count at launch alone is not enough: the
        limit is fixed then, and the jobs launched after it (a class graded with ``--jobs N``) add their
        kernels' threads to the same count, which left an earlier kernel none (ZeroMQ's threads failed to
        start; the notebook came back needs_manual). Whatever the order of launches, the count can grow past
        a job's launch by no more than what the jobs running at once use, and an honest one uses well under
        ``nproc`` (a class of 8 graded with ``--jobs 4``: at most 92 threads of the uid in all, the grader's
        own included), so none is starved by its neighbours. Starting the jobs one at a time would not do (each
        limit is still fixed at its launch, below what later jobs add), and unprivileged there is no other uid
        to take. A fork bomb is still stopped, ``nproc`` times the jobs over the count at its launch; beside
        it, jobs that share its uid may find no room (only a uid of its own separates them: root, or bwrap)."""
        if not shared_uid:
            return self.limits.nproc
        return self.limits.nproc * shared_jobs() + _threads_of_uid(os.getuid())

    @staticmethod
    def _drop_args(uid: int | None) -> list[str]:
        setpriv = _which("setpriv")
        if uid is None:
            return [setpriv, "--no-new-privs", "--"] if setpriv else []
        return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs",
                "--inh-caps=-all", "--bounding-set=-all", "--"]

    def _bwrap_argv(self, argv, uid) -> list[str]:
        dirs, links = _system_layout()
        cmd = [_which("bwrap")]
        if uid is None:  # unprivileged: bwrap makes a user namespace
            cmd += ["--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                    "--unshare-cgroup-try", "--disable-userns"]
        else:            # root: mounts as root, then setpriv drops to the job uid
            cmd += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                    "--unshare-cgroup-try"]
        cmd += ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--clearenv"]
        for k, v in self.env.items():
            cmd += ["--setenv", k, v]
        # /tmp first: binds below it must land on top of the tmpfs, not under it.
        cmd += ["--size", str(self.limits.tmp_bytes), "--perms", "1777", "--tmpfs", "/tmp"]
        made = {"/", "/tmp", "/proc", "/dev"}
        for top, target in links:
            cmd += ["--symlink", target, top]
            made.add(top)
        bound: list[str] = []
        for src, path, rw in self._mounts():
            if not _under(path, bound):  # inside an earlier bind the destination exists already
                for anc in _ancestors(path):
                    if anc not in made:
                        cmd += ["--perms", "0755", "--dir", anc]
                        made.add(anc)
            cmd += ["--bind" if rw else "--ro-bind", src, path]
            bound.append(path)
            made.add(path)
        cmd += ["--dev", "/dev", "--proc", "/proc", "--chdir", "/tmp", "--"]
        return cmd + self._rlimit_args() + self._drop_args(uid) + list(argv)

    def _unshare_argv(self, argv, uid, root_dir) -> list[str]:
        dirs, links = _system_layout()
        q = _shquote
        lines = ["set -e", "R=" + q(root_dir), "mount --make-rprivate /",
                 f"mount -t tmpfs -o mode=0755,size={self.limits.tmp_bytes},nosuid,nodev sandbox \"$R\""]
        for top, target in links:
            lines.append(f"ln -s {q(target)} \"$R\"{q(top)}")
        # /tmp first: binds below it must land on top of the tmpfs, not under it.
        lines += ["mkdir -p \"$R/tmp\"",
                  f"mount -t tmpfs -o mode=1777,size={self.limits.tmp_bytes},nosuid,nodev tmp \"$R/tmp\""]
        for src, path, rw in self._mounts():
            make = "mkdir -p" if os.path.isdir(src) else "touch"
            if not os.path.isdir(src):
                lines.append(f"mkdir -p \"$R\"{q(os.path.dirname(path))}")
            lines.append(f"{make} \"$R\"{q(path)}")
            lines.append(f"mount --rbind {q(src)} \"$R\"{q(path)}")
            if not rw:
                lines.append(f"mount -o remount,bind,ro,nosuid,nodev \"$R\"{q(path)}")
        lines += [
            "mkdir -p \"$R/proc\" \"$R/dev\"",
            "mount -t proc -o nosuid,nodev,noexec proc \"$R/proc\"",
        ]
        for dev in ("null", "zero", "full", "random", "urandom"):
            lines.append(f"touch \"$R/dev/{dev}\" && mount --bind /dev/{dev} \"$R/dev/{dev}\"")
        lines.append("ln -s /proc/self/fd \"$R/dev/fd\"")
        inner = self._rlimit_args() + self._drop_args(uid) + list(argv)
        if uid is None:  # uid 0 of a user namespace: keep it, but with no capabilities at all
            setpriv = _which("setpriv")
            inner = self._rlimit_args() + [
                setpriv, "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all",
                "--securebits=+noroot,+noroot_locked,+no_setuid_fixup,+no_setuid_fixup_locked,"
                "+keep_caps_locked", "--"] + list(argv)
        # sh stays pid 1 (not exec'd) so the namespace dies with it.
        lines.append("cd \"$R\"")
        lines.append(f"{_which('chroot')} \"$R\" /usr/bin/env -C /tmp " + " ".join(q(a) for a in inner))
        script = "\n".join(lines)
        ns = ["--mount", "--pid", "--net", "--ipc", "--uts", "--fork", "--kill-child"]
        if uid is None:
            ns = ["--user", "--map-root-user"] + ns
        return [_which("unshare")] + ns + ["--", "/bin/sh", "-c", script]

    def _rlimits_argv(self, argv, uid) -> list[str]:
        if _which("prlimit"):
            return self._rlimit_args(shared_uid=uid is None) + (self._drop_args(uid) if uid is not None else []) \
                + list(argv)
        return list(argv)

    def _preexec(self):
        """Child-side limits when prlimit is missing (rlimits level, non-root only)."""
        lim = self.limits
        nproc = self._nproc(shared_uid=True)

        def apply():
            import resource
            cpu = max(1, int(lim.cpu_s))
            for res, value in ((resource.RLIMIT_CPU, (cpu, cpu + 1)),
                               (resource.RLIMIT_AS, (lim.memory_bytes,) * 2),
                               (resource.RLIMIT_FSIZE, (lim.file_bytes,) * 2),
                               (resource.RLIMIT_NPROC, (nproc,) * 2),
                               (resource.RLIMIT_NOFILE, (lim.nofile,) * 2),
                               (resource.RLIMIT_CORE, (0, 0))):
                with contextlib.suppress(ValueError, OSError):
                    resource.setrlimit(res, value)
        return apply

    # -- running -----------------------------------------------------------
    def needs_uid(self) -> bool:
        """As root every level but "none" runs the job as a uid of its own."""
        return is_root() and self.level in ("bwrap", "unshare+setpriv", "rlimits")

    @contextlib.contextmanager
    def prepared(self, argv, *, uid: int | None = None):
        """The wrapped command, ready to start: yields a ``Prepared``; cleans up (uid, temp dirs) after.

        ``run`` uses it; so does ``python -m autograder.kernel_launcher`` (a kernel
        launcher), which starts the command itself with inherited stdio.
        ``uid``: a job uid the caller already holds (``job_uid()``); by default
        one is taken here when ``needs_uid()``.
        """
        level = self.level
        if level == "none":
            yield Prepared(list(argv), dict(self.env), None, None, None, level)
            return
        held = contextlib.nullcontext(uid) if uid is not None or not self.needs_uid() else job_uid()
        with held as uid:
            if level == "bwrap":
                yield Prepared(self._bwrap_argv(argv, uid), {}, "/", uid, None, level)
                return
            if level == "unshare+setpriv":
                root_dir = tempfile.mkdtemp(prefix="kv-sandbox-root-", dir=self.tmp_base)
                try:
                    yield Prepared(self._unshare_argv(argv, uid, root_dir), dict(self.env), "/", uid, None, level)
                finally:
                    with contextlib.suppress(OSError):
                        os.rmdir(root_dir)
                return
            work = tempfile.mkdtemp(prefix="kv-sandbox-job-", dir=self.tmp_base)  # rlimits
            try:
                if uid is not None:
                    os.chown(work, uid, uid)
                    _kill_uid(uid)
                preexec = None if _which("prlimit") else self._preexec()
                yield Prepared(self._rlimits_argv(argv, uid), dict(self.env, HOME=work, TMPDIR=work), work,
                               uid, preexec, level)
            finally:
                if uid is not None:
                    _kill_uid(uid)
                shutil.rmtree(work, ignore_errors=True)

    def run(self, argv, stdin: bytes = b"") -> Result:
        """Run ``argv`` (absolute paths; the program must be inside a bind) with ``stdin``."""
        with self.prepared(argv) as p:
            return _communicate(p.argv, stdin, self.limits, p.level, env=p.env, cwd=p.cwd, uid=p.uid,
                                preexec=p.preexec)


@dataclass
class Prepared:
    argv: list
    env: dict
    cwd: str | None
    uid: int | None
    preexec: object
    level: str


def _shquote(s: str) -> str:
    return "'" + str(s).replace("'", "'\"'\"'") + "'"


def _communicate(cmd, stdin: bytes, limits: Limits, level: str, *, env, cwd, uid,
                 preexec=None) -> Result:
    """Start ``cmd`` in a new session, feed stdin, read capped output, enforce the wall time."""
    start = time.monotonic()
    deadline = start + limits.wall_s
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env, cwd=cwd, close_fds=True,
                                start_new_session=True, preexec_fn=preexec)
    except OSError as exc:
        return Result(level, 127, b"", f"cannot start {cmd[0]}: {exc}".encode(), wall_s=0.0, uid=uid)

    out, err = bytearray(), bytearray()
    timed_out = overflow = False
    sel = selectors.DefaultSelector()
    for f in (proc.stdout, proc.stderr):
        os.set_blocking(f.fileno(), False)
        sel.register(f, selectors.EVENT_READ)
    pending = memoryview(stdin or b"")
    if pending:
        os.set_blocking(proc.stdin.fileno(), False)
        sel.register(proc.stdin, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    exited_at = None

    def kill():
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()

    try:
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                kill()
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > 1.0:
                break  # the command is gone; something it left behind holds the pipes
            for key, _ in sel.select(timeout=min(0.25, deadline - now)):
                f = key.fileobj
                if f is proc.stdin:
                    try:
                        n = os.write(f.fileno(), pending[:65536])
                        pending = pending[n:]
                    except (BrokenPipeError, OSError):
                        pending = pending[:0]
                    if not pending:
                        sel.unregister(f)
                        f.close()
                    continue
                try:
                    chunk = os.read(f.fileno(), 65536)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    sel.unregister(f)
                    continue
                if f is proc.stdout:
                    room = limits.stdout_bytes - len(out)
                    out += chunk[:max(room, 0)]
                    if len(chunk) > room:
                        overflow = True
                        if limits.kill_on_overflow:
                            kill()
                            sel.unregister(f)
                else:
                    room = limits.stderr_bytes - len(err)
                    if room > 0:
                        err += chunk[:room]
        if proc.poll() is None:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
                kill()
        kill()  # whatever is left of the session (wrappers, strays)
        proc.wait()
    finally:
        sel.close()
        for f in (proc.stdin, proc.stdout, proc.stderr):
            with contextlib.suppress(OSError):
                f.close()
    return Result(level, proc.returncode, bytes(out), bytes(err), timed_out=timed_out,
                  overflow=overflow, wall_s=time.monotonic() - start, uid=uid)


def describe_machine() -> dict:
    """Every level and whether it works here (for reports and ``python -m autograder.sandbox``)."""
    return {lvl: (lambda r: "ok" if r[0] else r[1])(probe(lvl)) for lvl in reversed(LEVELS)}


def main(argv=None) -> int:
    """``python -m autograder.sandbox``: the levels here (``python -m autograder.kernel_launcher [...] -- CMD``
    runs CMD in the sandbox)."""
    if list(sys.argv[1:] if argv is None else argv):
        print("python -m autograder.sandbox takes no arguments (a command in the sandbox: "
              "python -m autograder.kernel_launcher [options] -- CMD)", file=sys.stderr)
        return 2
    for lvl, state in describe_machine().items():
        print(f"{lvl:16} {state}")
    print(f"selected: {detect_level()} (minimum when REQUIRE_ISOLATION=1: {min_level()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
