"""Prefix caching: vLLM's chained block hash, a radix-tree cache, and what reuse saves.

Causality makes a prefix's KV independent of what follows it, so a request
that starts with tokens already seen can reuse their cache. Engines share it
in whole blocks:

* **vLLM** keys each *full* block by a hash of (its parent block's key, its
  token ids, extra keys such as a LoRA name or a cache salt); the first
  block's parent is a fixed ``NONE_HASH``. Because each key folds in its
  parent's, one changed token invalidates its own block and every block
  after it, while the blocks before it still hit (``block_hashes``).
* **SGLang's RadixAttention** keeps a radix tree of cached token sequences
  and evicts least-recently-used leaves (``RadixCache``; here with edges cut
  at block boundaries, so ``block_size=1`` is SGLang's token-level tree).

The granularity is the engine's page: vLLM matches whole 16-token blocks by
default, SGLang token by token at its usual ``--page-size 1`` (its
``RadixCache`` compares runs of ``page_size`` tokens otherwise). At the same
block size the hash chain and the tree find the same longest cached prefix
of full blocks; the tests check it. vLLM also never serves a whole prompt
from the cache: ``get_computed_blocks`` caps a hit at ``num_tokens - 1`` so
the last token is computed for its logits, and the cap rounds down to a
block (``cache_hit_tokens``; ``run_cache`` applies it).

Hashing here is SHA-256 over a small type-tagged, length-prefixed encoding
(not vLLM's pickle), so keys are stable across Python versions and
machines; they are not byte-identical to vLLM's. ``NONE_HASH`` is
SHA-256 of the encoded string "kvlib-none-hash", as vLLM 0.33 derives its
own from "vllm-none-hash".

Taught in ch05_prefix_reuse.
"""

from __future__ import annotations

import hashlib
import heapq
import random
from dataclasses import dataclass, field

from .units import format_gb_gib

__all__ = [
    "PrefixCacheError",
    "NONE_HASH",
    "hash_block",
    "block_hashes",
    "changed_blocks",
    "ChainedHashCache",
    "RadixCache",
    "Request",
    "agent_requests",
    "WORKLOADS",
    "make_workload",
    "CacheReport",
    "run_cache",
    "simulate_prefix_cache",
    "SharingSavings",
    "prefix_sharing_savings",
    "cache_hit_tokens",
]


class PrefixCacheError(ValueError):
    """A prefix-cache input is out of range; the message names the parameter."""


def _int(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, int):
        raise PrefixCacheError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise PrefixCacheError(f"{name} must be at least {minimum}, got {value}")
    return value


# --- the chained block hash -------------------------------------------------------
def _encode(obj) -> bytes:
    """A stable byte encoding of None, bool, int, str, bytes and tuples/lists of them."""
    if obj is None:
        return b"N"
    if isinstance(obj, bool):
        return b"T" if obj else b"F"
    if isinstance(obj, int):
        body = str(obj).encode()
        return b"i" + len(body).to_bytes(4, "big") + body
    if isinstance(obj, str):
        body = obj.encode("utf-8")
        return b"s" + len(body).to_bytes(4, "big") + body
    if isinstance(obj, bytes):
        return b"b" + len(obj).to_bytes(4, "big") + obj
    if isinstance(obj, (tuple, list)):
        if all(type(x) is int for x in obj):  # token ids: one tagged run of decimal numbers
            body = ",".join(map(str, obj)).encode()
            return b"I" + len(body).to_bytes(4, "big") + body
        return b"t" + len(obj).to_bytes(4, "big") + b"".join(_encode(x) for x in obj)
    raise PrefixCacheError(f"extra keys must be None, bool, int, str, bytes or tuples of them, "
                           f"got {type(obj).__name__}")


NONE_HASH = hashlib.sha256(_encode("kvlib-none-hash")).digest()


