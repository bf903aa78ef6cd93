"""The sandboxed Jupyter kernel's launcher: the kernelspec nbgrader starts, and what it runs.

``write_kernelspec`` writes a kernelspec whose argv is ``python -I -m
autograder.kernel_launcher --kernel ... -- python -m ipykernel_launcher -f
{connection_file}``; ``cli_run`` is that command: it binds the kernel's
connection file and ipc socket directory read-write, starts the kernel in the
sandbox (``autograder.sandbox``; its environment is the sandbox's own plus
``KV_COURSE_GRADING_STUDENT`` when the grader set it) and kills it when its ``--wall`` time is up or
when the grader that started it dies. The grader's side of the kernel (send
timeouts, killing a kernel that stopped answering) is ``autograder.kernel``.
Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .sandbox import GRADING_STUDENT_ENV, SANDBOX_ENV, IsolationError, Limits, Sandbox, _pairs, job_uid, python_binds


def _die_with_parent():
    """preexec: SIGKILL the child when this process dies (Linux prctl PR_SET_PDEATHSIG)."""
    import ctypes
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


def socket_dir() -> str:
    """A new private folder (0700) for one kernel's ipc sockets, directly under ``/tmp``.

    Directly under ``/tmp``: a Unix socket's path holds at most 107 bytes, and at the ``rlimits``
    level, where nothing is bound, a job uid must reach the sockets at their host path (the launcher
    hands the folder to the job uid), which it could not through a private parent folder.
    """
    return tempfile.mkdtemp(prefix="kvi-", dir="/tmp" if os.path.isdir("/tmp") else None)


def _kernel_binds(cmd: list, uid: int | None, scratch: str | None = None) -> tuple[list, list]:
    """(rw binds, [(host copy, path in the sandbox)]) for a Jupyter kernel command.

    The connection file (after ``-f``) is copied (into the socket directory, so
    that the caller's clean-up removes it even when the launcher is killed),
    readable by the job uid only, and bound at its own path; with ``transport: ipc`` the directory of the
    sockets (``ip``) is bound read-write. TCP cannot cross the new network
    namespace, so it is refused. The copy's folder and the socket directory belong to the job uid:
    where nothing is bound (``rlimits``), the kernel reads the copy and makes its sockets at their
    host paths (``_unbound_kernel``).
    """
    if "-f" not in cmd:
        raise IsolationError("--kernel needs the kernel's '-f CONNECTION_FILE' argument")
    conn = os.path.realpath(cmd[cmd.index("-f") + 1])
    with open(conn, encoding="utf-8") as f:
        info = json.load(f)
    if info.get("transport") != "ipc":
        raise IsolationError("a sandboxed kernel has no network: set KernelManager.transport = 'ipc' "
                             "(and KernelManager.ip to a per-kernel directory + '/kernel')")
    sock_dir = os.path.dirname(os.path.realpath(info["ip"]))
    scratch = tempfile.mkdtemp(prefix="kv-sandbox-kernel-", dir=scratch or sock_dir)
    copy = os.path.join(scratch, os.path.basename(conn))
    shutil.copyfile(conn, copy)
    os.chmod(copy, 0o400)
    if uid is not None:
        os.chown(copy, uid, uid)
        os.chown(scratch, uid, uid)
        os.chown(sock_dir, uid, uid)
    return [sock_dir], [(copy, conn)]


def _unbound_kernel(cmd: list, copy: str) -> list:
    """``cmd`` reading the connection file's copy: at a level without a mount namespace (``rlimits``,
    ``none``) nothing is bound, and the job uid cannot read the grader's own file (0600, root's)."""
    at = cmd.index("-f") + 1
    return cmd[:at] + [copy] + cmd[at + 1:]


def _watch(child, stop, wall_s: float, parent: int) -> None:
    """Kill ``child``'s group when the wall time is up or when our parent dies (a daemon thread).

    The launcher runs in a session of its own (jupyter_client starts kernels
    with ``start_new_session``), so a SIGKILL to the grader's process group
    does not reach it: without this, a killed grader would leave its kernel
    running. ``parent`` is the launcher's parent as it was at start-up (if the
    grader died while the launcher was still setting up, the child is killed
    at once).
    """
    deadline = time.monotonic() + wall_s if wall_s and wall_s > 0 else None

    def loop():
        while child.poll() is None:
            if os.getppid() != parent or (deadline is not None and time.monotonic() >= deadline):
                stop()
                return
            time.sleep(0.2)
    threading.Thread(target=loop, daemon=True).start()


def cli_run(args) -> int:
    """``python -m autograder.kernel_launcher [options] -- CMD ...``: run CMD in the sandbox, stdio inherited.

    Meant as a kernel launcher (a kernelspec's argv) and for trying things by
    hand. Wall time is left to the caller (nbgrader's per-cell timeout).
    """
    # Our parent as it was at start-up: jupyter_client names itself in JPY_PARENT_PID (so a
    # grader that died while this interpreter started is noticed too).
    parent = int(os.environ.get("JPY_PARENT_PID", "") or os.getppid())
    p = argparse.ArgumentParser(prog="python -m autograder.kernel_launcher")
    p.add_argument("--ro", action="append", default=[], help="a host path to bind read-only (repeatable)")
    p.add_argument("--rw", action="append", default=[], help="a host path to bind read-write (repeatable)")
    p.add_argument("--kernel", action="store_true", help="CMD is a Jupyter kernel: bind its connection file "
                                                         "and ipc socket directory")
    p.add_argument("--level", default=None)
    p.add_argument("--cpu", type=int, default=600, help="CPU seconds [s]")
    p.add_argument("--memory", type=int, default=2 << 30, help="address space [B]")
    p.add_argument("--nproc", type=int, default=64, help="processes and threads")
    p.add_argument("--wall", type=float, default=0, help="wall seconds for the whole command, then SIGKILL "
                                                         "(0: none; nbgrader's per-cell timeout still applies)")
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for the command")
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    ns = p.parse_args(args)
    cmd = ns.cmd[1:] if ns.cmd[:1] == ["--"] else ns.cmd
    if not cmd:
        p.error("no command after --")
    binds = python_binds() + [os.path.realpath(sys.prefix)] + ns.ro
    limits = Limits(cpu_s=ns.cpu, wall_s=float("inf"), memory_bytes=ns.memory, nproc=ns.nproc)
    env = dict(SANDBOX_ENV, **dict(kv.split("=", 1) for kv in ns.env))
    if os.environ.get(GRADING_STUDENT_ENV):   # the student nbgrader grades (the course's preprocessor)
        env[GRADING_STUDENT_ENV] = os.environ[GRADING_STUDENT_ENV]
    box = Sandbox(level=ns.level, limits=limits, binds=binds, writable=list(ns.rw), env=env)
    scratch = None
    try:
        with (job_uid() if box.needs_uid() else contextlib.nullcontext(None)) as uid:
            if ns.kernel:
                rw, files = _kernel_binds(cmd, uid)
                scratch = os.path.dirname(files[0][0])
                box.tmp_base = rw[0]  # temp dirs of the launcher live with the sockets
                box.writable = box.writable + _pairs(rw)
                box.binds = box.binds + _pairs(files)
                if box.level in ("rlimits", "none"):
                    cmd = _unbound_kernel(cmd, files[0][0])
            with box.prepared(cmd, uid=uid) as prep:
                # A kernel talks over its sockets; what it prints on fd 1 before ipykernel takes it
                # over (a banner, since it sees no parent) must not land in the grader's stdout.
                child = subprocess.Popen(prep.argv, env=prep.env, cwd=prep.cwd, start_new_session=True,
                                         preexec_fn=_die_with_parent, stdout=2 if ns.kernel else None)

                def stop(signum=None, frame=None):
                    with contextlib.suppress(OSError):
                        os.killpg(child.pid, signal.SIGKILL)
                for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                    signal.signal(sig, stop)
                _watch(child, stop, ns.wall, parent)
                rc = child.wait()
                with contextlib.suppress(OSError):
                    os.killpg(child.pid, signal.SIGKILL)
                return rc if rc >= 0 else 128 - rc
    finally:
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)


def write_kernelspec(kernels_dir, name: str = "kv-sandboxed", *, ro=(), level: str | None = None,
                     python: str | None = None, cpu_s: int = 600, memory_bytes: int = 2 << 30,
                     nproc: int = 64, wall_s: float = 0) -> Path:
    """A Jupyter kernelspec whose kernel runs in this sandbox; returns its directory.

    Put ``kernels_dir``'s parent on ``JUPYTER_PATH`` (or pass a KernelSpecManager),
    select it by ``name`` (nbgrader: ``Execute.kernel_name``), and give the
    KernelManager ``transport = "ipc"`` and ``ip = <a directory of its own>/kernel``.
    ``ro``: extra host paths the kernel needs (kvlib, autograder). Interrupts go
    as messages (``interrupt_mode``), which cross the sandbox. ``cpu_s``,
    ``memory_bytes``, ``nproc``: per-process limits of the kernel's job;
    ``wall_s``: the whole kernel's lifetime (0: no limit), after which it is
    killed (nbgrader then reports a dead kernel).
    """
    python = python or sys.executable
    # -I: the launcher runs on the host (as root, when grading as root) with the notebook's folder
    # as its working directory; without -I, ``python -m`` would import an ``autograder/`` a
    # student put in that folder instead of ours.
    argv = [python, "-I", "-m", "autograder.kernel_launcher", "--kernel", f"--cpu={cpu_s}",
            f"--memory={memory_bytes}", f"--nproc={nproc}"]
    if wall_s:
        argv.append(f"--wall={wall_s:g}")
    if level:
        argv.append(f"--level={level}")
    for path in ro:
        argv += ["--ro", str(path)]
    argv += ["--", python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec = Path(kernels_dir) / name
    spec.mkdir(parents=True, exist_ok=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": argv, "display_name": f"Python 3 (sandboxed: {level or 'strongest'})", "language": "python",
        "interrupt_mode": "message", "metadata": {"debugger": False}}, indent=1))
    return spec


if __name__ == "__main__":
    sys.exit(cli_run(sys.argv[1:]))
