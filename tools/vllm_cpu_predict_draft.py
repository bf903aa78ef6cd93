"""Draft: read and predict vLLM's CPU-backend KV-cache lines (vLLM 0.32.0), standalone.

Not part of kvlib yet (kvlib's vLLM code is moving into ``kvlib/vllm/``); this module uses the
standard library only, so the tests and kvlib can adopt it as it stands.
"""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PATTERNS = {
    "version": re.compile(r"LLM engine \(v(\d+\.\d+\.\d+[^)\s]*)\)|vLLM(?: API server)? version:? v?(\d+\.\d+\.\d+\S*)"),
    "explicit": re.compile(r"Explicitly set \(([\d.]+)/([\d.]+)\) GiB for KV cache"),
    "capacity": re.compile(r"(\w+) KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) tokens "
                           r"per request: ([\d.]+)x"),
    "group_sizes": re.compile(r"kv cache group sizes \(([\d, ]+)\)"),
    "lcm": re.compile(r"kv lcm block sizes (\d+)"),
    "padding": re.compile(r"Add (\d+) padding layers"),
    "backend": re.compile(r"Using (\w+) backend"),
}


def parse_cpu_log(text: str) -> dict:
    """What a vLLM CPU start printed about its KV cache (None for a line it did not print)."""
    got: dict = {"version": None, "kv_space_gib": None, "device": None, "tokens": None, "max_model_len": None,
                 "concurrency": None, "group_block_sizes": None, "lcm_block_size": None,
                 "padding_layers": None, "attention_backend": None}
    for raw in text.splitlines():
        line = _ANSI.sub("", raw)
        if got["version"] is None and (m := _PATTERNS["version"].search(line)):
            got["version"] = m.group(1) or m.group(2)
        if m := _PATTERNS["explicit"].search(line):
            got["kv_space_gib"] = float(m.group(1))
        if m := _PATTERNS["capacity"].search(line):
            got.update(device=m.group(1), tokens=int(m.group(2).replace(",", "")),
                       max_model_len=int(m.group(3).replace(",", "")), concurrency=m.group(4))
        if m := _PATTERNS["group_sizes"].search(line):
            got["group_block_sizes"] = [int(x) for x in m.group(1).replace(" ", "").split(",") if x]
        if m := _PATTERNS["lcm"].search(line):
            got["lcm_block_size"] = int(m.group(1))
        if m := _PATTERNS["padding"].search(line):
            got["padding_layers"] = int(m.group(1))
        if got["attention_backend"] is None and (m := _PATTERNS["backend"].search(line)):
            got["attention_backend"] = m.group(1)
    return got


# ---------------------------------------------------------------------------------------------
# Prediction. Every rule names the vLLM 0.32.0 source it mirrors (paths under site-packages/vllm).
# ---------------------------------------------------------------------------------------------

GIB = 1 << 30
PINNED_VERSION = "0.32.0"
CPU_BLOCK_SIZE = 128            # platforms/cpu.py CpuPlatform.check_and_update_config: no user block size
CPU_MLA_REFERENCE_BLOCK = 16    # same place: reference CPU_MLA kernel (no AMX) forces 16
CPU_LLM_BATCHED_TOKENS = 4096   # engine/arg_utils.py get_batch_defaults, CPU, LLM class (API server: 2048)
_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def kv_element_bytes(config: dict, kv_cache_dtype: str = "auto") -> int:
    """fp8* caches are 1 byte (v1/kv_cache_interface.py get_kv_quant_mode: FP8_PER_TENSOR, scales are
    layer parameters, not in the page); "auto" is the model dtype (config "dtype"/"torch_dtype")."""
    if kv_cache_dtype.startswith("fp8"):
        return 1
    if kv_cache_dtype != "auto":
        raise ValueError(f"kv_cache_dtype: {kv_cache_dtype!r} is not one the CPU backend takes (auto, fp8*)")
    name = str(config.get("dtype") or config.get("torch_dtype") or "bfloat16")
    return _DTYPE_BYTES[name.removeprefix("torch.")]


def is_mla(config: dict) -> bool:
    """DeepSeek-V2/V3-style latent attention (config/model.py use_mla: a kv_lora_rank on a deepseek model)."""
    return config.get("kv_lora_rank") is not None and str(config.get("model_type", "")).startswith(
        ("deepseek", "kimi"))


