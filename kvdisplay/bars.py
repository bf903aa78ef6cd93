"""Horizontal bar charts with labelled axes and units, one colour per group.

Used in: ch03_mla (bytes per token across the bundled models, by attention kind).
"""

from __future__ import annotations

from .plots import _UNIT

#: A colour per group label when the caller gives none (matplotlib's tab10, in order).
PALETTE = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
           "tab:gray", "tab:olive", "tab:cyan")


def bar_plot(labels, values, groups, *, xlabel: str, title: str = "", colors: dict | None = None,
             value_text=None, figsize=(8, 4.4)):
    """Horizontal bars, one per label, coloured by group; returns the matplotlib Figure.

    ``groups[i]`` names the group of bar ``i`` (the legend shows each group once);
    ``colors`` maps a group to a colour (default: ``PALETTE`` in order of first use).
    ``value_text(v)`` writes a label at the end of each bar. ``xlabel`` must name its
    unit in parentheses: a ValueError says so otherwise, or when the lengths differ.

    >>> fig = bar_plot(["a", "b"], [1, 2], ["x", "y"], xlabel="bytes per token (KiB)")
    >>> [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    ['x', 'y']

    Used in: ch03_mla.
    """
    if not _UNIT.search(xlabel):
        raise ValueError(f"bar_plot: xlabel {xlabel!r} names no unit in parentheses")
    if not len(labels) == len(values) == len(groups):
        raise ValueError(f"bar_plot: {len(labels)} labels, {len(values)} values, {len(groups)} groups")
    import matplotlib.pyplot as plt

    chosen = dict(colors or {})
    for group in groups:
        chosen.setdefault(group, PALETTE[len(chosen) % len(PALETTE)])
    fig, ax = plt.subplots(figsize=figsize)
    positions = list(range(len(labels)))[::-1]      # the first label on top
    ax.barh(positions, values, color=[chosen[g] for g in groups])
    ax.set_yticks(positions, labels)
    if value_text is not None:
        for y, v in zip(positions, values):
            ax.text(v, y, " " + value_text(v), va="center", fontsize=8)
    ax.set_xlim(0, max(values) * 1.25 if values else 1)
    handles = [plt.Rectangle((0, 0), 1, 1, color=chosen[g]) for g in dict.fromkeys(groups)]
    ax.legend(handles, list(dict.fromkeys(groups)), fontsize=8, loc="lower right")
    ax.set_xlabel(xlabel)
    if title:
        ax.set_title(title)
    ax.grid(True, axis="x", alpha=0.3)
    fig.tight_layout()
    plt.close(fig)
    return fig
