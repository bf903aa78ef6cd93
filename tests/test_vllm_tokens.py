"""kvlib.vllm.tokens: from blocks to the token and concurrency figures vLLM prints, worked by hand.

Source of every rule: notes/vllm-kv-accounting.md, "How concurrency is computed" (vLLM's
get_max_concurrency_for_kv_cache_config): blocks per request = sum over groups of
full: ceil(mml / bs); sliding window: ceil(min(W - 1 + F, mml) / bs) + 1; chunked: ceil(min(C + F, mml) / bs);
a Mamba2 / Gated DeltaNet state group its state pages (v1/kv_cache_interface.py MambaSpec).
"""


from kvlib import load_model
from kvlib.spec import ModelSpec
from kvlib.vllm.layout import Layout
from kvlib.vllm.tokens import Scenario, _blocks_per_request, fmt2

GPT_OSS = load_model("gpt-oss-20b")      # 24 layers: sliding (W = 128) and full alternating
CHUNKED = ModelSpec(name="chunked", model_type="llama4", num_layers=2, num_heads=8, num_kv_heads=8, head_dim=64,
                    hidden_size=None, vocab_size=None, intermediate_size=None, layer_kinds=("chunked", "full"),
                    attention_chunk_size=8192)


def test_sliding_window_blocks_per_request():
    # W = 128, F = 2,048, mml = 8,192, bs = 16: sliding ceil((127 + 2048) / 16) + 1 = ceil(135.94) + 1 = 137,
    # full ceil(8192 / 16) = 512; 649 in all
    assert _blocks_per_request(("full", "sliding"), GPT_OSS, 16, 8192, 2048) == 649
    # F doubled (0.33's async scheduling): ceil((127 + 4096) / 16) + 1 = 264 + 1 = 265, + 512 = 777
    assert _blocks_per_request(("full", "sliding"), GPT_OSS, 16, 8192, 4096) == 777
    # mml below the window + F: sliding ceil(1000 / 16) + 1 = 64, full ceil(1000 / 16) = 63
    assert _blocks_per_request(("full", "sliding"), GPT_OSS, 16, 1000, 2048) == 127
    # W - 1 + F exactly a multiple of bs: (127 + 1) / 16 = 8, + 1 = 9
    assert _blocks_per_request(("sliding",), GPT_OSS, 16, 8192, 1) == 9
    # W - 1 + F one past a multiple of bs: ceil((127 + 2) / 16) + 1 = 9 + 1 = 10 (W - 2 would give 9)
    assert _blocks_per_request(("sliding",), GPT_OSS, 16, 8192, 2) == 10
    # without F there is no sliding-window figure
    assert _blocks_per_request(("full", "sliding"), GPT_OSS, 16, 8192, None) is None


def test_state_groups_and_group_block_sizes():
    # vLLM's MambaSpec.max_memory_usage_bytes: a state group takes its state pages whatever the context.
    # Full at a 384-token block: ceil(1000 / 384) = 3; two Mamba2 groups of 3 pages ('align' + checkpoint): 9.
    layout = Layout(196608, 2, ("full", "mamba2", "mamba2"), (("full", 384), ("mamba2", 384)), (), 3)
    assert _blocks_per_request(layout.groups, GPT_OSS, 128, 1000, None, layout) == 9
    # without a layout a state group's pages are unknown: no figure
    assert _blocks_per_request(layout.groups, GPT_OSS, 128, 1000, None) is None
    # each group its own block (Gemma 4's sliding layers at 4 x 128): full ceil(1000 / 128) = 8, sliding
    # ceil(min(127 + 4,096, 1000) / 512) + 1 = 3
    layout = Layout(262144, 1, ("full", "sliding"), (("full", 128), ("sliding", 512)))
    assert _blocks_per_request(layout.groups, GPT_OSS, 128, 1000, 4096, layout) == 11
    assert layout.printed_block_sizes(128) == (128, 512)


def test_chunked_blocks_per_request():
    # C = 8,192, F = 2,048, mml = 32,768: ceil(10,240 / 16) = 640, full 2,048
    assert _blocks_per_request(("chunked", "full"), CHUNKED, 16, 32768, 2048) == 2688
    # the groups add up whatever their order
    assert _blocks_per_request(("full", "chunked"), CHUNKED, 16, 32768, 2048) == 2688
    # mml 9,000 < C + F: ceil(9000 / 16) = 563 (562.5), full 563
    assert _blocks_per_request(("chunked", "full"), CHUNKED, 16, 9000, 2048) == 1126
    # C + F = 8,193: ceil(8193 / 16) = 513 (no extra block for chunked layers)
    assert _blocks_per_request(("chunked",), CHUNKED, 16, 32768, 1) == 513
    assert _blocks_per_request(("chunked",), CHUNKED, 16, 32768, None) is None