def layer_kinds(config: dict) -> list[tuple[str, int | None]]:
    """(kind, window) per attention layer: ("full", None) or ("sliding", W).

    Gemma-2/3-style configs name each layer in layer_types; a plain sliding_window with no
    layer_types (Mistral-style) makes every layer sliding, unless use_sliding_window is false.
    """
    n = int(config["num_hidden_layers"])
    window = config.get("sliding_window")
    types = config.get("layer_types")
    if types:
        return [("sliding", int(window)) if t == "sliding_attention" else ("full", None) for t in types[:n]]
    if window and config.get("use_sliding_window", True):
        return [("sliding", int(window))] * n
    return [("full", None)] * n


def block_size(config: dict, amx: bool = True) -> int:
    """The CPU block size: 128, except MLA on a CPU without AMX tiles (reference CPU_MLA kernel): 16.

    platforms/cpu.py CpuPlatform.check_and_update_config; the AMX_MLA backend is chosen when
    torch.cpu._is_amx_tile_supported() (get_attn_backend_cls), and the log says "Using AMX_MLA backend."
    """
    return CPU_MLA_REFERENCE_BLOCK if is_mla(config) and not amx else CPU_BLOCK_SIZE


def page_bytes(config: dict, bs: int, kv_cache_dtype: str = "auto") -> int:
    """One layer's block: v1/kv_cache_interface.py AttentionSpec.page_size_bytes =
    kv_heads * bs * (head_size + head_size_v) * dtype_bytes; MLA: 1 head, head_size =
    kv_lora_rank + qk_rope_head_dim, head_size_v = 0 (MLAAttentionSpec)."""
    elem = kv_element_bytes(config, kv_cache_dtype)
    if is_mla(config):
        return bs * (int(config["kv_lora_rank"]) + int(config["qk_rope_head_dim"])) * elem
    heads = int(config["num_attention_heads"])
    kv_heads = int(config.get("num_key_value_heads") or heads)
    head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    return kv_heads * bs * 2 * head_dim * elem


def kv_cache_groups(kinds: list[tuple[str, int | None]]) -> tuple[list[tuple[tuple, int]], list[int]]:
    """Group the layers as v1/core/kv_cache_utils.py get_kv_cache_groups does for equal pages.

    Returns ([(kind, layers in group)], [padding layers per bucket]). One spec, or one type
    (all full / all one window): one group of every layer. Otherwise
    _get_kv_cache_groups_uniform_page_size: bucket by spec; group_size = the smallest bucket,
    or the largest if largest < 1.5 x smallest; each bucket splits into ceil(n / group_size)
    groups, layers[i::num_groups] each (so the last groups may be a layer short: padding).
    """
    buckets: dict[tuple, int] = {}
    for kind in kinds:
        buckets[kind] = buckets.get(kind, 0) + 1
    if len(buckets) == 1:
        (kind, n), = buckets.items()
        return [(kind, n)], [0]
    smallest, largest = min(buckets.values()), max(buckets.values())
    group_size = largest if largest < smallest * 1.5 else smallest
    groups, padding = [], []
    for kind, n in buckets.items():
        num_groups = _cdiv(n, group_size)
        padding.append((group_size - n % group_size) % group_size)
        groups += [(kind, len(range(i, n, num_groups))) for i in range(num_groups)]
    return groups, padding


def blocks_per_request(kind: tuple, bs: int, max_model_len: int, in_flight_tokens: int) -> int:
    """cdiv(max_memory_usage_bytes, page) for one group (kv_cache_utils.py
    get_max_concurrency_for_kv_cache_config). Full: cdiv(max_model_len, bs)
    (FullAttentionSpec.max_memory_usage_bytes). Sliding window W: cdiv(min(W - 1 + F,
    max_model_len), bs) + 1 (SlidingWindowSpec.max_admission_blocks_per_request), F =
    VllmConfig.max_in_flight_tokens = max_num_batched_tokens x pp (async scheduling is off on CPU)."""
    name, window = kind
    if name == "sliding":
        return _cdiv(min(window - 1 + in_flight_tokens, max_model_len), bs) + 1
    return _cdiv(max_model_len, bs)


