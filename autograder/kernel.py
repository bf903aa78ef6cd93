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
"""

from __future__ import annotations

import zmq
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.channels import HBChannel
from jupyter_client.manager import AsyncKernelManager, KernelManager
from traitlets import DottedObjectName, Type

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

    def _create_connected_socket(self, channel, identity=None):
        return _bounded(super()._create_connected_socket(channel, identity))

    async def _async_interrupt_kernel(self) -> None:
        try:
            await KernelManager._async_interrupt_kernel(self)
        except zmq.Again:
            self.log.error(UNREACHABLE)
            await self._async_kill_kernel()

    async def _async_request_shutdown(self, restart: bool = False) -> None:
        try:
            await KernelManager._async_request_shutdown(self, restart=restart)
        except zmq.Again:
            self.log.error(UNREACHABLE)
            await self._async_kill_kernel()

    interrupt_kernel = _async_interrupt_kernel
    request_shutdown = _async_request_shutdown


def use_in_nbgrader() -> None:
    """Make nbgrader's Execute preprocessor start kernels with ``SandboxedKernelManager``."""
    import nbgrader.preprocessors.execute as execute

    execute.AsyncKernelManager = SandboxedKernelManager
