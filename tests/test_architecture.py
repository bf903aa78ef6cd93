"""The course's packages as layers, and what each may import, held on every import of every module.

    kvlib        the reference: one function per formula, configs, GPUs, vLLM's and SGLang's accounting,
                 the ``kvlib`` command line. Imports nothing of the course, and does not even name it.
    kvcoach      the coach: the slip catalogue, the drills and their history, the answer guard,
                 ``kvlib drill`` (an entry point of the ``kvlib.commands`` group). Imports kvlib only.
    kvdisplay    the notebook side: tables, folds, explorers, plots. Imports kvlib and kvcoach, never the
                 autograder (the learner's id comes from ``kvcoach.learner``).
    autograder   grading a submission or a class, sandboxed, with feedback that names the slip.

Each module's imports are read from its source with the AST: at module level and inside functions,
``import x`` and ``from x import y`` (relative ones resolved), and ``importlib.import_module("x")`` or
``__import__("x")`` with a literal name. A rule is one line of ``NEVER_IMPORTS``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: Everything of the course a package could reach for: its packages, and the repository's tools and tests.
COURSE = ("kvlib", "kvcoach", "kvdisplay", "autograder", "tools", "tests", "benchmarks")

#: The one rule of each layer: the packages it never imports (lowest layer first).
NEVER_IMPORTS = {
    "kvlib": ("kvcoach", "kvdisplay", "autograder", "tools", "tests", "benchmarks"),
    "kvcoach": ("kvdisplay", "autograder", "tools", "tests", "benchmarks"),
    "kvdisplay": ("autograder", "tools", "tests", "benchmarks"),
}

#: Import circles still to be cut (the modules of each, sorted; one is removed here once it is cut); any other
#: circle, of two modules or more, fails.
CIRCLES_TO_CUT: set = set()


def module_name(path: Path) -> str:
    """``kvlib/vllm/log.py`` -> ``kvlib.vllm.log``; a package's ``__init__.py`` is the package."""
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name of a relative import ``from .<name>`` (``level`` dots) in ``module``."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[:len(base) - level + 1]
    return ".".join(base + ([name] if name else []))


def imports(source: str, module: str, is_package: bool = False) -> list[tuple[int, str]]:
    """``(line, absolute module name)`` of every import in ``source``, the module ``module``.

    ``from a import b`` gives ``a.b`` (b may be a module); ``importlib.import_module("a")`` and
    ``__import__("a")`` with a literal name give ``a`` (a relative literal is resolved against
    ``module``'s package).
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = node.module or "" if not node.level else _absolute(module, is_package, node.level, node.module)
            found += [(node.lineno, f"{target}.{alias.name}" if target else alias.name) for alias in node.names]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in ("import_module", "__import__"):
                name = node.args[0].value
                if name.startswith("."):
                    level = len(name) - len(name.lstrip("."))
                    name = _absolute(module, is_package, level, name.lstrip(".") or None)
                found.append((node.lineno, name))
    return found


def package_modules(package: str) -> list[Path]:
    return sorted(p for p in (REPO / package).rglob("*.py") if "__pycache__" not in p.parts)


def _module_imports(path: Path) -> list[tuple[int, str]]:
    return imports(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")


def violations(package: str, never: tuple) -> list[str]:
    """``path:line imports name`` for each import of ``package``'s modules that reaches one of ``never``."""
    found = []
    for path in package_modules(package):
        for line, name in _module_imports(path):
            if name.split(".")[0] in never:
                found.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    return found


@pytest.mark.parametrize("package", NEVER_IMPORTS)
def test_each_layer_imports_only_what_is_below_it(package):
    assert (REPO / package / "__init__.py").is_file(), f"{package} is no package of this repository"
    assert package_modules(package), package
    found = violations(package, NEVER_IMPORTS[package])
    assert found == [], f"{package} must never import {', '.join(NEVER_IMPORTS[package])}:\n" + "\n".join(found)


