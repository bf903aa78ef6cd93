"""Held-out wrong answers for chapter 02 (GQA, MHA, MQA and tensor parallelism), from the student notebook alone."""

from __future__ import annotations

from heldout import Answer

Q1, Q2 = "ch02_q1_kv_heads_and_group", "ch02_q2_kv_bytes_per_token_per_gpu"
Q3, Q4 = "ch02_q3_sequences_per_gpu", "ch02_q4_diagnose_colleague"

ANSWERS = [
    Answer(Q1, "kv_heads_and_group", "gpt2_keyerror", '''
def kv_heads_and_group(config):
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads
    return (kv_heads, heads // kv_heads)
''', "Forgets GPT-2's names: reads num_attention_heads only, so a GPT-2 config (n_head) raises a KeyError; "
         "right on every Llama-style config."),
    Answer(Q1, "kv_heads_and_group", "absent_means_mqa", '''
def kv_heads_and_group(config):
    heads = config.get("num_attention_heads") or config.get("n_head")
    kv_heads = config.get("num_key_value_heads") or 1
    return (kv_heads, heads // kv_heads)
''', "Misreads 'absent or null' as one KV head in all (MQA) instead of one KV head per query head (MHA)."),
    Answer(Q2, "kv_bytes_per_token_per_gpu", "no_max_one", '''
def kv_bytes_per_token_per_gpu(layers, kv_heads, head_dim, dtype_bytes, tp):
    return 2 * layers * (kv_heads // tp) * head_dim * dtype_bytes
''', "Splits the heads K // t without the floor of one whole head: past t = K it returns 0 instead of one "
         "head's bytes."),
    Answer(Q2, "kv_bytes_per_token_per_gpu", "bytes_divided_by_tp", '''
def kv_bytes_per_token_per_gpu(layers, kv_heads, head_dim, dtype_bytes, tp):
    return 2 * layers * kv_heads * head_dim * dtype_bytes // tp
''', "Divides the whole model's bytes per token by t, as if the cache kept shrinking past t = K, instead of "
         "each GPU keeping one whole head."),
    Answer(Q3, "sequences_per_gpu", "weights_not_split", '''
def sequences_per_gpu(cuda_memory_bytes, weight_bytes, reserve_bytes, layers, kv_heads, head_dim, dtype_bytes,
                      tp, seq_len):
    per_seq = 2 * layers * max(1, kv_heads // tp) * head_dim * dtype_bytes * seq_len
    budget = cuda_memory_bytes - weight_bytes - reserve_bytes
    return max(0, budget // per_seq)
''', "Subtracts the whole model's weights on every GPU instead of its 1/t share."),
    Answer(Q3, "sequences_per_gpu", "cache_not_split", '''
def sequences_per_gpu(cuda_memory_bytes, weight_bytes, reserve_bytes, layers, kv_heads, head_dim, dtype_bytes,
                      tp, seq_len):
    per_seq = 2 * layers * kv_heads * head_dim * dtype_bytes * seq_len
    budget = cuda_memory_bytes - -(-weight_bytes // tp) - reserve_bytes
    return max(0, budget // per_seq)
''', "Splits the weights but not the cache: sizes each sequence with all K heads instead of the max(1, K // t) "
         "this GPU holds."),
    Answer(Q4, "diagnose_colleague", "guess_from_factor", '''
def diagnose_colleague(claimed_bytes, layers, num_heads, kv_heads, head_dim, dtype_bytes, tp):
    true = 2 * layers * max(1, kv_heads // tp) * head_dim * dtype_bytes
    factor = claimed_bytes // true
    if factor == num_heads // kv_heads:
        return (factor, "query_heads")
    if factor == tp:
        return (factor, "total_not_per_gpu")
    return (factor, "fp32_bytes")
''', "Guesses the slip from the factor (H / K means query heads, t means the total) instead of recomputing each "
         "slip, which the exercise warns against: wrong where the factors coincide or the TP rule changes them."),
    Answer(Q4, "diagnose_colleague", "true_figure_divided_by_tp", '''
def diagnose_colleague(claimed_bytes, layers, num_heads, kv_heads, head_dim, dtype_bytes, tp):
    true = 2 * layers * kv_heads * head_dim * dtype_bytes // tp
    candidates = {
        "query_heads": 2 * layers * num_heads * head_dim * dtype_bytes // tp,
        "total_not_per_gpu": 2 * layers * kv_heads * head_dim * dtype_bytes,
        "fp32_bytes": 2 * layers * kv_heads * head_dim * 4 // tp,
    }
    for slip, figure in candidates.items():
        if figure == claimed_bytes:
            return (claimed_bytes // true, slip)
    return (claimed_bytes // true, "query_heads")
''', "Recomputes each slip, but splits every figure by dividing by t, not by the TP rule max(1, K // t), so "
         "past t = K the true figure and the factor are wrong."),
]
