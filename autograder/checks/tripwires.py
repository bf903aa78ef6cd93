"""Tripwires: while a learner's function runs, every kvlib function raises instead of computing.

Every kvlib function (module functions, ``load_model``/``parse_config``,
``ModelSpec`` methods and properties) has its code swapped for a tripwire that
raises "build this by hand: exercise X must not call kvlib.<name>". The code
object is swapped, not the module attribute, so ``from kvlib import
kv_bytes_per_token`` done earlier is caught too; a call that the learner
catches is still recorded (``calls``) and fails. Everything is restored in a
``finally``. Reading a bundled config, byte units, dtype sizes and the GPU
table stay allowed. The coach's functions (``kvcoach``: its slip catalogue
recomputes every exercise's answer) are tripped and watched like kvlib's.

Value exercises (ch09's graded drills) bind a number in the answer cell, with
no function for the tripwires to run. Their guard is ``drill_reads``: kvlib's
drill objects note each answer that code outside the course's packages read
(``Problem.answer``, the answer ``Problem.check`` shows, ``repr``), and a value
that equals the answer of the learner's own problem after such a read is
refused, in the kernel's check and in the outside verdict alike.

kvlib under another name. Swapping code objects reaches only the functions of
the modules named ``kvlib.*``. A learner could load kvlib's files under another
module name (``importlib.util.spec_from_file_location("k", ".../kvlib/formulas.py")``,
``exec`` of a file's source) or rebuild a function from its code object
(``types.FunctionType(kv.formulas.kv_bytes_per_token.__code__, {...})``). So,
while the learner's function runs (``watching``), a trace hook (``sys.settrace``,
calls only) also watches every Python call: a call from outside kvlib into code that is
kvlib's (compiled from a file of the kvlib package, under any module name; or
a copy of one of its documented functions compiled from its source elsewhere:
the same name, bytecode, constants with the docstring, and names) is recorded
like a tripwire, and the case fails. kvlib's calls into its own code are not
counted, so the allowed functions keep working. An audit hook
(``sys.addaudithook``, installed when this module is imported, and which
nothing can remove) refuses ``sys.settrace`` to the learner's code while a
check runs, and a watch found switched off afterwards counts as a kvlib call
(``WATCH_OFF``). While the learner's function runs, a debugger's trace hook is
set aside.

What this cannot stop (it is a guard rail in the learner's own process, not a
sandbox): kvlib's source pasted into the answer cell and edited (it is then the
learner's own code, whatever its quality), code objects rebuilt with other
constants (``code.replace``), work done in another process, and code that goes
after the checker itself (its frames, its closures, ``ctypes``). The grader's
outside check (``autograder.verdict``) runs the same watch in the sandbox, where
the answer cells run after this module is imported.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
import threading
import types

import kvcoach
import kvlib

#: The packages whose code a graded function must not call: kvlib, and the coach beside it (its slip catalogue
#: recomputes the answers; it was part of kvlib until it moved out, and is tripped and watched the same way).
TRIPPED_PACKAGES = (kvlib, kvcoach)
_TRIPPED_NAMES = tuple(package.__name__ for package in TRIPPED_PACKAGES)

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
        if module is None or module_name.split(".")[0] not in _TRIPPED_NAMES:
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
    """Swap every kvlib function's code for a tripwire, and learn kvlib's code for ``watching``; restore the
    functions on the way out."""
    saved = []
    try:
        functions = _kvlib_functions()
        _WATCH.learn(functions)
        for name, fn in functions:
            saved.append((fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__))
            fn.__defaults__, fn.__kwdefaults__ = None, None
            fn.__code__ = _tripwire_code(fn, name, grade_id)
        yield
    finally:
        for fn, code, defaults, kwdefaults in reversed(saved):
            fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, defaults, kwdefaults


# --- the watch: kvlib's code under any name ---------------------------------------------------------
#: What a case records when the learner's code switched the watch off (or kept it from starting).
WATCH_OFF = "sys.settrace (the check's watch on kvlib)"
_ALLOWED = "allowed"


def _code_key(code: types.CodeType) -> tuple:
    """What a copy of a function compiled from the same source shares with it, wherever and whenever it was
    compiled: name, bytecode, constants (the docstring first; nested code by its own key), names."""
    consts = tuple(_code_key(c) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    return (code.co_name, code.co_code, consts, code.co_names, code.co_varnames)


class _Watch:
    """The trace hook's state (one per process): which code is kvlib's (the module doc)."""

    def __init__(self):
        self.armed = False
        self.roots = {os.path.dirname(os.path.realpath(package.__file__)) + os.sep: package.__name__
                      for package in TRIPPED_PACKAGES}
        self.public: dict = {}          # (module, qualname) -> the name a tripwire reports
        self.copies: dict = {}          # _code_key -> that name, for kvlib's documented functions
        self.copy_names: set = set()    # their co_name (a cheap first test)
        self.learned: set = set()       # ids of the functions already learned
        self.modules: dict = {}         # co_filename -> kvlib module name, or None
        self.kinds: dict = {}           # id(code) -> (code, kind): None, _ALLOWED or a name
        self.previous = (None, None)
        self.trace = self._make_trace()

    def learn(self, functions) -> None:
        """Note kvlib's functions (before their code is swapped): their names, and the key of each one that
        has a docstring (an undocumented helper is too small to tell from a learner's own)."""
        for name, fn in functions:
            if id(fn) in self.learned:
                continue
            self.learned.add(id(fn))
            code = fn.__code__
            self.public[(fn.__module__, code.co_qualname)] = name
            if fn.__doc__:
                self.copies[_code_key(code)] = name
                self.copy_names.add(code.co_name)

    def module_of(self, filename: str):
        """The kvlib module a code object's file is, whatever name it was loaded under (None: not kvlib)."""
        if filename not in self.modules:
            path = os.path.realpath(filename) if filename[:1] not in ("<", "") else filename
            module = None
            for root, package in self.roots.items():
                if path.startswith(root) and path.endswith(".py"):
                    parts = path[len(root):-3].split(os.sep)
                    module = ".".join([package, *parts[:-1]] + ([] if parts[-1] == "__init__" else [parts[-1]]))
            self.modules[filename] = module
        return self.modules[filename]

    def kind(self, code: types.CodeType):
        """None (not kvlib's), ``_ALLOWED`` (an allowed module or function), or the name to report."""
        hit = self.kinds.get(id(code))
        if hit is not None and hit[0] is code:
            return hit[1]
        module = self.module_of(code.co_filename)
        kind = None
        if module is not None:
            owner = code.co_qualname.split(".<locals>")[0]
            if module in ALLOWED_MODULES or f"{module}.{owner}" in ALLOWED_FUNCTIONS:
                kind = _ALLOWED
            else:
                kind = self.public.get((module, code.co_qualname)) or f"{module}.{code.co_qualname}"
        elif code.co_name in self.copy_names:
            kind = self.copies.get(_code_key(code))
        self.kinds[id(code)] = (code, kind)
        return kind

    def _make_trace(self):
        """The trace hook (``sys.settrace``; Python calls only, no line events): a call into kvlib's code from
        code that is not kvlib's is recorded. A closure, for speed: it runs on every call the learner makes."""
        kinds, kind, trips = self.kinds, self.kind, _TRIPS

        def trace(frame, event, arg):
            code = frame.f_code
            hit = kinds.get(id(code))
            found = hit[1] if hit is not None and hit[0] is code else kind(code)
            if found is None or found is _ALLOWED:
                return None
            caller = frame.f_back
            while caller is not None:        # kvlib calling its own code (an allowed function's helpers)
                if kind(caller.f_code) is not None:
                    return None
                caller = caller.f_back
            trips.append(found)
            return None
        return trace

    def _set(self, hook) -> bool:
        """The one caller of ``sys.settrace`` the audit hook lets through while a check runs."""
        try:
            sys.settrace(hook)
        except Exception:  # noqa: BLE001 -- an audit hook of the learner's refused it
            return False
        return sys.gettrace() is hook

    def arm(self) -> None:
        self.previous = (sys.gettrace(), threading.gettrace())
        self.armed = True
        threading.settrace(self.trace)
        if not self._set(self.trace):
            _TRIPS.append(WATCH_OFF)

    def disarm(self) -> None:
        """Put the previous trace hooks back; True when the watch was still in place."""
        if not self.armed:
            return True
        intact = sys.gettrace() is self.trace
        self.armed = False
        trace, threads = self.previous
        self.previous = (None, None)
        self._set(trace)
        threading.settrace(threads)
        return intact

    def audit(self, event: str, args) -> None:
        """The audit hook: while a check runs, only the watch itself may change the trace hook."""
        if event != "sys.settrace" or not self.armed:
            return
        if sys._getframe(1).f_code is not self._set.__code__:
            _TRIPS.append(WATCH_OFF)
            raise RuntimeError("sys.settrace is refused while a check runs (it would hide calls into kvlib)")


_WATCH = _Watch()
sys.addaudithook(_WATCH.audit)


@contextlib.contextmanager
def watching():
    """Watch for kvlib's code under other names while the learner's function runs (inside
    ``kvlib_tripwires``, which learns kvlib's functions first); a watch switched off counts as a kvlib call."""
    _WATCH.arm()
    try:
        yield
    finally:
        if not _WATCH.disarm():
            _TRIPS.append(WATCH_OFF)


def calls() -> list:
    """The kvlib functions tripped since the last ``reset`` (sorted, once each); ``WATCH_OFF`` when the
    learner's code switched the watch off."""
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
