"""kvdisplay.course: the notation table as Markdown, and kvlib's command line run for real."""

from __future__ import annotations

import subprocess
import sys

import pytest

import kvdisplay as kd
from kvdisplay.course import TERMINAL_WIDTH
from kvlib import notation


def test_notation_table_has_a_row_per_symbol_with_its_latex_letter():
    lines = kd.notation_table(notation.SYMBOLS).data.splitlines()
    assert len(lines) == 2 + len(notation.SYMBOLS)
    mla = next(line for line in lines if "`kv_lora_rank`" in line)
    # d_c is written d_{c} in LaTeX; kvlib's mla_bytes_per_token calls it latent_dim.
    assert mla.startswith("| $d_{c}$ | `kv_lora_rank` | `latent_dim` |")
    tp = next(line for line in lines if line.startswith("| $t$"))
    assert "vLLM `tensor_parallel_size`" in tp and "| the same |" in tp


def test_terminal_shows_the_command_and_its_real_output():
    text = kd.terminal("info", "llama-3.1-8b").data
    assert text.startswith("```\n$ kvlib info llama-3.1-8b\n") and text.endswith("\n```")
    # 2 * 32 layers * 8 KV heads * 128 * 2 bytes = 131,072 B (Llama 3.1 8B's config, bf16)
    assert "131,072 B" in text


def test_terminal_feeds_stdin():
    text = kd.terminal("drill", "--topic", "kv_per_token", "--count", "1", "--seed", "7", stdin="1\n").data
    assert "answer (bytes)> 1" in text and "score 0/1" in text


def test_terminal_raises_on_a_failing_command():
    with pytest.raises(RuntimeError, match=r"`kvlib info no-such-model` exited 2"):
        kd.terminal("info", "no-such-model")


def test_terminal_breaks_long_lines_between_words():
    # ch00's `kvlib info` prints lines of 200+ characters; the browser would break them inside a word
    args = ("info", "qwen2.5-7b", "--context", "32768", "--gpu", "l40s", "--vllm-version", "0.32.0")
    raw = subprocess.run([sys.executable, "-m", "kvlib", *args], capture_output=True, text=True, check=True).stdout
    assert max(map(len, raw.splitlines())) > TERMINAL_WIDTH          # the case is real
    lines = kd.terminal(*args).data.splitlines()[2:-1]
    assert max(map(len, lines)) <= TERMINAL_WIDTH
    assert " ".join(" ".join(lines).split()) == " ".join(raw.split())        # every word whole, none lost
