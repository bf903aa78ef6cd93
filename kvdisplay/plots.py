"""Plots with labelled axes and units.

Used in: ch01_kv_formula (weights against cache).
"""

from __future__ import annotations

import re

_UNIT = re.compile(r"\(.+\)")


def line_plot(x, series, *, xlabel: str, ylabel: str, title: str = "", hlines=None, xlog=False, ylog=False,
              figsize=(8, 4.4)):
    """A line plot; returns the matplotlib Figure (the notebook's last expression shows it).

    ``series`` maps a legend label to y values (one per x, or a ``(ys, style)`` pair
    with matplotlib keyword arguments); ``hlines`` maps a label to a constant y (or
    ``(y, style)``). Both axis labels must name their unit in parentheses, e.g.
    "memory (GB, 10⁹ B)": a ValueError says which label lacks one.

    >>> fig = line_plot([1, 2], {"cache": [1, 2]}, xlabel="tokens (count)", ylabel="memory (GB)")
    >>> fig.axes[0].get_xlabel()
    'tokens (count)'

    Used in: ch01_kv_formula, ch02_gqa_tp, ch03_mla, ch04_pool_paging, ch06_crossover, ch07_capacity_plan, ch05_prefix_reuse, ch08_vllm_lab, ch09_interview_drills.
    """
    for name, label in (("xlabel", xlabel), ("ylabel", ylabel)):
        if not _UNIT.search(label):
            raise ValueError(f"line_plot: {name} {label!r} names no unit in parentheses")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=figsize)
    for label, values in series.items():
        ys, style = values if isinstance(values, tuple) else (values, {})
        if len(ys) != len(x):
            raise ValueError(f"line_plot: series {label!r} has {len(ys)} values for {len(x)} x values")
        ax.plot(x, ys, label=label, **style)
    for label, value in (hlines or {}).items():
        y, style = value if isinstance(value, tuple) else (value, {})
        ax.axhline(y, label=label, **{"linestyle": "--", **style})
    ax.set_xscale("log" if xlog else "linear")
    ax.set_yscale("log" if ylog else "linear")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    plt.close(fig)   # shown once, as the cell's value, not again by the inline backend
    return fig
