"""The course's one notation table (kvlib/notation.py, shown in ch00_orientation) and who uses it.

* Every letter in a formula of ``kvlib.formulas``' docstrings, and every sympy symbol a chapter
  source declares, is a letter of the table (or, in a docstring, a name the table or the
  function itself gives): a chapter or docstring that brings in an undefined letter fails here.
* Every letter used as a quantity in a chapter's LaTeX is a letter of the table: ``$...$`` in
  markdown cells, in the strings code cells hand to ``kvdisplay`` (worked problems' formulas and
  substitutions, explorers' labels, errata) and in what ``kvdisplay`` writes itself. Words in
  ``\\text{...}`` are not letters, bold (``\\mathbf{c}``) is a paper's vector, ``i``, ``j``, ``k``
  are indices (``notation.INDICES``), and a subscript index (``T_1``, ``T_{8B}``) is an instance
  of its letter. A worked problem's substitution of a bytes figure must use a letter whose unit
  is bytes (so ``T`` cannot be "80 GiB": ``T`` is tokens).
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


# -- LaTeX in markdown and in what kvdisplay renders ------------------------------------------------

CODE_SPANS = re.compile(r"```.*?```|`[^`\n]*`", re.S)
MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$(?!\s)(.+?)(?<![\s\\])\$", re.S)
WORDS = re.compile(r"\\(?:text|mathrm|operatorname|textbf|textit|mbox|mathbf|boldsymbol)\s*\{[^{}]*\}")
SUB_WORDS = re.compile(r"_\s*\{?\s*\\(?:text|mathrm|mathit)\s*\{([^{}]*)\}\s*\}?")
ITALIC = re.compile(r"\\mathit\s*\{([A-Za-z]+)\}")
INDEX = re.compile(r"^(?:\d+[A-Za-z]*|[ijk])$")          # T_1, T_{8B}, T_k: an instance of T
BYTES_VALUE = re.compile(r"\d\s*(?:B|kB|KB|MB|GB|TB|KiB|MiB|GiB|TiB)(?![/\w])")


def math_spans(text: str) -> list:
    """The ``$...$`` and ``$$...$$`` spans of markdown (code spans and fences are not math)."""
    return [a or b for a, b in MATH.findall(CODE_SPANS.sub(" ", text))]


def _braced(s: str, i: int):
    """The argument at ``s[i]`` (``{...}`` or one character): (text, index after it)."""
    if i < len(s) and s[i] == "{":
        depth, j = 1, i + 1
        while j < len(s) and depth:
            depth += {"{": 1, "}": -1}.get(s[j], 0)
            j += 1
        return s[i + 1:j - 1], j
    return (s[i], i + 1) if i < len(s) else ("", i)


def math_letters(math: str) -> list:
    """The quantities a LaTeX formula names, as table letters: ``d_{c}`` -> ``d_c``, ``\\mathit{bs}`` -> ``bs``,
    ``L_\\text{full}`` -> ``L_full``, ``\\tau`` -> ``tau``; adjacent letters are a product (``2PB``: P, B)."""
    s = SUB_WORDS.sub(lambda m: "_{" + m.group(1) + "}", math)
    s = WORDS.sub(" ", ITALIC.sub(lambda m: "\x00" + m.group(1) + "\x00", s))
    found, i = [], 0
    while i < len(s):
        ch = s[i]
        if ch == "\\":
            command = re.match(r"\\([A-Za-z]+)", s[i:])
            if command is None:
                i += 2
                continue
            i += command.end()
            if command.group(1) in notation.GREEK:
                found.append(command.group(1))
            continue                              # \cdot, \frac, \lfloor, \max: operators
        if ch == "^":                             # exponents and labels (2^{30}, T^*, c^{KV}) name nothing
            _, i = _braced(s, i + 1)
            continue
        if ch == "\x00":
            end = s.index("\x00", i + 1)
            base, i = s[i + 1:end], end + 1
        elif ch.isalpha():
            base, i = ch, i + 1
        else:
            i += 1
            continue
        if i < len(s) and s[i] == "_":
            sub, i = _braced(s, i + 1)
            sub = re.sub(r"[{}\\\s]", "", sub)
            if f"{base}_{sub}" in notation.letters() or not INDEX.match(sub):
                found.append(f"{base}_{sub}")
                continue
        found.append(base)
    return found


def undefined_in_latex(math: str) -> list:
    allowed = notation.letters() | set(notation.INDICES)
    return [letter for letter in math_letters(math) if letter not in allowed]


def _string(node):
    """A string constant, or an f-string with each placeholder as 0 (a value, never a letter)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "0" for v in node.values)
    return None


