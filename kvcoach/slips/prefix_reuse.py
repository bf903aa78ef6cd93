"""Prefix caching, chained block keys, an agent's loop, fetch against recompute: ch05_prefix_reuse's slips."""

from __future__ import annotations

from .engine import unit_slips

SLIP_WORDS = {
    "partial_block_shared": ("only full blocks are shared (block_size = {block_size} tokens): the tokens of a partial "
                             "last block are recomputed and held by every request, never matched.",
                             "only full blocks are shared: a partial last block is recomputed."),
    "partial_block_rounded_up": ("a partial last block is never shared: round the prompt down to whole blocks of "
                                 "{block_size} tokens (floor), not up.",
                                 "a partial last block is not shared: round down to whole blocks, not up."),
    "every_copy_saved": ("one copy of the shared blocks is still computed and held: the saving is over num_requests - "
                         "1 = {others} requests, not all {num_requests}.",
                         "one copy is still computed and held: the saving is over num_requests - 1 requests."),
    "tokens_not_bytes": ("that is a count of tokens: multiply by bytes_per_token ({bytes_per_token:,} B) for bytes.",
                         "that is a count of tokens: multiply by bytes_per_token."),
    "last_token_cap": ("a hit stops before the prompt's last token only when the prompt is the whole request; here each "
                       "request goes on with a question of its own, so every full block of the {prompt_tokens:,}-token "
                       "prompt is hit (the cap falls inside the question).",
                       "the cap at the request's last token falls inside each request's question: every full block "
                       "of the shared prompt is hit."),
    "blocks_not_tokens": ("that counts blocks: multiply by block_size ({block_size} tokens) for tokens.",
                          "that counts blocks: multiply by block_size."),
    "no_cache": ("that is the prefill with no prefix cache at all: every step recomputes its whole history.",
                 "that is the prefill with no prefix cache at all."),
    "output_not_cached": ("the action a step generates is cached too (its full blocks), so the next step hits it as "
                          "well: only its partial last block and the new observation are recomputed.",
                          "the generated action is cached too, so the next step hits it."),
    "history_block_rounded_up": ("a hit covers whole blocks only: the partial last block of the cached history "
                                 "({block_size}-token blocks) is recomputed at the next step; you rounded the hit up "
                                 "to a whole block.",
                                 "a hit covers whole blocks only: round the cached history down, not up."),
    "unchained_key": ("each block's key is hash_block(parent, its tokens), with the previous block's key as the "
                      "parent; you hashed a block from NONE_HASH alone, so its key no longer says what came before it.",
                      "each block's key chains from the previous block's key, not from NONE_HASH."),
    "partial_block_keyed": ("a partial last block has no key: return the key of the last full block; you hashed the "
                            "tokens past it too.",
                            "a partial last block has no key: stop at the last full block."),
    "salt_on_every_block": ("the salt goes into the first block's key only; later blocks carry it through the chain. "
                            "You added it to every block.",
                            "the salt goes into the first block's key only."),
    "salt_ignored": ("the salt ({cache_salt!r}) goes into the first block's key only, as extra_keys=(('cache_salt', "
                     "salt),); you left it out.",
                     "the cache salt is missing from the first block's key."),
    "hex_not_bytes": ("the key came back as hex text (.hex()); return the bytes, not .hex(): the chapter prints keys "
                      "in hex only to show them.",
                      "return the key's bytes, not .hex() text."),
    "attention_term_missing": ("recomputing also pays the attention term, 2 L H (2 D) T (T + 1) / 2 FLOPs, which "
                               "grows with T squared; you counted only the linear 2 P T.",
                               "recomputing also pays the attention term, which grows with T squared."),
    "attention_half_width": ("the attention term is 2 L H (2 D) T (T + 1) / 2 FLOPs: each query-key pair costs 2 D for "
                             "the score and 2 D for the weighted value; counted with D (head_dim = {head_dim}) in "
                             "place of 2 D it is half as large.",
                             "the attention term counts 2 D per pair (score and weighted value), not D."),
    "mfu_ignored": ("the GPU achieves mfu x peak FLOP/s ({mfu} x peak), not its peak: recomputing is slower than you "
                    "took it.",
                    "the GPU achieves mfu x peak FLOP/s, not its peak."),
    "fetch_overhead_ignored": ("a fetch pays its fixed cost ({fetch_overhead_s} s: lookup, scheduling of the load) on "
                               "top of the copy.",
                               "a fetch pays its fixed cost on top of the copy."),
    "link_as_bits": ("link_bytes_per_s is in bytes per second; you took it as bits (divided the bytes by it x 8 or "
                     "multiplied them by 8).",
                     "link_bytes_per_s is in bytes per second, not bits."),
    "choice_inverted": ("the choice is the other way round: fetch when fetch_s <= recompute_s, else recompute.",
                        "the choice is the other way round: fetch when fetch_s <= recompute_s."),
}