def _scenario(formula, groups=("full", "sliding"), mml=8192, f=2048, mult=1, layouts=None, bs=16):
    layouts = layouts or (Layout(page_bytes=32768, group_size=12, groups=groups),)
    return Scenario("v1", formula, "1.5", mult, layouts, bs, mml, f, GPT_OSS)


def test_token_formulas():
    # V0: N x bs
    assert _scenario("blocks").tokens(1000) == 16000
    # V1 before 0.20: (N // groups) x bs; 1,001 blocks over 2 groups is still 500 per group
    assert _scenario("floor").tokens(1000) == 8000
    assert _scenario("floor").tokens(1001) == 8000
    # 0.20+: int(N / bpr x mml) = int(1000 / 649 x 8192) = int(12,622.496) = 12,622
    assert _scenario("concurrency").tokens(1000) == 12622
    # the multiplier doubles F: bpr 777, int(1000 / 777 x 8192) = int(10,543.1) = 10,543
    assert _scenario("concurrency", mult=2).tokens(1000) == 10543
    # no mml, no 0.20+ figure
    assert _scenario("concurrency", mml=None).tokens(1000) is None
    assert _scenario("concurrency", mml=None).bpr() is None
    assert _scenario("concurrency", f=None).tokens(1000) is None


def test_concurrency_formulas():
    # V0: N x bs / mml = 1000 x 16 / 8192 = 1.953125
    assert _scenario("blocks").concurrency(1000) == 1.953125
    # V1: N / bpr = 1298 / 649 = 2
    assert _scenario("floor").concurrency(1298) == 2
    assert _scenario("concurrency").concurrency(1298) == 2
    assert _scenario("blocks", mml=None).concurrency(1000) is None
    assert _scenario("floor", f=None).concurrency(1000) is None


def test_blocks_from_a_byte_window():
    two = (Layout(1000, 3, ("full",)), Layout(1000, 2, ("full",)))     # 3,000 and 2,000 B per block
    s = _scenario("blocks", groups=("full",), layouts=two)
    assert (s.b_max, s.b_min) == (3000, 2000)
    # one window against the largest and smallest block: 59,999 // 3,000 = 19, 60,000 // 2,000 = 30
    assert s.blocks(59_999, 60_000) == (19, 30)
    # one window per stage: min(30,000 // 3,000, 25,000 // 2,000) = min(10, 12) = 10; hi min(11, 13) = 11
    assert s.blocks(0, 0, stage_windows=[(30_000, 33_000), (25_000, 26_000)]) == (10, 11)


def test_blocks_for_tokens_inverts_the_token_figure():
    assert _scenario("blocks").blocks_for_tokens(16000) == (1000, 1000)
    assert _scenario("blocks").blocks_for_tokens(16001) is None
    assert _scenario("floor").blocks_for_tokens(8000) == (1000, 1001)
    assert _scenario("floor").blocks_for_tokens(0) == (0, 1)
    assert _scenario("concurrency", mml=None).blocks_for_tokens(100) is None


def test_describe_and_fmt2():
    assert _scenario("blocks").describe() == "V1, tokens = N x bs, 2 KV-cache groups of 12 layers"
    assert _scenario("floor", groups=("full",)).describe() == "V1, tokens = (N // groups) x bs"
    assert _scenario("concurrency", groups=("full",)).describe() == \
        "V1, tokens = int(N / blocks_per_request x max_model_len)"
    assert str(fmt2(4.8449)) == "4.84" and str(fmt2(2)) == "2.00" and str(fmt2(159.205)) == "159.21"


def test_blocks_for_tokens_one_token_per_block():
    # bs = 1, V0's N x bs: each block count prints its own figure, so 1,000 tokens is exactly N = 1,000
    # (the upper end is the first N printing more, 1,001, less one)
    s = _scenario("blocks", bs=1)
    assert s.blocks_for_tokens(1000) == (1000, 1000)
    assert s.blocks_for_tokens(1) == (1, 1)


def test_blocks_for_tokens_searches_up_to_2_to_the_80_blocks():
    # the search doubles N from 1 and gives up past 2^80 blocks. 16 x 2^80 tokens is N = 2^80 exactly, the
    # last count it reaches: found, and, as no N within reach prints more, the range is that one N;
    # 16 x 2^81 tokens would need N = 2^81, past the bound: no block count
    s = _scenario("blocks")
    assert s.blocks_for_tokens(16 * 2**80) == (2**80, 2**80)
    assert s.blocks_for_tokens(16 * 2**81) is None
    assert s.blocks_for_tokens(16 * 2**80 + 16) is None


def test_one_block_per_request():
    # one full-attention group, mml = bs = 16: a request needs ceil(16 / 16) = 1 block, so N blocks serve N
    # requests (concurrency 10 / 1 = 10) and print int(10 / 1 x 16) = 160 tokens
    s = _scenario("concurrency", groups=("full",), mml=16)
    assert s.bpr() == 1
    assert s.tokens(10) == 160
    assert s.concurrency(10) == 10
