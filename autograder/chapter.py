"""A chapter is a source notebook and a checks module of data; they must agree.

``problems(nb, assignment)`` lists, one line each, every way the notebook's
answer and test cells and the chapter's exercises (``autograder.checks.chNN``)
disagree: a test cell with no exercise, an exercise with no test cell, a test
cell that does not call ``check("<its grade id>", <the function>)``, an answer
cell that does not define the function with the exercise's parameters in
order (a value exercise: no answer cell that assigns its name), grade ids out of ``chNN_qN_<name>`` form or order. The build's
``--check`` and ``tests/test_exercises.py`` (every chapter) use it. A chapter
marked ungraded (``"kv_course": {"graded": false}``) must have no graded cells.
"""

from __future__ import annotations

import ast
import re

from . import notebook as _nb

#: The fixed chapter ids (folder = notebook stem = nbgrader assignment id).
CHAPTER_IDS = ("ch00_orientation", "ch01_kv_formula", "ch02_gqa_tp", "ch03_mla", "ch04_pool_paging",
               "ch05_prefix_reuse", "ch06_crossover", "ch07_capacity_plan", "ch08_vllm_lab",
               "ch09_interview_drills", "ch10_state_and_sparsity")
GRADE_ID_RE = re.compile(r"^(ch\d{2})_q(\d+)_[a-z0-9_]+$")


def _calls(source: str) -> list:
    """``(function name, [first arg constant or None], [second arg name or None])`` of each call."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            first = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
            second = node.args[1].id if len(node.args) > 1 and isinstance(node.args[1], ast.Name) else None
            out.append((name, first, second))
    return out


def _defined_params(source: str, function_name: str):
    """The parameter names of ``def function_name(...)`` at the top level of ``source``, or None."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == function_name:
            return tuple(a.arg for a in node.args.posonlyargs + node.args.args)
    return None


def _assigns(source: str, name: str) -> bool:
    """True when ``source`` binds ``name`` at its top level (``name = ...``): a value exercise's answer."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def problems(nb: dict, assignment: str, exercises: dict | None = None) -> list:
    """Every disagreement between the notebook ``nb`` of ``assignment`` and its exercises (one line each)."""
    name = f"{assignment}.ipynb"
    tests, answers = [], []
    for cell in nb["cells"]:
        meta = _nb.nbgrader_meta(cell)
        if cell.get("cell_type") != "code" or not meta.get("grade_id"):
            continue
        if meta.get("grade") and not meta.get("solution"):
            tests.append((meta["grade_id"], _nb.source(cell)))
        elif meta.get("solution"):
            answers.append((meta["grade_id"], _nb.source(cell)))
    if not _nb.is_graded(nb):
        return [f"{name}: marked ungraded but has test cell {gid}" for gid, _ in tests]
    if exercises is None:
        from .checks import chapter_exercises
        try:
            exercises = chapter_exercises(assignment)
        except LookupError as exc:
            return [f"{name}: {exc}"] if tests else []
    out = []
    prefix = assignment.split("_")[0]
    for gid, source in tests:
        match = GRADE_ID_RE.match(gid)
        if not match or match.group(1) != prefix:
            out.append(f"{name}: test cell {gid}: grade ids read {prefix}_qN_<name>")
        ex = exercises.get(gid)
        if ex is None:
            out.append(f"{name}: test cell {gid} has no check (no exercise {gid} in autograder/checks/{prefix}.py)")
            continue
        calls = [c for c in _calls(source) if c[0] == "check"]
        if not any(c[1] == gid and c[2] == ex.function_name for c in calls):
            out.append(f'{name}: test cell {gid} does not call check("{gid}", {ex.function_name})')
        if any(c[1] not in (gid, None) for c in calls):
            out.append(f"{name}: test cell {gid} checks another exercise")
        if getattr(ex, "value", False):
            if not any(_assigns(src, ex.function_name) for _, src in answers):
                out.append(f"{name}: no answer cell assigns {ex.function_name} = ... (value exercise {gid})")
            continue
        defined = [_defined_params(src, ex.function_name) for _, src in answers]
        defined = [d for d in defined if d is not None]
        if not defined:
            out.append(f"{name}: no answer cell defines {ex.function_name} (exercise {gid})")
        elif defined[0][:len(ex.params)] != tuple(ex.params):
            out.append(f"{name}: {ex.function_name}{defined[0]} in the answer cell; exercise {gid} "
                       f"calls it with {tuple(ex.params)}")
    test_ids = [gid for gid, _ in tests]
    for gid, ex in exercises.items():
        if gid not in test_ids:
            out.append(f"{name}: exercise {gid} has no test cell")
        if ex.builds_on and (ex.builds_on not in exercises or list(exercises).index(ex.builds_on)
                             > list(exercises).index(gid)):
            out.append(f"{name}: exercise {gid} builds on {ex.builds_on}, which is not an earlier exercise")
    known = [gid for gid in test_ids if gid in exercises]
    if known != [gid for gid in exercises if gid in known]:
        out.append(f"{name}: test cells and exercises are in different orders")
    return out
