"""kvdisplay.state: a hybrid's state as arrays, its all-attention twin, and the sequence view, by hand.

Shapes from vLLM's mamba_utils.py (gated_delta_net_state_shape, mamba2_state_shape) and the bundled configs:
Qwen3-Next-80B-A3B, Gated DeltaNet: conv kernel 4 over 2 x 16 key heads x 128 + 32 value heads x 128 = 8,192
channels, recurrent 32 x 128 x 128, both bf16; 12 full-attention layers of 2 KV heads x 256.
Nemotron-H-56B: Mamba2 conv kernel 4 over 256 heads x 64 + 2 x 8 groups x 256 = 20,480 channels (bf16), SSM
256 x 64 x 256 in fp32; 10 attention layers of 8 KV heads x 128, 54 Mamba2 layers; max_position_embeddings 8,192.
"""

from __future__ import annotations

import kvdisplay as kd
import kvlib as kv


def test_state_arrays_are_the_layer_state_on_a_rank():
    arrays = kd.state_arrays(kv.load_model("qwen3-next-80b-a3b"), "gated_deltanet", tp=4)
    assert {name: a.shape for name, a in arrays.items()} == {"conv": (3, 8192 // 4), "recurrent": (32 // 4, 128, 128)}
    assert sum(a.nbytes for a in arrays.values()) == 3 * 2048 * 2 + 8 * 128 * 128 * 2 == 274_432
    ssm = kd.state_arrays(kv.load_model("nemotron-h-56b"), "mamba2")["ssm"]
    assert ssm.shape == (256, 64, 256) and ssm.itemsize == 4        # fp32, as Nemotron-H's config asks


def test_the_all_attention_twin():
    assert kd.all_attention_bytes_per_token(kv.load_model("qwen3-next-80b-a3b")) == 48 * 2 * 2 * 256 * 2 == 98_304
    assert kd.all_attention_bytes_per_token(kv.load_model("nemotron-h-56b"), tp=4) == 64 * 2 * 2 * 128 * 2   # 8 / 4 heads


def test_sequence_view_gives_the_crossovers_and_the_context_limit():
    view = kd.sequence_memory_view("nemotron-h-56b", 32768, 1)
    # state 54 x (3 x 20,480 x 2 + 256 x 64 x 256 x 4) = 54 x 16,900,096 = 912,605,184 B; KV 10 x 4,096 B a token
    # twin: 912,605,184 / (262,144 - 40,960) = 4,126 exactly; Llama 3.3 70B: / (327,680 - 40,960) = 3,182.9 -> 3,183
    assert "0.91 GB" in view and "<b>4,126</b>" in view and "<b>3,183</b>" in view
    assert "past the config's max_position_embeddings (8,192)" in view
    assert "past the config" not in kd.sequence_memory_view("nemotron-h-56b", 8192, 1)


def test_explorer_redraws_on_a_new_context():
    box = kd.state_explorer(["qwen3-next-80b-a3b", "nemotron-h-56b"])
    before = box.view.value
    box.children[1].value = 1_048_576
    assert box.view.value != before and "1,048,576 tokens" in box.view.value
