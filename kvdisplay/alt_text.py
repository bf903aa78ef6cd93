"""A figure's alternative text, computed from what it draws: what is plotted against what, in which units,
and the shape each series takes.

A screen reader cannot read a PNG, and neither can a learner whose image did not load. So importing kvdisplay
puts ``figure_alt(fig)`` on every figure a kernel displays, in the output's metadata, as
``{"image/png": {"alt": ...}}``: the one field that nbconvert's HTML templates (the feedback pages) read, that
JupyterLab reads through the course's small extension (``kvdisplay/labextension``) and the executed site
through ``tools/site/conf.py``. It is written from the figure's own artists, never from the cell that drew
it, so a chapter (or a learner's own plot) gets it without a line of its own:

* each panel: its title, the kind of plot, the y axis against the x axis with their units (the text in the
  label's parentheses) and scales;
* each line: its legend label and its shape (rises, falls, stays, peaks), with its end values and how it
  bends (``ever faster``, ``levelling off``, ``steadily``), in the axes' own scale;
* each horizontal or vertical reference line, each scatter point, each bar (or, for many bars, the extremes
  and each colour group's range);
* where two series cross, and near which x.

Numbers are written to three significant figures (crossings to two): what a sighted reader takes from the
ticks, not more. They are read by the leak test like a legend (tests/leaks.py), so a plot's alt text names no
figure of a folded answer either.
"""

from __future__ import annotations

import math
import re

_UNIT = re.compile(r"\(([^()]*)\)\s*$")
_UNITLESS = {"count", "number", "fraction", ""}
MAX_LISTED_BARS = 8
MAX_CROSSINGS = 6


def figure_alt(fig) -> str:
    """The figure described in words (see the module doc); "" for a figure that draws nothing.

    >>> from kvdisplay.plots import line_plot
    >>> print(figure_alt(line_plot([1, 2, 3], {"cache": [1, 2, 4]}, xlabel="batch (sequences)",
    ...                            ylabel="memory (GB, 10⁹ B)", title="grows", hlines={"weights": 3})))
    grows. Line plot of memory (GB, 10⁹ B) against batch (sequences); the y axis marked from 1 to 4 GB. cache rises ever faster from 1 sequence to 3 sequences (4-fold); weights, flat at 3 GB. cache crosses weights near 2.5 sequences.

    Used in: (none yet; every figure's alt text, through ``show_figure_text``, which kvdisplay's import runs).
    """  # noqa: E501
    parts = []
    suptitle = getattr(fig, "_suptitle", None)
    if suptitle is not None and suptitle.get_text().strip():
        parts.append(_sentence(suptitle.get_text()))
    panels = [ax for ax in fig.axes if ax.get_visible() and _has_data(ax)]
    for number, ax in enumerate(panels, 1):
        prefix = f"Panel {number} of {len(panels)}: " if len(panels) > 1 else ""
        parts.append(prefix + _axes_alt(ax))
    return " ".join(p for p in parts if p)


# -- the pieces of a panel ---------------------------------------------------------------------------

def _has_data(ax) -> bool:
    return bool(ax.get_lines() or ax.collections or ax.containers or ax.patches)


def _unit(label: str) -> str:
    """The unit a label names in its last parentheses: "memory (GB, 10⁹ B)" -> "GB"; "(count)" -> ""."""
    match = _UNIT.search(label)
    if not match:
        return ""
    unit = re.split(r"[,;]", match.group(1))[0].strip()
    return "" if unit.lower() in _UNITLESS else unit


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text if text.endswith((".", "!", "?")) else text + "."


def _num(value: float, digits: int = 3) -> str:
    """``value`` to ``digits`` significant figures, with thousands separators and no exponent.

    >>> [_num(v) for v in (0, 1, 2.5, 12.345, 131072, 0.012345, 1024.0, -3.14159)]
    ['0', '1', '2.5', '12.3', '131,000', '0.0123', '1,020', '-3.14']
    """
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    places = digits - 1 - math.floor(math.log10(abs(value)))
    rounded = round(value, places)
    if places <= 0:
        return f"{int(rounded):,}"
    return f"{rounded:,.{places}f}".rstrip("0").rstrip(".")


