"""Chapter 05 (prefix reuse): its five graded exercises, as data.

Grade ids, function names and parameter order are a contract with the grading
pipeline; points are on the source notebook's test cells.

=================================  ==========================================================================
grade id                           the learner writes
=================================  ==========================================================================
ch05_q1_prefix_bytes_saved         prefix_bytes_saved(prompt_tokens, num_requests, bytes_per_token, block_size)
ch05_q2_prefill_tokens_saved       prefill_tokens_saved(prompt_tokens, num_requests, block_size)
ch05_q3_prefix_key                 prefix_key(token_ids, block_size, cache_salt)            -> bytes
ch05_q4_agent_prefill_tokens       agent_prefill_tokens(system_tokens, observation_tokens, action_tokens,
                                                        steps, block_size)
ch05_q5_fetch_or_recompute         fetch_or_recompute(kv_bytes_per_token, num_params, layers, num_heads,
                                                      head_dim, tokens, link_bytes_per_s, peak_flop_per_s,
                                                      mfu, fetch_overhead_s)                -> "fetch" | "recompute"
=================================  ==========================================================================

Expected values come from kvlib: q1/q2 from ``kvlib.prefix_cache.prefix_sharing_savings``, q3 from
``kvlib.prefix_cache.block_hashes`` (the key of the last full block; ``NONE_HASH`` when there is
none), q4 from ``kvlib.prefix_cache.run_cache`` on the agent loop of ``kvlib.prefix_cache.agent_requests``,
q5 from ``kvlib.offload.fetch_or_recompute(...).winner``. In q3 the learner may call
``kvlib.prefix_cache.hash_block`` (allowed by ``tripwires.ALLOWED_FUNCTIONS``); ``block_hashes``,
the whole chain, trips. q3 and q5 have no numeric slips: each visible case carries the hint
for the slip it is built to catch (a case per slip).
"""

from __future__ import annotations

import random

import kvlib as kv
import kvlib.offload  # noqa: F401 -- loaded here so the tripwires cover it
import kvlib.prefix_cache as pc
from kvlib.prefix_cache import agent_requests    # the agent loop q4 is judged on

from .answers import BYTES, Choice
from .schema import Edge, Exercise, exercises, with_sides

H100 = "H100-SXM"
LLAMA8_BPT = 131_072      # Llama 3.1 8B, bf16: 2 x 32 x 8 x 128 x 2 B ([chains])
PCIE5_ASSUMED = 50 * 10**9   # PCIe Gen5 x16, an assumed effective 50 GB/s ([chains])
CHOICES = ("fetch", "recompute")

HIDDEN_NOTE_SHARING = "(Hidden cases use other prompt lengths, request counts, block sizes and models.)"
HIDDEN_NOTE_KEY = "(Hidden cases use other token lists, block sizes and salts.)"
HIDDEN_NOTE_AGENT = "(Hidden cases use other system prompts, observation and action lengths, steps and block sizes.)"
HIDDEN_NOTE_FETCH = "(Hidden cases use other models, lengths, links, MFUs and fixed fetch costs.)"


# --- q1, q2: a shared prompt ---------------------------------------------------------------
def _sharing_case(label, prompt_tokens, num_requests, block_size, bytes_per_token=None, hint=""):
    kwargs = {"prompt_tokens": prompt_tokens, "num_requests": num_requests}
    if bytes_per_token is not None:
        kwargs["bytes_per_token"] = bytes_per_token
    kwargs["block_size"] = block_size
    return {"label": label, "kwargs": kwargs, "context": {"hint": hint}}


def _sharing(case):
    k = case["kwargs"]
    return pc.prefix_sharing_savings(k["prompt_tokens"], k["num_requests"], k.get("bytes_per_token", 1),
                                     k["block_size"])


def _sharing_slip_inputs(case):
    k = case["kwargs"]
    return dict(k, others=k["num_requests"] - 1)


_TAIL_HINT = "only full blocks are shared; the tokens of a partial last block are recomputed by every request."
PARTIAL_BLOCK_EDGE = Edge("only full blocks are shared: a partial last block and a prompt under one block share "
                          "nothing of it")