def predict_cpu(config: dict, kv_space_bytes: int, max_model_len: int, *, kv_cache_dtype: str = "auto",
                amx: bool = True, max_num_batched_tokens: int = CPU_LLM_BATCHED_TOKENS,
                version: str = PINNED_VERSION) -> dict:
    """Predict the CPU KV-cache lines of vLLM 0.32.0 from a config and the KV space.

    The space is VLLM_CPU_KVCACHE_SPACE x 2^30 (whole GiB; platforms/cpu.py) or
    --kv-cache-memory-bytes; the CPU worker uses it as is (v1/worker/cpu_worker.py
    CPUWorker.determine_available_memory). num_blocks = space // bytes_per_block, with
    bytes_per_block = the largest group's summed pages (kv_cache_utils.py
    _get_kv_cache_bytes_per_block; the CPU layout LBHNC is layer-outer, each page already a
    multiple of its 32-token kernel page). concurrency = num_blocks / sum of blocks per request;
    tokens = int(concurrency x max_model_len) (get_kv_cache_capacity); printed with "%.2f".
    """
    if version != PINNED_VERSION:
        raise ValueError(f"version: only vLLM {PINNED_VERSION}'s CPU rules are known, the log says {version}")
    bs = block_size(config, amx)
    page = page_bytes(config, bs, kv_cache_dtype)
    groups, padding = kv_cache_groups([("mla", None)] * int(config["num_hidden_layers"]) if is_mla(config)
                                      else layer_kinds(config))
    per_block = max(n for _, n in groups) * page
    num_blocks = kv_space_bytes // per_block
    bpr = sum(blocks_per_request(("full", None) if kind[0] == "mla" else kind, bs, max_model_len,
                                 max_num_batched_tokens) for kind, _ in groups)
    concurrency = num_blocks / bpr
    return {
        "block_size": bs, "page_bytes": page, "groups": [[kind[0], kind[1], n] for kind, n in groups],
        "padding_layers": [p for p in padding if p], "bytes_per_block": per_block, "num_blocks": num_blocks,
        "blocks_per_request": bpr, "tokens": int(concurrency * max_model_len),
        "concurrency": f"{concurrency:.2f}",
        "group_block_sizes": [bs] * len(groups) if len(groups) > 1 else None,
    }


def predict_from_log(config: dict, log_text: str, *, kv_cache_dtype: str | None = None) -> dict:
    """Predict from what the log itself says: the version, the KV space, max_model_len, the
    kv_cache_dtype, max_num_batched_tokens and the MLA backend (AMX or not)."""
    printed = parse_cpu_log(log_text)
    if printed["kv_space_gib"] is None or printed["max_model_len"] is None:
        raise ValueError("log: no 'Explicitly set (...) GiB for KV cache' or no 'CPU KV cache size' line")
    gib = printed["kv_space_gib"]
    if gib != int(gib):
        raise ValueError(f"log: KV space {gib} GiB is rounded to 2 decimals; exact only for whole GiB")
    dtype = kv_cache_dtype or (m.group(1) if (m := re.search(r"kv_cache_dtype=(\w+)", log_text)) else "auto")
    batched = re.search(r"max_num_batched_tokens=(\d+)", log_text)
    return predict_cpu(config, int(gib) * GIB, printed["max_model_len"], kv_cache_dtype=dtype,
                       amx=printed["attention_backend"] != "CPU_MLA",
                       max_num_batched_tokens=int(batched.group(1)) if batched else CPU_LLM_BATCHED_TOKENS,
                       version=printed["version"] or PINNED_VERSION)


def check_fixtures(root) -> list[dict]:
    """Compare predict_from_log with every <geometry>/<run>.log under root."""
    import json
    from pathlib import Path

    rows = []
    for log in sorted(Path(root).glob("*/*.log")):
        config = json.loads((log.parent / "config.json").read_text())
        text = log.read_text(errors="replace")
        printed = parse_cpu_log(text)
        row = {"fixture": f"{log.parent.name}/{log.stem}", "logged_tokens": printed["tokens"],
               "logged_concurrency": printed["concurrency"], "logged_groups": printed["group_block_sizes"]}
        try:
            pred = predict_from_log(config, text)
        except (ValueError, KeyError) as exc:
            row["error"] = str(exc)
        else:
            row.update(predicted_tokens=pred["tokens"], predicted_concurrency=pred["concurrency"],
                       predicted_groups=pred["group_block_sizes"], num_blocks=pred["num_blocks"],
                       block_size=pred["block_size"],
                       agrees=(pred["tokens"], pred["concurrency"], pred["group_block_sizes"])
                       == (printed["tokens"], printed["concurrency"], printed["group_block_sizes"]))
        rows.append(row)
    return rows


if __name__ == "__main__":
    import sys

    rows = check_fixtures(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/vllm_cpu")
    for r in rows:
        print(r)
    sys.exit(0 if rows and all(r.get("agrees") for r in rows) else 1)
