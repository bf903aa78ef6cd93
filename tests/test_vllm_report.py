"""kvlib.vllm.report: the JSON object ``kvlib vllm-log --json`` prints, key by key.

The keys are a contract (other tools read them), so each is checked against the field it must carry: every
field below holds a value no other field holds, and the expected dicts are written out by hand.
"""

from dataclasses import replace

from kvlib.vllm.log import EngineStart
from kvlib.vllm.predict import LogPrediction
from kvlib.vllm.report import report

# One engine start with a distinct value in every field (a V1 start on 2 ranks that printed its token
# capacity but no block count, no block size).
START = EngineStart(
    index=3, first_line=10, last_line=42, engine="v1", engine_evidence="'V1 LLM engine' line", vllm_version="0.20.2",
    model="org/model", dtype="bfloat16", kv_cache_dtype="auto", tensor_parallel_size=2, pipeline_parallel_size=1,
    block_size=None, block_size_line=None, enforce_eager=False, max_model_len=4096,
    max_model_len_source="concurrency line", available_kv_cache_text="10.00",
    available_kv_cache_source="Available KV cache memory", available_kv_cache_by_rank=(("0", "10.00"), ("", "10.01")),
    num_gpu_blocks=None, num_gpu_blocks_computed=None, num_cpu_blocks=2048, gpu_kv_cache_tokens=81_920,
    gpu_kv_cache_tokens_source="GPU KV cache size line", max_concurrency=20.0, max_concurrency_text="20.00",
    combined_capacity_line=False, model_weights_gib=12.55, model_weights_text="12.55 GiB",
    total_gpu_memory_gib=79.19, gpu_memory_utilization=0.9, non_torch_gib=0.16, activation_peak_gib=2.38,
    peak_torch_gib=None, cudagraph_estimate_gib=None, kv_cache_needed_gib=None, num_ranks_reporting=2,
    device="gpu", kv_cache_group_block_sizes=(16, 32), attention_backend="FLASH_ATTN", max_num_batched_tokens=8192,
    mamba_cache_mode="align", mamba_ssm_cache_dtype="float32", mamba_padding_text="1.49", enable_prefix_caching=True)

# What report(START) must print: the figures as the log printed them, and 81,920 tokens / 16 = 5,120 blocks
# derived (no block size printed: vLLM's default 16).
PLAIN = {
    "index": 3, "first_line": 10, "last_line": 42, "engine": "v1", "engine_evidence": "'V1 LLM engine' line",
    "vllm_version": "0.20.2", "model_in_log": "org/model", "dtype": "bfloat16", "kv_cache_dtype": "auto",
    "tensor_parallel_size": 2, "pipeline_parallel_size": 1, "available_kv_cache_gib": 10.0,
    "available_kv_cache_bytes": 10 * 2**30,       # 10.00 x 2^30 = 10,737,418,240
    "available_kv_cache_source": "Available KV cache memory",
    "available_kv_cache_by_rank": [{"process": "0", "gib": 10.0}, {"process": None, "gib": 10.01}],
    "pool_sizing": None, "pool_sizing_evidence": None, "estimated_kv_cache_gib": None,     # START leaves them unset
    "gpu_kv_cache_tokens": 81_920, "gpu_kv_cache_tokens_source": "GPU KV cache size line", "num_gpu_blocks": None,
    "num_gpu_blocks_computed": None, "num_cpu_blocks": 2048, "max_model_len": 4096,
    "max_model_len_source": "concurrency line", "max_concurrency": 20.0,
    "derived_num_gpu_blocks": 5120, "derived_gpu_kv_cache_tokens": None,
    "derived_note": "gpu_kv_cache_tokens / block_size (one KV-cache group assumed)",
    "block_size": 16, "block_size_source": "default", "model_weights_gib": 12.55, "model_weights_printed": "12.55 GiB",
    "total_gpu_memory_gib": 79.19, "gpu_memory_utilization": 0.9, "num_ranks_reporting": 2, "device": "gpu",
    "attention_backend": "FLASH_ATTN", "max_num_batched_tokens": 8192, "kv_cache_group_block_sizes": [16, 32],
    # no 'Setting attention block size' line (block_size_line None): no printed attention block
    "attention_block_size_printed": None, "mamba_padding_percent_printed": "1.49", "mamba_cache_mode": "align",
    "mamba_ssm_cache_dtype": "float32",
}

