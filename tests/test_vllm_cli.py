"""Tests for ``kvlib vllm-log``: the JSON contract, list output, and one-line errors (exit 2).

Expected values come from the sidecars (kvlib/data/vllm_logs/NN.json) or from
arithmetic written out here; each names its source.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

import kvlib
from kvlib.cli import main

LOG_DIR = Path(kvlib.__file__).parent / "data" / "vllm_logs"
CONTRACT = {"engine", "available_kv_cache_bytes", "gpu_kv_cache_tokens", "num_gpu_blocks", "max_model_len",
            "max_concurrency", "block_size", "block_size_source"}
WITH_MODEL = {"predicted_blocks_min", "predicted_blocks_max", "predicted_tokens_min", "predicted_tokens_max",
              "agrees", "reason", "cause"}


def sidecar(name):
    return json.loads((LOG_DIR / f"{name}.json").read_text(encoding="utf-8"))


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_json_keys_and_values_for_log_20(capsys):
    code, out, err = run(capsys, "vllm-log", str(LOG_DIR / "20.log"), "--model", "qwen3-0.6b", "--json")
    assert code == 0 and err == ""
    r = json.loads(out)
    assert isinstance(r, dict)                                      # one start -> one object
    assert CONTRACT | WITH_MODEL <= set(r)
    reported = sidecar("20")["reported"]
    assert r["engine"] == sidecar("20")["engine"].lower()
    assert r["available_kv_cache_bytes"] == round(Fraction("69.66") * 2**30)   # sidecar: 69.66 GiB
    assert r["gpu_kv_cache_tokens"] == reported["gpu_kv_cache_tokens"]
    assert r["num_gpu_blocks"] is None                              # sidecar: not printed
    assert r["derived_num_gpu_blocks"] == reported["num_gpu_blocks_derived"]
    assert r["max_model_len"] == sidecar("20")["max_model_len"]
    assert r["max_concurrency"] == reported["max_concurrency"]["x"]
    assert (r["block_size"], r["block_size_source"]) == (16, "default")
    hand = sidecar("20")["check"]["predicted_range_for_rounding"]
    assert [r["predicted_tokens_min"], r["predicted_tokens_max"]] == hand
    assert r["agrees"] is True and r["cause"] is None
    for key in ("available_kv_cache_bytes", "gpu_kv_cache_tokens", "predicted_blocks_min", "predicted_blocks_max"):
        assert type(r[key]) is int


def test_json_without_model_has_the_contract_keys_only(capsys):
    code, out, _ = run(capsys, "vllm-log", str(LOG_DIR / "16.log"), "--json")
    r = json.loads(out)
    assert code == 0 and CONTRACT <= set(r) and not (WITH_MODEL & set(r))
    assert r["available_kv_cache_bytes"] is None                    # sidecar 16: no available figure


def test_several_starts_print_a_list(capsys):
    code, out, _ = run(capsys, "vllm-log", str(LOG_DIR / "07.log"), "--model", "llama-3.1-8b", "--json")
    runs = json.loads(out)
    assert code == 0 and isinstance(runs, list) and len(runs) == 2   # sidecar 07: reported + 1 additional run
    assert [r["num_gpu_blocks"] for r in runs] == [sidecar("07")["reported"]["num_gpu_blocks"],
                                                  sidecar("07")["additional_runs"][0]["num_gpu_blocks"]]
    assert [r["agrees"] for r in runs] == [True, True]              # sidecar 07: MATCH (both runs)


def test_wrong_model_gives_a_cause(capsys):
    code, out, _ = run(capsys, "vllm-log", str(LOG_DIR / "12.log"), "--model", "llama-3.1-8b", "--json")
    r = json.loads(out)
    assert code == 0 and r["agrees"] is False and "wrong model" in r["cause"]


def test_overrides_are_reported(capsys):
    code, out, _ = run(capsys, "vllm-log", str(LOG_DIR / "07.log"), "--model", "llama-3.1-8b",
                       "--block-size", "32", "--kv-dtype", "fp8", "--json")
    first = json.loads(out)[0]
    assert code == 0
    assert (first["block_size"], first["block_size_source"], first["kv_element_bytes"]) == (32, "cli", 1)
    # 32 layers x 32 tokens x 2 x 8 heads x 128 x 1 B = 2 MiB, the same block bytes as bf16 at 16 tokens.
    assert first["bytes_per_block"] == 32 * 32 * 2 * 8 * 128 * 1


def test_human_table_names_units(capsys):
    code, out, _ = run(capsys, "vllm-log", str(LOG_DIR / "14.log"), "--model", "deepseek-v3")
    assert code == 0
    assert "GiB" in out and "GB" in out
    assert "23,904 to 24,064" in out                                # sidecar 14 predicted_range_for_rounding


@pytest.mark.parametrize("argv", [
    ["vllm-log", "no/such/file.log"],
    ["vllm-log", str(LOG_DIR / "20.log"), "--model", "no-such-model"],
    ["vllm-log", str(LOG_DIR / "20.log"), "--model", "llama-3.1-8b", "--tp", "3"],
    ["vllm-log", str(LOG_DIR / "20.log"), "--kv-dtype", "fp7"],
    ["vllm-log", str(LOG_DIR / "PROVENANCE.md")],                   # readable, but no engine start
    ["vllm-log", str(LOG_DIR)],                                     # a folder
])
def test_user_errors_exit_2_with_one_line(capsys, argv):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_a_log_of_a_release_past_the_newest_read_warns_in_one_line(tmp_path, capsys):
    # a V1 start printed by a release kvlib has not read: its figures follow 0.34.0's rules, and stderr says so
    log = tmp_path / "server.log"
    log.write_text("Initializing a V1 LLM engine (v0.35.0) with config: model='meta-llama/Llama-3.1-8B', "
                   "dtype=torch.bfloat16, max_seq_len=8192, tensor_parallel_size=1, pipeline_parallel_size=1, "
                   "kv_cache_dtype=auto, device_config=cuda\nAvailable KV cache memory: 10.00 GiB\n"
                   "GPU KV cache size: 81,920 tokens\n")
    assert main(["vllm-log", str(log), "--model", "llama-3.1-8b"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["kvlib: warning: vLLM 0.35.0 is newer than 0.34.0, the newest release whose source kvlib's rules "
                   "were read from: its figures follow 0.34.0's rules, unchecked"]


def test_a_measured_0_34_start_says_how_its_pool_was_sized(tmp_path, capsys):
    # the lines of vllm 0.34's extensible_kv_cache.py and kv_cache_utils.py, filled in by hand: 7,549 blocks of
    # 64 tokens x 131,072 B = 8 MiB each are 58.98 GiB and 483,136 tokens (Llama 3.1 8B)
    log = tmp_path / "server.log"
    log.write_text("Initializing a V1 LLM engine (v0.34.0) with config: model='meta-llama/Llama-3.1-8B', "
                   "dtype=torch.bfloat16, max_seq_len=8192, tensor_parallel_size=1, kv_cache_dtype=auto\n"
                   "Available KV cache memory: 61.72 GiB\n"
                   "Memory after warmup: 61.31 GiB free, 1.0 GiB committed to the KV cache, 1.9 GiB kept for "
                   "transient activations (1.9 GiB allocated at peak, 0.0 GiB of torch reservation growth); 7549 KV "
                   "cache blocks (58.98 GiB) fit within the requested 79.18 GiB. Torch may reserve up to 19.12 GiB.\n"
                   "GPU KV cache size: 483,136 tokens, Maximum concurrency for 8,192 tokens per request: 58.98x\n"
                   "Extended KV cache to 7549 blocks (58.98 GiB).\n")
    code, out, _ = run(capsys, "vllm-log", str(log), "--model", "llama-3.1-8b")
    assert code == 0
    assert "pool sized by            measured ('Memory after warmup'" in out and "beside it: 61.72 GiB" in out
    assert "block size               64 (default)" in out and "AGREES" in out
    code, out, _ = run(capsys, "vllm-log", str(log), "--json")
    r = json.loads(out)
    assert (r["pool_sizing"], r["estimated_kv_cache_gib"], r["available_kv_cache_gib"]) == ("measured", 61.72, 58.98)