def hash_block(parent: bytes, token_ids, extra_keys=None) -> bytes:
    """Key of one full block: ``sha256(encode((parent, token_ids, extra_keys)))``.

    >>> hash_block(NONE_HASH, range(4)).hex()[:16] == hash_block(NONE_HASH, [0, 1, 2, 3]).hex()[:16]
    True
    """
    return hashlib.sha256(_encode((parent, tuple(token_ids), extra_keys))).digest()


def block_hashes(token_ids, block_size: int = 16, *, extra_keys=None, cache_salt=None,
                 parent: bytes = NONE_HASH) -> tuple:
    """Chained keys of the full blocks of ``token_ids`` (a partial last block has none).

    ``extra_keys`` (a tuple, e.g. ``("lora", "my-adapter")``) goes into every
    block's key; ``cache_salt`` only into the first block's, as in vLLM, so
    two tenants with different salts share nothing.

    [chains]: a 2,007-token prompt has 125 full 16-token blocks; 7 tokens are
    left over and are always recomputed. One changed token at position 100
    (block 6) changes blocks 6..124 and leaves blocks 0..5 shared:

    >>> prompt = list(range(2007))
    >>> len(block_hashes(prompt))
    125
    >>> edited = prompt[:100] + [-1] + prompt[101:]
    >>> changed = changed_blocks(block_hashes(prompt), block_hashes(edited))
    >>> changed[0], changed[-1], len(changed)
    (6, 124, 119)
    """
    _int("block_size", block_size)
    tokens = list(token_ids)
    keys = tuple(extra_keys) if extra_keys else ()
    out = []
    for i in range(len(tokens) // block_size):
        extra = keys + ((("cache_salt", cache_salt),) if cache_salt is not None and i == 0 else ())
        parent = hash_block(parent, tokens[i * block_size:(i + 1) * block_size], extra or None)
        out.append(parent)
    return tuple(out)


def changed_blocks(hashes_a, hashes_b) -> list:
    """Indices of blocks whose keys differ (blocks only one of the two has count as changed).

    >>> changed_blocks(block_hashes([1, 2, 3, 4], 2), block_hashes([1, 2, 3, 5, 6, 7], 2))
    [1, 2]
    """
    n = max(len(hashes_a), len(hashes_b))
    return [i for i in range(n) if i >= len(hashes_a) or i >= len(hashes_b) or hashes_a[i] != hashes_b[i]]


def cache_hit_tokens(prompt_tokens: int, cached_tokens: int, block_size: int = 16) -> int:
    """Prompt tokens served from the cache: ``floor(min(T_c, T - 1) / bs) * bs``.

    A hit covers whole blocks (``block_size`` tokens; 1 is a token-granular
    cache such as SGLang's radix tree at ``--page-size 1``), and never the
    whole prompt: vLLM's ``KVCacheManager.get_computed_blocks``
    (``vllm/v1/core/kv_cache_manager.py``) sets ``max_cache_hit_length =
    request.num_tokens - 1``, since the last prompt token must run to give
    the logits of the first new one. Rounded down to a block, that cap can
    cost a whole block. ``cached_tokens`` is how much of the prompt's start
    is in the cache (full blocks or not).

    A 3,000-token turn whose first 2,900 tokens are cached, 16-token blocks
    against a token-granular cache; then a 2,000-token prompt (125 blocks)
    that is cached in full:

    >>> cache_hit_tokens(3000, 2900), cache_hit_tokens(3000, 2900, block_size=1)
    (2896, 2900)
    >>> cache_hit_tokens(2000, 2000), cache_hit_tokens(2000, 2000, block_size=1)
    (1984, 1999)
    """
    _int("prompt_tokens", prompt_tokens)
    _int("cached_tokens", cached_tokens, 0)
    _int("block_size", block_size)
    return min(cached_tokens, prompt_tokens - 1) // block_size * block_size


class ChainedHashCache:
    """vLLM's lookup, unbounded: a set of block keys; a hit is the longest prefix of keys present.

    >>> c = ChainedHashCache(block_size=4)
    >>> c.match(list(range(10))), c.insert(list(range(10))), c.match(list(range(9)) + [99])
    (0, 2, 2)
    """

    def __init__(self, block_size: int = 16):
        self.block_size = _int("block_size", block_size)
        self.keys = set()

    def match(self, token_ids) -> int:
        """Number of leading full blocks already cached."""
        n = 0
        for key in block_hashes(token_ids, self.block_size):
            if key not in self.keys:
                break
            n += 1
        return n

    def insert(self, token_ids) -> int:
        """Cache every full block; return how many were new."""
        before = len(self.keys)
        self.keys.update(block_hashes(token_ids, self.block_size))
        return len(self.keys) - before


# --- the radix tree ---------------------------------------------------------------
class _Node:
    __slots__ = ("key", "children", "parent", "last_access", "alive")

    def __init__(self, key, parent, last_access):
        self.key = key                # tuple of blocks; each block a tuple of token ids
        self.children = {}            # first block -> child
        self.parent = parent
        self.last_access = last_access
        self.alive = True


class RadixCache:
    """A radix tree of cached blocks with LRU eviction under a block budget.

    Edges hold runs of full blocks (``block_size`` tokens each). ``match``
    returns the longest cached prefix in blocks and marks it used;
    ``insert`` adds a sequence's missing full blocks, first evicting blocks
    from the least recently used leaves -- the last block of a leaf goes
    first, so a cached block's prefix always stays cached -- and never
    blocks of the sequence being inserted. ``capacity_blocks=None`` is
    unbounded.

    >>> c = RadixCache(block_size=2, capacity_blocks=3)
    >>> c.insert([1, 2, 3, 4]), c.insert([1, 2, 5, 6]), c.num_blocks
    (2, 1, 3)
    >>> c.match([1, 2, 3, 4, 7]), c.match([1, 2, 5, 6])
    (2, 2)
    >>> c.insert([8, 9]), c.num_blocks, c.evicted_blocks   # evicts [3, 4], the least recently used
    (1, 3, 1)
    """

    def __init__(self, block_size: int = 16, capacity_blocks: int | None = None):
        self.block_size = _int("block_size", block_size)
        self.capacity_blocks = None if capacity_blocks is None else _int("capacity_blocks", capacity_blocks, 0)
        self.root = _Node((), None, 0)
        self.num_blocks = 0
        self.evicted_blocks = 0
        self.clock = 0
        self._heap = []              # (last_access, id, node) of leaves, lazily invalidated
        self._ids = 0

    def _blocks(self, token_ids):
        bs = self.block_size
        tokens = tuple(token_ids)
        return [tokens[i * bs:(i + 1) * bs] for i in range(len(tokens) // bs)]

    def _push_leaf(self, node):
        if node is not self.root and not node.children:
            self._ids += 1
            heapq.heappush(self._heap, (node.last_access, self._ids, node))

    def _walk(self, blocks, touch):
        """Follow ``blocks`` from the root: (node, matched blocks in it, total matched, path)."""
        node, i, path = self.root, 0, []
        while i < len(blocks):
            child = node.children.get(blocks[i])
            if child is None:
                break
            k = 0
            while k < len(child.key) and i + k < len(blocks) and child.key[k] == blocks[i + k]:
                k += 1
            path.append(child)
            if touch:
                child.last_access = self.clock
            i += k
            if k < len(child.key):
                return child, k, i, path
            node = child
        return node, len(node.key), i, path

    def match(self, token_ids) -> int:
        """Longest cached prefix of ``token_ids``, in full blocks; marks it recently used."""
        self.clock += 1
        _, _, matched, path = self._walk(self._blocks(token_ids), touch=True)
        for node in path:
            self._push_leaf(node)
        return matched

    def _split(self, node, k):
        """Cut ``node`` after its first k blocks; return the upper part."""
        upper = _Node(node.key[:k], node.parent, node.last_access)
        node.parent.children[upper.key[0]] = upper
        node.key = node.key[k:]
        node.parent = upper
        upper.children[node.key[0]] = node
        return upper

    def evict(self, num_blocks: int, protect=()) -> int:
        """Evict up to ``num_blocks`` blocks from LRU leaves not in ``protect``; return how many."""
        protected = set(map(id, protect))
        done, skipped = 0, []
        while done < num_blocks and self._heap:
            access, _, node = heapq.heappop(self._heap)
            if not node.alive or node.children or access != node.last_access:
                continue  # stale entry
            if id(node) in protected:
                skipped.append(node)
                continue
            take = min(len(node.key), num_blocks - done)
            node.key = node.key[:len(node.key) - take]
            done += take
            if node.key:
                self._push_leaf(node)
            else:
                node.alive = False
                parent = node.parent
                del parent.children[next(k for k, v in parent.children.items() if v is node)]
                self._push_leaf(parent)
        for node in skipped:
            self._push_leaf(node)
        self.num_blocks -= done
        self.evicted_blocks += done
        return done

    def insert(self, token_ids) -> int:
        """Cache the full blocks of ``token_ids``; return how many blocks were added.

        Under a budget, LRU blocks are evicted first; if the sequence alone
        is over budget only its leading blocks that fit are kept.
        """
        self.clock += 1
        blocks = self._blocks(token_ids)
        node, k, matched, path = self._walk(blocks, touch=True)
        new = len(blocks) - matched
        if new > 0 and node is not self.root and k < len(node.key):
            # diverging inside an edge: cut it, so that only the shared part is protected
            upper = self._split(node, k)
            self._push_leaf(node)
            path[-1] = node = upper
        if new > 0 and self.capacity_blocks is not None:
            over = self.num_blocks + new - self.capacity_blocks
            if over > 0:
                self.evict(over, protect=path)
            new = min(new, self.capacity_blocks - self.num_blocks)
        for n in path:
            self._push_leaf(n)
        if new <= 0:
            return 0
        leaf = _Node(tuple(blocks[matched:matched + new]), node, self.clock)
        node.children[leaf.key[0]] = leaf
        self.num_blocks += new
        self._push_leaf(leaf)
        return new

    def cached_sequences(self) -> list:
        """Every root-to-leaf path as a flat token tuple (for inspection and tests)."""
        out, stack = [], [(self.root, ())]
        while stack:
            node, prefix = stack.pop()
            here = prefix + tuple(t for block in node.key for t in block)
            if not node.children and node is not self.root:
                out.append(here)
            stack.extend((child, here) for child in node.children.values())
        return sorted(out)

    def count_blocks(self) -> int:
        """Blocks in the tree, counted by walking it (``num_blocks`` is the running total)."""
        total, stack = 0, [self.root]
        while stack:
            node = stack.pop()
            total += len(node.key)
            stack.extend(node.children.values())
        return total


# --- synthetic workloads ----------------------------------------------------------------
@dataclass(frozen=True)
class Request:
    """One request: the prompt it sends and the tokens it generates."""

    prompt: tuple
    output: tuple = ()


def _tokens(rng, n, vocab):
    return tuple(rng.choices(range(vocab), k=n))


def _shared_system_prompt(rng, vocab, num_requests=100, system_tokens=2000, user_tokens=(20, 200),
                          output_tokens=(50, 300)):
    system = _tokens(rng, system_tokens, vocab)
    return [Request(system + _tokens(rng, rng.randint(*user_tokens), vocab),
                    _tokens(rng, rng.randint(*output_tokens), vocab)) for _ in range(num_requests)]


def _few_shot(rng, vocab, num_requests=100, num_templates=4, shots=5, shot_tokens=300, question_tokens=(20, 80),
              output_tokens=(10, 60)):
    templates = [_tokens(rng, 100, vocab) + sum((_tokens(rng, shot_tokens, vocab) for _ in range(shots)), ())
                 for _ in range(num_templates)]
    return [Request(rng.choice(templates) + _tokens(rng, rng.randint(*question_tokens), vocab),
                    _tokens(rng, rng.randint(*output_tokens), vocab)) for _ in range(num_requests)]


def _document_qa(rng, vocab, num_requests=100, num_documents=10, document_tokens=4000, question_tokens=(10, 60),
                 output_tokens=(50, 200)):
    docs = [_tokens(rng, 200, vocab) + _tokens(rng, document_tokens, vocab) for _ in range(num_documents)]
    weights = [1 / (i + 1) for i in range(num_documents)]  # a few documents are asked about most
    return [Request(rng.choices(docs, weights)[0] + _tokens(rng, rng.randint(*question_tokens), vocab),
                    _tokens(rng, rng.randint(*output_tokens), vocab)) for _ in range(num_requests)]


def _agent(rng, vocab, steps=20, system_tokens=1000, observation_tokens=(200, 600), action_tokens=(50, 150)):
    history = _tokens(rng, system_tokens, vocab)
    out = []
    for _ in range(steps):
        history += _tokens(rng, rng.randint(*observation_tokens), vocab)
        action = _tokens(rng, rng.randint(*action_tokens), vocab)
        out.append(Request(history, action))
        history += action
    return out


def agent_requests(system_tokens, observation_tokens, action_tokens, steps):
    """The agent loop of ch05's exercise: each step appends an observation, then generates an action.

    Token ids are distinct integers, so nothing matches by accident; step k's prompt is the
    system prompt and every earlier observation and action, plus its own observation (``_agent``
    draws the same loop with random ids and lengths). Taught in ch05_prefix_reuse (Exercise 4).

    >>> [len(r.prompt) for r in agent_requests(100, 40, 10, 3)]   # 100 + k x 40 + (k - 1) x 10
    [140, 190, 240]
    """
    history, out, nxt = tuple(range(system_tokens)), [], system_tokens
    for _ in range(steps):
        history += tuple(range(nxt, nxt + observation_tokens))
        action = tuple(range(nxt + observation_tokens, nxt + observation_tokens + action_tokens))
        nxt += observation_tokens + action_tokens
        out.append(Request(history, action))
        history += action
    return out


def _multi_turn_chat(rng, vocab, conversations=20, turns=6, system_tokens=500, user_tokens=(20, 150),
                     assistant_tokens=(50, 300)):
    system = _tokens(rng, system_tokens, vocab)
    histories = [system for _ in range(conversations)]
    out = []
    for _ in range(turns):           # turn k of every conversation, then turn k + 1
        for c in range(conversations):
            prompt = histories[c] + _tokens(rng, rng.randint(*user_tokens), vocab)
            reply = _tokens(rng, rng.randint(*assistant_tokens), vocab)
            out.append(Request(prompt, reply))
            histories[c] = prompt + reply
    return out


WORKLOADS = {
    "shared_system_prompt": (_shared_system_prompt, "100 requests behind one 2,000-token system prompt"),
    "few_shot": (_few_shot, "100 requests over 4 few-shot templates of 5 x 300-token examples"),
    "document_qa": (_document_qa, "100 questions over 10 documents of 4,200 tokens, popularity 1/rank"),
    "agent": (_agent, "one 20-step agent re-sending its growing history (1,000-token system prompt)"),
    "multi_turn_chat": (_multi_turn_chat, "20 conversations x 6 turns, interleaved, one 500-token system prompt"),
}


def make_workload(name: str, seed: int = 0, *, vocab_size: int = 128_256, **params) -> list:
    """The requests of a named synthetic workload (same seed, same tokens).

    ``params`` override the generator's defaults (``steps``, ``num_requests``,
    ``system_tokens`` ...). The agent re-sends its whole history each step:

    >>> steps = make_workload("agent", steps=3, system_tokens=100)
    >>> [steps[i + 1].prompt[:len(s.prompt + s.output)] == s.prompt + s.output for i, s in enumerate(steps[:-1])]
    [True, True]
    """
    if name not in WORKLOADS:
        raise PrefixCacheError(f"workload must be one of {', '.join(WORKLOADS)}, got {name!r}")
    _int("vocab_size", vocab_size, 2)
    try:
        return WORKLOADS[name][0](random.Random(seed), vocab_size, **params)
    except TypeError as exc:
        raise PrefixCacheError(f"{name}: {exc}") from None


# --- running a workload through a cache ----------------------------------------------------
@dataclass(frozen=True)
class CacheReport:
    """What a prefix cache did for a sequence of requests (token counts are prompt tokens)."""

    workload: str
    requests: int
    block_size: int
    capacity_blocks: int | None
    prompt_tokens: int              # prefill work without a cache
    hit_tokens: int                 # tokens served from the cache (full blocks)
    blocks_held: int                # at the end
    peak_blocks: int
    evicted_blocks: int
    bytes_per_token: int | None
    hit_blocks: tuple = field(default=(), repr=False)   # per request

    @property
    def hit_rate(self) -> float:
        """Share of prompt tokens served from the cache, in [0, 1]."""
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def prefill_tokens_without_cache(self) -> int:
        return self.prompt_tokens

    @property
    def prefill_tokens_with_cache(self) -> int:
        return self.prompt_tokens - self.hit_tokens

    @property
    def bytes_held(self) -> int | None:
        if self.bytes_per_token is None:
            return None
        return self.blocks_held * self.block_size * self.bytes_per_token

    def summary(self) -> str:
        held = f"{self.blocks_held:,} blocks"
        if self.bytes_per_token is not None:
            held += f" = {format_gb_gib(self.bytes_held)}"
        return (f"{self.workload:<22} hit rate {self.hit_rate:6.1%}  prefill {self.prefill_tokens_with_cache:,} "
                f"of {self.prompt_tokens:,} tokens  held {held}  evicted {self.evicted_blocks:,} blocks")


def run_cache(requests, *, block_size: int = 16, capacity_blocks: int | None = None, capacity_bytes=None,
              bytes_per_token: int | None = None, workload: str = "requests") -> CacheReport:
    """Send requests one after another through a RadixCache.

    Each request looks up its prompt, then caches its prompt and output
    (generated blocks are cached too, so the next turn of a conversation
    hits them). ``capacity_bytes`` needs ``bytes_per_token`` and becomes
    ``capacity_bytes // (block_size * bytes_per_token)`` blocks. Hit rate =
    hit tokens / prompt tokens; prefill with the cache = prompt - hit tokens.
    A hit stops short of the prompt's last token, as in vLLM
    (``cache_hit_tokens``): a prompt sent twice recomputes its last block.

    A second turn re-sends the first turn's 40 tokens (2 full blocks) plus 10:

    >>> turn1 = Request(tuple(range(30)), tuple(range(100, 110)))
    >>> turn2 = Request(turn1.prompt + turn1.output + tuple(range(200, 210)))
    >>> r = run_cache([turn1, turn2])
    >>> r.hit_blocks, r.prefill_tokens_without_cache, r.prefill_tokens_with_cache, f"{r.hit_rate:.0%}"
    ((0, 2), 80, 48, '40%')
    """
    if bytes_per_token is not None:
        _int("bytes_per_token", bytes_per_token)
    if capacity_bytes is not None:
        if capacity_blocks is not None or bytes_per_token is None:
            raise PrefixCacheError("capacity_bytes needs bytes_per_token and excludes capacity_blocks")
        capacity_blocks = _int("capacity_bytes", capacity_bytes, 0) // (block_size * bytes_per_token)
    cache = RadixCache(block_size, capacity_blocks)
    prompt_tokens = hit_tokens = peak = 0
    hits = []
    for r in requests:
        matched = cache.match(r.prompt)
        if r.prompt:     # vLLM's cap: the last prompt token is always computed (cache_hit_tokens)
            matched = min(matched, (len(r.prompt) - 1) // block_size)
        hits.append(matched)
        prompt_tokens += len(r.prompt)
        hit_tokens += matched * block_size
        cache.insert(r.prompt + tuple(r.output))
        peak = max(peak, cache.num_blocks)
    return CacheReport(workload=workload, requests=len(hits), block_size=block_size,
                       capacity_blocks=capacity_blocks, prompt_tokens=prompt_tokens, hit_tokens=hit_tokens,
                       blocks_held=cache.num_blocks, peak_blocks=peak, evicted_blocks=cache.evicted_blocks,
                       bytes_per_token=bytes_per_token, hit_blocks=tuple(hits))


def simulate_prefix_cache(workload: str = "shared_system_prompt", *, seed: int = 0, block_size: int = 16,
                          capacity_blocks: int | None = None, capacity_bytes=None, bytes_per_token=None,
                          **params) -> CacheReport:
    """Generate a named workload and run it through the cache.

    The shared system prompt: the first request computes all 2,000 prompt
    tokens, each of the other 99 finds the 125 full blocks cached:

    >>> r = simulate_prefix_cache("shared_system_prompt")
    >>> r.hit_blocks[:3], r.hit_tokens == 99 * 125 * 16
    ((0, 125, 125), True)
    """
    return run_cache(make_workload(workload, seed, **params), block_size=block_size,
                     capacity_blocks=capacity_blocks, capacity_bytes=capacity_bytes,
                     bytes_per_token=bytes_per_token, workload=workload)


# --- what sharing a prompt saves ---------------------------------------------------------
@dataclass(frozen=True)
class SharingSavings:
    """``num_requests`` requests that all start with the same ``prompt_tokens``-token prompt."""

    prompt_tokens: int
    num_requests: int
    block_size: int
    bytes_per_token: int
    shared_blocks: int              # full blocks: floor(P / bs)
    tail_tokens: int                # P mod bs: every request recomputes and keeps its own
    unshared_bytes: int             # N x P x bytes_per_token
    shared_bytes: int               # (shared_blocks x bs + N x tail) x bytes_per_token
    shared_block_bytes: int         # as allocated: (shared_blocks + N x ceil(tail / bs)) blocks
    prefill_tokens_unshared: int    # N x P
    prefill_tokens_shared: int      # P + (N - 1) x tail

    @property
    def saved_bytes(self) -> int:
        return self.unshared_bytes - self.shared_bytes

    @property
    def hit_tokens_per_request(self) -> int:
        return self.shared_blocks * self.block_size


def prefix_sharing_savings(prompt_tokens: int, num_requests: int, bytes_per_token: int,
                           block_size: int = 16) -> SharingSavings:
    """Memory and prefill saved when requests share a prompt, at block granularity.

    Only full blocks are shared: ``floor(P / bs)`` of them, held once; the
    ``P mod bs`` tokens of the partial last block are recomputed and held by
    every request. The prompt is taken to be the start of each request,
    followed by tokens of its own (a question): a request that is the prompt
    alone cannot hit all of it (``cache_hit_tokens``: its last token, here a
    whole block, is computed again). [chains]: a 2,000-token system prompt, 100 requests,
    Llama 3.1 8B (131,072 B per token):

    >>> s = prefix_sharing_savings(2000, 100, 131072)
    >>> print(f"{s.unshared_bytes / 1e9:.1f} GB unshared, {s.shared_bytes / 1e6:.0f} MB shared, "
    ...       f"{s.shared_blocks} full blocks")
    26.2 GB unshared, 262 MB shared, 125 full blocks
    >>> s = prefix_sharing_savings(2007, 100, 131072)
    >>> s.shared_blocks, s.tail_tokens
    (125, 7)
    """
    _int("prompt_tokens", prompt_tokens)
    _int("num_requests", num_requests)
    _int("bytes_per_token", bytes_per_token)
    _int("block_size", block_size)
    shared, tail = divmod(prompt_tokens, block_size)
    tail_blocks = -(-tail // block_size)
    return SharingSavings(
        prompt_tokens=prompt_tokens, num_requests=num_requests, block_size=block_size,
        bytes_per_token=bytes_per_token, shared_blocks=shared, tail_tokens=tail,
        unshared_bytes=num_requests * prompt_tokens * bytes_per_token,
        shared_bytes=(shared * block_size + num_requests * tail) * bytes_per_token,
        shared_block_bytes=(shared + num_requests * tail_blocks) * block_size * bytes_per_token,
        prefill_tokens_unshared=num_requests * prompt_tokens,
        prefill_tokens_shared=prompt_tokens + (num_requests - 1) * tail,
    )


