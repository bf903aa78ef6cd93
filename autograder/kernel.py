"""The grader's side of a sandboxed kernel: messages to it never block.

A kernel's code can break its own ZeroMQ connection from inside (write
garbage to every file descriptor, close them all). jupyter_client's sockets
then block for ever on the next send (the interrupt nbclient sends at a
cell's time limit, the next ``execute_request``, the shutdown request), and
the grader hangs with them. ``SandboxedKernelManager`` gives every socket a
send timeout and, where a send times out, kills the kernel instead: nbgrader
then sees a dead kernel and leaves the tests to a manual grade.

``use_in_nbgrader()`` makes nbgrader's ``Execute`` preprocessor use it in this
process (nbgrader passes its kernel manager class as a keyword, which config
cannot override, so the name it reads is replaced in its module).

Plain nbgrader (``nbgrader autograde`` with ``course/nbgrader_config.py``) gets
the same sandbox from ``sandboxed_autograde(c)``, which the course config
calls: the kernel ``kv-sandboxed``, and a manager that makes, for each kernel,
a private directory (0700) for its ipc sockets (``kernel_launcher.socket_dir``)
and one holding a fresh kernelspec of
this interpreter's sandbox (``own_sandbox``), so nothing has to be installed
and nothing stale is used. Where the sandbox cannot hide the file system
(level ``rlimits`` or ``none``), it refuses to start the kernel unless the
level was chosen explicitly (``SANDBOX_LEVEL``); ``KV_COURSE_UNSANDBOXED=1``
runs students' code on the plain ``python3`` kernel, unsandboxed, on request.
The grading CLI provides its own kernelspec and sockets (``own_sandbox`` off).
"""

from __future__ import annotations

import os
import shutil
import tempfile

import zmq
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import HBChannel
from jupyter_client.manager import AsyncKernelManager, KernelManager
from traitlets import Bool, DottedObjectName, Float, Type

SANDBOXED_KERNEL = "kv-sandboxed"
UNSANDBOXED_ENV = "KV_COURSE_UNSANDBOXED"   # =1: plain nbgrader runs students' code unsandboxed (python3)

SEND_TIMEOUT_MS = 5000   # a healthy kernel takes a message at once (ZeroMQ queues it)
UNREACHABLE = "the kernel does not take messages any more: killing it"   # logged; the grader looks for it


def _bounded(sock):
    sock.sndtimeo = SEND_TIMEOUT_MS
    return sock


class BoundedHBChannel(HBChannel):
    """The heartbeat thread: its ping times out instead of waiting for ever, and stop() does not hang."""

    def _create_socket(self) -> None:
        super()._create_socket()
        _bounded(self.socket)

    def stop(self) -> None:
        self._running = False
        self._exit.set()
        self.join(timeout=SEND_TIMEOUT_MS / 1000 + 5)
        if not self.is_alive():  # a thread stuck on a dead socket keeps it; it is a daemon
            self.close()


class SandboxedKernelClient(AsyncKernelClient):
    """A kernel client whose sends time out (``zmq.Again``) instead of blocking."""

    hb_channel_class = Type(BoundedHBChannel)

    def _create_connected_socket(self, channel, identity=None):
        return _bounded(super()._create_connected_socket(channel, identity))


