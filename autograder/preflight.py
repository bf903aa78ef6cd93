"""Before grading anyone: does the sandboxed kernel see the course the grader sees?

A grader whose interpreter imports the course's packages from somewhere the
sandbox does not show (a second clone whose editable install points at the
first one, a copy of the checkout run without ``pip install -e``) would run
every notebook in a kernel where ``from autograder.checks import check``
fails: every test scores 0 and looks graded. ``check`` starts the kernel's
interpreter the way the kernelspec does (same binds, same environment, no
``-I``), imports every package of ``COURSE_PACKAGES``, the checks, the
chapter's exercises and ipykernel there, and compares what it found with
this process: the same folders, the same grade ids as the course's source
notebook. Any difference is an ``EnvironmentFault`` (one line; the command
line exits 5 and records nothing).
"""

from __future__ import annotations

import json
import os
import sys

from . import notebook as _nb
from .packages import COURSE_PACKAGES, package_dirs


class EnvironmentFault(RuntimeError):
    """The grading environment cannot grade: what is wrong, in one line."""


# Runs inside the sandbox with the kernel's interpreter; standard library only until the imports.
_PROBE = r"""
import importlib, json, os, sys
packages, assignment = json.loads(sys.argv[1]), sys.argv[2]
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
print(json.dumps(out))
"""

_FIX = "run ./dev.sh setup (pip install -e .) in the checkout whose course you grade"


def check(reference: dict, assignment: str, level: str) -> dict:
    """Raise EnvironmentFault unless the sandbox imports this process's packages and checks.

    ``reference``: the course's source notebook of ``assignment``. Returns what
    the probe found (``packages``: {name: folder}, ``exercises``).
    """
    from . import sandbox

    mine = dict(zip(COURSE_PACKAGES, package_dirs()))
    binds = sandbox.python_binds() + [os.path.realpath(sys.prefix)] + list(mine.values())
    limits = sandbox.Limits(cpu_s=60, wall_s=60.0, memory_bytes=2 << 30, nproc=64)
    box = sandbox.Sandbox(level=level, limits=limits, binds=binds, enforce_minimum=False)
    run = box.run([sys.executable, "-c", _PROBE, json.dumps(list(COURSE_PACKAGES)), assignment])
    try:
        found = json.loads(run.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = run.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [run.describe()]
        raise EnvironmentFault(f"the sandboxed kernel's interpreter did not start ({tail[0]})") from None
    if found["errors"]:
        raise EnvironmentFault(f"inside the sandbox, {found['errors'][0]} (this grader imports "
                               f"{', '.join(f'{k} from {v}' for k, v in mine.items())}); {_FIX}")
    moved = [f"{name} from {found['packages'].get(name)} instead of {where}"
             for name, where in mine.items() if found["packages"].get(name) != where]
    if moved:
        raise EnvironmentFault(f"inside the sandbox, the kernel imports {'; '.join(moved)}; {_FIX}")
    tests = list(_nb.grade_points(reference))
    if found["exercises"] is not None and set(found["exercises"]) != set(tests):
        raise EnvironmentFault(f"the course's {assignment} test cells ({', '.join(tests) or 'none'}) are not "
                               f"the checks' exercises ({', '.join(found['exercises'])}): the course folder "
                               f"and autograder/checks come from different versions")
    return found