def _at(value: float, unit: str, digits: int = 3) -> str:
    """A value with its unit: '4 GB', '12%', '1 token' (a plural unit word goes singular for 1)."""
    number = _num(value, digits)
    if unit == "%":
        return number + "%"
    if number == "1" and re.fullmatch(r"[A-Za-z]{3,}s", unit):
        unit = unit[:-1]
    return f"{number} {unit}".strip()


def _x(value: float, unit: str, name: str) -> str:
    """An x position: exact when it is a whole number of three significant digits or a power of two (a
    context, a batch: an input), else to three significant figures; on a unitless axis, after the axis' name
    ('agent step 3')."""
    exact = float(value).is_integer() and (len(str(int(abs(value))).rstrip("0")) <= 3 or _power_of_two(value))
    if exact:
        number = f"{int(value):,}"
        if not unit:
            return f"{name} {number}".strip()
        return _at(value, unit) if number == "1" else f"{number} {unit}" if unit != "%" else number + "%"
    return _at(value, unit) if unit else f"{name} {_num(value)}".strip()


def _power_of_two(value: float) -> bool:
    whole = int(abs(value))
    return whole > 0 and whole & (whole - 1) == 0


def _axis_name(label: str) -> str:
    """A label without its unit: "agent step (count)" -> "agent step"."""
    return _UNIT.sub("", label).strip()


def _label(artist) -> str:
    label = str(artist.get_label() or "")
    return "" if label.startswith("_") else " ".join(label.split())


def _scale_words(ax) -> str:
    x_log, y_log = ax.get_xscale() == "log", ax.get_yscale() == "log"
    if x_log and y_log:
        return ", both axes logarithmic"
    if x_log or y_log:
        return f", {'x' if x_log else 'y'} axis logarithmic"
    return ""


def _y_range(ax, unit: str) -> str:
    """'; the y axis marked from 10 to 1,000 GB': its first and last visible major ticks, as a reader sees them."""
    low, high = sorted(ax.get_ylim())
    ticks = [float(t) for t in ax.yaxis.get_majorticklocs() if low <= t <= high]
    if len(ticks) < 2:
        return ""
    return f"; the y axis marked from {_num(min(ticks))} to {_at(max(ticks), unit)}"


def _kind(ax) -> str:
    if ax.containers:
        return "Bar chart"
    series = [ln for ln in ax.get_lines() if _line_kind(ax, ln) == "line"]
    if ax.collections and not series:
        return "Scatter plot"
    return "Line plot"


def _line_kind(ax, line) -> str:
    """'hline' (an axhline), 'vline' (an axvline) or 'line' (data against data)."""
    transform = line.get_transform()
    if transform is ax.get_yaxis_transform(which="grid"):
        return "hline"
    if transform is ax.get_xaxis_transform(which="grid"):
        return "vline"
    return "line"


def _points(line):
    """(xs, ys) of a data line, finite points only, in the order drawn."""
    xs, ys = line.get_xdata(orig=False), line.get_ydata(orig=False)
    pairs = [(float(x), float(y)) for x, y in zip(xs, ys) if _finite(x) and _finite(y)]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _finite(value) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _scaled(values, log: bool):
    return [math.log10(v) if log and v > 0 else v for v in values]


def _axes_alt(ax) -> str:
    xlabel, ylabel = " ".join(ax.get_xlabel().split()), " ".join(ax.get_ylabel().split())
    xunit, yunit, xname = _unit(xlabel), _unit(ylabel), _axis_name(xlabel)
    words = []
    title = " | ".join(t.get_text() for t in (ax._left_title, ax.title, ax._right_title) if t.get_text().strip())
    if title:
        words.append(_sentence(title))
    kind = _kind(ax)
    if kind == "Bar chart":
        words.append(_bars(ax))
        return " ".join(words)
    axes = (f" of {ylabel or 'values'} against {xlabel}" if xlabel else f" of {ylabel}" if ylabel else "")
    words.append(f"{kind}{axes}{_scale_words(ax)}{_y_range(ax, yunit)}.")
    x_log, y_log = ax.get_xscale() == "log", ax.get_yscale() == "log"
    fx, fy = (lambda v: _x(v, xunit, xname)), (lambda v: _at(v, yunit))
    series, described = [], []
    for line in ax.get_lines():
        kind_of, name = _line_kind(ax, line), _label(line)
        if kind_of == "hline":
            y = float(line.get_ydata()[0])
            described.append(f"{name}, flat at {fy(y)}" if name else f"a horizontal line at {fy(y)}")
            series.append((name or "the horizontal line", None, [y]))
        elif kind_of == "vline":
            x = float(line.get_xdata()[0])
            described.append(f"{name}, a vertical line at {fx(x)}" if name else f"a vertical line at {fx(x)}")
        else:
            xs, ys = _points(line)
            if xs:
                described.append(_line_shape(name or "a line", xs, ys, fx, xname, (x_log, y_log)))
                series.append((name or "a line", xs, ys))
    for collection in ax.collections:
        described += _scatter(collection, fx, series, x_log)
    if described:
        words.append(_sentence("; ".join(described)))
    crossings = _crossings(series, lambda v: _at(v, xunit, digits=2) if xunit else f"{xname} {_num(v, 2)}", x_log)
    if crossings:
        words.append(_sentence("; ".join(crossings)))
    return " ".join(words)


