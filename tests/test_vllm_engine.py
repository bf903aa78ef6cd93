"""kvlib.vllm.engine: what changes with vLLM's engine and release, at each boundary.

Sources: the released wheels' Python files, each boundary read in the release and the one before it:
vllm/config/cache.py (gpu_memory_utilization 0.9 -> 0.92 in 0.20; DEFAULT_BLOCK_SIZE 16 -> 64 and the
extensible KV cache's 1.0 in 0.34), vllm/v1/worker/utils.py request_memory (math.ceil from 0.14),
vllm/v1/core/kv_cache_utils.py _get_kv_cache_groups_uniform_page_size (the smallest bucket through 0.11.2,
'max_num_layers < min_num_layers * 1.25' in 0.12.0-0.17.1, '* 1.5' from 0.18.0), vllm/config/vllm.py
use_v2_model_runner (by architecture in 0.24, dense models in 0.25, every model from 0.29),
vllm/engine/arg_utils.py get_batch_defaults, and V0's swap_space 4 GiB.
"""

import warnings

import pytest

from kvlib.vllm.engine import (
    BOUNDARIES,
    DEFAULT_BLOCK_SIZE,
    NEWEST_CHECKED_RELEASE,
    UncheckedReleaseWarning,
    V0,
    V0_SWAP_SPACE_BYTES,
    V1,
    VllmLogError,
    as_version,
    batch_defaults,
    budget_rounds_up,
    default_block_size,
    default_runner,
    default_utilization,
    group_rule,
    parse_version,
    release_rules,
)
from kvlib.units import GiB


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
    ("0.19.9", 0.90), ("0.19.1", 0.90), ("0.2.7", 0.90), ("0.20.0", 0.92), ("0.33.1", 0.92), ("0.34.0", 1.0),
    (None, 1.0), ((0, 19, 0), 0.90), ((0, 20), 0.92),
])
def test_default_utilization_changes_in_0_20_and_0_34(version, expected):
    assert default_utilization(version) == expected


def test_0_34_keeps_0_92_without_the_extensible_cache():
    # config/cache.py 0.34: DEFAULT_GPU_MEMORY_UTILIZATION = 0.92; resolved_gpu_memory_utilization returns 1.0 only
    # when enable_extensible_kv_cache
    assert default_utilization("0.34.0", extensible=False) == 0.92
    assert default_utilization("0.33.0", extensible=False) == 0.92 == default_utilization("0.33.0")


@pytest.mark.parametrize("version,expected", [("0.8.5", 16), ("0.33.0", 16), ("0.34.0", 64), (None, 64),
                                              ("0.6.4", 16)])
def test_default_block_size(version, expected):
    assert default_block_size(version) == expected
    assert DEFAULT_BLOCK_SIZE == 16          # kvlib's constant stays the 0.2-0.33 default (kvdisplay imports it)


def test_a_release_past_the_newest_read_warns_once_naming_it():
    assert issubclass(UncheckedReleaseWarning, UserWarning) and NEWEST_CHECKED_RELEASE == "0.34.0"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rules = release_rules("0.35.2")
    [w] = [w for w in caught if issubclass(w.category, UncheckedReleaseWarning)]
    assert "0.35.2" in str(w.message) and "0.34.0" in str(w.message) and "\n" not in str(w.message)
    assert rules == release_rules("0.34.0")           # the newest rules, said so
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        release_rules("0.34.0"), default_block_size("0.34.0"), group_rule("0.33.0")   # read: no warning
    with pytest.warns(UncheckedReleaseWarning, match="0.34.0"):
        default_block_size("0.34.1")                  # a patch release kvlib has not read is past it too


@pytest.mark.parametrize("engine,version,expected", [
    (V1, "0.13.9", False), (V1, "0.14.0", True), (V1, "0.20.1", True), (V1, None, True),
    (V0, "0.14.0", False), (V0, None, False), (V0, "0.6.4", False),
])
def test_budget_rounds_up_in_v1_from_0_14(engine, version, expected):
    assert budget_rounds_up(engine, version) is expected


@pytest.mark.parametrize("version,expected", [
    ("0.10.2", "smallest"), ("0.9.0", "smallest"), ("0.11.0", "smallest"), ("0.11.2", "smallest"),
    ("0.12.0", "1.25"), ("0.14.1", "1.25"), ("0.17.1", "1.25"),
    ("0.18.0", "1.5"), ("0.20.0", "1.5"), ("0.34.0", "1.5"),
    ((0, 11, 9), "smallest"), ((0, 12, 0), "1.25"), ((0, 18, 0), "1.5"),
    # a short tuple is the release's .0, as everywhere else (default_utilization((0, 20)) is 0.92):
    # (0, 12) is 0.12.0, the first 1.25 release; (0, 18) is 0.18.0, the first 1.5 release
    ((0, 12), "1.25"), ((0, 18), "1.5"), ((0, 11), "smallest"),
    (None, "1.5"),
])
def test_kv_group_rule_by_release(version, expected):
    assert group_rule(version) == expected


