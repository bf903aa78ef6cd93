"""The course's one notation table (kvlib/notation.py, shown in ch00_orientation) and who uses it.

* Every letter in a formula of ``kvlib.formulas``' docstrings, and every sympy symbol a chapter
  source declares, is a letter of the table (or, in a docstring, a name the table or the
  function itself gives): a chapter or docstring that brings in an undefined letter fails here.
* The table's config fields are fields of real configs, and its kvlib names are names kvlib uses.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re
from pathlib import Path

import pytest

import kvlib
from kvlib import formulas, notation

REPO = Path(__file__).resolve().parents[1]
SOURCES = sorted((REPO / "course" / "source").glob("ch*/ch*.ipynb"))

# Functions a docstring formula may call besides kvlib.formulas' own.
MATH_FUNCTIONS = {"floor", "ceil", "max", "min", "round", "int", "exp", "log", "sqrt"}
SNIPPET = re.compile(r"``([^`]+)``")
IDENTIFIER = re.compile(r"(?<![\w.])[A-Za-z_]\w*")


def undefined_in_formula(snippet: str, own_names=()) -> list:
    """Identifiers of a docstring formula that are neither the table's letters or names, the function's
    own parameters, nor a function; [] for a snippet without an operator (a plain name or value)."""
    if not re.search(r"[*/+=-]", snippet):
        return []
    allowed = notation.letters() | notation.code_names() | set(own_names) | MATH_FUNCTIONS | set(formulas.__all__)
    return [name for name in IDENTIFIER.findall(snippet) if name not in allowed]


def sympy_symbols(source: str) -> list:
    """Names declared with ``symbols("...")`` / ``Symbol("...")`` / ``var("...")`` in a code cell."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if func in ("symbols", "Symbol", "var") and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            names += [n.replace("{", "").replace("}", "") for n in re.split(r"[\s,]+", node.args[0].value) if n]
    return names


def _code_cells(path: Path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            yield "".join(cell["source"])


# -- the table itself ------------------------------------------------------------------------------

def test_one_meaning_per_letter_and_per_name():
    letters = [s.letter for s in notation.SYMBOLS]
    names = [s.name for s in notation.SYMBOLS]
    assert len(set(letters)) == len(letters), letters
    assert len(set(names)) == len(names), names
    keywords = [k for s in notation.SYMBOLS for k in set(s.kvlib_keywords) - {s.name}]
    assert len(set(keywords)) == len(keywords) and not set(keywords) & set(names), keywords


def test_the_formula_letters_of_chapter_01_are_there():
    # The letters chapter 01 derives with (its sympy cell), and the names its notation table gives them.
    expected = {"L": "num_layers", "K": "num_kv_heads", "D": "head_dim", "b": "dtype_bytes", "T": "seq_len",
                "B": "batch_size", "H": "num_heads"}
    assert {letter: notation.by_letter(letter).name for letter in expected} == expected


def test_kv_bytes_per_token_keywords_match_the_table():
    # kvlib's contract: kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes), 2 * L * K * D * b.
    params = list(inspect.signature(kvlib.kv_bytes_per_token).parameters)
    assert params == [notation.by_letter(x).kvlib_keywords[0] for x in "LKDb"] == \
        ["layers", "kv_heads", "head_dim", "dtype_bytes"]
    assert notation.by_letter("d_c").kvlib_keywords == ("latent_dim",)
    assert list(inspect.signature(kvlib.mla_bytes_per_token).parameters)[1:3] == ["latent_dim", "rope_dim"]


def test_config_fields_are_fields_of_real_configs():
    """Each field the table names appears in at least one bundled config.json (real published configs)."""
    raw = [kvlib.bundled_config(m) for m in kvlib.bundled_models()]
    present = set().union(*(config.keys() for config in raw))
    missing = [f"{s.letter}: {f}" for s in notation.SYMBOLS for f in s.config_fields if f not in present]
    assert missing == [], missing


def test_kvlib_names_are_names_kvlib_uses():
    """Each kvlib keyword of the table is a parameter of a kvlib function or a field of a kvlib dataclass."""
    from kvlib import gpus, planner, spec
    from kvlib.vllm import layout, pool, predict
    used = set()
    for module in (formulas, spec, gpus, planner, layout, pool, predict):
        for _, obj in inspect.getmembers(module):
            if dataclasses.is_dataclass(obj):
                used |= {f.name for f in dataclasses.fields(obj)}
                for _, method in inspect.getmembers(obj, inspect.isfunction):
                    used |= set(inspect.signature(method).parameters)
            elif inspect.isfunction(obj):
                used |= set(inspect.signature(obj).parameters)
    unused = [f"{s.letter}: {k}" for s in notation.SYMBOLS for k in s.kvlib_keywords if k not in used]
    assert unused == [], unused


def test_by_letter_names_the_missing_letter():
    with pytest.raises(KeyError, match="'Q'.*kvlib/notation.py"):
        notation.by_letter("Q")


# -- who uses it -----------------------------------------------------------------------------------

def test_the_checkers_can_fail():
    """The two scans below do flag a letter the table lacks."""
    assert undefined_in_formula("2 * L * Q * D * b") == ["Q"]
    assert undefined_in_formula("ceil(W / n)") == ["n"]
    assert undefined_in_formula("ceil(W / n)", own_names=("n",)) == []
    assert undefined_in_formula("kv_lora_rank") == []          # a name, not a formula
    assert sympy_symbols('L, Q = sp.symbols("L Q", positive=True)\nx = sympy.Symbol("d_{c}")') == ["L", "Q", "d_c"]


@pytest.mark.parametrize("name", formulas.__all__)
def test_docstring_formulas_use_the_table(name):
    function = getattr(formulas, name)
    own = inspect.signature(function).parameters
    doc = inspect.getdoc(function) or ""
    # Only the prose: doctest lines are code, checked by running them.
    prose = "\n".join(line for line in doc.splitlines() if not line.lstrip().startswith((">>>", "...")))
    undefined = {n for snippet in SNIPPET.findall(prose) for n in undefined_in_formula(snippet, own)}
    assert not undefined, (f"kvlib.formulas.{name}: {sorted(undefined)} in a docstring formula; add the letter "
                           "to kvlib/notation.py or use one it has")


def test_formulas_module_points_to_the_table():
    assert "kvlib.notation" in formulas.__doc__ and "ch00_orientation" in formulas.__doc__


@pytest.mark.parametrize("path", SOURCES, ids=[p.parent.name for p in SOURCES])
def test_chapter_sympy_symbols_are_in_the_table(path):
    declared = [n for source in _code_cells(path) for n in sympy_symbols(source)]
    undefined = sorted(set(declared) - notation.letters())
    assert not undefined, (f"{path.parent.name} declares sympy symbols {undefined} that the notation table "
                           "(kvlib/notation.py) lacks: add their rows, or use the table's letters")


def test_chapter_01_declares_the_formula_letters():
    """The scan above sees ch01's derivation (so an empty scan cannot pass it silently)."""
    ch01 = REPO / "course" / "source" / "ch01_kv_formula" / "ch01_kv_formula.ipynb"
    declared = {n for source in _code_cells(ch01) for n in sympy_symbols(source)}
    assert {"L", "K", "D", "b", "T", "B"} <= declared