FULL_BLOCKS_EDGE = Edge("only full blocks are shared: whole blocks, one token past them, one short of them")
REQUESTS_EDGE = Edge("one request alone shares nothing (N - 1 = 0); two share one copy")
Q1_VISIBLE = (
    FULL_BLOCKS_EDGE.on(_sharing_case("Llama 3.1 8B, a 2,000-token system prompt, 100 requests, 16-token blocks",
                                      2000, 100, 16, LLAMA8_BPT)),
    PARTIAL_BLOCK_EDGE.on(_sharing_case("Llama 3.1 8B, a 2,007-token prompt (7 tokens past a block), 100 requests",
                                        2007, 100, 16, LLAMA8_BPT, hint=_TAIL_HINT)),
    _sharing_case("Llama 3.3 70B, a 5,000-token document, 12 requests, 32-token blocks", 5000, 12, 32,
                  kv.load_model("llama-3.3-70b").kv_bytes_per_token(), hint=_TAIL_HINT),
    PARTIAL_BLOCK_EDGE.on(FULL_BLOCKS_EDGE.on(
        _sharing_case("Qwen2.5 7B, a 10-token prompt (less than one block), 50 requests", 10, 50, 16,
                      kv.load_model("qwen2.5-7b").kv_bytes_per_token(), hint="no full block, nothing shared."))),
    REQUESTS_EDGE.on(_sharing_case("one request alone (nothing to share with)", 4096, 1, 16, LLAMA8_BPT)),
    # the full-block edge, one token either side of 125 whole 16-token blocks (2,000 tokens)
    *FULL_BLOCKS_EDGE.on_each((
        _sharing_case("Llama 3.1 8B, a 2,001-token prompt (one token past a block), 100 requests", 2001, 100, 16,
                      LLAMA8_BPT, hint=_TAIL_HINT),
        _sharing_case("Llama 3.1 8B, a 1,999-token prompt (one token short of a block), 100 requests", 1999, 100,
                      16, LLAMA8_BPT, hint=_TAIL_HINT),
    )),
    REQUESTS_EDGE.on(_sharing_case("two requests (one shares with the other)", 4096, 2, 16, LLAMA8_BPT)),
)
Q2_VISIBLE = tuple(
    _sharing_case(c["label"], c["kwargs"]["prompt_tokens"], c["kwargs"]["num_requests"], c["kwargs"]["block_size"],
                  hint=c["context"]["hint"]) for c in Q1_VISIBLE)
# Exercise 2's edges sit on the counterparts of exercise 1's cases
REUSED_PARTIAL_BLOCK_EDGE = Edge("only full blocks are reused")
REUSED_FULL_BLOCKS_EDGE = Edge("only full blocks are reused: whole blocks, one token past them, one short of them")
REUSED_REQUESTS_EDGE = Edge("N - 1 requests reuse the prefill: one alone saves nothing")
for _q1_edge, _q2_edge in ((PARTIAL_BLOCK_EDGE, REUSED_PARTIAL_BLOCK_EDGE), (FULL_BLOCKS_EDGE, REUSED_FULL_BLOCKS_EDGE),
                           (REQUESTS_EDGE, REUSED_REQUESTS_EDGE)):
    _q2_edge.on_counterparts(_q1_edge, Q1_VISIBLE, Q2_VISIBLE)

_BPT_CHOICES = tuple(sorted({kv.load_model(m).kv_bytes_per_token() for m in
                             ("llama-3.1-8b", "llama-3.3-70b", "qwen2.5-7b", "qwen2.5-32b", "llama-2-7b")}))


def _sharing_hidden(with_bytes):
    def build(seed):
        rng = random.Random(seed)
        out = []
        for _ in range(8):
            bs = rng.choice([1, 8, 16, 16, 32, 64, 128])
            prompt = rng.choice([rng.randint(1, 200), rng.randint(200, 20_000), bs * rng.randint(1, 300)])
            out.append(_sharing_case("hidden", prompt, rng.randint(1, 1000), bs,
                                     rng.choice(_BPT_CHOICES) if with_bytes else None))
        return tuple(out)
    return build


PROMPT_SIDES = {0: "whole blocks", 1: "one token past a block", -1: "one token short of a block"}


def _block_edge(tokens: int, bs: int, names: dict) -> str | None:
    """``names[0]``, ``names[1]`` or ``names[-1]``: whole blocks, a token past them or a token short (None: off)."""
    rest = tokens % bs
    return names.get(rest - bs if rest == bs - 1 and bs > 2 else rest)


