"""The sparse-attention indexer's cache (kvlib.spec indexer_bytes_per_token): the slips of ``indexer_cache``.

DeepSeek-V3.2 and GLM-5 (DeepSeek Sparse Attention) cache, beside each MLA layer's latent and RoPE key,
one indexer key per token: ``index_head_dim`` values in fp8 and one float32 scale per 128 of them, whole on
every tensor-parallel rank (vLLM's ``DeepseekV32IndexerCache``).
"""

from __future__ import annotations

SLIP_WORDS = {
    "indexer_in_bf16": ("vLLM stores the indexer keys in fp8 (1 byte a value, plus a float32 scale per 128), "
                        "whatever the KV cache's dtype.",
                        "the indexer keys are fp8, whatever the KV dtype."),
}


def _per_layer(i, value_bytes=1, scales=True):
    d = i["index_head_dim"]
    return d * value_bytes + (d // 128 * 4 if scales else 0)


def _indexer_table(i):
    from kvlib.config import load_model
    expected = load_model(i["model"]).indexer_bytes_per_token(i["tp"])
    L = i["indexer_layers"]
    slips = [("indexer_scale_forgotten", L * _per_layer(i, scales=False)), ("indexer_in_bf16", L * _per_layer(i, 2, False)),
             ("indexer_in_bf16", L * _per_layer(i, 2)), ("missing_layers", _per_layer(i))]
    if i["tp"] > 1:
        slips.append(("indexer_split_by_tp", expected // i["tp"]))
    return expected, slips


def _q_indexer_bytes(i):
    """Indexer bytes per token on one GPU: L_idx (D_idx + D_idx / 128 x 4) (ModelSpec.indexer_bytes_per_token)."""
    from .engine import unit_slips
    expected, slips = _indexer_table(i)
    return expected, [(k, v) for k, v in slips if v != expected] + unit_slips(expected)


def _q_indexer_pool_tokens(i):
    """Tokens a budget holds with the indexer: floor(M_kv / (L (d_c + d_R) b + indexer)) (ModelSpec.kv_bytes_per_token)."""
    from kvlib.config import load_model
    spec = load_model(i["model"])
    budget = i["budget_bytes"]
    per_token = spec.kv_bytes_per_token(tp=i["tp"])
    expected = budget // per_token
    index, wrong = _indexer_table(i)
    mla = per_token - index
    slips = [("indexer_forgotten", budget // mla)]
    slips += [(k, budget // (mla + v)) for k, v in wrong if k in ("indexer_in_bf16", "indexer_split_by_tp")]
    return expected, [(k, v) for k, v in slips if v != expected]


def figures(key, inputs):
    """The indexer's bytes per token, for ``indexer_forgotten``'s words."""
    if key == "indexer_forgotten" and "model" in inputs and "index_head_dim" in inputs:
        return {"indexer_bytes": _indexer_table(inputs)[0]}
    return {}


QUANTITIES = {"indexer_bytes": _q_indexer_bytes, "indexer_pool_tokens": _q_indexer_pool_tokens}
