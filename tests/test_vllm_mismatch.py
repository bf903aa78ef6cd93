"""kvlib.vllm.mismatch: the block range a printed GiB figure allows, and why a logged count misses it.

Worked on log 12 (Llama 2 7B: 32 layers, 32 KV heads of 128, 16-bit; vLLM printed "56.18 GiB" and 7,191
blocks). A block of 16 tokens is 2 x 32 x 32 x 128 x 2 x 16 = 8,388,608 B = 8 MiB, so a GiB holds 128 of
them, and the figure's window [56.175, 56.185) GiB holds [56.175 x 128, 56.185 x 128) = [7190.4, 7191.7)
blocks: the range (7190, 7191).
"""

import pytest

from kvlib.vllm.engine import VllmLogError
from kvlib.vllm.mismatch import (LARGER_BLOCK_SIZES, MISMATCH_CAUSES, ROUNDING_SLACK_BLOCKS, block_bytes,
                                 block_range, classify_block_mismatch)

LLAMA2_7B = dict(layers=32, kv_heads=32, head_dim=128, dtype_bytes=2, block_size=16)


def test_block_bytes():
    assert block_bytes(**LLAMA2_7B) == 8 * 2**20                 # 2 x 32 x 32 x 128 x 2 x 16
    assert block_bytes(**LLAMA2_7B, tp=2) == 4 * 2**20           # 16 KV heads a rank
    assert block_bytes(**LLAMA2_7B, tp=64) == 2**18              # tp past K: one whole head a rank, 8 MiB / 32
    assert block_bytes(1, 1, 1, 1, 1) == 2                       # K and V of one element


@pytest.mark.parametrize("field", ["layers", "kv_heads", "head_dim", "dtype_bytes", "block_size", "tp"])
@pytest.mark.parametrize("bad", [0, -1, 1.0, True, "16"])
def test_block_bytes_names_a_bad_field(field, bad):
    inputs = dict(LLAMA2_7B, tp=1)
    inputs[field] = bad
    with pytest.raises(VllmLogError, match=f"^{field} must be a positive integer, got {bad!r}$"):
        block_bytes(**inputs)


def test_block_range():
    assert block_range("56.18", **LLAMA2_7B) == (7190, 7191)
    assert block_range(" 56.18\n", **LLAMA2_7B) == (7190, 7191)          # as printed, spaces around it
    # tp 2: 4 MiB blocks, 256 a GiB: [56.175 x 256, 56.185 x 256) = [14380.8, 14383.4)
    assert block_range("56.18", **LLAMA2_7B, tp=2) == (14380, 14383)
    # 32-token blocks: 16 MiB, 64 a GiB: [3595.2, 3595.8)
    assert block_range("56.18", **dict(LLAMA2_7B, block_size=32)) == (3595, 3595)


@pytest.mark.parametrize("bad,words", [
    (56.18, "available_gib must be the printed figure as a str, got 56.18"),
    (None, "available_gib must be the printed figure as a str, got None"),
    ("abc", "available_gib: not a GiB figure: 'abc'"),
    ("1/0", "available_gib: not a GiB figure: '1/0'"),
    ("", "available_gib: not a GiB figure: ''"),
])
def test_block_range_names_a_bad_figure(bad, words):
    with pytest.raises(VllmLogError) as err:
        block_range(bad, **LLAMA2_7B)
    assert str(err.value) == words


@pytest.mark.parametrize("logged,gpus,cause", [
    (7190, 1, "agrees"), (7191, 1, "agrees"),
    # two blocks either side of (7190, 7191): the printed figure's rounding; three: not
    (7192, 1, "rounding"), (7193, 1, "rounding"), (7189, 1, "rounding"), (7188, 1, "rounding"),
    (7194, 1, "wrong_model"), (7187, 1, "wrong_model"),
    # the heads split over 2 GPUs: (14380, 14383)
    (14380, 2, "tensor_parallel"), (14383, 2, "tensor_parallel"),
    # on 2 GPUs a count outside their range goes on to the other causes
    (7192, 2, "rounding"), (3595, 2, "block_size"), (5000, 2, "wrong_model"),
    # the same counts on one GPU: an fp8 cache gives the same 4 MiB blocks
    (14382, 1, "kv_cache_dtype"),
    # larger blocks: 32 -> (3595, 3595), 64 -> 1797, 128 -> 898, 256 -> 449 (8 MiB x 2, 4, 8, 16)
    (3595, 1, "block_size"), (1797, 1, "block_size"), (898, 1, "block_size"), (449, 1, "block_size"),
    (448, 1, "wrong_model"), (5000, 1, "wrong_model"), (0, 1, "wrong_model"),
])
def test_classify_block_mismatch(logged, gpus, cause):
    assert classify_block_mismatch("56.18", logged, **LLAMA2_7B, gpus=gpus) == cause


def test_classify_tries_only_what_applies():
    # an fp32 cache (16 MiB blocks, (3595, 3595)): the fp8 explanation is for a 16-bit cache only, so the
    # fp8-sized count 14,382 is no known cause; 32-token fp32 blocks (32 MiB) give 1,797
    fp32 = dict(LLAMA2_7B, dtype_bytes=4)
    assert classify_block_mismatch("56.18", 3595, **fp32) == "agrees"
    assert classify_block_mismatch("56.18", 14382, **fp32) == "wrong_model"
    assert classify_block_mismatch("56.18", 1797, **fp32) == "block_size"
    # blocks of 128 already (898; fp8 1,797): only larger ones (256 -> 449) are tried, not 32 (3,595)
    bs128 = dict(LLAMA2_7B, block_size=128)
    assert classify_block_mismatch("56.18", 898, **bs128) == "agrees"
    assert classify_block_mismatch("56.18", 1797, **bs128) == "kv_cache_dtype"
    assert classify_block_mismatch("56.18", 449, **bs128) == "block_size"
    assert classify_block_mismatch("56.18", 3595, **bs128) == "wrong_model"
    # the tp explanation needs gpus > 1: 14,380 on one GPU is the fp8 one (14,380 is inside (14380, 14383))
    assert classify_block_mismatch("56.18", 14380, **LLAMA2_7B) == "kv_cache_dtype"


@pytest.mark.parametrize("logged", [-1, 1.0, True, "7191", None])
def test_classify_names_a_bad_count(logged):
    with pytest.raises(VllmLogError, match=f"^logged_blocks must be a non-negative integer, got {logged!r}$"):
        classify_block_mismatch("56.18", logged, **LLAMA2_7B)


@pytest.mark.parametrize("gpus", [0, -2, 2.0, True])
def test_classify_names_bad_gpus(gpus):
    with pytest.raises(VllmLogError, match=f"^gpus must be a positive integer, got {gpus!r}$"):
        classify_block_mismatch("56.18", 7191, **LLAMA2_7B, gpus=gpus)


def test_the_constants():
    # the causes in the order the docstring gives; the block sizes MLA and FlashInfer backends force; the slack
    assert MISMATCH_CAUSES == ("agrees", "rounding", "tensor_parallel", "kv_cache_dtype", "block_size", "wrong_model")
    assert LARGER_BLOCK_SIZES == (32, 64, 128, 256)
    assert ROUNDING_SLACK_BLOCKS == 2