class SandboxedKernelManager(AsyncKernelManager):
    """An async kernel manager whose control messages time out; an unreachable kernel is killed."""

    client_class = DottedObjectName("autograder.kernel.SandboxedKernelClient")
    client_factory = Type(klass=SandboxedKernelClient, default_value=SandboxedKernelClient)

    own_sandbox = Bool(False, config=True, help="for the kernel kv-sandboxed: make a private directory with "
                                                "its ipc sockets and a fresh kernelspec (plain nbgrader)")
    wall_s = Float(300.0, config=True, help="the whole kernel's lifetime in seconds (own_sandbox)")
    _private: str | None = None
    _sockets: str | None = None
    unreachable = False   # set when this manager killed its kernel for not taking messages

    def _make_own_sandbox(self) -> None:
        from jupyter_client.kernelspec import KernelSpecManager

        from . import sandbox
        from .kernel_launcher import write_kernelspec
        from .packages import package_dirs

        level = sandbox.detect_level()
        sandbox.check_level(level)
        if sandbox.rank(level) < sandbox.rank("unshare+setpriv") and not os.environ.get("SANDBOX_LEVEL"):
            raise sandbox.IsolationError(
                f"the sandbox here is only {level!r}, which does not hide the file system (the course's "
                f"solutions and hidden tests) from students' code; install bubblewrap (apt-get install "
                f"bubblewrap), or set SANDBOX_LEVEL={level} to accept it, or {UNSANDBOXED_ENV}=1 to grade "
                f"unsandboxed")
        from .kernel_launcher import socket_dir

        self._private = tempfile.mkdtemp(prefix="kvk-")   # the kernelspec
        self._sockets = ipc = socket_dir()
        kernels = os.path.join(self._private, "kernels")
        write_kernelspec(kernels, SANDBOXED_KERNEL, ro=package_dirs(), level=level, wall_s=self.wall_s)
        self.kernel_spec_manager = KernelSpecManager(kernel_dirs=[kernels], parent=self)
        self.transport = "ipc"
        self.ip = os.path.join(ipc, "kernel")

    async def _async_pre_start_kernel(self, **kw):
        if self.own_sandbox and self.kernel_name == SANDBOXED_KERNEL and self._private is None:
            self._make_own_sandbox()
        return await super()._async_pre_start_kernel(**kw)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart=restart)
        if not restart and self._private:
            shutil.rmtree(self._private, ignore_errors=True)
            shutil.rmtree(self._sockets, ignore_errors=True)
            self._private = self._sockets = None

    pre_start_kernel = _async_pre_start_kernel
    cleanup_resources = _async_cleanup_resources

    def _create_connected_socket(self, channel, identity=None):
        return _bounded(super()._create_connected_socket(channel, identity))

    async def _async_interrupt_kernel(self) -> None:
        try:
            await KernelManager._async_interrupt_kernel(self)
        except zmq.Again:
            self.log.error(UNREACHABLE)
            self.unreachable = True
            await self._async_kill_kernel()

    async def _async_request_shutdown(self, restart: bool = False) -> None:
        try:
            await KernelManager._async_request_shutdown(self, restart=restart)
        except zmq.Again:
            self.log.error(UNREACHABLE)
            await self._async_kill_kernel()

    interrupt_kernel = _async_interrupt_kernel
    request_shutdown = _async_request_shutdown


def sandboxed_autograde(c) -> None:
    """Configure nbgrader (config ``c``, a course's nbgrader_config.py) to run notebooks sandboxed.

    Every notebook nbgrader executes with this config (autograde, validate)
    runs in the kernel ``kv-sandboxed`` (see the module doc), limited to ten
    cells' worth of ``Execute.timeout`` (at least 5 minutes) in all; with
    ``KV_COURSE_UNSANDBOXED=1`` in the environment, on ``python3`` instead.
    """
    if os.environ.get(UNSANDBOXED_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        c.Execute.kernel_name = "python3"
        return
    use_in_nbgrader()
    timeout = c.Execute.timeout if "timeout" in c.Execute else 30
    c.Execute.kernel_name = SANDBOXED_KERNEL
    c.SandboxedKernelManager.own_sandbox = True
    c.SandboxedKernelManager.wall_s = float(max(300, 10 * int(timeout or 30)))


def use_in_nbgrader() -> None:
    """Make nbgrader's Execute preprocessor start kernels with ``SandboxedKernelManager``."""
    import nbgrader.preprocessors.execute as execute

    execute.AsyncKernelManager = SandboxedKernelManager
