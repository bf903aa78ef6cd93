"""kvdisplay.alt_text: a figure described in words, and the PNG output that carries it as its alt text.

Every expected phrase is worked out here from the data the test draws (a slope of 1 on log-log axes is "in
proportion to", 2 -> 16 is 8-fold, where a line crosses a level is linear interpolation by hand), never taken
from the module's output."""

from __future__ import annotations

import types

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

import kvdisplay as kd  # noqa: E402
import kvlib as kv  # noqa: E402
from kvdisplay.alt_text import figure_alt  # noqa: E402


def test_a_line_says_what_against_what_in_which_units_and_its_shape():
    # cache = 2 GB per token: 2, 4, 8, 16 GB at 1, 2, 4, 8 tokens, a slope of 1 on log-log axes; the weights'
    # level, 5 GB, is passed between 2 tokens (4 GB, 1 below) and 4 tokens (8 GB, 3 above): 2 + 2 x 1/4 = 2.5
    fig = kd.line_plot([1, 2, 4, 8], {"cache": [2, 4, 8, 16]}, xlabel="context (tokens)",
                       ylabel="memory (GB, 10⁹ B)", title="The cache grows", hlines={"weights": 5})
    alt = figure_alt(fig)
    assert alt.startswith("The cache grows. Line plot of memory (GB, 10⁹ B) against context (tokens)")
    assert "cache rises in proportion to context from 1 token to 8 tokens (8-fold)" in alt
    assert "weights, flat at 5 GB" in alt
    assert "cache crosses weights near 2.5 tokens" in alt


def test_a_knee_a_flat_line_and_log_axes():
    # per-GPU bytes: 320 / TP down to TP = 8 (K = 8 heads), then one head each: 40 from 8 GPUs on
    tps = [1, 2, 4, 8, 16]
    fig = kd.line_plot(tps, {"GQA-8": [320, 160, 80, 40, 40], "MQA": [40] * 5}, xlabel="TP (GPUs)",
                       ylabel="KV per token (KiB)", xlog=True, ylog=True, xticks=tps)
    alt = figure_alt(fig)
    assert "Line plot of KV per token (KiB) against TP (GPUs), both axes logarithmic" in alt
    assert "GQA-8 falls in inverse proportion to TP from 1 GPU to 8 GPUs (8-fold), then stays flat up to 16 GPUs" in alt
    assert "MQA stays flat from 1 GPU to 16 GPUs" in alt


def test_a_line_names_no_level_of_its_own():
    # a line's values may be what a question asks (tests/leaks.py reads alt text): its shape, not its numbers
    fig = kd.line_plot([2, 3, 5], {"pool": [123.456, 234.567, 345.678]}, xlabel="GPUs (count)",
                       ylabel="pool (GiB)")
    alt = figure_alt(fig)
    assert not any(number in alt for number in ("123", "235", "234", "346", "345"))
    assert "pool rises" in alt and "from GPUs 2 to GPUs 5" in alt   # a unitless x axis: its name before the value


def test_bars_with_their_values_and_many_bars_by_colour():
    fig = kd.bar_plot(["a", "b"], [1.5, 3], ["x", "y"], xlabel="bytes per token (KiB)")
    assert figure_alt(fig) == "Horizontal bar chart of bytes per token (KiB): 2 bars. a: 1.5 KiB; b: 3 KiB."
    labels = [f"m{i}" for i in range(9)]
    fig = kd.bar_plot(labels, [float(i + 1) for i in range(9)], ["GQA"] * 6 + ["MLA"] * 3, xlabel="bytes (KiB)")
    alt = figure_alt(fig)
    assert "9 bars. From m0 at 1 KiB to m8 at 9 KiB." in alt
    assert "By colour, GQA: 6 bars, 1 KiB to 6 KiB; MLA: 3 bars, 7 KiB to 9 KiB." in alt


def test_stacked_bars_sum_their_segments():
    fig = kd.step_bytes_figure([("B=1", 16 * kv.GB, 1 * kv.GB), ("B=8", 16 * kv.GB, 8 * kv.GB)])
    alt = figure_alt(fig)
    assert "Bar chart of bytes read per step (GB, 10⁹ B): 2 bars." in alt
    assert ("B=1: weights (read once per step) 16 GB + KV cache of every sequence 1 GB = 17 GB; "
            "B=8: weights (read once per step) 16 GB + KV cache of every sequence 8 GB = 24 GB.") in alt