def prompt_side(case) -> str | None:
    """Which side of the full-block edge a shared prompt sits on (None: off it)."""
    k = case["kwargs"]
    if k["prompt_tokens"] < k["block_size"]:
        return "under one block"
    return _block_edge(k["prompt_tokens"], k["block_size"], PROMPT_SIDES)


def requests_side(case) -> str | None:
    """N - 1 requests share: one request (nothing), two (one), else None."""
    return {1: "one request", 2: "two requests"}.get(case["kwargs"]["num_requests"])


def _sharing_on_side(with_bytes):
    def make(rng, side):
        bs = rng.choice([8, 16, 32, 64, 128])
        prompt, n = bs * rng.randint(1, 300), rng.randint(3, 1000)
        if side == "under one block":
            prompt = rng.randint(1, bs - 1)
        elif side in PROMPT_SIDES.values():
            prompt += next(k for k, name in PROMPT_SIDES.items() if name == side)
        else:
            n = 1 if side == "one request" else 2
            prompt += rng.randint(0, bs - 1)
        return _sharing_case("hidden", prompt, n, bs, rng.choice(_BPT_CHOICES) if with_bytes else None)
    return make


def _sharing_hidden_sided(with_bytes):
    make = _sharing_on_side(with_bytes)
    build = with_sides(_sharing_hidden(with_bytes), prompt_side, ("under one block",) + tuple(PROMPT_SIDES.values()),
                       make)
    return with_sides(build, requests_side, ("one request", "two requests"), make)


# --- q3: the chained key ---------------------------------------------------------------------
def _tokens(text):
    """Byte-level token ids: each UTF-8 byte of the text is one token (as byte-level models read text)."""
    return list(text.encode("utf-8"))


_PROMPT = "You are a careful assistant. Answer in one short paragraph and cite the source of every figure."
_CHAIN_HINT = ("each block's key is hash_block(parent, its tokens), with the previous block's key as the "
               "parent; the first block's parent is NONE_HASH.")
KEY_EDGE = Edge("no full block: NONE_HASH; a partial last block has no key")
Q3_VISIBLE = (
    KEY_EDGE.on({"label": "32 byte-level tokens, 8-token blocks (4 full blocks), no salt",
                 "kwargs": {"token_ids": _tokens(_PROMPT)[:32], "block_size": 8, "cache_salt": None},
                 "context": {"hint": _CHAIN_HINT}}),
    KEY_EDGE.on({"label": f"{len(_tokens(_PROMPT))} tokens, 16-token blocks (a partial last block), no salt",
                 "kwargs": {"token_ids": _tokens(_PROMPT), "block_size": 16, "cache_salt": None},
                 "context": {"hint": "a partial last block has no key: return the key of the last full block."}}),
    {"label": "48 tokens, 16-token blocks, cache_salt='tenant-a'",
     "kwargs": {"token_ids": _tokens(_PROMPT)[:48], "block_size": 16, "cache_salt": "tenant-a"},
     "context": {"hint": "the salt goes into the first block's key only, as extra_keys=(('cache_salt', salt),); "
                         "later blocks get no extra keys (extra_keys left at None) and carry the salt through "
                         "the chain."}},
    KEY_EDGE.on({"label": "5 tokens, 16-token blocks (no full block)",
                 "kwargs": {"token_ids": _tokens("Hello"), "block_size": 16, "cache_salt": "tenant-a"},
                 "context": {"hint": "with no full block there is no key: return NONE_HASH, the parent a first "
                                     "block would chain from."}}),
)


def key_side(case) -> str | None:
    """Exercise 3's edge: no full block (NONE_HASH), whole blocks only, or a partial last block past them."""
    k = case["kwargs"]
    n, bs = len(k["token_ids"]), k["block_size"]
    return "no full block" if n < bs else "whole blocks" if n % bs == 0 else "a partial last block"


def _key_on_side(rng, side):
    bs = rng.choice([4, 8, 16, 32])
    n = {"no full block": rng.randint(0, bs - 1), "whole blocks": bs * rng.randint(1, 6)}.get(
        side, bs * rng.randint(1, 6) + rng.randint(1, bs - 1))
    return {"label": "hidden", "kwargs": {"token_ids": [rng.randrange(128_256) for _ in range(n)], "block_size": bs,
                                          "cache_salt": rng.choice([None, f"tenant-{rng.randint(1, 99)}"])},
            "context": {}}


