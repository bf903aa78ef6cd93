"""import kvlib stays light: standard library only, nothing heavy, no network."""

import subprocess
import sys

HEAVY = ("sympy", "matplotlib", "numpy", "ipywidgets", "huggingface_hub", "requests", "urllib.request",
         "socket", "http.client")


def test_import_pulls_in_nothing_heavy():
    code = ("import sys, kvlib; import kvlib.cli; "
            f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_kvlib_imports_only_stdlib():
    import ast
    import pathlib

    import kvlib
    root = pathlib.Path(kvlib.__file__).parent
    allowed_third_party = {"sympy", "huggingface_hub"}  # imported lazily, only when asked for
    stdlib = set(sys.stdlib_module_names)
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                assert top in stdlib or top == "kvlib" or top in allowed_third_party, f"{path.name}: {name}"


def test_the_coach_pulls_in_nothing_heavy():
    """kvcoach (slips, drills, ``kvlib drill``) is loaded by every check and by ``kvlib``'s command line."""
    code = ("import sys, kvcoach.slips, kvcoach.drills, kvcoach.cli, kvcoach.drill_history, kvcoach.drill_steps, "
            f"kvcoach.drill_assumptions; print(','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_kvcoach_imports_only_stdlib_and_kvlib():
    import ast
    import pathlib

    import kvcoach
    root = pathlib.Path(kvcoach.__file__).parent
    stdlib = set(sys.stdlib_module_names)
    paths = sorted(root.rglob("*.py"))
    assert len(paths) > 5, paths
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] in stdlib | {"kvlib", "kvcoach"}, f"{path.name}: {name}"