def substitutions(tree) -> list:
    """``(symbol, value)`` of every worked problem's substitutions (the symbol is LaTeX without dollars)."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "worked_problem":
            subs = node.args[4] if len(node.args) > 4 else \
                next((k.value for k in node.keywords if k.arg == "substitutions"), None)
            for entry in getattr(subs, "elts", []):
                if isinstance(entry, ast.Tuple) and len(entry.elts) >= 2 and _string(entry.elts[0]) is not None:
                    out.append((_string(entry.elts[0]), _string(entry.elts[1]) or ""))
    return out


#: A substitution's value in one of these units goes to a letter whose table unit is one of them.
UNIT_FAMILIES = (
    (("B", "GiB"), BYTES_VALUE),
    (("B/s",), re.compile(r"\d\s*(?:B|kB|KB|MB|GB|TB)/s\b")),
    (("FLOP/s",), re.compile(r"FLOP/s\b")),
)


def bytes_letter_misuse(tree) -> list:
    """Substitutions that give a lone table letter a value in a unit it has not: "80.0 GiB" to T (tokens),
    "989 TFLOP/s" to P (parameters)."""
    wrong = []
    for symbol, value in substitutions(tree):
        letters = [x for x in math_letters(symbol) if x in notation.letters()]
        if len(letters) != 1 or symbol.strip() not in (letters[0], notation.by_letter(letters[0]).latex):
            continue
        row = notation.by_letter(letters[0])
        for units, pattern in UNIT_FAMILIES:
            if pattern.search(value) and row.unit not in units:
                wrong.append(f"{symbol} = {value!r} ({row.meaning})")
                break
    return wrong


def code_math(source: str) -> list:
    """The LaTeX a code cell hands to kvdisplay: ``$...$`` in its strings and its worked problems' symbols
    (docstrings are documentation, their examples are checked by running them)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    parts = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    parts |= {id(node.body[0].value) for node in ast.walk(tree)
              if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body
              and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    spans = [span for node in ast.walk(tree) if id(node) not in parts and (_string(node) or "").count("$")
             for span in math_spans(_string(node))]
    return spans + [symbol for symbol, _ in substitutions(tree)]


def chapter_math(path: Path) -> list:
    """``(cell index, LaTeX)`` of a chapter source: markdown and code cells."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for index, cell in enumerate(nb["cells"]):
        text = "".join(cell["source"])
        spans = math_spans(text) if cell["cell_type"] == "markdown" else \
            code_math(text) if cell["cell_type"] == "code" else []
        out += [(index, span) for span in spans]
    return out


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
    assert undefined_in_formula("ceil(W / q)") == ["q"]
    assert undefined_in_formula("ceil(W / q)", own_names=("q",)) == []
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


def test_the_latex_scan_can_fail():
    """The LaTeX scan reads letters the way the chapters write them, and flags what the table lacks."""
    assert math_letters(r"2 \cdot L \cdot K \cdot D \cdot b") == ["L", "K", "D", "b"]
    assert math_letters(r"\lfloor T_p / \mathit{bs} \rfloor \cdot b_{tok} + L_\text{full} + \tau") == \
        ["T_p", "bs", "b_tok", "L_full", "tau"]
    assert math_letters(r"2PB + T_{8B} + T_k + \text{link} + \mathbf{c}^{KV}") == ["P", "B", "T", "T"]
    assert math_spans("`$ kvlib gpus` and $x = 2$ and $$A$$") == ["x = 2", "A"]
    # what ch08 wrote before the table had its rows: a block size S, a printed figure's window lo/hi
    assert undefined_in_latex(r"N \in [\lfloor lo / B \rfloor, \lfloor hi / B \rfloor]$, $B = 2 L K D b S") == \
        ["h", "S"]      # l, o and i are table letters (all-reduce latency, tp_overhead, an index): the product hides them
    assert undefined_in_latex(r"c_{16} T B") == ["c"]           # ch06's bytes per token, before b_tok
    # ch08 before: T the GPU's total memory and P the activation peak, each given in GiB
    ch08 = ast.parse('kd.worked_problem(3, "q", "a", "$A = T u - W - P$", [("T", f"{t} GiB", "total"), '
                     '("P", f"{p:.4f} GiB", "activation peak"), ("M", "80 GiB", "total"), ("B", 7, "seqs")], "r", "s")')
    assert [entry.split(" = ")[0] for entry in bytes_letter_misuse(ch08)] == ["T", "P"]
    # ch06 before: P the peak compute (P is the parameter count), BW in TB/s (right)
    ch06 = ast.parse('kd.worked_problem(3, "q", "a", "$x$", [("P", f"{p:,.0f} TFLOP/s", "peak"), '
                     '(r"\\mathit{BW}", f"{bw} TB/s", "bandwidth"), ("F", "989 TFLOP/s", "peak")], "r", "s")')
    assert [entry.split(" = ")[0] for entry in bytes_letter_misuse(ch06)] == ["P"]
    assert code_math('kd.worked_problem(1, "q", "a", "$x$", [("T", f"{t} GiB", "total")], "r", "s")') == ["x", "T"]


@pytest.mark.parametrize("path", SOURCES, ids=[p.parent.name for p in SOURCES])
def test_chapter_latex_uses_the_table(path):
    undefined = {}
    for index, math in chapter_math(path):
        for letter in undefined_in_latex(math):
            undefined.setdefault(letter, f"cell {index}: ${math[:80]}$")
    assert not undefined, (f"{path.parent.name} writes letters the notation table (kvlib/notation.py) lacks: "
                           f"{undefined}; use the table's letter for the quantity, or add its row")


@pytest.mark.parametrize("path", SOURCES, ids=[p.parent.name for p in SOURCES])
def test_a_bytes_figure_takes_a_bytes_letter(path):
    """A worked problem's ``(letter, "80.0 GiB", ...)`` names a quantity in bytes (T, tokens, cannot be memory);
    the same for bandwidths and FLOP rates."""
    wrong = []
    for source in _code_cells(path):
        try:
            wrong += bytes_letter_misuse(ast.parse(source))
        except SyntaxError:
            continue
    assert not wrong, f"{path.parent.name}: bytes given to a letter that is no number of bytes: {wrong}"


def test_kvdisplay_writes_the_table_letters():
    """What kvdisplay renders itself: the notation table's LaTeX of each row reads back as its letter
    (``tau`` as ``\\tau``, not the word), and its modules' own ``$...$`` use table letters."""
    import kvdisplay
    assert [math_letters(s.latex) for s in notation.SYMBOLS] == [[s.letter] for s in notation.SYMBOLS]
    assert notation.by_letter("tau").latex == r"\tau"
    folder = Path(kvdisplay.__file__).parent
    found = {}
    for module in sorted(folder.glob("*.py")):
        for math in code_math(module.read_text(encoding="utf-8")):
            for letter in undefined_in_latex(math):
                found.setdefault(letter, f"{module.name}: ${math}$")
    assert not found, found


# -- widget labels and plot axes ---------------------------------------------------------------------

#: Keyword arguments whose string a learner reads as a label: a widget's description, a plot's axes.
LABEL_KEYWORDS = ("description", "xlabel", "ylabel")
LABEL_SYMBOL = re.compile(r"(?<![\w\-/.'’])([A-Za-z](?:_\{?[A-Za-z0-9]+\}?)?)(?![\w\-'’])")
#: One-letter English words a label may hold that are no symbol.
NOT_SYMBOLS = {"a", "A"}


def label_strings(source: str) -> list:
    """The strings a code cell or module hands to a widget's ``description`` or a plot's ``xlabel`` /
    ``ylabel`` (an f-string with each placeholder as 0)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [text for node in ast.walk(tree) if isinstance(node, ast.Call)
            for keyword in node.keywords if keyword.arg in LABEL_KEYWORDS
            for text in [_string(keyword.value)] if text]


def _stems(text: str) -> set:
    return {w.lower().rstrip("s") for w in re.findall(r"[A-Za-z]{3,}", text)}


def _row_words(letter: str) -> set:
    row = notation.by_letter(letter)
    return _stems(" ".join([row.name.replace("_", " "), row.meaning, *row.kvlib_keywords, *row.config_fields])
                  .replace("_", " "))


def misnamed_in_label(label: str) -> list:
    """What is wrong with the symbols of a label: a letter the table lacks, or letters whose rows share no word
    with the label's words ("latent width r": r is the tokens of a last block; "tensor-parallel size N": N is
    GPUs in a node, the table's TP is t). Units in parentheses are not read."""
    text = re.sub(r"\([^)]*\)", " ", label)
    text = re.sub(r"\$([^$]*)\$", r" \1 ", text).replace("\\", " ")
    symbols = [s.replace("{", "").replace("}", "") for s in LABEL_SYMBOL.findall(text) if s not in NOT_SYMBOLS]
    if not symbols:
        return []
    unknown = [s for s in symbols if s not in notation.letters()]
    if unknown:
        return [f"{label!r}: {', '.join(unknown)} not in the table"]
    words = _stems(LABEL_SYMBOL.sub(" ", text))
    if words and not words & set().union(*(_row_words(s) for s in symbols)):
        rows = "; ".join(f"{s} is {notation.by_letter(s).meaning}" for s in symbols)
        return [f"{label!r}: {rows}"]
    return []


def test_the_label_scan_can_fail():
    # what ch03's explorer and plot wrote before: the latent called r, TP called N
    assert misnamed_in_label("latent width r") and misnamed_in_label("tensor-parallel size N (GPUs)")
    assert misnamed_in_label("latent width q") == ["'latent width q': q not in the table"]
    assert [misnamed_in_label(label) for label in ("latent width d_c", "rope width d_R", "layers L",
            "tensor-parallel size t (GPUs)", "tokens in flight, B × T (tokens)", "memory (GB)")] == [[]] * 6
    assert label_strings('w = W.IntSlider(3, description="layers L")\nkd.line_plot(x, y, xlabel=f"TP {t}")') == \
        ["layers L", "TP 0"]


def _label_sources():
    import kvdisplay
    yield from ((f"kvdisplay/{m.name}", m.read_text(encoding="utf-8"))
                for m in sorted(Path(kvdisplay.__file__).parent.glob("*.py")))
    for path in SOURCES:
        yield from ((path.parent.name, source) for source in _code_cells(path))


def test_widget_labels_and_plot_axes_use_the_table():
    """A letter in a widget's label or on a plot's axis is the table's letter for that quantity: the
    explorer's "latent width" is d_c, a TP axis is t."""
    found = sorted({f"{where}: {problem}" for where, source in _label_sources()
                    for label in label_strings(source) for problem in misnamed_in_label(label)})
    assert found == [], "labels whose letters the notation table gives another meaning, or lacks:\n" + \
        "\n".join(found)