# A prediction with a distinct value in every field.
PREDICTION = LogPrediction(
    model="org/model-id", engine="v1", block_size=32, block_size_source="cli", kv_cache_dtype="fp8",
    kv_element_bytes=1, tensor_parallel_size=4, pipeline_parallel_size=2, page_bytes=1111, bytes_per_block=2222,
    kv_cache_groups=3, available_bytes_min=100, available_bytes_max=200, blocks_min=5, blocks_max=6, tokens_min=160,
    tokens_max=192, concurrency_min=1.25, concurrency_max=1.5, compared="gpu_kv_cache_tokens", logged=81_920,
    agrees=False, error_blocks=-7, error_tokens=-224, implied_available_bytes_min=300,
    implied_available_bytes_max=400, reason="does not agree: a cause", cause="a cause", alternatives=("alt",),
    scenarios=("scenario",), notes=("a note",), derived_blocks_min=None, derived_blocks_max=None,
    num_cpu_blocks_default_swap=512, stages=({"stage": 0},), path="cpu", kv_cache_group_block_sizes=(128, 128),
    hybrid={"block_size": 272})

PREDICTED = {
    "model": "org/model-id", "kv_cache_dtype_used": "fp8", "kv_element_bytes": 1, "tensor_parallel_size_used": 4,
    "pipeline_parallel_size_used": 2, "block_size": 32, "block_size_source": "cli", "page_bytes": 1111,
    "bytes_per_block": 2222, "kv_cache_groups": 3, "available_kv_cache_bytes_min": 100,
    "available_kv_cache_bytes_max": 200, "predicted_blocks_min": 5, "predicted_blocks_max": 6,
    "predicted_tokens_min": 160, "predicted_tokens_max": 192, "predicted_concurrency_min": 1.25,
    "predicted_concurrency_max": 1.5, "predicted_num_cpu_blocks": 512, "derived_available_kv_cache_bytes_min": 300,
    "derived_available_kv_cache_bytes_max": 400, "compared": "gpu_kv_cache_tokens", "agrees": False,
    "error_blocks": -7, "error_tokens": -224, "reason": "does not agree: a cause", "cause": "a cause",
    "alternatives": ["alt"], "scenarios": ["scenario"], "stages": [{"stage": 0}], "notes": ["a note"],
    "predicted_path": "cpu", "predicted_kv_cache_group_block_sizes": [128, 128], "predicted_hybrid": {"block_size": 272},
}


def test_every_key_carries_its_field():
    assert report(START) == PLAIN


def test_a_prediction_adds_its_keys_and_its_block_size():
    out = report(START, PREDICTION)
    assert out == PLAIN | PREDICTED
    # the lists are copies: the report can be changed without touching the prediction
    out["stages"][0]["stage"] = 9
    assert PREDICTION.stages[0] == {"stage": 0}
    empty = replace(PREDICTION, kv_cache_group_block_sizes=None)
    assert report(START, empty)["predicted_kv_cache_group_block_sizes"] is None
    assert report(START, replace(PREDICTION, kv_cache_group_block_sizes=()))["predicted_kv_cache_group_block_sizes"] \
        is None


