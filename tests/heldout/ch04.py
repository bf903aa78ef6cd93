"""Held-out wrong answers for chapter 04 (the pool, paging and waste), from the student notebook alone."""

from __future__ import annotations

from heldout import Answer

Q1, Q2, Q3 = "ch04_q1_pool_tokens", "ch04_q2_block_waste", "ch04_q3_hybrid_sequence_bytes"
Q4, Q5 = "ch04_q4_fp8_pool_tokens", "ch04_q5_allocator_waste"

ANSWERS = [
    Answer(Q1, "pool_tokens", "ceil", '''
import math

def pool_tokens(label_bytes, reported_bytes, utilization, weight_bytes, other_bytes, bytes_per_token):
    return math.ceil((reported_bytes * utilization - weight_bytes - other_bytes) / bytes_per_token)
''', "Right memory and order, but rounds the tokens up (ceiling) instead of taking the floor once at the end."),
    Answer(Q1, "pool_tokens", "utilization_after_weights", '''
def pool_tokens(label_bytes, reported_bytes, utilization, weight_bytes, other_bytes, bytes_per_token):
    return int(((reported_bytes - weight_bytes) * utilization - other_bytes) // bytes_per_token)
''', "Applies u to what the weights leave, (M - W) u - O, instead of to the memory CUDA reports, M u - W - O."),
    Answer(Q2, "expected_block_waste", "half_a_block", '''
def expected_block_waste(num_seqs, block_size):
    return num_seqs * block_size / 2
''', "Takes half a block, bs / 2, per sequence instead of the average of the empty slots over the residues, "
         "(bs - 1) / 2."),
    Answer(Q2, "expected_block_waste", "floor_division", '''
def expected_block_waste(num_seqs, block_size):
    return float(num_seqs * ((block_size - 1) // 2))
''', "Right formula, but floor division drops the half: 7.0 instead of 7.5 per sequence at 16-token blocks."),
    Answer(Q3, "hybrid_kv_bytes_per_sequence", "window_always_full", '''
def hybrid_kv_bytes_per_sequence(config, seq_len, dtype_bytes=2):
    per_token_layer = 2 * config["num_key_value_heads"] * config["head_dim"] * dtype_bytes
    total = 0
    for kind in config["layer_types"]:
        tokens = config["sliding_window"] if kind == "sliding_attention" else seq_len
        total += per_token_layer * tokens
    return total
''', "Gives every windowed layer a full window, even when the sequence is shorter than the window: at most "
         "sliding_window tokens, not always that many."),
    Answer(Q3, "hybrid_kv_bytes_per_sequence", "window_minus_one", '''
def hybrid_kv_bytes_per_sequence(config, seq_len, dtype_bytes=2):
    per_token_layer = 2 * config["num_key_value_heads"] * config["head_dim"] * dtype_bytes
    total = 0
    for kind in config["layer_types"]:
        tokens = min(seq_len, config["sliding_window"] - 1) if kind == "sliding_attention" else seq_len
        total += per_token_layer * tokens
    return total
''', "Caps a windowed layer at w - 1 tokens, vLLM's planning rule for the tokens before the newest, instead of "
         "the window of w tokens the exercise states."),
    Answer(Q4, "fp8_pool_tokens", "no_factor_2", '''
def fp8_pool_tokens(available_bytes, layers, kv_heads, head_dim, block_size):
    block_bytes = block_size * layers * kv_heads * head_dim * 1
    return (available_bytes // block_bytes) * block_size
''', "Leaves out the 2 for K and V in a block's bytes, so the pool holds twice the tokens."),
    Answer(Q4, "fp8_pool_tokens", "no_whole_blocks", '''
def fp8_pool_tokens(available_bytes, layers, kv_heads, head_dim, block_size):
    return available_bytes // (2 * layers * kv_heads * head_dim * 1)
''', "Divides by bytes per token directly, not rounding the pool down to whole blocks of block_size tokens."),
    Answer(Q5, "allocator_waste", "oracle_wastes_nothing", '''
def allocator_waste(requests, policy, block_size, max_seq_len):
    waste = 0
    for prompt, output in requests:
        held = prompt + 1
        if policy == "max_reservation":
            waste += max_seq_len - held
        elif policy == "paged":
            waste += -(-held // block_size) * block_size - held
    return waste
''', "Counts no waste for the oracle, forgetting that its reservation, output - 1 slots not yet reached, is idle "
         "at that step."),
    Answer(Q5, "allocator_waste", "paged_extra_block", '''
def allocator_waste(requests, policy, block_size, max_seq_len):
    waste = 0
    for prompt, output in requests:
        held = prompt + 1
        if policy == "max_reservation":
            allocated = max_seq_len
        elif policy == "oracle":
            allocated = prompt + output
        else:
            allocated = (held // block_size + 1) * block_size
        waste += allocated - held
    return waste
''', "Counts paged blocks as held // bs + 1, an off-by-one that adds a whole empty block when the tokens fill "
         "their last block exactly."),
]
