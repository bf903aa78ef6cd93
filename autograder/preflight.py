"""Before grading anyone: does the sandboxed kernel start, and see the course the grader sees?

A kernel that cannot start at the chosen sandbox level (a job uid that cannot
read the kernel's connection file or reach its sockets, a level the machine
half offers) would kill every notebook; a grader whose interpreter imports the
course's packages from somewhere the sandbox does not show (a second clone
whose editable install points at the first one, a copy of the checkout run
without ``pip install -e``) would run every notebook in a kernel where ``from
autograder.checks import check`` fails: every test scores 0 and looks graded.
``check`` starts a real kernel the way the grader starts each notebook's (the
kernelspec of ``autograder.kernel_launcher``, its sockets in
``socket_dir()``, the same level, binds and job uid), imports every package of
``COURSE_PACKAGES``, the checks, the chapter's exercises and ipykernel there,
and compares what it found with this process: the same folders, the same
grade ids as the course's automatically graded test cells. Any difference is
an ``EnvironmentFault`` (one line; the command line exits 5 and records
nothing).
"""

from __future__ import annotations

import json
import os

from . import notebook as _nb
from .packages import COURSE_PACKAGES, package_dirs


class EnvironmentFault(RuntimeError):
    """The grading environment cannot grade: what is wrong, in one line."""


# Runs in the sandboxed kernel; standard library only until the imports.
_PROBE = r"""
import importlib, json, os, sys
packages, assignment = json.loads(%r), %r
out = {"packages": {}, "errors": [], "exercises": None}
for name in packages + ["autograder.checks", "ipykernel"]:
    try:
        module = importlib.import_module(name)
        if name in packages:
            out["packages"][name] = os.path.realpath(os.path.dirname(module.__file__))
    except BaseException as exc:
        out["errors"].append(f"import {name}: {type(exc).__name__}: {exc}")
if not out["errors"]:
    try:
        from autograder.checks import chapter_exercises
        out["exercises"] = list(chapter_exercises(assignment))
    except LookupError:
        out["exercises"] = None
    except BaseException as exc:
        out["errors"].append(f"the checks of {assignment}: {type(exc).__name__}: {exc}")
print("KV-PREFLIGHT " + json.dumps(out))
"""

_FIX = "run ./dev.sh setup (pip install -e .) in the checkout whose course you grade"


def check(reference: dict, assignment: str, level: str, timeout: float = 60.0) -> dict:
    """Raise EnvironmentFault unless a sandboxed kernel starts at ``level`` and imports this process's
    packages and checks.

    ``reference``: the course's source notebook of ``assignment``. Returns what
    the probe found (``packages``: {name: folder}, ``exercises``).
    """
    mine = dict(zip(COURSE_PACKAGES, package_dirs()))
    text = _run_in_kernel(_PROBE % (json.dumps(list(COURSE_PACKAGES)), assignment), level, timeout)
    lines = [line for line in text.splitlines() if line.startswith("KV-PREFLIGHT ")]
    try:
        found = json.loads(lines[-1][len("KV-PREFLIGHT "):])
    except (ValueError, IndexError):
        raise EnvironmentFault(f"the sandboxed kernel ({level}) ran the probe but printed no result "
                               f"({(text.strip().splitlines() or ['nothing'])[-1][:200]})") from None
    if found["errors"]:
        raise EnvironmentFault(f"inside the sandbox, {found['errors'][0]} (this grader imports "
                               f"{', '.join(f'{k} from {v}' for k, v in mine.items())}); {_FIX}")
    moved = [f"{name} from {found['packages'].get(name)} instead of {where}"
             for name, where in mine.items() if found["packages"].get(name) != where]
    if moved:
        raise EnvironmentFault(f"inside the sandbox, the kernel imports {'; '.join(moved)}; {_FIX}")
    tests = list(_nb.autograded_points(reference))
    if found["exercises"] is not None and set(found["exercises"]) != set(tests):
        raise EnvironmentFault(f"the course's {assignment} test cells ({', '.join(tests) or 'none'}) are not "
                               f"the checks' exercises ({', '.join(found['exercises'])}): the course folder "
                               f"and autograder/checks come from different versions")
    return found


def _run_in_kernel(code: str, level: str, timeout: float) -> str:
    """What ``code`` printed in a kernel started as the grader starts one (EnvironmentFault if it could not)."""
    import shutil
    import subprocess
    import tempfile

    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    from .kernel import SANDBOXED_KERNEL
    from .kernel_launcher import socket_dir, write_kernelspec

    spec, sockets = tempfile.mkdtemp(prefix="kvp-"), socket_dir()
    km = kc = None
    with tempfile.TemporaryFile() as stderr:
        try:
            write_kernelspec(os.path.join(spec, "kernels"), SANDBOXED_KERNEL, ro=package_dirs(), level=level,
                             wall_s=timeout)
            km = KernelManager(kernel_name=SANDBOXED_KERNEL, transport="ipc", ip=os.path.join(sockets, "kernel"),
                               kernel_spec_manager=KernelSpecManager(kernel_dirs=[os.path.join(spec, "kernels")]))
            km.start_kernel(stdout=subprocess.DEVNULL, stderr=stderr)
            kc = km.client()
            kc.start_channels()
            kc.wait_for_ready(timeout=timeout)
            printed: list = []
            kc.execute_interactive(code, timeout=timeout, output_hook=lambda msg: printed.append(
                msg["content"].get("text", "") if msg["msg_type"] == "stream" else ""))
            return "".join(printed)
        except Exception as exc:  # noqa: BLE001 -- whatever stops the kernel, said in one line
            stderr.seek(0)
            said = [line for line in stderr.read().decode("utf-8", "replace").splitlines() if line.strip()]
            cause = said[-1].strip() if said else f"{type(exc).__name__}: {exc}"
            raise EnvironmentFault(f"the sandboxed kernel does not start at level {level} "
                                   f"({cause[:240]}): it would stop every notebook") from None
        finally:
            if kc is not None:
                kc.stop_channels()
            if km is not None and km.has_kernel:
                km.shutdown_kernel(now=True)
            shutil.rmtree(spec, ignore_errors=True)
            shutil.rmtree(sockets, ignore_errors=True)