def _key_hidden(seed):
    rng = random.Random(seed)
    out = []
    for _ in range(6):
        bs = rng.choice([1, 4, 8, 16, 32])
        tokens = [rng.randrange(128_256) for _ in range(rng.randint(0, 200))]
        salt = rng.choice([None, f"tenant-{rng.randint(1, 99)}"])
        out.append({"label": "hidden", "kwargs": {"token_ids": tokens, "block_size": bs, "cache_salt": salt},
                    "context": {}})
    return tuple(out)


def _prefix_key(case):
    k = case["kwargs"]
    keys = pc.block_hashes(k["token_ids"], k["block_size"], cache_salt=k["cache_salt"])
    return keys[-1] if keys else pc.NONE_HASH


# --- q4: the agent loop ----------------------------------------------------------------------
def _agent_case(label, system, observation, action, steps, bs, hint=""):
    return {"label": label, "kwargs": {"system_tokens": system, "observation_tokens": observation,
                                       "action_tokens": action, "steps": steps, "block_size": bs},
            "context": {"hint": hint}}


AGENT_EDGE = Edge("a hit covers whole blocks only")
AGENT_WHOLE_BLOCKS_EDGE = Edge("a hit covers whole blocks only: a cached history of whole blocks is hit whole, one a "
                               "token past them recomputes that token, one a token short recomputes the block_size - "
                               "1 tokens of its partial block; one step hits nothing")
Q4_VISIBLE = (
    _agent_case("20 steps: 1,000-token system prompt, 400-token observations, 100-token actions, 16-token blocks",
                1000, 400, 100, 20, 16),
    _agent_case("10 steps: 2,000-token system prompt, 300-token observations, 50-token actions, 16-token blocks",
                2000, 300, 50, 10, 16),
    AGENT_EDGE.on(_agent_case("20 steps: 500, 37 and 13 tokens, 32-token blocks (nothing block-aligned)", 500, 37,
                              13, 20, 32, hint="a hit covers whole blocks only: the partial last block of the cached "
                                               "history is recomputed.")),
    AGENT_EDGE.on(AGENT_WHOLE_BLOCKS_EDGE.on(_agent_case("one step (nothing cached yet)", 1000, 400, 100, 1, 16))),
    # the whole-block edge: 48 + 16 = 64 tokens a step keep every history's remainder that of the system prompt
    *AGENT_WHOLE_BLOCKS_EDGE.on_each((
        _agent_case("5 steps: a 1,024-token system prompt, 48-token observations, 16-token actions, 16-token blocks "
                    "(every cached history in whole blocks)", 1024, 48, 16, 5, 16),
        _agent_case("5 steps: a 1,025-token system prompt, 48-token observations, 16-token actions, 16-token blocks "
                    "(every cached history a token past a block)", 1025, 48, 16, 5, 16),
        _agent_case("5 steps: a 1,023-token system prompt, 48-token observations, 16-token actions, 16-token blocks "
                    "(every cached history a token short of a block)", 1023, 48, 16, 5, 16),
    )),
)

#: step 2's hit is step 1's prompt and action (system + observation + action) rounded down to a block
AGENT_SIDES = {0: "history in whole blocks", 1: "history a token past a block", -1: "history a token short of a block"}


def agent_side(case) -> str | None:
    """Which side of the whole-block edge the first cached history (step 2's hit) sits on; one step caches
    nothing (None: off the edge)."""
    k = case["kwargs"]
    if k["steps"] == 1:
        return "one step"
    return _block_edge(k["system_tokens"] + k["observation_tokens"] + k["action_tokens"], k["block_size"],
                       AGENT_SIDES)


def _agent_on_side(rng, side):
    bs = rng.choice([8, 16, 32, 64])
    observation = rng.randint(1, 500)
    action = (-observation) % bs + bs * rng.randint(0, 6) or bs     # a step adds whole blocks
    steps = 1 if side == "one step" else rng.randint(2, 25)
    offset = {name: k for k, name in AGENT_SIDES.items()}.get(side, rng.randint(0, bs - 1))
    return _agent_case("hidden", bs * rng.randint(1, 120) + offset, observation, action, steps, bs)


