"""import kvlib stays light: standard library only, nothing heavy, no network."""

import ast
import pathlib
import subprocess
import sys

HEAVY = ("sympy", "matplotlib", "numpy", "ipywidgets", "huggingface_hub", "requests", "urllib.request",
         "socket", "http.client")


def test_import_pulls_in_nothing_heavy():
    code = ("import sys, kvlib; import kvlib.cli; "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def absolute_imports(package):
    """(file, module) for every absolute import in ``package``'s files, those inside functions included."""
    root = pathlib.Path(package.__file__).parent
    paths = sorted(root.rglob("*.py"))
    assert len(paths) > 5, paths
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                yield from ((path.name, a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                yield path.name, node.module


def test_kvlib_imports_only_stdlib():
    import kvlib
    allowed_third_party = {"sympy", "huggingface_hub"}  # imported lazily, only when asked for
    stdlib = set(sys.stdlib_module_names)
    for file, name in absolute_imports(kvlib):
        top = name.split(".")[0]
        assert top in stdlib or top == "kvlib" or top in allowed_third_party, f"{file}: {name}"


def test_the_coach_pulls_in_nothing_heavy():
    """kvcoach (slips, drills, ``kvlib drill``) is loaded by every check and by ``kvlib``'s command line."""
    code = ("import sys, kvcoach.slips, kvcoach.drills, kvcoach.cli, kvcoach.drill_history, kvcoach.drill_steps, "
            f"kvcoach.drill_assumptions; print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_kvcoach_imports_only_stdlib_and_kvlib():
    import kvcoach
    stdlib = set(sys.stdlib_module_names)
    for file, name in absolute_imports(kvcoach):
        assert name.split(".")[0] in stdlib | {"kvlib", "kvcoach"}, f"{file}: {name}"
