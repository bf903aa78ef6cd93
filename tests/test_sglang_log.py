"""kvlib.sglang_log: reading SGLang's startup lines, and kvlib.sglang's pool against real starts.

The logs are tests/fixtures/sglang_logs (their sources and hand checks in PROVENANCE.md and each NN.json).
A printed "X GB" is GiB to two decimals: it stands for [(X - 0.005) 2^30, (X + 0.005) 2^30).
"""

import json
from pathlib import Path

import pytest

from kvlib import GiB
from kvlib.sglang import default_mem_fraction_static, max_total_num_tokens
from kvlib.sglang_log import SGLangLogError, check_start, parse_log

LOGS = Path(__file__).parent / "fixtures" / "sglang_logs"


def _log(name: str):
    [start] = parse_log((LOGS / f"{name}.log").read_text())
    return start, json.loads((LOGS / f"{name}.json").read_text())


def _gib(text: str) -> int:
    return round(float(text) * GiB)


# --- the real logs ---------------------------------------------------------------------------------------------
# (log, model whose config gives the geometry, tokens printed, window worked by hand in the sidecar)
LOG_CASES = [
    ("01", "llama-3.1-8b", 444_500, (444_474, 444_566)),
    ("02", "qwen2.5-7b", 105_531, (105_479, 105_688)),
    ("03", "qwen2.5-32b", 46_611, (46_526, 46_714)),
    ("04", "kimi-k2.5", 2_454_421, (2_454_415, 2_454_594)),
]


@pytest.mark.parametrize("name,model,tokens,window", LOG_CASES)
def test_logs_are_read_as_printed(name, model, tokens, window):
    start, meta = _log(name)
    printed = meta["printed"]
    assert start.tokens == tokens
    assert start.free_before_load_text == printed["free_before_load_gib"]
    assert start.free_after_load_text == printed["free_after_load_gib"]
    assert (start.k_size_text, start.v_size_text, start.kv_size_text) == \
        (printed["k_size_gib"], printed["v_size_gib"], printed["kv_size_gib"])
    assert start.mem_fraction_static == meta["mem_fraction_static"]
    assert start.tp_size == meta["tensor_parallel_size"]
    assert start.ranks == meta["tensor_parallel_size"]


@pytest.mark.parametrize("name,model,tokens,window", LOG_CASES)
def test_pool_predicted_from_each_log(name, model, tokens, window):
    start, meta = _log(name)
    check = check_start(start, model)
    assert (check.tokens_min, check.tokens_max) == window == tuple(meta["check"]["tokens_window"])
    assert check.agrees and check.cell_bytes == meta["check"]["cell_bytes"]
    # and the forward function on the printed figures (their middle) lands in the window too
    f = meta["mem_fraction_static"]
    mid = max_total_num_tokens(model, mem_fraction_static=f, tp=meta["tensor_parallel_size"],
                               free_before_load=_gib(start.free_before_load_text),
                               free_after_load=_gib(start.free_after_load_text))
    assert window[0] <= mid <= window[1]


def test_log_03_by_hand():
    # QwQ-32B over 4 L4s: rest = 6.09 - 21.63 x 0.15 = 2.8455 GiB = 3,055,332,360 B; cell 65,536 B (2 heads a rank);
    # 2.8455 x 2^30 / 65,536 = 46,620.7: the middle of the window, 9 tokens above the 46,611 printed
    assert max_total_num_tokens("qwen2.5-32b", tp=4, mem_fraction_static=0.85, free_before_load=_gib("21.63"),
                                free_after_load=_gib("6.09")) == 46_620


@pytest.mark.parametrize("name,model,size_field,printed", [
    # K = (T + 1) x heads a rank x 128 x 2 B x layers, two decimals of GiB
    ("02", "qwen2.5-7b", "k_size_predicted", "2.82"),       # 105,532 x 4 x 128 x 2 x 28 = 3,025,895,424 B
    ("03", "qwen2.5-32b", "k_size_predicted", "1.42"),      # 46,612 x 2 x 128 x 2 x 64 = 1,527,382,016 B
    ("04", "kimi-k2.5", "kv_size_predicted", "160.63"),     # 2,454,422 x 576 x 2 x 61 = 172,477,142,784 B
])
def test_kv_sizes_printed_from_the_token_count(name, model, size_field, printed):
    start, _ = _log(name)
    check = check_start(start, model)
    assert getattr(check, size_field) == printed and check.sizes_agree


def test_log_01_k_size_as_the_next_docs_build_printed():
    # 01.log (2024-12-26) prints no K size; the same page rebuilt on 2025-01-23 with the same figures printed
    # "K size: 27.13 GB": 444,501 x 8 x 128 x 2 x 32 = 29,130,817,536 B = 27.130 GiB
    start, _ = _log("01")
    assert check_start(start, "llama-3.1-8b").k_size_predicted == "27.13"


