"""kvlib.vllm.engine: what changes with vLLM's engine and release, at each boundary.

Sources: notes/vllm-kv-accounting.md (default utilization 0.90 -> 0.92 in 0.20; the budget rounded up by
V1 from 0.14; KV-cache groups: smallest bucket through 0.10, threshold 1.25 in 0.14, 1.5 from 0.15) and
vLLM's CacheConfig (DEFAULT_BLOCK_SIZE 16, V0 swap_space 4 GiB).
"""

import pytest

from kvlib.vllm.engine import (
    DEFAULT_BLOCK_SIZE,
    V0,
    V0_SWAP_SPACE_BYTES,
    V1,
    VllmLogError,
    as_version,
    budget_rounds_up,
    default_utilization,
    group_rule,
    parse_version,
)


def test_constants():
    assert (V0, V1) == ("v0", "v1")
    assert DEFAULT_BLOCK_SIZE == 16
    assert V0_SWAP_SPACE_BYTES == 4 * 1024**3      # 4 GiB, not 4 GB: 4,294,967,296


@pytest.mark.parametrize("text,expected", [
    ("0.8.3rc2.dev224+g49c0d11ec", (0, 8, 3)),
    ("v0.10.1.1", (0, 10, 1)),
    ("0.20", (0, 20, 0)),
    ("  1.2.3", (1, 2, 3)),
    ("main", None),
    ("", None),
    (None, None),
    (0.8, None),
    ((0, 9), (0, 9, 0)),
    ((0, 9, 2, 7), (0, 9, 2)),
    ((0, "9"), None),
])
def test_parse_version(text, expected):
    assert parse_version(text) == expected


def test_as_version():
    assert as_version(None) is None
    assert as_version("0.8.5") == (0, 8, 5)
    with pytest.raises(VllmLogError, match=r"not a vLLM version: 'latest'"):
        as_version("latest")


@pytest.mark.parametrize("version,expected", [
    ("0.19.9", 0.90), ("0.19.1", 0.90), ("0.2.7", 0.90), ("0.20.0", 0.92), ("0.33.1", 0.92), (None, 0.92),
    ((0, 19, 0), 0.90), ((0, 20), 0.92),
])
def test_default_utilization_changes_in_0_20(version, expected):
    assert default_utilization(version) == expected


@pytest.mark.parametrize("engine,version,expected", [
    (V1, "0.13.9", False), (V1, "0.14.0", True), (V1, "0.20.1", True), (V1, None, True),
    (V0, "0.14.0", False), (V0, None, False), (V0, "0.6.4", False),
])
def test_budget_rounds_up_in_v1_from_0_14(engine, version, expected):
    assert budget_rounds_up(engine, version) is expected


@pytest.mark.parametrize("version,expected", [
    ("0.10.2", "smallest"), ("0.9.0", "smallest"),
    ("0.11.0", "1.25"), ("0.14.1", "1.25"),
    ("0.15.0", "1.5"), ("0.20.0", "1.5"),
    ((0, 10, 9), "smallest"), ((0, 11, 0), "1.25"), ((0, 15, 0), "1.5"),
    # a short tuple is the release's .0, as everywhere else (default_utilization((0, 20)) is 0.92):
    # (0, 11) is 0.11.0, the first 1.25 release; (0, 15) is 0.15.0, the first 1.5 release
    ((0, 11), "1.25"), ((0, 15), "1.5"), ((0, 10), "smallest"),
    (None, "1.5"),
])
def test_kv_group_rule_by_release(version, expected):
    assert group_rule(version) == expected


def test_kv_group_rule_refuses_what_is_not_a_version():
    with pytest.raises(VllmLogError, match=r"not a vLLM version: \(0, '11'\)"):
        group_rule((0, "11"))
