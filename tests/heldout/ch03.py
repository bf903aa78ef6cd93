"""Held-out wrong answers for chapter 03 (multi-head latent attention), from the student notebook alone."""

from __future__ import annotations

from heldout import Answer

Q1, Q2, Q3 = ("ch03_q1_mla_bytes_per_token_from_config", "ch03_q2_kv_bytes_per_token_per_gpu",
              "ch03_q3_name_the_slip")

ANSWERS = [
    Answer(Q1, "mla_bytes_per_token_from_config", "text_config_keyerror", '''
def mla_bytes_per_token_from_config(config, dtype_bytes=2):
    layers = config["num_hidden_layers"]
    return layers * (config["kv_lora_rank"] + config["qk_rope_head_dim"]) * dtype_bytes
''', "Right formula, but forgets the multimodal wrapper: a config nested under text_config raises a KeyError."),
    Answer(Q1, "mla_bytes_per_token_from_config", "nope_for_rope", '''
def mla_bytes_per_token_from_config(config, dtype_bytes=2):
    config = config.get("text_config", config)
    return config["num_hidden_layers"] * (config["kv_lora_rank"] + config["qk_nope_head_dim"]) * dtype_bytes
''', "Takes qk_nope_head_dim for the RoPE key's width instead of qk_rope_head_dim (the non-rotary part of a "
         "head's key, rebuilt from the latent and never cached)."),
    Answer(Q2, "kv_bytes_per_token_per_gpu", "latent_split", '''
def kv_bytes_per_token_per_gpu(config, tp, dtype_bytes=2):
    config = config.get("text_config", config)
    layers = config["num_hidden_layers"]
    if "kv_lora_rank" in config:
        return layers * (config["kv_lora_rank"] + config["qk_rope_head_dim"]) * dtype_bytes // tp
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    return 2 * layers * max(1, kv_heads // tp) * head_dim * dtype_bytes
''', "Splits the MLA latent over the t ranks like GQA's heads, where every rank holds the whole latent and "
         "RoPE key."),
    Answer(Q2, "kv_bytes_per_token_per_gpu", "gqa_no_max_one", '''
def kv_bytes_per_token_per_gpu(config, tp, dtype_bytes=2):
    config = config.get("text_config", config)
    layers = config["num_hidden_layers"]
    if "kv_lora_rank" in config:
        return layers * (config["kv_lora_rank"] + config["qk_rope_head_dim"]) * dtype_bytes
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    return 2 * layers * (kv_heads // tp) * head_dim * dtype_bytes
''', "GQA heads split as K // t without the max(1, ...): past t = K a GPU holds 0 heads instead of a copy of one."),
    Answer(Q3, "name_the_slip", "no_dtype_bytes", '''
def name_the_slip(answer_bytes, layers, latent_dim, rope_dim, dtype_bytes):
    right = layers * (latent_dim + rope_dim)
    if answer_bytes == right:
        return "correct"
    if answer_bytes == 2 * right:
        return "extra_factor_2"
    if answer_bytes == layers * latent_dim:
        return "missing_rope"
    return "other"
''', "Leaves b out of every reference figure: compares bytes with counts of numbers, so only 1-byte cases "
         "come out right."),
    Answer(Q3, "name_the_slip", "factor_2_on_latent_only", '''
def name_the_slip(answer_bytes, layers, latent_dim, rope_dim, dtype_bytes):
    if answer_bytes == layers * (latent_dim + rope_dim) * dtype_bytes:
        return "correct"
    if answer_bytes == layers * (2 * latent_dim + rope_dim) * dtype_bytes:
        return "extra_factor_2"
    if answer_bytes == layers * latent_dim * dtype_bytes:
        return "missing_rope"
    return "other"
''', "Builds the 'extra factor 2' figure by doubling the latent alone (a K and a V of the latent, RoPE key once) "
         "instead of twice the whole L (d_c + d_R) b."),
]
