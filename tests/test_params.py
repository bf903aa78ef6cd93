"""Parameter counts within 1% of the published counts (model cards / papers)."""

import pytest

import kvlib as kv

# Published totals: model cards and technical reports.
PUBLISHED = {
    "meta-llama/Llama-3.1-8B": 8.03e9,
    "meta-llama/Llama-3.3-70B-Instruct": 70.55e9,
    "meta-llama/Llama-2-7b-hf": 6.74e9,
    "meta-llama/Llama-2-70b-chat-hf": 68.98e9,
    "Qwen/Qwen2.5-7B": 7.62e9,
    "Qwen/Qwen2.5-32B": 32.76e9,
    "mistralai/Mistral-7B-v0.1": 7.24e9,
    "mistralai/Mixtral-8x7B-v0.1": 46.70e9,
    "deepseek-ai/DeepSeek-V3": 671e9,
    "openai/gpt-oss-20b": 20.9e9,
    "google/gemma-2-9b-it": 9.24e9,
    "microsoft/Phi-3-mini-4k-instruct": 3.82e9,
    "openai-community/gpt2-large": 774e6,
    "Qwen/Qwen3-0.6B": 0.6e9,
}

# Active parameters per token, where the publisher states them.
PUBLISHED_ACTIVE = {
    "mistralai/Mixtral-8x7B-v0.1": 12.9e9,   # Mixtral paper: 13B active
    "deepseek-ai/DeepSeek-V3": 37e9,         # DeepSeek-V3 report: 37B activated
    "openai/gpt-oss-20b": 3.6e9,             # gpt-oss model card: 3.6B active (excl. embeddings)
}


@pytest.mark.parametrize("model_id", sorted(PUBLISHED))
def test_total_within_one_percent(model_id):
    count = kv.load_model(model_id).num_params()
    assert abs(count / PUBLISHED[model_id] - 1) < 0.01, count


def test_llama_8b_by_hand():
    # embed 128256 x 4096 twice (untied) + 32 x (attn 4096*(4096+1024+1024+4096)
    # + mlp 3*4096*14336 + 2 norms 4096) + final norm 4096
    d, ff, V = 4096, 14336, 128256
    layer = d * (d + 1024 + 1024 + d) + 3 * d * ff + 2 * d
    assert kv.load_model("llama-3.1-8b").num_params() == 2 * V * d + 32 * layer + d


def test_active_parameters():
    mixtral = kv.load_model("mixtral-8x7b")
    assert abs(mixtral.num_params_active() / PUBLISHED_ACTIVE["mistralai/Mixtral-8x7B-v0.1"] - 1) < 0.01
    v3 = kv.load_model("deepseek-v3")
    assert abs(v3.num_params_active() / 37e9 - 1) < 0.03
    oss = kv.load_model("gpt-oss-20b")
    # the card's 3.6B excludes the embedding table (201,088 x 2,880 = 0.58B)
    assert abs((oss.num_params_active() - 201_088 * 2_880) / 3.6e9 - 1) < 0.03
    dense = kv.load_model("llama-3.1-8b")
    assert dense.num_params_active() == dense.num_params()


def test_mtp_excluded_and_reported_apart():
    v3 = kv.load_model("deepseek-v3")
    # DeepSeek-V3 report: 671B main model + 14B MTP module (which shares the
    # 0.93B embedding and 0.93B head): about 11.5-12B of its own
    assert 11e9 < v3.num_params_mtp() < 12.5e9
    assert kv.load_model("llama-3.1-8b").num_params_mtp() == 0


def test_weight_bytes_by_precision():
    spec = kv.load_model("llama-3.1-8b")
    n = spec.num_params()
    assert spec.weight_bytes(2) == 2 * n
    assert spec.weight_bytes(1) == n
    assert spec.weight_bytes(0.5) == (n + 1) // 2