def _line_shape(name: str, xs, ys, fx, xname: str, logs) -> str:
    """``name`` and how its line runs, from its first x to its last: 'cache rises in proportion to tokens
    from 1 token to 1,000 tokens (1,000-fold)'. No y value: the y axis' range is said once, and a line's level may be
    what a question asks (see the module doc)."""
    span = f"from {fx(xs[0])} to {fx(xs[-1])}"
    if len(xs) == 1:
        return f"{name}: one point, at {fx(xs[0])}"
    top, bottom = max(ys), min(ys)
    if math.isclose(top, bottom, rel_tol=1e-9, abs_tol=1e-12):
        return f"{name} stays flat {span}"
    steps = [b - a for a, b in zip(ys, ys[1:])]
    rising, falling = all(s >= 0 for s in steps), all(s <= 0 for s in steps)
    if rising or falling:
        verb = "rises" if rising else "falls"
        flat_start, flat_end = _flat_run(ys), len(ys) - 1 - _flat_run(ys[::-1])
        if flat_start > 0:
            return (f"{name} stays flat up to {fx(xs[flat_start])}, then {verb}"
                    f"{_how(xs[flat_start:], ys[flat_start:], xname, logs, rising)} up to {fx(xs[-1])}"
                    f"{_fold(ys[flat_start], ys[-1])}")
        if flat_end < len(ys) - 1:
            return (f"{name} {verb}{_how(xs[:flat_end + 1], ys[:flat_end + 1], xname, logs, rising)} from "
                    f"{fx(xs[0])} to {fx(xs[flat_end])}{_fold(ys[0], ys[flat_end])}, then stays flat up to "
                    f"{fx(xs[-1])}")
        how = _how(xs, ys, xname, logs, rising)
        return f"{name} {verb}{how}{',' if ',' in how else ''} {span}{_fold(ys[0], ys[-1])}"
    peak, low = ys.index(top), ys.index(bottom)
    if 0 < peak < len(ys) - 1 and all(s >= 0 for s in steps[:peak]) and all(s <= 0 for s in steps[peak:]):
        return f"{name} rises from {fx(xs[0])} to a peak at {fx(xs[peak])}, then falls up to {fx(xs[-1])}"
    if 0 < low < len(ys) - 1 and all(s <= 0 for s in steps[:low]) and all(s >= 0 for s in steps[low:]):
        return f"{name} falls from {fx(xs[0])} to a low at {fx(xs[low])}, then rises up to {fx(xs[-1])}"
    return f"{name} goes up and down {span}, ending {'above' if ys[-1] > ys[0] else 'below'} where it starts"


def _flat_run(ys) -> int:
    """How many steps the series stays at its first value (0 when it moves at once)."""
    run = 0
    while run + 1 < len(ys) and math.isclose(ys[run + 1], ys[0], rel_tol=1e-9, abs_tol=1e-12):
        run += 1
    return run


def _fold(first: float, last: float) -> str:
    """' (8-fold)': how many times the line's end is its start (two significant figures), when both have a sign."""
    if first == 0 or last == 0 or (first < 0) != (last < 0):
        return ""
    ratio = max(abs(first), abs(last)) / min(abs(first), abs(last))
    return f" ({_num(ratio, 2)}-fold)" if ratio >= 1.1 else " (slightly)"


_POWERS = ((1, "in proportion to"), (-1, "in inverse proportion to"), (2, "with the square of"),
           (-2, "with the inverse square of"), (0.5, "with the square root of"))


