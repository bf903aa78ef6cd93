"""Held-out wrong answers for chapter 05 (prefix reuse, agents and offload), from the student notebook alone."""

from __future__ import annotations

from heldout import Answer

Q1, Q2, Q3 = "ch05_q1_prefix_bytes_saved", "ch05_q2_prefill_tokens_saved", "ch05_q3_prefix_key"
Q4, Q5 = "ch05_q4_agent_prefill_tokens", "ch05_q5_fetch_or_recompute"

ANSWERS = [
    Answer(Q1, "prefix_bytes_saved", "every_request", '''
def prefix_bytes_saved(prompt_tokens, num_requests, bytes_per_token, block_size):
    return (prompt_tokens // block_size) * block_size * bytes_per_token * num_requests
''', "Counts every request as saving its copy, B instead of B - 1: one request must still keep the shared blocks."),
    Answer(Q1, "prefix_bytes_saved", "partial_block_shared", '''
def prefix_bytes_saved(prompt_tokens, num_requests, bytes_per_token, block_size):
    blocks = -(-prompt_tokens // block_size)
    return blocks * block_size * bytes_per_token * (num_requests - 1)
''', "Rounds the prompt's blocks up, counting the partial last block as shared, where only full blocks are."),
    Answer(Q2, "prefill_tokens_saved", "last_token_cap", '''
def prefill_tokens_saved(prompt_tokens, num_requests, block_size):
    return ((prompt_tokens - 1) // block_size) * block_size * (num_requests - 1)
''', "Applies the cap at the prompt's last token (num_tokens - 1) to the shared prompt, though each request "
         "goes on with a question, so the cap falls inside the question and costs the prompt nothing."),
    Answer(Q2, "prefill_tokens_saved", "whole_prompt", '''
def prefill_tokens_saved(prompt_tokens, num_requests, block_size):
    return prompt_tokens * (num_requests - 1)
''', "Counts the whole prompt as skipped, including the partial last block that every request computes again."),
    Answer(Q3, "prefix_key", "salt_every_block", '''
import kvlib as kv

def prefix_key(token_ids, block_size, cache_salt):
    key = kv.prefix_cache.NONE_HASH
    extra = (("cache_salt", cache_salt),) if cache_salt is not None else None
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        key = kv.prefix_cache.hash_block(key, token_ids[start:start + block_size], extra_keys=extra)
    return key
''', "Hashes the salt into every block, where only the first block takes it and the chain passes it on."),
    Answer(Q3, "prefix_key", "partial_block_hashed", '''
import kvlib as kv

def prefix_key(token_ids, block_size, cache_salt):
    key = kv.prefix_cache.NONE_HASH
    for i, start in enumerate(range(0, len(token_ids), block_size)):
        extra = (("cache_salt", cache_salt),) if cache_salt is not None and i == 0 else None
        key = kv.prefix_cache.hash_block(key, token_ids[start:start + block_size], extra_keys=extra)
    return key
''', "Hashes the partial last block too, where a partial block has no key: the key should stop at the last "
         "full block."),
    Answer(Q4, "agent_prefill_tokens", "actions_not_cached", '''
def agent_prefill_tokens(system_tokens, observation_tokens, action_tokens, steps, block_size):
    total, cached, history = 0, 0, system_tokens
    for _ in range(steps):
        prompt = history + observation_tokens
        total += prompt - cached
        cached = (prompt // block_size) * block_size
        history = prompt + action_tokens
    return total
''', "Caches only the full blocks of each prompt, not of the prompt and its action, so every step recomputes "
         "the previous action."),
    Answer(Q4, "agent_prefill_tokens", "hits_in_tokens", '''
def agent_prefill_tokens(system_tokens, observation_tokens, action_tokens, steps, block_size):
    total, history = 0, system_tokens
    for step in range(steps):
        prompt = history + observation_tokens
        total += prompt if step == 0 else observation_tokens
        history = prompt + action_tokens
    return total
''', "Counts a hit token by token (each step prefills only its new observation), where a hit covers whole "
         "blocks and the partial last block is computed again."),
    Answer(Q5, "fetch_or_recompute", "peak_not_mfu", '''
def fetch_or_recompute(kv_bytes_per_token, num_params, layers, num_heads, head_dim, tokens, link_bytes_per_s,
                       peak_flop_per_s, mfu, fetch_overhead_s):
    fetch = fetch_overhead_s + kv_bytes_per_token * tokens / link_bytes_per_s
    flops = 2 * num_params * tokens + 2 * layers * num_heads * (2 * head_dim) * tokens * (tokens + 1) / 2
    recompute = flops / peak_flop_per_s
    return "fetch" if fetch <= recompute else "recompute"
''', "Divides the prefill FLOPs by the peak rate instead of the achieved rate mfu x peak, so recomputing looks "
         "faster than it is."),
    Answer(Q5, "fetch_or_recompute", "attention_d_not_2d", '''
def fetch_or_recompute(kv_bytes_per_token, num_params, layers, num_heads, head_dim, tokens, link_bytes_per_s,
                       peak_flop_per_s, mfu, fetch_overhead_s):
    fetch = fetch_overhead_s + kv_bytes_per_token * tokens / link_bytes_per_s
    flops = 2 * num_params * tokens + 2 * layers * num_heads * head_dim * tokens * (tokens + 1) / 2
    recompute = flops / (mfu * peak_flop_per_s)
    return "fetch" if fetch <= recompute else "recompute"
''', "Counts the attention term with D instead of 2D (scores and weighted values each cost 2 D per pair), "
         "halving attention's FLOPs."),
]
