"""The process ``kvlib.vllm.cpu_engine`` starts with the engine venv's Python: build a tiny model, start vLLM.

Run as a script (``.venv-engine/bin/python tools/engine_child.py --config C --model-dir D ...``),
never imported by kvlib: it needs ``torch``, ``transformers`` and ``vllm``, which only the
engine venv (``./dev.sh engine``) has, and kvlib stays standard-library only. It imports
nothing from kvlib. ``tools/engine_fixtures.py`` imports ``save_model`` from here.

1. If ``D`` holds no weights yet, save a model with random weights (seed 0, bfloat16,
   safetensors) from the config with ``transformers`` -- no hub, no tokenizer -- and print
   ``KVCOURSE-ENGINE-BUILT {"seconds": s}``.
2. Unless ``--build-only``, start it in ``LLM(..., skip_tokenizer_init=True,
   enforce_eager=True)`` (the KV space comes from ``VLLM_CPU_KVCACHE_SPACE`` in the
   environment) and print ``KVCOURSE-ENGINE-READY {...}`` with what the engine itself
   holds: block size, block count, token capacity. vLLM's engine core is a spawned
   process, hence the ``__main__`` guard.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

BUILT = "KVCOURSE-ENGINE-BUILT"
READY = "KVCOURSE-ENGINE-READY"


def save_model(config, dest: Path) -> dict:
    """Save a random-weight model for ``config`` (a transformers config, or a config.json dict) into dest."""
    import torch
    import transformers

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if isinstance(config, dict):
        (dest / "config.json").write_text(json.dumps(config, indent=2))
        config = transformers.AutoConfig.from_pretrained(str(dest))
    config.dtype = torch.bfloat16
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).to(torch.bfloat16)
    model.save_pretrained(dest)
    return json.loads((dest / "config.json").read_text())


def has_weights(model_dir: Path) -> bool:
    return any(Path(model_dir).glob("*.safetensors"))


def start_engine(model_dir: str, max_model_len: int, llm_kwargs: dict) -> dict:
    """Build ``LLM(...)`` on the model, print the READY line with the engine's own KV figures, return them."""
    from vllm import LLM

    llm = LLM(model=str(model_dir), skip_tokenizer_init=True, enforce_eager=True,
              max_model_len=max_model_len, **llm_kwargs)
    cache = llm.llm_engine.vllm_config.cache_config
    figures = {"block_size": cache.block_size, "num_gpu_blocks": cache.num_gpu_blocks,
               "kv_cache_size_tokens": getattr(cache, "kv_cache_size_tokens", None)}
    print(READY, json.dumps(figures), flush=True)
    return figures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, help="config.json to build the model from (when --model-dir has none)")
    ap.add_argument("--model-dir", type=Path, required=True)
    ap.add_argument("--max-model-len", type=int)
    ap.add_argument("--llm-kwargs", default="{}", help="JSON: extra LLM(...) arguments")
    ap.add_argument("--build-only", action="store_true")
    args = ap.parse_args(argv)
    if not has_weights(args.model_dir):
        if args.config is None:
            ap.error(f"--model-dir {args.model_dir} holds no weights and no --config was given")
        t0 = time.monotonic()
        save_model(json.loads(args.config.read_text()), args.model_dir)
        print(BUILT, json.dumps({"seconds": round(time.monotonic() - t0, 1)}), flush=True)
    if not args.build_only:
        start_engine(str(args.model_dir), args.max_model_len, json.loads(args.llm_kwargs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