def _how(xs, ys, xname: str, logs, rising: bool) -> str:
    """How a monotonic line bends: ' in proportion to tokens' (a power law: its slope on log-log axes, whatever
    the plot's own scales), else ' ever faster' or ' ever more slowly' (the change over the second half of its
    points against the first, in the plot's own scales), else ' linearly' (or ' steadily' on a log axis)."""
    x_log, y_log = logs
    if len(ys) < 3:
        return ""
    if all(x > 0 for x in xs) and (all(y > 0 for y in ys) or all(y < 0 for y in ys)):
        ly = [math.log10(abs(y)) for y in ys]
        lx = [math.log10(x) for x in xs]
        slopes = [(b - a) / (d - c) for a, b, c, d in zip(ly, ly[1:], lx, lx[1:]) if d != c]
        for power, words in _POWERS:     # nine segments in ten on the power law (a knee may end it)
            if slopes and sum(abs(slope - power) < 0.03 for slope in slopes) >= 0.9 * len(slopes):
                return f" {words} {xname or 'x'}"
    ys_scaled, xs_scaled = _scaled(ys, y_log), _scaled(xs, x_log)
    half = len(ys) // 2
    first = abs(ys_scaled[half] - ys_scaled[0]) / max(abs(xs_scaled[half] - xs_scaled[0]), 1e-300)
    second = abs(ys_scaled[-1] - ys_scaled[half]) / max(abs(xs_scaled[-1] - xs_scaled[half]), 1e-300)
    if first == 0 or second / first > 1.2:
        return " ever faster" if rising else " ever more steeply"
    if second / first < 1 / 1.2:
        return " ever more slowly" if rising else " and levels off"
    return " linearly" if not (x_log or y_log) else " steadily"


def _scatter(collection, fx, series, x_log: bool) -> list[str]:
    """Scatter points by their x, and the line each sits on (no y value, as for lines)."""
    offsets = [(float(x), float(y)) for x, y in collection.get_offsets() if _finite(x) and _finite(y)]
    if not offsets:
        return []
    name = _label(collection) or "a point"
    if len(offsets) == 1:
        x, y = offsets[0]
        on = [line for line, xs, ys in series if xs is not None and _on(_value_at(xs, ys, x, x_log), y)]
        return [f"{name} at {fx(x)}" + (f", on {on[0]}" if on else "")]
    xs = [p[0] for p in offsets]
    return [f"{name}: {len(offsets)} points from {fx(min(xs))} to {fx(max(xs))}"]


def _on(value, y: float) -> bool:
    return value is not None and math.isclose(value, y, rel_tol=0.01)


def _crossings(series, fx, x_log: bool) -> list[str]:
    """'A crosses B near x, C near y' for each series, the first crossing with each later series (or line)."""
    found = []
    for i, (name, xs, ys) in enumerate(series):
        near = []
        for other_name, other_xs, other_ys in series[i + 1:]:
            if xs is None and other_xs is None:
                continue
            if xs is None:      # a horizontal line and a data line: the data line crosses it
                x = _first_crossing(other_xs, other_ys, xs, ys, x_log)
                if x is not None:
                    found.append((x, f"{other_name} crosses {name} near {fx(x)}"))
                continue
            x = _first_crossing(xs, ys, other_xs, other_ys, x_log)
            if x is not None:
                near.append((x, f"{other_name} near {fx(x)}"))
        if near:
            near.sort()
            found.append((near[0][0], f"{name} crosses " + _and([text for _, text in near])))
    return [text for _, text in sorted(found)][:MAX_CROSSINGS]


def _and(items) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _value_at(xs, ys, x: float, x_log: bool):
    """The series' y at ``x`` (linear interpolation in the x axis' scale), None outside its range."""
    if xs is None:
        return ys[0]
    order = sorted(zip(xs, ys))
    if x < order[0][0] or x > order[-1][0]:
        return None
    for (x0, y0), (x1, y1) in zip(order, order[1:]):
        if x0 <= x <= x1:
            if x1 == x0:
                return y0
            a, b, t = _scaled([x0, x1, x], x_log)
            return y0 + (y1 - y0) * (t - a) / (b - a)
    return order[0][1]