def test_block_size_and_its_source():
    # --block-size given: it wins
    assert (report(START, block_size=32)["block_size"], report(START, block_size=32)["block_size_source"]) == \
        (32, "cli")
    # printed by the log
    logged = report(replace(START, block_size=64))
    assert (logged["block_size"], logged["block_size_source"]) == (64, "log")
    # 81,920 / 64 = 1,280 blocks derived with it
    assert logged["derived_num_gpu_blocks"] == 1280
    # a CPU start that printed its group sizes (16, 32): the first one, from the log
    cpu = report(replace(START, device="cpu"))
    assert (cpu["block_size"], cpu["block_size_source"]) == (16, "log")
    # a CPU start without them: the CPU backend's own block of 128 (vLLM platforms/cpu.py)
    cpu = report(replace(START, device="cpu", kv_cache_group_block_sizes=None))
    assert (cpu["block_size"], cpu["block_size_source"]) == (128, "cpu backend")
    assert cpu["kv_cache_group_block_sizes"] is None
    assert cpu["derived_num_gpu_blocks"] == 640            # 81,920 / 128
    # a GPU start with nothing printed: vLLM's default 16
    unknown = report(replace(START, device=None))
    assert (unknown["block_size"], unknown["block_size_source"]) == (16, "default")
    assert report(replace(START, kv_cache_group_block_sizes=()))["kv_cache_group_block_sizes"] is None


def test_derived_figures():
    # a token count that is no whole number of 16-token blocks: no block count derived (81,928 / 16 = 5,120.5)
    odd = report(replace(START, gpu_kv_cache_tokens=81_928))
    assert (odd["derived_num_gpu_blocks"], odd["derived_gpu_kv_cache_tokens"], odd["derived_note"]) == \
        (None, None, None)
    # a block count printed, no tokens: 7,191 blocks x 16 = 115,056 tokens (log 12's count)
    blocks = report(replace(START, gpu_kv_cache_tokens=None, num_gpu_blocks=7191))
    assert (blocks["derived_num_gpu_blocks"], blocks["derived_gpu_kv_cache_tokens"], blocks["derived_note"]) == \
        (None, 115_056, "num_gpu_blocks x block_size")
    # both printed: nothing derived
    both = report(replace(START, num_gpu_blocks=5120))
    assert (both["derived_num_gpu_blocks"], both["derived_gpu_kv_cache_tokens"], both["derived_note"]) == \
        (None, None, None)
    # neither printed: nothing derived
    none = report(replace(START, gpu_kv_cache_tokens=None))
    assert (none["derived_num_gpu_blocks"], none["derived_gpu_kv_cache_tokens"], none["derived_note"]) == \
        (None, None, None)


def test_derived_blocks_from_the_prediction():
    # the prediction knows which block counts print as the logged tokens (hybrid groups): one count, taken
    one = report(START, replace(PREDICTION, derived_blocks_min=2560, derived_blocks_max=2560))
    assert (one["derived_num_gpu_blocks"], one["derived_note"]) == \
        (2560, "blocks whose token figure is the logged one, for the model given")
    # two counts possible: none is named (and the tokens / block_size rule is not used instead)
    two = report(START, replace(PREDICTION, derived_blocks_min=2560, derived_blocks_max=2561))
    assert (two["derived_num_gpu_blocks"], two["derived_note"]) == (None, None)
    # no figure from the prediction: tokens / the start's block size (the CLI passes its --block-size to both),
    # 81,920 / 16 = 5,120, or 81,920 / 32 = 2,560 with --block-size 32
    plain = report(START, PREDICTION)
    assert (plain["derived_num_gpu_blocks"], plain["derived_note"]) == \
        (5120, "gpu_kv_cache_tokens / block_size (one KV-cache group assumed)")
    assert report(START, PREDICTION, block_size=32)["derived_num_gpu_blocks"] == 2560


def test_a_measured_start_says_so_and_takes_the_releases_block():
    # a 0.34 start sized after warmup: the estimate printed beside the pool, and 0.34's default block of 64 tokens
    # (config/cache.py DEFAULT_BLOCK_SIZE): 483,136 tokens / 64 = 7,549 blocks derived
    start = replace(START, vllm_version="0.34.0", pool_sizing="measured", pool_sizing_evidence="the warmup line",
                    estimated_kv_cache_text="61.72", gpu_kv_cache_tokens=483_136, available_kv_cache_text="58.98")
    r = report(start)
    assert (r["pool_sizing"], r["pool_sizing_evidence"], r["estimated_kv_cache_gib"]) == \
        ("measured", "the warmup line", 61.72)
    assert (r["block_size"], r["block_size_source"], r["derived_num_gpu_blocks"]) == (64, "default", 7549)