def test_a_point_on_the_roof_is_said_to_be_on_it():
    step = kv.roofline.decode_step("llama-3.1-8b", batch=32, context=4096)
    alt = figure_alt(kd.roofline_plot("H100-SXM", [("B=32", step)]))
    assert "rises in proportion to arithmetic intensity" in alt and "then stays flat up to 10,000 FLOP/B" in alt
    assert "1. B=32 at " in alt and "FLOP/B, on H100-SXM roof" in alt


def test_a_learners_own_figure_and_two_panels():
    fig, (left, right) = plt.subplots(1, 2)
    left.plot([1, 2, 3], [3, 2, 1])
    left.set_xlabel("time (s)")
    right.plot([1, 2, 3], [1, 4, 9], label="area")
    right.set_title("grows")
    plt.close(fig)
    alt = figure_alt(fig)
    # matplotlib marks a linear axis with round ticks, here at both ends of the data: 1 and 3, 1 and 9
    assert alt.startswith("Panel 1 of 2: Line plot of values against time (s); the y axis marked from 1 to 3. "
                          "a line falls linearly from 1 s to 3 s (3-fold).")
    # 1, 4, 9 at 1, 2, 3: slope 2 on log-log axes, the square
    assert alt.endswith("Panel 2 of 2: grows. Line plot; the y axis marked from 1 to 9. area rises with the square "
                        "of x from 1 to 3 (9-fold).")


def test_an_empty_figure_says_nothing():
    fig = plt.figure()
    plt.close(fig)
    assert figure_alt(fig) == ""


def test_a_folded_figure_and_the_explorers_bar_carry_their_description():
    img = kd.figure_img(kd.step_bytes_figure([("B=1", 2 * kv.GB, 1 * kv.GB)]))
    assert img.startswith("<img alt='Bar chart of bytes read per step (GB, 10⁹ B): 1 bar. B=1: ")
    from kvdisplay.crossover import step_bytes_svg
    svg = step_bytes_svg(16 * kv.GB, 17 * kv.GB)
    assert "role='img'" in svg
    assert "aria-label='Stacked bar of the bytes one decode step reads: 16.00 GB of weights under 17.00 GB" in svg


def _session(png=True):
    """A stand-in for an IPython session: its display formatter, with a PNG printer for figures as the inline
    backend registers one (here a fixed string)."""
    from IPython.core.formatters import DisplayFormatter
    from matplotlib.figure import Figure

    formatter = DisplayFormatter()
    if png:
        formatter.formatters["image/png"].for_type(Figure, lambda fig: "iVBOR-a-png")
    return types.SimpleNamespace(display_formatter=formatter)


def test_a_displayed_figure_carries_its_alt_text_in_the_pngs_metadata():
    session = _session()
    kd.show_figure_text(session)
    kd.show_figure_text(session)          # a second import does not wrap the printer twice
    fig = kd.line_plot([1, 2], {"cache": [1, 2]}, xlabel="tokens (count)", ylabel="memory (GB)", title="grows")
    data, metadata = session.display_formatter.format(fig)
    assert data["image/png"] == "iVBOR-a-png"
    assert data["text/plain"] == "figure: grows | legend: cache"
    assert metadata["image/png"]["alt"].startswith("grows. Line plot of memory (GB) against tokens (count)")
    assert "cache rises" in metadata["image/png"]["alt"]


def test_no_png_printer_no_alt_text_and_no_error():
    session = _session(png=False)
    kd.show_figure_text(session)
    fig = kd.line_plot([1, 2], {"cache": [1, 2]}, xlabel="tokens (count)", ylabel="memory (GB)")
    data, metadata = session.display_formatter.format(fig)
    assert "image/png" not in data and metadata == {}


@pytest.mark.parametrize("value, written", [(0.5, "0.5"), (131072, "131,000"), (0.0012345, "0.00123")])
def test_numbers_to_three_significant_figures(value, written):
    from kvdisplay.alt_text import _num
    assert _num(value) == written