def test_a_wrong_geometry_is_caught():
    # 03.log read with Llama 3.1 8B's geometry (32 layers): the cell halves and the window doubles past 46,611
    start, _ = _log("03")
    assert not check_start(start, "llama-3.1-8b").agrees
    # and f read wrong (0.88, the TP 1 default) moves the window below the printed count
    assert not check_start(start, "qwen2.5-32b", mem_fraction_static=0.88).agrees


def test_tp_ranks_take_the_smallest_figure():
    # 04.log: before 283.53 (TP3) ... 283.96 (TP1); after 209.96 (TP2, TP3) ... 210.38 (TP1)
    start, _ = _log("04")
    assert (start.free_before_load_text, start.free_after_load_text, start.pool_end_text) == \
        ("283.53", "209.96", "45.23")


def test_reader_lines_and_starts():
    text = "\n".join([
        "2025-02-04 21:21:40 [2025-02-04 05:21:40 TP0] Load weight begin. avail mem=22.76 GB",
        "[2026-08-28 21:32:38] Load weight end. elapsed=787.55 s, type=X, quant=fp8, avail mem=29.01 GB, "
        "mem usage=82.97 GB.",
        "[2026-08-28 21:32:39] Load weight begin. avail mem=28.81 GB",          # a draft model: not a new start
        "[2026-08-28 21:34:13] Load weight end. type=XMTP, avail mem=30.67 GB, mem usage=-1.86 GB.",
        "[2026-08-28 21:34:15] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 159552, "
        "K size: 1.83 GB, V size: 1.83 GB",
        "[kvcached][INFO] VirtualKV Cache is allocated. #tokens: 248479, K size: 7.99 GB, V size: 7.99 GB",
        "Use sliding window memory pool. full_layer_tokens=63987, swa_layer_tokens=51189",
        "[22:30:53 TP0] Load weight begin. avail mem=176.33 GB",                # after a sized pool: a new start
        "max_total_num_tokens=1256440",
    ])
    first, second = parse_log(text)
    assert (first.free_before_load_text, first.free_after_load_text, first.weight_mem_usage_text) == \
        ("22.76", "30.67", "-1.86")
    assert (first.kv_dtype, first.kv_tokens, first.k_size_text) == ("torch.bfloat16", 159_552, "1.83")
    assert (first.full_layer_tokens, first.swa_layer_tokens) == (63_987, 51_189)
    assert (second.free_before_load_text, second.max_total_num_tokens, second.kv_tokens) == ("176.33", 1_256_440, None)


@pytest.mark.parametrize("text,call,message", [
    ("nothing here", None, "no SGLang startup line found"),
    ("server_args=ServerArgs(tp_size=four)", None, "server_args field tp_size='four' cannot be read (a int expected)"),
    ("max_total_num_tokens=1000", "check", "the log prints no mem_fraction_static (server_args)"),
    ("server_args=ServerArgs(mem_fraction_static=0.9)\nmax_total_num_tokens=1000", "check",
     "the log lacks a 'Load weight begin' or 'Load weight end' line"),
])
def test_reader_refusals_are_one_line(text, call, message):
    with pytest.raises(SGLangLogError) as err:
        [start] = parse_log(text)
        if call:
            check_start(start, "llama-3.1-8b")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_default_fraction_of_log_04_to_the_last_bit():
    # 04.log printed mem_fraction_static=0.8260405859375: MI355X 294,912 MiB, TP 8, 0.5.8.post1, Kimi-K2.5's
    # MoonViT (27 layers of 1,152): 0.908 x 0.95 x (1 - 0.1 x (27 x 1,152^2 / (24 x 1,024^2) - 1))
    start, meta = _log("04")
    assert default_mem_fraction_static(meta["gpu_memory_mib"], tp=8, release="0.5.8.post1") == 0.908
    assert default_mem_fraction_static(meta["gpu_memory_mib"], tp=8, release="0.5.8.post1",
                                       vision=(27, 1152)) == start.mem_fraction_static == 0.8260405859375


def test_kimi_k2_5_weights_are_read_as_int4():
    # 04.log's model keeps quantization_config inside text_config (compressed-tensors, int4, group 32): read
    # there, its experts are int4 and a rank's weights come to tens of GiB, as the log's 73.58 GB "mem usage"
    # says, not the ~239 GiB of 16-bit experts
    from kvlib.weights import config_dict, quantization_scheme, stored_weights
    q = quantization_scheme(config_dict("kimi-k2.5"))
    assert (q["scheme"], q["group_size"], q["method"]) == ("int4", 32, "compressed-tensors")
    assert 60 * GiB < stored_weights("kimi-k2.5", tp=8).bytes_per_rank < 80 * GiB
