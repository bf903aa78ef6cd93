"""autograder/checks/answers.py: how an answer is shown to the learner.

A float answer of a byte count used to print as ``9.01943e+10``; a learner compares digits, so from a
million up (where six significant digits turn into an exponent) it prints grouped whole digits.
"""

from __future__ import annotations

import pytest

from autograder.checks import check
from autograder.checks.answers import Float, show_float


@pytest.mark.parametrize("value, shown", [
    (90_194_313_216.0, "90,194,313,216"),      # Mixtral's 8 experts x 32 layers x 176,160,768 x 2 B
    (1_000_000.0, "1,000,000"),
    (-2_500_000.4, "-2,500,000"),
    (999_999.5, "1,000,000"),                  # six significant digits round it to an exponent: digits instead
    (123_456.7, "123,457"),                    # below: six significant digits, as before
    (0.634, "0.634"),
    (12.3456789, "12.3457"),
    (float("inf"), "inf"),
])
def test_show_float_groups_digits_from_a_million(value, shown):
    assert show_float(value) == shown
    assert Float().show(value) == shown


def test_a_byte_count_answered_as_a_float_reads_as_digits():
    # Every expert read: 8 x 32 x 176,160,768 x 2 = 90,194,313,216 B against 2 experts' 22,548,578,304 B.
    def expert_bytes_read(num_experts, top_k, batch_size, moe_layers, expert_params, dtype_bytes):
        return float(num_experts * moe_layers * expert_params * dtype_bytes)

    with pytest.raises(AssertionError) as failed:
        check("ch06_q6_expert_bytes_read", expert_bytes_read)
    message = str(failed.value)
    assert "returned 90,194,313,216; expected 22,548,578,304 bytes" in message
    assert "e+10" not in message
