"""A formula built up one factor at a time, in the formula's own order.

sympy prints a product with its symbols sorted (``2*D*K*L*b``), which hides which
factor each step added. ``build_up`` writes each step's LaTeX from the factors in the
order given, marks the new one, and returns the sympy products as well, so the
notebook can show them equal to kvlib's function.

Used in: ch01_kv_formula (section "The formula, one factor at a time").
"""

from __future__ import annotations

from IPython.display import Markdown

NEW_FACTOR_COLOR = "#c0392b"


def build_up(steps):
    """A table of partial products, each marked with its new factor, and the products themselves.

    ``steps`` is a list of ``(factor, meaning, counts)``: the sympy factor, what that
    factor is ("layers"), and what the product so far counts ("vectors one token
    leaves in the whole model"). Returns ``(markdown, products)`` where
    ``products[i]`` is the sympy product of the first ``i + 1`` factors.

    >>> import sympy as sp
    >>> L, K = sp.symbols("L K")
    >>> view, products = build_up([(sp.Integer(2), "K and V", "vectors"), (L, "layers", "vectors, all layers"),
    ...                            (K, "KV heads", "vectors, whole model")])
    >>> products[-1] == 2 * K * L
    True
    >>> "2 \\\\cdot L \\\\cdot" in view.data       # formula order, not sympy's sorted order
    True
    >>> B = sp.Symbol("B")
    >>> r"\\left(B - 1\\right)" in build_up([(L, "layers", "x"), (B - 1, "others", "y")])[0].data
    True

    Used in: ch01_kv_formula, ch02_gqa_tp, ch03_mla, ch05_prefix_reuse, ch08_vllm_lab, ch09_interview_drills.
    """
    import sympy as sp

    if not steps:
        raise ValueError("build_up: no steps")
    rows, products, factors = [], [], []
    for factor, meaning, counts in steps:
        factors.append(sp.sympify(factor))
        products.append(sp.Mul(*factors))
        # a sum as a factor needs its brackets: b_tok (B - 1), not b_tok B - 1
        shown = [rf"\left({sp.latex(f)}\right)" if isinstance(f, sp.Add) else sp.latex(f) for f in factors]
        shown[-1] = rf"\color{{{NEW_FACTOR_COLOR}}}{{\mathbf{{{shown[-1]}}}}}"
        product = r" \cdot ".join(shown)
        rows.append(f"| ${product}$ | ${sp.latex(factors[-1])}$ ({meaning}) | {counts} |")
    text = ("| product so far (new factor in red) | new factor | what it counts |\n|---|---|---|\n"
            + "\n".join(rows))
    return Markdown(text), products
