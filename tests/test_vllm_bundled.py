"""kvlib.vllm.bundled: the real vLLM logs and CPU-engine starts shipped with kvlib, and reading a log file.

Expected names are the files in kvlib/data/vllm_logs and kvlib/data/vllm_cpu (each listed in its PROVENANCE.md);
expected lines are read off the logs by eye.
"""

from pathlib import Path

import pytest

import kvlib
from kvlib.vllm import VllmLogError
from kvlib.vllm.bundled import bundled_cpu_start, bundled_cpu_starts, bundled_logs, read_bundled_log, read_log_file

LOGS = ["02", "04", "05", "07", "12", "14", "16", "17", "20", "25"]   # kvlib/data/vllm_logs/PROVENANCE.md


def test_bundled_logs_are_the_shipped_files():
    assert bundled_logs() == LOGS


def test_read_bundled_log_by_name_with_or_without_the_suffix():
    # 04.log is two V0 block lines (vLLM 0.3.x): '# GPU blocks: 13078, # CPU blocks: 2048', then 3631 / 512
    text = read_bundled_log("04")
    assert text.splitlines() == ["# GPU blocks: 13078, # CPU blocks: 2048", "# GPU blocks: 3631, # CPU blocks: 512"]
    assert read_bundled_log("04.log") == text


def test_an_unknown_log_names_the_ones_there_are():
    with pytest.raises(VllmLogError) as err:
        read_bundled_log("99")
    assert str(err.value) == "no bundled vLLM log '99' (have: " + ", ".join(LOGS) + ")"


def test_bundled_cpu_starts():
    # kvlib/data/vllm_cpu/PROVENANCE.md: five geometries, each started at max_model_len 1000 ('kv1g_len1000')
    assert bundled_cpu_starts() == ["deepseek_mla", "gemma2_hybrid", "llama_gqa", "nemotron_h_pattern",
                                    "qwen3_next_gdn"]
    config, text = bundled_cpu_start("llama_gqa")
    assert isinstance(config, Path) and config.name == "config.json" and config.parent.name == "llama_gqa"
    assert config.is_file()
    # the llama start's line 45: its CPU capacity at max_model_len 1000
    assert ("CPU KV cache size: 1,365,250 tokens, Maximum concurrency for 1,000 tokens per request: 1365.25x"
            in text.splitlines()[44])
    with pytest.raises(VllmLogError) as err:
        bundled_cpu_start("qwen")
    assert str(err.value) == ("no bundled CPU start 'qwen' (have: deepseek_mla, gemma2_hybrid, llama_gqa, "
                              "nemotron_h_pattern, qwen3_next_gdn)")


def test_read_log_file_replaces_undecodable_bytes(tmp_path):
    path = tmp_path / "vllm.log"
    path.write_bytes(b"# GPU blocks: 7\xff\n")
    assert read_log_file(path) == "# GPU blocks: 7\ufffd\n"
    assert read_log_file(str(path)) == "# GPU blocks: 7\ufffd\n"


def test_read_log_file_says_why_it_cannot(tmp_path):
    missing = tmp_path / "missing.log"
    with pytest.raises(VllmLogError) as err:
        read_log_file(missing)
    assert str(err.value) == f"cannot read {missing}: No such file or directory"
    with pytest.raises(VllmLogError) as err:
        read_log_file(tmp_path)
    assert str(err.value) == f"cannot read {tmp_path}: Is a directory"


def test_an_os_error_without_a_reason_is_named_by_its_type(tmp_path, monkeypatch):
    def refuse(self):
        raise PermissionError()          # no errno, no strerror
    monkeypatch.setattr(Path, "read_bytes", refuse)
    with pytest.raises(VllmLogError) as err:
        read_log_file(tmp_path / "vllm.log")
    assert str(err.value) == f"cannot read {tmp_path / 'vllm.log'}: PermissionError"


def test_the_shipped_logs_and_cpu_starts_are_ascii():
    # What bundled.py and cpu_runs.py read (every .log of vllm_logs, every file of vllm_cpu) is plain ASCII, so
    # it reads the same under any locale's encoding (benchmarks/mutation-equivalent.md relies on this).
    data = Path(kvlib.__file__).parent / "data"
    files = sorted((data / "vllm_logs").glob("*.log")) + sorted(p for p in (data / "vllm_cpu").rglob("*")
                                                                 if p.is_file())
    assert len(files) > 10
    for path in files:
        assert path.read_bytes().isascii(), path


def test_the_bundled_stats_lines_and_their_sources():
    # kvlib/data/vllm_stats, read by eye: 1 V0 line (#6206), 2 + 3 + 3 + 3 V1 lines; each line's '[loggers.py:N]'
    # tag is the one sources.json records; vllm-43295's first line: 18 running, 43 waiting, 95.9% of the pool
    from kvlib.vllm.bundled import bundled_stats_logs, read_bundled_stats_log
    sources = bundled_stats_logs()
    counts = {name: len(kvlib.vllm.stats_lines(read_bundled_stats_log(name))) for name in sources}
    assert counts == {"vllm-6206": 1, "vllm-18115": 2, "vllm-37307": 3, "vllm-43295": 3, "spyre-1030": 3}
    for name, source in sources.items():
        for s in kvlib.vllm.stats_lines(read_bundled_stats_log(name)):
            assert (s.source, s.engine) == (source["source_tag"], source["engine"])
    first = kvlib.vllm.stats_lines(read_bundled_stats_log("vllm-43295"))[0]
    assert (first.running, first.waiting, first.kv_cache_usage_percent) == (18, 43, 95.9)
    with pytest.raises(kvlib.vllm.VllmLogError, match=r"^no bundled stats lines 'x'"):
        read_bundled_stats_log("x")
