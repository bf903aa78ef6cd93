"""Held-out wrong answers for chapter 01 (the KV-cache formula), from the student notebook alone."""

from __future__ import annotations

from heldout import Answer

Q1, Q2, Q3 = "ch01_q1_bytes_per_token_from_config", "ch01_q2_kv_bytes_per_sequence", "ch01_q3_kv_bytes_per_batch"
Q4, Q5, Q6 = "ch01_q4_sequences_that_fit", "ch01_q5_sequences_on_gpu", "ch01_q6_kv_head_sharing"

ANSWERS = [
    Answer(Q1, "bytes_per_token_from_config", "null_kv_heads", '''
def bytes_per_token_from_config(config, dtype_bytes=2):
    layers = config.get("num_hidden_layers", config.get("n_layer"))
    heads = config.get("num_attention_heads", config.get("n_head"))
    hidden = config.get("hidden_size", config.get("n_embd"))
    kv_heads = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim") or hidden // heads
    return 2 * layers * kv_heads * head_dim * dtype_bytes
''', "Covers num_key_value_heads absent but not null: a config with `null` gives None, and the product raises "
         "a TypeError instead of falling back to one KV head per query head."),
    Answer(Q1, "bytes_per_token_from_config", "head_dim_from_hidden", '''
def bytes_per_token_from_config(config, dtype_bytes=2):
    layers = config.get("num_hidden_layers") or config.get("n_layer")
    heads = config.get("num_attention_heads") or config.get("n_head")
    hidden = config.get("hidden_size") or config.get("n_embd")
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = hidden // heads
    return 2 * layers * kv_heads * head_dim * dtype_bytes
''', "Always takes D as hidden_size // num_attention_heads, ignoring a given head_dim (gemma-2, gpt-oss, Qwen3), "
         "where the exercise says the given head_dim wins."),
    Answer(Q2, "kv_bytes_for_sequence", "no_factor_2", '''
def kv_bytes_for_sequence(layers, kv_heads, head_dim, dtype_bytes, seq_len):
    return layers * kv_heads * head_dim * dtype_bytes * seq_len
''', "Leaves out the 2: counts a key or a value per KV head, not the pair."),
    Answer(Q2, "kv_bytes_for_sequence", "one_layer", '''
def kv_bytes_for_sequence(layers, kv_heads, head_dim, dtype_bytes, seq_len):
    return 2 * kv_heads * head_dim * dtype_bytes * seq_len
''', "Leaves out L: counts one layer's cache, not every layer's."),
    Answer(Q3, "kv_bytes_for_batch", "no_batch", '''
def kv_bytes_for_batch(layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size):
    return 2 * layers * kv_heads * head_dim * dtype_bytes * seq_len
''', "Leaves out B: returns one sequence's cache, not the batch's."),
    Answer(Q3, "kv_bytes_for_batch", "no_seq_len", '''
def kv_bytes_for_batch(layers, kv_heads, head_dim, dtype_bytes, seq_len, batch_size):
    return 2 * layers * kv_heads * head_dim * dtype_bytes * batch_size
''', "Leaves out T: multiplies bytes per token by the sequences, as if each were one token long."),
    Answer(Q4, "sequences_that_fit", "ceil", '''
def sequences_that_fit(budget_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len):
    per_sequence = 2 * layers * kv_heads * head_dim * dtype_bytes * seq_len
    return -(-budget_bytes // per_sequence)
''', "Rounds the number of sequences up (ceiling) instead of down: counts a sequence that does not fit whole."),
    Answer(Q4, "sequences_that_fit", "tokens_not_sequences", '''
def sequences_that_fit(budget_bytes, layers, kv_heads, head_dim, dtype_bytes, seq_len):
    per_token = 2 * layers * kv_heads * head_dim * dtype_bytes
    return budget_bytes // per_token
''', "Divides by bytes per token, not bytes per sequence: returns the tokens that fit, forgetting T."),
    Answer(Q5, "sequences_on_gpu", "gib_read_as_gb", '''
def sequences_on_gpu(gpu, num_params, weight_dtype_bytes, utilization, other_bytes, bytes_per_token, seq_len):
    memory = gpu["cuda_total_gib"] * 10**9
    pool = memory * utilization - num_params * weight_dtype_bytes - other_bytes
    return max(0, int(pool // (bytes_per_token * seq_len)))
''', "Picks the right figure, what CUDA reports, but converts its GiB with 10^9 (decimal GB) instead of 2^30."),
    Answer(Q5, "sequences_on_gpu", "negative_not_zero", '''
def sequences_on_gpu(gpu, num_params, weight_dtype_bytes, utilization, other_bytes, bytes_per_token, seq_len):
    memory = gpu["cuda_total_gib"] * 2**30
    pool = memory * utilization - num_params * weight_dtype_bytes - other_bytes
    return int(pool // (bytes_per_token * seq_len))
''', "Right pool, but no floor at zero: when the weights and other allocations leave no room it returns a "
         "negative number instead of 0."),
    Answer(Q6, "kv_head_sharing", "h_figure_not_difference", '''
def kv_head_sharing(config, dtype_bytes=2):
    layers = config.get("num_hidden_layers") or config.get("n_layer")
    heads = config.get("num_attention_heads") or config.get("n_head")
    hidden = config.get("hidden_size") or config.get("n_embd")
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or hidden // heads
    with_h = 2 * layers * heads * head_dim * dtype_bytes
    return (heads // kv_heads, with_h)
''', "Returns the bytes per token counted with H as the second number, not what counting H adds (H figure less "
         "the K figure)."),
    Answer(Q6, "kv_head_sharing", "ratio_inverted", '''
def kv_head_sharing(config, dtype_bytes=2):
    layers = config.get("num_hidden_layers") or config.get("n_layer")
    heads = config.get("num_attention_heads") or config.get("n_head")
    hidden = config.get("hidden_size") or config.get("n_embd")
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or hidden // heads
    extra = 2 * layers * (heads - kv_heads) * head_dim * dtype_bytes
    return (kv_heads // heads, extra)
''', "Inverts the group size: returns K // H (0 under GQA) instead of the query heads per KV head, H / K."),
]