def _agent_hidden(seed):
    rng = random.Random(seed)
    return tuple(_agent_case("hidden", rng.randint(1, 2000), rng.randint(1, 500), rng.randint(1, 200),
                             rng.randint(1, 25), rng.choice([8, 16, 32, 64])) for _ in range(6))


def _agent_expected(case):
    k = case["kwargs"]
    requests = agent_requests(k["system_tokens"], k["observation_tokens"], k["action_tokens"], k["steps"])
    return pc.run_cache(requests, block_size=k["block_size"]).prefill_tokens_with_cache


# --- q5: fetch or recompute ------------------------------------------------------------------
FETCH_MODELS = ("llama-3.1-8b", "llama-3.3-70b", "qwen2.5-7b", "qwen2.5-32b", "llama-2-7b")


def _fetch_case(label, model, tokens, link, mfu=0.6, overhead=0.0, gpu=H100, hint=""):
    spec = kv.load_model(model)
    return {"label": label,
            # num_params: what each token is multiplied by, the input table left out (the course's one prefill rule)
            "kwargs": {"kv_bytes_per_token": spec.kv_bytes_per_token(),
                       "num_params": kv.offload.prefill_params_per_token(spec),
                       "layers": spec.num_layers, "num_heads": spec.num_heads, "head_dim": spec.head_dim,
                       "tokens": tokens, "link_bytes_per_s": link,
                       "peak_flop_per_s": kv.get_gpu(gpu).bf16_flop_per_s, "mfu": mfu,
                       "fetch_overhead_s": overhead},
            "context": {"model": model, "hint": hint}}


Q5_VISIBLE = (
    _fetch_case("Llama 3.1 8B, 8,192 tokens, PCIe Gen5 at an assumed 50 GB/s, H100 at 60% MFU", "llama-3.1-8b",
                8192, PCIE5_ASSUMED),
    _fetch_case("Llama 3.1 8B, 100 tokens, 50 GB/s, a 5 ms fixed cost per fetch", "llama-3.1-8b", 100,
                PCIE5_ASSUMED, overhead=0.005,
                hint="a fetch pays its fixed cost (lookup, scheduling of the load) on top of the copy."),
    _fetch_case("Llama 3.1 8B, 200,000 tokens over a 2 GB/s link", "llama-3.1-8b", 200_000, 2 * 10**9,
                hint="recomputing also pays the attention term, 2 L H (2 D) T (T + 1) / 2 FLOPs, which grows "
                     "with T squared."),
    _fetch_case("Llama 3.1 8B, 20,000 tokens over a 2 GB/s link", "llama-3.1-8b", 20_000, 2 * 10**9),
    # the attention term decides here at its full width, 2 D per pair: with D alone recomputing would win
    _fetch_case("Llama 3.1 8B, 160,000 tokens over a 2 GB/s link", "llama-3.1-8b", 160_000, 2 * 10**9),
    _fetch_case("Llama 2 7B (MHA), 4,096 tokens, 16 GB/s, H100 at 40% MFU", "llama-2-7b", 4096, 16 * 10**9,
                mfu=0.4, hint="the GPU achieves mfu x peak FLOP/s, not its peak."),
    # head_dim decides here: GPT-2 large's 64-wide heads keep the attention term small enough to recompute
    # (were they 128 wide, fetching would win)
    _fetch_case("GPT-2 large (MHA, head_dim 64), 4,096 tokens, 50 GB/s", "gpt2-large", 4096, PCIE5_ASSUMED),
)


def _fetch_hidden(seed):
    rng = random.Random(seed)
    out = []
    for _ in range(8):
        out.append(_fetch_case("hidden", rng.choice(FETCH_MODELS), rng.choice([rng.randint(1, 2000),
                                                                               rng.randint(2000, 300_000)]),
                               rng.choice([2, 4, 16, 25, 50, 64, 100]) * 10**9, mfu=rng.choice([0.3, 0.4, 0.5, 0.6]),
                               overhead=rng.choice([0.0, 0.0, 0.001, 0.005, 0.02]),
                               gpu=rng.choice([H100, "A100-80GB", "H200"])))
    return tuple(out)


def _fetch_expected(case):
    k = case["kwargs"]
    return kv.offload.fetch_or_recompute(case["context"]["model"], k["tokens"], link_bytes_per_s=k["link_bytes_per_s"],
                                         peak_flop_per_s=k["peak_flop_per_s"], mfu=k["mfu"],
                                         num_params=k["num_params"], fetch_overhead_s=k["fetch_overhead_s"]).winner