def _sharing(i, bytes_per_token=1):
    """prefix_sharing_savings of the case (its token counts do not depend on bytes_per_token)."""
    from kvlib.prefix_cache import prefix_sharing_savings
    return prefix_sharing_savings(i["prompt_tokens"], i["num_requests"], bytes_per_token, i["block_size"])


def _q_prefill_tokens_saved(i):
    """Prefill tokens a shared prompt saves: N P - (P + (N - 1) tail) = (N - 1) floor(P / bs) bs."""
    s = _sharing(i)
    expected = s.prefill_tokens_unshared - s.prefill_tokens_shared
    n, p, shared = s.num_requests, s.prompt_tokens, s.hit_tokens_per_request
    slips = [("partial_block_shared", (n - 1) * p), ("every_copy_saved", n * shared),
             ("partial_block_shared+every_copy_saved", n * p), ("blocks_not_tokens", (n - 1) * s.shared_blocks),
             # a partial last block counted as a whole shared block
             ("partial_block_rounded_up", (n - 1) * -(-p // i["block_size"]) * i["block_size"]),
             # the hit capped before the prompt's last token, as if the prompt were the whole request
             ("last_token_cap", (n - 1) * ((p - 1) // i["block_size"]) * i["block_size"])]
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_prefix_bytes_saved(i):
    """Bytes a shared prompt saves: unshared - shared = (N - 1) floor(P / bs) bs x bytes_per_token."""
    s = _sharing(i, i["bytes_per_token"])
    expected = s.saved_bytes
    tokens, bpt = _q_prefill_tokens_saved(i)
    slips = [(k, v * s.bytes_per_token) for k, v in bpt]
    slips.append(("tokens_not_bytes", tokens))
    return expected, [(k, v) for k, v in slips if v != expected] + unit_slips(expected)


def _agent_prefill_slips(i):
    """Prefill tokens of the agent loop through a prefix cache (kvlib.prefix_cache.run_cache)."""
    from kvlib.prefix_cache import Request, agent_requests, run_cache
    requests = agent_requests(i["system_tokens"], i["observation_tokens"], i["action_tokens"], i["steps"])
    bs = i["block_size"]
    expected = run_cache(requests, block_size=bs).prefill_tokens_with_cache
    prompts_only = [Request(r.prompt) for r in requests]
    system, observation, action, steps = (i["system_tokens"], i["observation_tokens"], i["action_tokens"],
                                          i["steps"])
    # Shared at token level (block size 1, nothing evicted), every step after the first recomputes only what
    # is new to the cache: its observation, plus the previous action when outputs are not cached. Closed
    # forms, since simulating block size 1 hashes one block per token (~0.5 s per hidden case).
    slips = [("no_cache", sum(len(r.prompt) for r in requests)),
             ("output_not_cached", run_cache(prompts_only, block_size=bs).prefill_tokens_with_cache),
             ("partial_block_shared", system + steps * observation),
             ("output_not_cached+partial_block_shared",
              system + observation + (steps - 1) * (observation + action))]
    return expected, [(k, v) for k, v in slips if v != expected]


def _q_agent_prefill_with_cache(i):
    """The agent loop's prefill tokens (above), plus the hit rounded up: step k > 1 recomputes its prompt P_k less
    ceil(H / bs) bs of the history H = S + (k - 1)(O + A) instead of floor(H / bs) bs (at most P_k)."""
    expected, slips = _agent_prefill_slips(i)
    s, o, a, bs = i["system_tokens"], i["observation_tokens"], i["action_tokens"], i["block_size"]
    up = s + o
    for k in range(2, i["steps"] + 1):
        prompt = s + k * o + (k - 1) * a
        up += prompt - min(-(-(s + (k - 1) * (o + a)) // bs) * bs, prompt)
    return expected, slips + ([("history_block_rounded_up", up)] if up != expected else [])


def _q_fetch_choice(i):
    """'fetch' when fetch_s <= recompute_s (a tie fetches), else 'recompute' (kvlib.offload.fetch_or_recompute):
    fetch_s = overhead + T bpt / link, recompute_s = (2 P T + 2 L H (2 D) T (T + 1) / 2) / (mfu peak)."""
    t, bpt, link = i["tokens"], i["kv_bytes_per_token"], i["link_bytes_per_s"]
    linear = 2 * i["num_params"] * t
    attention = 2 * i["layers"] * i["num_heads"] * 2 * i["head_dim"] * t * (t + 1) // 2

    def choose(flops=linear + attention, achieved=i["mfu"] * i["peak_flop_per_s"],
               overhead=i["fetch_overhead_s"], byte_time=bpt / link, tie=True):
        fetch_s, recompute_s = overhead + t * byte_time, flops / achieved
        return "fetch" if fetch_s < recompute_s or (tie and fetch_s == recompute_s) else "recompute"

    expected = choose()
    slips = [("tie_other_way", choose(tie=False)),      # < for <=: only an exact tie differs
             ("attention_term_missing", choose(flops=linear)),
             ("attention_half_width", choose(flops=linear + attention // 2)),      # D per pair, not 2 D
             ("mfu_ignored", choose(achieved=i["peak_flop_per_s"])),
             ("fetch_overhead_ignored", choose(overhead=0)), ("link_as_bits", choose(byte_time=8 * bpt / link)),
             ("choice_inverted", "recompute" if expected == "fetch" else "fetch")]
    return expected, [(k, v) for k, v in slips if i["fetch_overhead_s"] or k != "fetch_overhead_ignored"]


def _q_prefix_key_hex(i):
    """The prefix key of ``token_ids`` (the last full block's chained key, NONE_HASH when there is none) as hex
    text: a key is matched as text (``autograder.checks.judge._number``), so a slip's key is recomputed and
    compared like any other answer."""
    from kvlib.prefix_cache import NONE_HASH, hash_block
    tokens, bs, salt = list(i["token_ids"]), i["block_size"], i.get("cache_salt")
    full = len(tokens) // bs
    blocks = [tokens[k * bs:(k + 1) * bs] for k in range(full)]
    salted = (("cache_salt", salt),) if salt is not None else None

    def chain(salt_on=lambda k: k == 0, unchained=False):
        key = NONE_HASH
        for k, block in enumerate(blocks):
            key = hash_block(NONE_HASH if unchained else key, block, salted if salt_on(k) else None)
        return key

    expected = chain()
    tail = tokens[full * bs:]
    slips = [("unchained_key", chain(unchained=True) if full > 1 else None),
             ("unchained_key@salted", hash_block(NONE_HASH, blocks[-1], salted) if full > 1 else None),
             ("partial_block_keyed", hash_block(expected, tail, None if full else salted) if tail else None),
             ("salt_on_every_block", chain(salt_on=lambda k: True) if salt is not None else None),
             ("salt_ignored", chain(salt_on=lambda k: False) if salt is not None else None)]
    return expected.hex(), [(k, v.hex()) for k, v in slips if v is not None and v != expected]


QUANTITIES = {
    "prefix_key_hex": _q_prefix_key_hex,
    "prefill_tokens_saved": _q_prefill_tokens_saved,
    "prefix_bytes_saved": _q_prefix_bytes_saved,
    "agent_prefill_with_cache": _q_agent_prefill_with_cache,
    "fetch_choice": _q_fetch_choice,
}
#: A choice made by a comparison: what the text says at a tie (``tie_other_way``'s words).
TIE_RULES = {"fetch_choice": "fetch when fetch_s <= recompute_s: a tie fetches"}
COUNT_SLIPS = {"partial_block_rounded_up"}


def figures(key, inputs) -> dict:
    """``{others}``: the requests beside the first one, which alone computes the shared blocks."""
    return {"others": inputs["num_requests"] - 1} if inputs.get("num_requests") else {}
