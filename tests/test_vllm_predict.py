"""kvlib.vllm.predict: figures predicted from a log, against what real vLLM logs printed."""

import pytest

from kvlib import load_model, parse_config
from kvlib.vllm import parse_log, predict_from_log, read_bundled_log

# facebook/opt-125m (log 02's model, not bundled): 12 layers, 12 heads of 64, fp16 (02.json's model_kv)
OPT_125M = parse_config({"num_hidden_layers": 12, "num_attention_heads": 12, "hidden_size": 768,
                         "vocab_size": 50272, "ffn_dim": 3072, "model_type": "opt"}, name="facebook/opt-125m")


@pytest.mark.parametrize("log,index,spec,logged_cpu_blocks", [
    # V0 sizes the CPU pool from swap_space = 4 GiB: 4 x 2^30 // bytes per block. Each count as the log printed:
    # opt-125m: 16 x 12 layers x 2 x 12 x 64 x 2 B = 589,824 B; 4,294,967,296 // 589,824 = 7,281 (4 GB: 6,781)
    ("02", 0, OPT_125M, 7281),
    # Llama 3.1 8B: 2 MiB per block, 4 GiB / 2 MiB = 2,048 (4 GB would give 1,907)
    ("07", 0, load_model("llama-3.1-8b"), 2048),
    ("07", 1, load_model("llama-3.1-8b"), 2048),
    # Llama 2 7B: 16 x 32 x 2 x 32 x 128 x 2 B = 8 MiB per block, 4 GiB / 8 MiB = 512
    ("12", 0, load_model("llama-2-7b"), 512),
])
def test_v0_cpu_blocks_from_the_default_4_gib_swap_space(log, index, spec, logged_cpu_blocks):
    start = parse_log(read_bundled_log(log))[index]
    assert start.engine == "v0" and start.num_cpu_blocks == logged_cpu_blocks
    assert predict_from_log(start, spec).num_cpu_blocks_default_swap == logged_cpu_blocks


def test_v1_predicts_no_cpu_blocks():
    start = parse_log("Available KV cache memory: 3.81 GiB\nGPU KV cache size: 31,200 tokens")[0]
    assert start.engine == "v1"
    assert predict_from_log(start, load_model("llama-3.1-8b")).num_cpu_blocks_default_swap is None