def test_the_reference_library_does_not_name_the_course():
    """kvlib holds no string that names a package above it (a module to import by name, an entry point's
    target, a list of the course's packages): it finds its ``drill`` command through the entry-point group.
    (A path into the repository, such as the engine child ``tools/engine_child.py`` it runs, is no import.)"""
    never = [name for name in NEVER_IMPORTS["kvlib"] if name in ("kvcoach", "kvdisplay", "autograder")]
    found = []
    for path in package_modules("kvlib"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                head = node.value.split(":")[0].split(".")[0]
                if head in never and (node.value == head or node.value[len(head)] in ".:"):
                    found.append(f"{path.relative_to(REPO)}:{node.lineno} names {node.value!r}")
    assert found == [], "kvlib names the course:\n" + "\n".join(found)


def test_the_layers_are_the_installed_course_packages():
    from autograder.packages import COURSE_PACKAGES
    lowest = list(COURSE_PACKAGES[:len(NEVER_IMPORTS)])
    assert list(NEVER_IMPORTS) == lowest, f"the layers {list(NEVER_IMPORTS)} are not the lowest course packages " \
                                          f"{lowest}"
    assert set(COURSE_PACKAGES) <= set(COURSE)


def _import_graph() -> dict:
    """``{module: the course's modules it imports}`` (``from a import name``: module a)."""
    paths = [path for package in ("kvlib", "kvcoach", "kvdisplay", "autograder") for path in package_modules(package)]
    modules = {module_name(path) for path in paths}

    def module_of(name):        # the longest prefix of an imported name that is one of the course's modules
        parts = name.split(".")
        return next((".".join(parts[:n]) for n in range(len(parts), 0, -1) if ".".join(parts[:n]) in modules), None)

    return {module_name(path): {module_of(name) for _, name in _module_imports(path)} - {None, module_name(path)}
            for path in paths}


def circles(graph: dict) -> set:
    """Every import circle of ``graph``, of any length: its modules, sorted (the strongly connected components
    of more than one module, Tarjan's algorithm)."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    found = set()

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph.get(module, ())):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                other = stack.pop()
                component.append(other)
                if other == module:
                    break
            if len(component) > 1:
                found.add(tuple(sorted(component)))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_import_circle():
    new = circles(_import_graph()) - CIRCLES_TO_CUT
    assert new == set(), f"modules that import each other, directly or around a circle: {sorted(new)}"


def test_a_circle_of_three_is_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"f"}, "f": {"e"}}
    assert circles(graph) == {("a", "b", "c"), ("e", "f")}
    assert circles({"a": {"b"}, "b": set()}) == set()


# --- the reader itself, on sources whose imports are named by hand ----------------------------------------------
SOURCE = '''
import os, kvlib.formulas as f
from kvcoach import slips
from . import drills
from ..units import GB
import importlib


def late():
    from autograder.checks import core
    importlib.import_module("kvdisplay.drills")
    __import__("tools.build_course")
    importlib.import_module(".guard", __package__)
'''


def test_the_reader_sees_every_import_a_module_makes():
    assert imports(SOURCE, "kvcoach.cli") == [
        (2, "os"), (2, "kvlib.formulas"), (3, "kvcoach.slips"), (4, "kvcoach.drills"), (5, "units.GB"),
        (6, "importlib"), (10, "autograder.checks.core"), (11, "kvdisplay.drills"), (12, "tools.build_course"),
        (13, "kvcoach.guard")]
    # inside a package's __init__, "." is the package itself; two dots its parent
    assert imports("from . import engine\nfrom ..vllm import log\n", "kvlib.cli", is_package=True) == [
        (1, "kvlib.cli.engine"), (2, "kvlib.vllm.log")]


def test_a_forbidden_import_anywhere_in_a_module_is_found(tmp_path, monkeypatch):
    """The rule has teeth: a coach module that imports the autograder inside a function, or by name."""
    fake = tmp_path / "kvcoach"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    (fake / "a.py").write_text("def f():\n    from autograder.checks import core\n")
    (fake / "b.py").write_text("import importlib\nx = importlib.import_module('kvdisplay')\n")
    monkeypatch.setattr(__import__(__name__), "REPO", tmp_path)
    assert violations("kvcoach", NEVER_IMPORTS["kvcoach"]) == [
        "kvcoach/a.py:2 imports autograder.checks.core", "kvcoach/b.py:2 imports kvdisplay"]