def test_kv_group_rule_refuses_what_is_not_a_version():
    with pytest.raises(VllmLogError, match=r"not a vLLM version: \(0, '11'\)"):
        group_rule((0, "11"))


@pytest.mark.parametrize("version,shape,expected", [
    # config/vllm.py use_v2_model_runner / _is_default_v2_model_runner_model, release by release
    ("0.23.0", {}, "v1"),
    ("0.24.0", {}, "v1"), ("0.24.0", {"architectures": ["LlamaForCausalLM"]}, "v2"),
    ("0.24.0", {"architectures": ["Qwen2ForCausalLM"]}, "v1"),
    ("0.25.0", {}, "v2"), ("0.25.0", {"num_experts": 128}, "v1"), ("0.25.0", {"hybrid": True}, "v1"),
    ("0.25.0", {"num_experts": 60, "architectures": ["Qwen2MoeForCausalLM"]}, "v2"),
    ("0.28.0", {"num_experts": 128}, "v1"), ("0.29.0", {"num_experts": 128}, "v2"),
    ("0.34.0", {"hybrid": True}, "v2"), (None, {}, "v2"),
])
def test_model_runner_v2_by_release_and_shape(version, shape, expected):
    assert default_runner(version, **shape) == expected


def test_the_v1_runner_is_gone_in_0_34_and_v2_absent_before_0_12():
    with pytest.raises(VllmLogError, match="no V1 model runner"):
        release_rules("0.34.0", runner="v1")
    with pytest.raises(VllmLogError, match="no Model Runner V2"):
        release_rules("0.11.2", runner="v2")
    assert release_rules("0.12.0", runner="v2").sampler == "logits"      # opt-in: VLLM_USE_V2_MODEL_RUNNER=1


@pytest.mark.parametrize("version,runner,graphs", [
    # V1 runner: profile_cudagraph_memory subtracted from 0.20 (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS default
    # '1'); Model Runner V2: its profile_cudagraph_memory returns 0 through 0.28, estimates from 0.29
    ("0.19.1", "v1", False), ("0.20.0", "v1", True), ("0.28.0", "v1", True),
    ("0.25.0", "v2", False), ("0.28.0", "v2", False), ("0.29.0", "v2", True), ("0.33.0", "v2", True),
])
def test_cuda_graph_estimate_by_release_and_runner(version, runner, graphs):
    assert release_rules(version, runner=runner).subtracts_cudagraph is graphs


@pytest.mark.parametrize("version,runner,per_logit", [
    # what each sampler path holds at once, per logit (see engine.SAMPLER_BYTES_PER_LOGIT's comments):
    ("0.11.0", "v1", 2 + 4 + 4 + 8 + 8 + 4 + 8),   # bf16, fp32, sort values/indices, torch's index input + cub buffers
    ("0.16.0", "v1", 2 + 4 + 4 + 8 + 8 + 4 + 8),
    ("0.17.0", "v1", 2 + 4 + 4 + 4),               # bf16, fp32 masked in place, softmax, exponential noise
    ("0.28.0", "v1", 2 + 4 + 4 + 4),
    ("0.25.0", "v2", 2), ("0.32.0", "v2", 2),      # Model Runner V2: the logits only
    ("0.33.0", "v2", 2 + 4),                       # + the fp32 copy of for_sampler_warmup's pass
])
def test_sampler_bytes_per_logit_by_release(version, runner, per_logit):
    assert release_rules(version, runner=runner).sampler_bytes_per_logit == per_logit


def test_batch_defaults_by_release():
    h100, b200, a100 = round(79.19 * GiB), round(178.4 * GiB), round(79.15 * GiB)
    # 0.8.0-0.8.4: 1,024 sequences everywhere, the larger batch for 'h100'/'h200' by name
    assert batch_defaults("0.8.0", "v1", a100, "A100") == (1024, 2048)
    assert batch_defaults("0.8.4", "v1", h100, "H100") == (1024, 8192)
    # 0.8.5: any GPU of >= 70 GiB; 0.9+: not an A100
    assert batch_defaults("0.8.5", "v1", a100, "A100") == (1024, 8192)
    assert batch_defaults("0.9.0", "v1", a100, "A100") == (256, 2048)
    # 0.28+: >= 160 GiB takes 16,384 tokens for vllm serve too
    assert batch_defaults("0.27.1", "v1", b200, "B200") == (1024, 8192)
    assert batch_defaults("0.28.0", "v1", b200, "B200") == (1024, 16384)
    assert batch_defaults("0.34.0", "v1", b200, "B200", usage="llm") == (1024, 16384)
    # 0.33+: GB10 leaves the >= 70 GiB tier
    assert batch_defaults("0.32.0", "v1", round(119.7 * GiB), "NVIDIA GB10") == (1024, 8192)
    assert batch_defaults("0.33.0", "v1", round(119.7 * GiB), "NVIDIA GB10") == (256, 2048)


def test_the_release_table_is_in_the_docs():
    """docs/engine.md lists every boundary of the table with its first release (a table row per boundary)."""
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "docs" / "engine.md").read_text()
    for b in BOUNDARIES:
        assert f"| {b.release} |" in text, b.release
