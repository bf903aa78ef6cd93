"""Plots with labelled axes and units, and the words a plot shows, in its text output and its alt text.

A notebook shows a matplotlib figure as a PNG; its title, legend and annotations are pixels no test can read.
So importing kvdisplay in a kernel makes every figure's text/plain output (which a front end hides behind the
image) say what the figure writes in words (``figure_text``): the leak test of tests/leaks.py reads it, so a
legend that states a folded answer is caught like a table that does. The PNG output gets the figure described
for a reader who cannot see it (``kvdisplay.alt_text.figure_alt``) as its alt text.

Used in: ch01_kv_formula (weights against cache).
"""

from __future__ import annotations

import re

_UNIT = re.compile(r"\(.+\)")


def line_plot(x, series, *, xlabel: str, ylabel: str, title: str = "", hlines=None, xlog=False, ylog=False,
              figsize=(8, 4.4), xticks=None, yticks=None):
    """A line plot; returns the matplotlib Figure (the notebook's last expression shows it).

    ``series`` maps a legend label to y values (one per x, or a ``(ys, style)`` pair
    with matplotlib keyword arguments); ``hlines`` maps a label to a constant y (or
    ``(y, style)``). Both axis labels must name their unit in parentheses, e.g.
    "memory (GB, 10⁹ B)": a ValueError says which label lacks one. ``xticks`` lists the x
    values to mark, each labelled in full ("1", "2", "4", "1,024"); a log x axis then runs in
    base 2, for axes in powers of two (TP sizes, contexts). ``yticks`` does the same on the y axis, so a
    floor the plot is about gets its own labelled tick.

    >>> fig = line_plot([1, 2], {"cache": [1, 2]}, xlabel="tokens (count)", ylabel="memory (GB)")
    >>> fig.axes[0].get_xlabel()
    'tokens (count)'
    >>> fig = line_plot([1, 2, 4, 8], {"copies": [1, 1, 1, 2]}, xlabel="TP (GPUs)", ylabel="copies (count)",
    ...                 xlog=True, xticks=[1, 2, 4, 8])
    >>> [t.get_text() for t in fig.axes[0].get_xticklabels()]
    ['1', '2', '4', '8']
    >>> fig = line_plot([1, 2, 4], {"per GPU": [160, 80, 40]}, xlabel="TP (GPUs)", ylabel="cache (KiB)",
    ...                 ylog=True, yticks=[40, 80, 160])
    >>> [t.get_text() for t in fig.axes[0].get_yticklabels()]
    ['40', '80', '160']

    Used in: ch01_kv_formula, ch02_gqa_tp, ch03_mla, ch04_pool_paging, ch06_crossover, ch07_capacity_plan, ch05_prefix_reuse, ch08_vllm_lab, ch09_interview_drills, ch10_state_and_sparsity.
    """  # noqa: E501
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
    _scale(ax, "x", xlog, xticks)
    _scale(ax, "y", ylog, yticks)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    plt.close(fig)   # shown once, as the cell's value, not again by the inline backend
    return fig


def figure_text(fig) -> str:
    """The words a figure shows, in reading order: titles, legend entries (and legend titles), annotations.

    >>> print(figure_text(line_plot([1, 2], {"cache": [1, 2]}, xlabel="tokens (count)", ylabel="memory (GB)",
    ...                              title="grows")))
    figure: grows | legend: cache

    Used in: (none yet; every figure's text output, through ``show_figure_text``, which kvdisplay's import runs).
    """
    words = [fig._suptitle.get_text()] if getattr(fig, "_suptitle", None) else []
    legends = list(getattr(fig, "legends", []))
    for ax in fig.axes:
        words += [t.get_text() for t in (ax._left_title, ax.title, ax._right_title)]
        words += [t.get_text() for t in ax.texts]
        legends += [ax.get_legend()] if ax.get_legend() else []
    words = [w for w in words if w.strip()]
    for legend in legends:
        entries = [legend.get_title().get_text()] + [t.get_text() for t in legend.get_texts()]
        words.append("legend: " + "; ".join(e for e in entries if e.strip()))
    return "figure: " + " | ".join(words)


def show_figure_text(ipython=None) -> None:
    """Make every figure this IPython session displays say what it shows, in words (kvdisplay's import does).

    Its text/plain output becomes ``figure_text(fig)`` (the leak test reads it), and its PNG output carries
    ``figure_alt(fig)`` as ``{"image/png": {"alt": ...}}`` in the output's metadata: the alternative text
    JupyterLab (with kvdisplay/labextension), nbconvert's pages and the executed site put on the ``<img>``.
    Figures a learner draws in the same kernel get both too.
    """
    if ipython is None:
        from IPython import get_ipython
        ipython = get_ipython()
    if ipython is None:     # plain Python (doctests, kvlib's CLI): nothing displays figures
        return
    # The inline backend, once it starts, drops every formatter a Figure had (IPython's select_figure_formats),
    # and it starts with the first figure: draw and close one first, so the formatters registered after stay.
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    from .alt_text import figure_alt

    plt.close(plt.figure())

    formatters = ipython.display_formatter.formatters
    formatters["text/plain"].for_type(Figure, lambda fig, printer, cycle: printer.text(figure_text(fig)))
    png = formatters["image/png"]
    try:
        draw_png = png.lookup_by_type(Figure)
    except KeyError:        # a backend that shows no PNG (a GUI window): no image, no alt text to give
        return
    if getattr(draw_png, "with_alt_text", False):
        return              # already wrapped (kvdisplay imported again after a reload)

    def png_with_alt(fig):
        data = draw_png(fig)
        if data is None or isinstance(data, tuple):
            return data
        alt = figure_alt(fig)
        return (data, {"alt": alt}) if alt else data

    png_with_alt.with_alt_text = True
    png.for_type(Figure, png_with_alt)


def _scale(ax, which: str, log: bool, ticks) -> None:
    """One axis: log base 2 where the ticks are given (powers of two), else log or linear; given ticks are
    labelled with thousands separators and nothing between them."""
    from matplotlib.ticker import NullLocator

    getattr(ax, f"set_{which}scale")(*(("log",) if log else ("linear",)), **({"base": 2} if log and ticks is not None else {}))
    if ticks is not None:
        getattr(ax, f"set_{which}ticks")(list(ticks), [f"{t:,}" for t in ticks])
        getattr(ax, f"{which}axis").set_minor_locator(NullLocator())