def _first_crossing(xs, ys, other_xs, other_ys, x_log: bool):
    """The first x where the series passes from one side of the other to the other side; None if it never does."""
    previous = None
    for x, y in sorted(zip(xs, ys)):
        other = _value_at(other_xs, other_ys, x, x_log)
        if other is None:
            continue
        diff = y - other
        if previous is not None and diff != 0 and (previous[1] < 0) != (diff < 0):
            (x0, d0), (x1, d1) = previous, (x, diff)
            a, b = _scaled([x0, x1], x_log)
            t = a + (b - a) * d0 / (d0 - d1)
            return 10 ** t if x_log else t
        if diff != 0:
            previous = (x, diff)
    return None


# -- bars ------------------------------------------------------------------------------------------

def _tick_names(axis) -> dict:
    """{tick position: its label} of an axis, for naming bars."""
    names = {}
    for tick, text in zip(axis.get_majorticklocs(), axis.get_majorticklabels()):
        if text.get_text().strip():
            names[round(float(tick), 6)] = " ".join(text.get_text().split())
    return names


def _bars(ax) -> str:
    """A bar chart: each bar's category and value (stacked segments summed), or for many bars the extremes
    and each colour group's range."""
    horizontal = any(getattr(c, "orientation", None) == "horizontal" for c in ax.containers)
    value_label = " ".join((ax.get_xlabel() if horizontal else ax.get_ylabel()).split())
    category_label = " ".join((ax.get_ylabel() if horizontal else ax.get_xlabel()).split())
    unit = _unit(value_label)
    names = _tick_names(ax.yaxis if horizontal else ax.xaxis)
    bars: dict = {}          # category -> [(segment name, value, colour)]
    for container in ax.containers:
        segment = _label(container)
        for patch in container.patches:
            if horizontal:
                where, value = patch.get_y() + patch.get_height() / 2, patch.get_width()
            else:
                where, value = patch.get_x() + patch.get_width() / 2, patch.get_height()
            category = names.get(round(float(where), 6), _num(where))
            bars.setdefault(category, []).append((segment, float(value), patch.get_facecolor()))
    groups = _legend_groups(ax)
    head = (f"{'Horizontal bar' if horizontal else 'Bar'} chart of {value_label or 'values'}"
            f"{', one bar per ' + category_label if category_label else ''}{_scale_words(ax)}: {len(bars)} "
            f"bar{'' if len(bars) == 1 else 's'}.")
    if not bars:
        return head
    stacked = any(len(segments) > 1 for segments in bars.values())
    totals = {c: sum(v for _, v, _ in segments) for c, segments in bars.items()}
    if len(bars) <= MAX_LISTED_BARS:
        listed = []
        for category, segments in bars.items():
            if stacked:
                parts = " + ".join(f"{name or 'a segment'} {_at(v, unit)}" for name, v, _ in segments)
                listed.append(f"{category}: {parts} = {_at(totals[category], unit)}")
            else:
                listed.append(f"{category}: {_at(totals[category], unit)}")
        return f"{head} {_sentence('; '.join(listed))}"
    low, high = min(totals, key=totals.get), max(totals, key=totals.get)
    words = [head, f"From {low} at {_at(totals[low], unit)} to {high} at {_at(totals[high], unit)}."]
    if groups:
        ranges = []
        for group, colour in groups:
            members = [totals[c] for c, segments in bars.items() if _same_colour(segments[0][2], colour)]
            if members:
                ranges.append(f"{group}: {len(members)} bar{'s' if len(members) > 1 else ''}, "
                              f"{_at(min(members), unit)}" + (f" to {_at(max(members), unit)}"
                                                               if len(members) > 1 else ""))
        if ranges:
            words.append(_sentence("By colour, " + "; ".join(ranges)))
    return " ".join(words)


def _legend_groups(ax):
    """[(legend entry, its colour)] of the panel's legend, for bars coloured by group."""
    legend = ax.get_legend()
    if legend is None:
        return []
    handles = getattr(legend, "legend_handles", None) or getattr(legend, "legendHandles", [])
    groups = []
    for handle, text in zip(handles, legend.get_texts()):
        colour = handle.get_facecolor() if hasattr(handle, "get_facecolor") else None
        if colour is not None:
            groups.append((text.get_text(), colour))
    return groups


def _same_colour(a, b) -> bool:
    return all(abs(float(p) - float(q)) < 1e-6 for p, q in zip(tuple(a)[:3], tuple(b)[:3]))
