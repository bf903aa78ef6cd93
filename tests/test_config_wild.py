"""Configs in the wild never abort: unknown non-KV names leave the parameter count unknown, not the KV figures.

Expected values: Llama 3.1 8B's KV bytes per token by hand (2 x 32 layers x
8 KV heads x 128 x 2 B = 131,072) and its published parameter count
(8,030,261,248, the safetensors total on the Hugging Face model card).
"""

from __future__ import annotations

import json

import pytest

import kvlib as kv
from kvlib.cli import main
from kvlib.config import FFN_WIDTH_FIELDS

LLAMA_PARAMS = 8_030_261_248      # meta-llama/Llama-3.1-8B model card: 8.03B (safetensors total)


def _llama_with_ffn(name=None, value=14_336) -> dict:
    cfg = dict(kv.bundled_config("llama-3.1-8b"))
    del cfg["intermediate_size"]
    if name is not None:
        cfg[name] = value
    return cfg


@pytest.mark.parametrize("name", FFN_WIDTH_FIELDS)
def test_every_known_feed_forward_name_gives_the_count(name):
    assert kv.parse_config(_llama_with_ffn(name)).num_params() == LLAMA_PARAMS


def test_dbrx_style_nested_ffn_config():
    cfg = _llama_with_ffn()
    cfg["ffn_config"] = {"ffn_hidden_size": 14_336}
    assert kv.parse_config(cfg).num_params() == LLAMA_PARAMS


def test_unknown_feed_forward_name_keeps_every_kv_figure():
    spec = kv.parse_config(_llama_with_ffn("mlp_width_we_never_heard_of"))
    assert spec.kv_bytes_per_token() == 2 * 32 * 8 * 128 * 2 == 131_072
    assert spec.kv_bytes_per_sequence(8192) == 131_072 * 8192
    assert spec.kv_bytes_per_token(tp=4) == 131_072 // 4
    with pytest.raises(kv.ParamsError, match="intermediate_size / n_inner / ffn_dim / d_ff"):
        spec.num_params()


def test_info_json_says_why_the_count_is_unknown(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_llama_with_ffn("mlp_width_we_never_heard_of")))
    assert main(["info", str(path), "--context", "8192", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["num_params"] is None and r["num_params_active"] is None
    assert "intermediate_size" in r["num_params_error"] and "missing field" in r["num_params_error"]
    assert (r["num_layers"], r["num_kv_heads"], r["head_dim"]) == (32, 8, 128)
    assert r["kv_bytes_per_token"] == 131_072 and r["kv_bytes_per_sequence"] == 2**30


def test_info_text_says_parameters_unknown(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_llama_with_ffn("mlp_width_we_never_heard_of")))
    assert main(["info", str(path), "--context", "8192", "--gpu", "H100-SXM"]) == 0
    out = capsys.readouterr().out
    # The table pads the label ("parameters   unknown (...)"): check the row itself.
    row = next(line for line in out.splitlines() if line.startswith("parameters"))
    assert row.split(None, 1)[1].startswith("unknown (missing field intermediate_size")
    assert "131,072 B" in out and "1.07 GB (1.00 GiB)" in out      # KV per token and per 8K sequence
    assert "no pool: the weights are unknown" in out


def test_unknown_vocab_name_too():
    cfg = dict(kv.bundled_config("llama-3.1-8b"))
    cfg["vocab_entries"] = cfg.pop("vocab_size")
    spec = kv.parse_config(cfg)
    assert spec.kv_bytes_per_token() == 131_072
    with pytest.raises(kv.ParamsError, match="vocab_size"):
        spec.num_params()
