"""Tripwires: while a learner's function runs, every kvlib function raises instead of computing.

Every kvlib function (module functions, ``load_model``/``parse_config``,
``ModelSpec`` methods and properties) has its code swapped for a tripwire that
raises "build this by hand: exercise X must not call kvlib.<name>". The code
object is swapped, not the module attribute, so ``from kvlib import
kv_bytes_per_token`` done earlier is caught too; a call that the learner
catches is still recorded (``calls``) and fails. Everything is restored in a
``finally``. Reading a bundled config, byte units, dtype sizes and the GPU
table stay allowed.

Value exercises (ch09's graded drills) bind a number in the answer cell, with
no function for the tripwires to run. Their guard is ``drill_reads``: kvlib's
drill objects note each answer that code outside the course's packages read
(``Problem.answer``, the answer ``Problem.check`` shows, ``repr``), and a value
that equals the answer of the learner's own problem after such a read is
refused, in the kernel's check and in the outside verdict alike.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import types

import kvlib

# kvlib modules and functions a learner may use inside a graded function:
# reading a bundled config, byte units, dtype sizes, the GPU table.
ALLOWED_MODULES = ("kvlib.units", "kvlib.dtypes", "kvlib.gpus")
ALLOWED_FUNCTIONS = ("kvlib.config.bundled_config", "kvlib.config.bundled_models",
                     "kvlib.config.resolve_model_id", "kvlib.config._data_dir", "kvlib.config._read_json",
                     # ch05's chaining exercise builds on the one-block hash (block_hashes stays tripped)
                     "kvlib.prefix_cache.hash_block", "kvlib.prefix_cache._encode")


class KvlibCalled(Exception):
    """Raised by a tripwire: the learner's function called kvlib."""


_TRIPS: list = []


def tripped(name: str, grade_id: str):
    """Called by a tripwire in place of a kvlib function: record it and raise."""
    _TRIPS.append(name)
    raise KvlibCalled(f"build this by hand: exercise {grade_id} must not call {name}")


def _public_name(module_name: str, qualname: str, obj) -> str:
    top = qualname.split(".")[0]
    if getattr(kvlib, top, None) is obj:
        return f"kvlib.{qualname}"
    return f"{module_name}.{qualname}"


def _kvlib_functions():
    """(display name, function) for every function kvlib defines, bar the allowed ones."""
    found, seen = [], set()
    for name in getattr(kvlib, "_SUBMODULES", ()):   # lazy submodules: a call inside the answer would load them
        importlib.import_module(f"kvlib.{name}")        # untripped otherwise

    def add(name, fn, module_name):
        if not isinstance(fn, types.FunctionType) or id(fn) in seen:
            return
        if fn.__module__ != module_name or fn.__closure__:
            return
        if f"{module_name}.{fn.__qualname__}" in ALLOWED_FUNCTIONS:
            return
        seen.add(id(fn))
        found.append((name, fn))

    for module_name, module in sorted(sys.modules.items()):
        if module is None or not (module_name == "kvlib" or module_name.startswith("kvlib.")):
            continue
        if module_name in ALLOWED_MODULES:
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, types.FunctionType):
                add(_public_name(module_name, value.__qualname__, value), value, module_name)
            elif isinstance(value, type) and value.__module__ == module_name:
                for meth_name, member in vars(value).items():
                    if meth_name.startswith("__"):
                        continue
                    if isinstance(member, (staticmethod, classmethod)):
                        member = member.__func__
                    elif isinstance(member, property):
                        member = member.fget
                    if isinstance(member, types.FunctionType):
                        label = _public_name(module_name, f"{value.__name__}.{meth_name}", value)
                        add(label, member, module_name)
    return found


def _tripwire_code(fn: types.FunctionType, name: str, grade_id: str) -> types.CodeType:
    return _compiled_tripwire(fn.__name__, fn.__qualname__, name, grade_id)


@functools.lru_cache(maxsize=4096)   # a check swaps every kvlib function twice (visible, hidden): compile once
def _compiled_tripwire(fn_name: str, qualname: str, name: str, grade_id: str) -> types.CodeType:
    source = (f"def {fn_name}(*args, **kwargs):\n"
              f"    __import__({__name__!r}, fromlist=['tripped']).tripped({name!r}, {grade_id!r})\n")
    namespace: dict = {}
    exec(compile(source, "<kvlib tripwire>", "exec"), namespace)
    return namespace[fn_name].__code__.replace(co_qualname=qualname)


@contextlib.contextmanager
def kvlib_tripwires(grade_id: str):
    """Swap every kvlib function's code for a tripwire; restore it on the way out."""
    saved = []
    try:
        for name, fn in _kvlib_functions():
            saved.append((fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__))
            fn.__defaults__, fn.__kwdefaults__ = None, None
            fn.__code__ = _tripwire_code(fn, name, grade_id)
        yield
    finally:
        for fn, code, defaults, kwdefaults in reversed(saved):
            fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, defaults, kwdefaults




def calls() -> list:
    """The kvlib functions tripped since the last ``reset`` (sorted, once each)."""
    return sorted(set(_TRIPS))


def reset() -> None:
    del _TRIPS[:]


#: The name a refused value exercise reports (``kvlib_calls`` of its record).
DRILL_ANSWER = "kvcoach.drills.Problem.answer"


def drill_reads(topic: str, student: str | None) -> list:
    """``[DRILL_ANSWER]`` when code outside the course's packages read the answer of ``student``'s own
    problem on ``topic`` (``kvcoach.drills.answer_reads``), else ``[]``. Nothing is imported: a kernel that never
    loaded ``kvcoach.drills`` read nothing from it."""
    drills = sys.modules.get("kvcoach.drills")
    if drills is None or not student or not hasattr(drills, "answer_reads"):
        return []
    try:
        seed = drills.seed_for_student(f"{student}/{topic}")
    except Exception:  # noqa: BLE001 -- an id no problem can be drawn for: nothing was read
        return []
    return [DRILL_ANSWER] if (topic, seed) in drills.answer_reads() else []