#: The edges the exercise text decides (a tie, a rounding direction, a tolerance, an "other"), each
#: with the visible cases that sit on it (tests/test_case_variants.py checks that they exist).
EDGES = {
    "ch05_q1_prefix_bytes_saved": (PARTIAL_BLOCK_EDGE.listing(), FULL_BLOCKS_EDGE.listing(prompt_side),
                                   REQUESTS_EDGE.listing(requests_side)),
    "ch05_q2_prefill_tokens_saved": (REUSED_PARTIAL_BLOCK_EDGE.listing(), REUSED_FULL_BLOCKS_EDGE.listing(prompt_side),
                                     REUSED_REQUESTS_EDGE.listing(requests_side)),
    "ch05_q3_prefix_key": (KEY_EDGE.listing(key_side),),
    "ch05_q4_agent_prefill_tokens": (AGENT_EDGE.listing(), AGENT_WHOLE_BLOCKS_EDGE.listing(agent_side)),
}


EXERCISES = exercises(
    Exercise(
        grade_id="ch05_q1_prefix_bytes_saved",
        function_name="prefix_bytes_saved",
        params=("prompt_tokens", "num_requests", "bytes_per_token", "block_size"),
        visible_cases=Q1_VISIBLE,
        hidden_cases=_sharing_hidden_sided(True),
        expected=lambda c: _sharing(c).saved_bytes,
        quantity="prefix_bytes_saved",
        slip_inputs=_sharing_slip_inputs,
        hidden_note=HIDDEN_NOTE_SHARING,
    ),
    Exercise(
        grade_id="ch05_q2_prefill_tokens_saved",
        function_name="prefill_tokens_saved",
        params=("prompt_tokens", "num_requests", "block_size"),
        visible_cases=Q2_VISIBLE,
        hidden_cases=_sharing_hidden_sided(False),
        expected=lambda c: _sharing(c).prefill_tokens_unshared - _sharing(c).prefill_tokens_shared,
        quantity="prefill_tokens_saved",
        slip_inputs=_sharing_slip_inputs,
        unit="tokens",
        hidden_note=HIDDEN_NOTE_SHARING,
    ),
    Exercise(
        grade_id="ch05_q3_prefix_key",
        function_name="prefix_key",
        params=("token_ids", "block_size", "cache_salt"),
        visible_cases=Q3_VISIBLE,
        hidden_cases=with_sides(_key_hidden, key_side, ('no full block', 'whole blocks', 'a partial last block'), _key_on_side),
        expected=_prefix_key,
        answer=BYTES,
        quantity="prefix_key_hex",      # a key is diagnosed by its hex (judge._number)
        slip_inputs=lambda case: dict(case["kwargs"]),
        unit="",
        hidden_note=HIDDEN_NOTE_KEY,
    ),
    Exercise(
        grade_id="ch05_q4_agent_prefill_tokens",
        function_name="agent_prefill_tokens",
        params=("system_tokens", "observation_tokens", "action_tokens", "steps", "block_size"),
        visible_cases=Q4_VISIBLE,
        hidden_cases=with_sides(_agent_hidden, agent_side, ("one step",) + tuple(AGENT_SIDES.values()),
                                _agent_on_side),
        expected=_agent_expected,
        quantity="agent_prefill_with_cache",
        slip_inputs=lambda c: dict(c["kwargs"]),
        unit="tokens",
        hidden_note=HIDDEN_NOTE_AGENT,
    ),
    Exercise(
        grade_id="ch05_q5_fetch_or_recompute",
        function_name="fetch_or_recompute",
        params=("kv_bytes_per_token", "num_params", "layers", "num_heads", "head_dim", "tokens", "link_bytes_per_s",
                "peak_flop_per_s", "mfu", "fetch_overhead_s"),
        visible_cases=Q5_VISIBLE,
        hidden_cases=_fetch_hidden,
        expected=_fetch_expected,
        answer=Choice(CHOICES),
        quantity="fetch_choice",
        slip_inputs=lambda c: dict(c["kwargs"]),
        unit="",
        hidden_note=HIDDEN_NOTE_FETCH,
    ),
)
