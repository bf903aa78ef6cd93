"""The kvlib CLI: tables, --json contract keys, one-line errors with exit 2."""

import json
import subprocess
import sys

import pytest

from kvlib.cli import main


def run(*args):
    proc = subprocess.run([sys.executable, "-m", "kvlib", *args], capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def test_info_json_contract(capsys):
    assert main(["info", "llama-3.1-8b", "--context", "8192", "--gpu", "H100-SXM", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    for key in ("model", "attention", "num_layers", "num_kv_heads", "head_dim", "num_params",
                "num_params_active", "kv_bytes_per_token", "kv_bytes_per_sequence", "kv_pool_bytes",
                "max_concurrency"):
        assert key in r, key
    assert (r["attention"], r["num_layers"], r["num_kv_heads"], r["head_dim"]) == ("gqa", 32, 8, 128)
    assert r["kv_bytes_per_token"] == 131_072
    assert r["kv_bytes_per_sequence"] == 2**30
    # pool = ceil(79.18 GiB x 1.0) - the printed parts (weights as stored, torch peak, non-torch, Model Runner V2's
    # sampler state, CUDA graphs and the newest release's margin), recomputed here from the parts the report lists;
    # 64-token blocks (0.34)
    cuda = round(79.18 * 2**30)
    import math
    pool = r["vllm_pool"]
    assert set(pool["parts"]) == {"weights", "torch peak", "non-torch", "sampler state", "CUDA graphs", "margin"}
    expected_pool = math.ceil(cuda * 1.0) - sum(part["bytes"] for part in pool["parts"].values())
    assert r["kv_pool_bytes"] == expected_pool
    assert r["kv_pool_tokens"] == expected_pool // (64 * 131_072) * 64
    assert r["max_concurrency"] == expected_pool // 2**30
    # weights as stored: the bf16 count plus the 131,072 x 128 x 2 B rotary cache
    assert pool["parts"]["weights"]["bytes"] == 2 * r["num_params"] + 131_072 * 128 * 2


def test_info_prints_each_part_and_a_model_that_does_not_fit(capsys):
    assert main(["info", "llama-3.1-8b", "--context", "8192", "--gpu", "h100", "--vllm-version", "0.19.0",
                 "--max-num-seqs", "256", "--weights", "14.99GiB"]) == 0
    out = capsys.readouterr().out
    for row in ("- weights", "14.99 GiB: measured figure given", "- torch peak", "- non-torch", "- CUDA graphs",
                "256 x 128,256 x 14 B", "V1 0.18-0.19", " tokens"):
        assert row in out, row
    assert main(["info", "llama-3.3-70b", "--context", "8192", "--gpu", "h100"]) == 0
    out = capsys.readouterr().out
    [line] = [ln for ln in out.splitlines() if "does not fit" in ln]
    assert "does not fit: weights 131.45 GiB > budget " in line


def test_info_mla_and_fp8(capsys):
    main(["info", "deepseek-v3", "--json"])
    r = json.loads(capsys.readouterr().out)
    assert (r["attention"], r["num_kv_heads"], r["head_dim"], r["kv_bytes_per_token"]) == ("mla", 1, 576, 70_272)
    assert r["num_params_active"] < r["num_params"]
    main(["info", "llama-3.1-8b", "--kv-dtype", "fp8", "--json"])
    assert json.loads(capsys.readouterr().out)["kv_bytes_per_token"] == 65_536


def test_info_windows_capped_per_sequence(capsys):
    main(["info", "gpt-oss-20b", "--context", "131072", "--json"])
    r = json.loads(capsys.readouterr().out)
    assert r["kv_bytes_per_token"] == 49_152            # as if every layer kept the token
    assert r["kv_bytes_per_sequence"] == 3_224_371_200  # PROVENANCE.md: windows capped


def test_info_table_names_units():
    code, out, err = run("info", "llama-3.1-8b", "--context", "8192", "--gpu", "h100")
    assert code == 0 and err == ""
    assert "GB" in out and "GiB" in out and "131,072 B (128 KiB)" in out


def test_info_path(tmp_path, capsys):
    import kvlib
    (tmp_path / "config.json").write_text(json.dumps(kvlib.bundled_config("qwen2.5-7b")))
    assert main(["info", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kv_bytes_per_token"] == 57_344


def test_models_and_gpus():
    code, out, _ = run("models", "--json")
    assert code == 0 and len(json.loads(out)) == 27          # the bundled configs (PROVENANCE.md)
    code, out, _ = run("gpus", "--json")
    names = {g["name"] for g in json.loads(out)}
    assert {"H100-SXM", "H100-PCIe", "H200", "B200", "A100-40GB", "A100-80GB", "L40S", "L4", "A10G",
            "RTX-4090", "T4", "MI300X"} <= names


@pytest.mark.parametrize("args,needle", [
    (["info", "no/such-model"], "unknown model"),
    (["info", "llama-3.1-8b", "--context", "-5"], "--context"),
    (["info", "llama-3.1-8b", "--context", "abc"], "--context"),
    (["info", "llama-3.1-8b", "--gpu", "h100"], "--context"),
    (["info", "llama-3.1-8b", "--context", "8192", "--gpu", "V9000"], "unknown GPU"),
    (["info", "llama-3.1-8b", "--utilization", "1.5"], "--utilization"),
    (["info", "llama-3.1-8b", "--tp", "3"], "tp=3"),
    (["info", "llama-3.1-8b", "--overhead", "3 parsecs"], "--overhead"),
    (["info", "llama-3.1-8b", "--weights", "lots"], "--weights"),
    (["info", "llama-3.1-8b", "--vllm-version", "main"], "--vllm-version"),
    (["info", "llama-3.1-8b", "--max-num-seqs", "0"], "--max-num-seqs"),
    (["info", "llama-3.1-8b", "--max-num-batched-tokens", "x"], "--max-num-batched-tokens"),
    (["info", "/nonexistent/config.json"], "unknown model"),
    # vLLM refuses Qwen2.5-7B at TP 8 (the planner's default: one replica per 8-GPU node): 28 % 8 = 4
    (["plan", "qwen2.5-7b", "--users", "100", "--context", "4096", "--itl-ms", "60", "--gpu", "h100"],
     "does not divide the 28 query heads"),
    (["plan", "llama-2-7b", "--users", "100", "--context", "8192", "--itl-ms", "60", "--gpu", "h100"],
     "max_position_embeddings 4,096"),
    (["frobnicate"], "invalid choice"),
    ([], "required"),
])
def test_user_errors_one_line_exit_2(args, needle):
    code, out, err = run(*args)
    assert code == 2
    assert needle in err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def test_bad_config_file_exit_2(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{"num_hidden_layers": "32", "num_attention_heads": 8, "hidden_size": 512}')
    code, _, err = run("info", str(bad))
    assert code == 2 and "num_hidden_layers" in err and len(err.strip().splitlines()) == 1


# --- commands other packages add: the kvlib.commands entry-point group ---------------------------------------
def _commands(monkeypatch, *entries):
    """kvlib's command line as it would be with only ``entries`` (name, target) in the kvlib.commands group."""
    import importlib.metadata as metadata

    from kvlib import cli
    found = [metadata.EntryPoint(name, target, cli.COMMANDS) for name, target in entries]
    monkeypatch.setattr(metadata, "entry_points", lambda group: found if group == cli.COMMANDS else [])


def test_kvlib_drill_is_the_coachs_entry_point(monkeypatch, capsys):
    # installed, the group names kvcoach's command (pyproject.toml): kvlib itself imports nothing of the coach
    from importlib.metadata import entry_points
    assert [(e.name, e.value) for e in entry_points(group="kvlib.commands")] == [("drill", "kvcoach.cli:add_parser")]
    _commands(monkeypatch)
    assert main(["drill", "--help"]) == 2
    assert capsys.readouterr().err.startswith("kvlib: argument command: invalid choice: 'drill'")


def test_a_command_that_does_not_load_is_left_out_in_one_line(monkeypatch, capsys):
    _commands(monkeypatch, ("broken", "kv_course_no_such_module:add_parser"), ("drill", "kvcoach.cli:add_parser"))
    assert main(["gpus", "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ("kvlib: warning: command 'broken' (kv_course_no_such_module:add_parser) did not load: No module "
                   "named 'kv_course_no_such_module'\n")
    assert json.loads(out)[0]["name"]
    assert main(["drill", "--count", "0"]) == 2          # the others still register (drill refuses a count of 0)
    assert "kvlib drill: argument --count" in capsys.readouterr().err
