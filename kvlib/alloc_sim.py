"""Allocator simulator: where KV memory goes under three allocation policies.

A stream of requests (prompt and output lengths drawn from a named
distribution) waits in a FCFS queue for a KV pool of ``capacity_tokens``
token slots. Time runs in decode steps; a request admitted at step ``a``
holds ``prompt + k`` tokens during its k-th step (k = 1..output) and frees
its memory after the last. Three policies:

* ``max_reservation`` -- contiguous, reserves ``max_seq_len`` slots at
  admission (pre-paging systems: Orca, FasterTransformer);
* ``oracle`` -- contiguous, reserves exactly ``prompt + output`` (an
  allocator that knew each final length);
* ``paged`` -- blocks of ``block_size`` slots taken as the sequence grows
  (PagedAttention); when no block is free, the most recently admitted
  sequence is preempted and later recomputed (vLLM's default).

Contiguous reservations are placed first-fit in one address space, so
sequences that finish leave holes. At every step the ``capacity_tokens``
slots are split exactly into:

* tokens -- slots holding a token's KV (the useful part);
* reservation -- slots reserved for tokens a running sequence has yet to
  produce (needed later, idle now);
* internal -- slots allocated that will never hold a token: beyond the final
  length (max_reservation), or the unfilled tail of a block (paged);
* external -- free slots while a request waits: memory that exists but the
  allocator cannot give to the request at the head of the queue;
* free -- free slots while nobody waits.

Shares are averaged over the *window*: the steps in which a request waited
(memory was the limit) plus the steps in which one was admitted. This is the
breakdown of Kwon et al. (PagedAttention, SOSP 2023), whose measurement --
20.4% to 38.2% of KV memory holding tokens in earlier systems, under 4%
waste with paging -- [build-up] quotes.

Taught in ch04_pool_paging. Runs in a few milliseconds for a few hundred
requests (see benchmarks/bench_simulators.py).
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field

from . import formulas

__all__ = [
    "SimError",
    "Dist",
    "fixed",
    "uniform",
    "lognormal",
    "Workload",
    "trace_workload",
    "WORKLOADS",
    "DEFAULT_WORKLOAD",
    "DEFAULT_CAPACITY_TOKENS",
    "POLICIES",
    "Snapshot",
    "PolicyResult",
    "simulate",
    "compare",
    "partial_block_waste",
    "expected_partial_block_waste",
    "allocator_waste",
]

MAX_RESERVATION, ORACLE, PAGED = "max_reservation", "oracle", "paged"
POLICIES = (MAX_RESERVATION, ORACLE, PAGED)
DEFAULT_CAPACITY_TOKENS = 32_768  # 16 reservations of 2,048; 4 GiB of Llama 3.1 8B KV at 128 KiB/token
DEFAULT_BLOCK_SIZE = 16           # vLLM's default on CUDA


class SimError(ValueError):
    """A simulator input is out of range; the message names the parameter."""


def _int(name, value, minimum=1):
    if isinstance(value, bool) or not isinstance(value, int):
        raise SimError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise SimError(f"{name} must be at least {minimum}, got {value}")
    return value


# --- length distributions --------------------------------------------------------
@dataclass(frozen=True)
class Dist:
    """A named distribution of token counts: 'fixed', 'uniform' or 'lognormal'.

    ``params``: fixed (n,); uniform (low, high), both inclusive; lognormal
    (mean, sigma) -- the mean in tokens and sigma of the underlying normal,
    so the median is ``mean * exp(-sigma^2 / 2)`` and the tail is long.
    Samples are rounded to integers and are at least 1.

    >>> rng = random.Random(0)
    >>> fixed(100).sample(rng), uniform(1, 6).sample(rng)
    (100, 4)
    """

    kind: str
    params: tuple

    def __post_init__(self):
        if self.kind == "fixed":
            (n,) = self.params
            _int("fixed length", n)
        elif self.kind == "uniform":
            low, high = self.params
            _int("uniform low", low)
            _int("uniform high", high, minimum=low)
        elif self.kind == "lognormal":
            mean, sigma = self.params
            if isinstance(mean, bool) or not isinstance(mean, (int, float)) or not mean > 0:
                raise SimError(f"lognormal mean must be a positive number, got {mean!r}")
            if isinstance(sigma, bool) or not isinstance(sigma, (int, float)) or not sigma >= 0:
                raise SimError(f"lognormal sigma must be a number >= 0, got {sigma!r}")
        else:
            raise SimError(f"distribution kind must be fixed, uniform or lognormal, got {self.kind!r}")

    def sample(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            return self.params[0]
        if self.kind == "uniform":
            return rng.randint(*self.params)
        mean, sigma = self.params
        mu = math.log(mean) - sigma * sigma / 2
        return max(1, round(rng.lognormvariate(mu, sigma)))

    def __str__(self):
        if self.kind == "lognormal":
            return f"lognormal(mean {self.params[0]:g}, sigma {self.params[1]:g})"
        return f"{self.kind}{self.params}"


def fixed(n: int) -> Dist:
    return Dist("fixed", (n,))


def uniform(low: int, high: int) -> Dist:
    return Dist("uniform", (low, high))


def lognormal(mean: float, sigma: float) -> Dist:
    return Dist("lognormal", (mean, sigma))


@dataclass(frozen=True)
class Workload:
    """Requests as (prompt, output) token counts: drawn from two distributions, or a trace.

    ``trace`` is a tuple of (prompt, output) pairs used as given (then the
    distributions are ignored). Lengths are clipped so that prompt +
    output <= max_seq_len (prompt at most max_seq_len - 1, output at least 1).
    """

    name: str
    prompt: Dist | None = None
    output: Dist | None = None
    num_requests: int = 300
    max_seq_len: int = 2048
    trace: tuple = ()
    description: str = field(default="", compare=False)

    def __post_init__(self):
        _int("max_seq_len", self.max_seq_len, minimum=2)
        if self.trace:
            object.__setattr__(self, "trace", tuple(tuple(pair) for pair in self.trace))
            for i, pair in enumerate(self.trace):
                if len(pair) != 2:
                    raise SimError(f"trace[{i}] must be a (prompt, output) pair, got {pair!r}")
                _int(f"trace[{i}] prompt", pair[0])
                _int(f"trace[{i}] output", pair[1])
        else:
            if not isinstance(self.prompt, Dist) or not isinstance(self.output, Dist):
                raise SimError("a workload needs prompt and output distributions (Dist) or a trace")
            _int("num_requests", self.num_requests)

    def requests(self, seed: int = 0) -> tuple:
        """The (prompt, output) pairs, clipped to max_seq_len; the same for the same seed."""
        if self.trace:
            raw = self.trace
        else:
            rng = random.Random(seed)
            raw = [(self.prompt.sample(rng), self.output.sample(rng)) for _ in range(self.num_requests)]
        out = []
        for prompt, output in raw:
            prompt = min(prompt, self.max_seq_len - 1)
            out.append((prompt, max(1, min(output, self.max_seq_len - prompt))))
        return tuple(out)


def trace_workload(pairs, max_seq_len: int = 2048, name: str = "trace") -> Workload:
    """A workload that replays (prompt, output) pairs in order (lengths clipped to max_seq_len).

    >>> trace_workload([(100, 20), (3000, 5)]).requests()
    ((100, 20), (2047, 1))
    """
    return Workload(name, trace=tuple(pairs), max_seq_len=max_seq_len, description="a given trace")


WORKLOADS = {
    "chat": Workload(
        "chat", lognormal(160, 1.0), lognormal(340, 1.0), num_requests=300, max_seq_len=2048,
        description="chat-like: prompt and output lengths lognormal with means of 160 and 340 tokens "
                    "(sigma 1.0: medians 97 and 206, a long tail), clipped to max_seq_len 2,048; "
                    "means of the order the PagedAttention paper reports for ShareGPT"),
    "uniform": Workload("uniform", uniform(1, 512), uniform(1, 512), num_requests=300, max_seq_len=2048,
                        description="prompt and output uniform on 1..512"),
    "fixed": Workload("fixed", fixed(512), fixed(512), num_requests=100, max_seq_len=2048,
                      description="every request 512 prompt + 512 output tokens"),
    "long": Workload("long", lognormal(1500, 0.6), lognormal(1500, 0.6), num_requests=200, max_seq_len=8192,
                     description="long documents: lognormal means 1,500 and 1,500, max_seq_len 8,192"),
}
DEFAULT_WORKLOAD = "chat"


# --- results ---------------------------------------------------------------------
@dataclass(frozen=True)
class Snapshot:
    """The pool at one step (recorded at every event when ``trace=True``)."""

    step: int
    running: int
    waiting: int
    tokens: int
    reservation: int
    internal: int
    external: int
    free: int
    allocated: int                 # tokens + reservation + internal
    blocks_used: int = 0           # paged only
    blocks_free: int = 0           # paged only
    blocks_needed: int = 0         # paged only: sum of ceil(length / block_size) over running sequences
    intervals: tuple = ()          # contiguous only: (start, size) of each reservation, by address


@dataclass(frozen=True)
class PolicyResult:
    """What one policy did with the pool over the window (slot-steps are slots x steps)."""

    policy: str
    workload: str
    capacity_tokens: int
    block_size: int
    num_requests: int
    window_steps: int
    token_slot_steps: int
    reservation_slot_steps: int
    internal_slot_steps: int
    external_slot_steps: int
    free_slot_steps: int
    running_steps: int            # sum over window steps of running sequences
    admitted_at_fill: int         # admitted at step 0, into the empty pool
    peak_running: int
    preemptions: int
    recomputed_tokens: int        # prompt + generated tokens prefilled again after preemption
    tokens_generated: int         # output tokens produced (each once, preemption or not)
    requests_finished: int
    makespan_steps: int           # steps until the last request finished
    snapshots: tuple = field(default=(), compare=False, repr=False)

    def _share(self, slot_steps) -> float:
        return slot_steps / (self.capacity_tokens * self.window_steps)

    @property
    def token_share(self) -> float:
        """Share of KV memory holding real tokens, averaged over the window."""
        return self._share(self.token_slot_steps)

    @property
    def reservation_share(self) -> float:
        return self._share(self.reservation_slot_steps)

    @property
    def internal_share(self) -> float:
        return self._share(self.internal_slot_steps)

    @property
    def external_share(self) -> float:
        return self._share(self.external_slot_steps)

    @property
    def free_share(self) -> float:
        return self._share(self.free_slot_steps)

    @property
    def waste_share(self) -> float:
        """Reservation + internal + external."""
        return self.reservation_share + self.internal_share + self.external_share

    @property
    def token_share_of_allocated(self) -> float:
        """Tokens over allocated slots (tokens + reservation + internal)."""
        allocated = self.token_slot_steps + self.reservation_slot_steps + self.internal_slot_steps
        return self.token_slot_steps / allocated if allocated else 0.0

    @property
    def mean_running(self) -> float:
        """Sequences running at once, averaged over the window: the batch the pool sustains."""
        return self.running_steps / self.window_steps

    def summary(self) -> str:
        return (f"{self.policy:<16} tokens {self.token_share:6.1%}  reservation {self.reservation_share:6.1%}  "
                f"internal {self.internal_share:6.1%}  external {self.external_share:6.1%}  "
                f"batch {self.mean_running:6.1f}  admitted at fill {self.admitted_at_fill}")


# --- the simulation -----------------------------------------------------------------
class _Seq:
    __slots__ = ("order", "prompt", "output", "admit", "reserve", "start", "blocks", "alive")

    def __init__(self, order, prompt, output, admit):
        # admission sets the rest: blocks (paged), or reserve and start (contiguous); nothing reads them before
        self.order, self.prompt, self.output, self.admit = order, prompt, output, admit
        self.alive = True

    def length(self, t):
        return self.prompt + t - self.admit + 1


class _FirstFit:
    """Contiguous reservations placed at the lowest address with a large enough hole."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.starts = []   # sorted
        self.sizes = {}    # start -> size

    def place(self, size):
        prev_end = 0
        for start in self.starts:
            if start - prev_end >= size:
                break  # the hole before this reservation fits
            prev_end = start + self.sizes[start]
        else:
            if self.capacity - prev_end < size:
                return None
        bisect.insort(self.starts, prev_end)
        self.sizes[prev_end] = size
        return prev_end

    def release(self, start):
        self.starts.pop(bisect.bisect_left(self.starts, start))
        del self.sizes[start]

    def layout(self):
        return tuple((s, self.sizes[s]) for s in self.starts)


def _capacity_tokens(capacity_tokens, capacity_bytes, bytes_per_token):
    if capacity_bytes is not None:
        if capacity_tokens is not None:
            raise SimError("give capacity_tokens or capacity_bytes (with bytes_per_token), not both")
        _int("capacity_bytes", capacity_bytes)
        if bytes_per_token is None:
            raise SimError("capacity_bytes needs bytes_per_token")
        return capacity_bytes // _int("bytes_per_token", bytes_per_token)
    return DEFAULT_CAPACITY_TOKENS if capacity_tokens is None else capacity_tokens


def _workload(workload) -> Workload:
    if workload is None:
        return WORKLOADS[DEFAULT_WORKLOAD]
    if isinstance(workload, Workload):
        return workload
    if isinstance(workload, str):
        if workload not in WORKLOADS:
            raise SimError(f"workload must be one of {', '.join(WORKLOADS)}, got {workload!r}")
        return WORKLOADS[workload]
    if isinstance(workload, (list, tuple)):
        return trace_workload(workload)
    raise SimError(f"workload must be a name, a Workload or a list of (prompt, output) pairs, got {workload!r}")


def simulate(workload=None, *, policy: str = PAGED, capacity_tokens: int | None = None, capacity_bytes=None,
             bytes_per_token=None, block_size: int = DEFAULT_BLOCK_SIZE, seed: int = 0,
             trace: bool = False) -> PolicyResult:
    """Run one policy over a workload and split the pool into tokens and waste.

    ``workload``: a name in WORKLOADS (default 'chat'), a Workload, or a
    list of (prompt, output) pairs. Capacity in token slots, or as
    ``capacity_bytes`` with ``bytes_per_token``. The pool must hold one
    max_seq_len sequence. ``trace=True`` keeps a Snapshot per event.

    Two requests of 10 + 6 tokens in a 40-slot pool with max_seq_len 20:
    reserving 20 each fills the pool. In the one step of the window (both
    are admitted and nobody waits) 11 + 11 slots hold tokens, 5 + 5 are
    reserved for tokens to come and 4 + 4 will never be used; paged in
    blocks of 4, each sequence holds 3 blocks and wastes 1 slot:

    >>> pairs = [(10, 6), (10, 6)]
    >>> w = Workload("two", trace=pairs, max_seq_len=20)
    >>> r = simulate(w, policy="max_reservation", capacity_tokens=40)
    >>> r.admitted_at_fill, r.window_steps, r.token_slot_steps, r.reservation_slot_steps, r.internal_slot_steps
    (2, 1, 22, 10, 8)
    >>> r = simulate(w, policy="paged", capacity_tokens=40, block_size=4)
    >>> r.token_slot_steps, r.internal_slot_steps, r.free_slot_steps
    (22, 2, 16)
    """
    w = _workload(workload)
    if policy not in POLICIES:
        raise SimError(f"policy must be one of {', '.join(POLICIES)}, got {policy!r}")
    capacity = _int("capacity_tokens", _capacity_tokens(capacity_tokens, capacity_bytes, bytes_per_token))
    _int("block_size", block_size)
    _int("seed", seed, minimum=-(2**63))
    if policy == PAGED:
        num_blocks = capacity // block_size
        if num_blocks < -(-w.max_seq_len // block_size):
            raise SimError(f"capacity_tokens ({capacity}) must hold one max_seq_len ({w.max_seq_len}) sequence "
                           f"in blocks of {block_size}")
    elif capacity < w.max_seq_len:
        raise SimError(f"capacity_tokens ({capacity}) must hold one max_seq_len ({w.max_seq_len}) reservation")
    requests = w.requests(seed)
    return _run(requests, w, policy, capacity, block_size, trace)


def _run(requests, w, policy, capacity, bs, trace):
    paged = policy == PAGED
    num_blocks = capacity // bs if paged else 0
    free_blocks = num_blocks
    heap = []                              # (step, kind 0 finish / 1 grow, order, seq)
    waiting = deque(requests)
    running = {}                           # order -> seq, in admission order
    allocator = None if paged else _FirstFit(capacity)
    k_sum = final_sum = reserved_sum = blocks_used = 0   # aggregates over running sequences
    counter = 0
    t = 0
    admitted_at_fill = peak = preemptions = recomputed = generated = finished = last_finish = 0
    acc = {"tokens": 0, "reservation": 0, "internal": 0, "external": 0, "free": 0, "running": 0, "steps": 0}
    snapshots = []

    def remove(seq):
        nonlocal k_sum, final_sum, reserved_sum, free_blocks, blocks_used
        seq.alive = False
        del running[seq.order]
        k_sum -= seq.prompt - seq.admit + 1
        final_sum -= seq.prompt + seq.output
        if paged:
            free_blocks += seq.blocks
            blocks_used -= seq.blocks
        else:
            reserved_sum -= seq.reserve
            allocator.release(seq.start)

    def push_grow(seq):
        step = seq.admit + seq.blocks * bs - seq.prompt  # first step whose length exceeds the blocks held
        if step < seq.admit + seq.output:
            heapq.heappush(heap, (step, 1, seq.order, seq))

    while waiting or running:
        # 1. finishes, then block requests, at step t
        while heap and heap[0][0] == t:
            _, kind, _, seq = heapq.heappop(heap)
            if not seq.alive:
                continue
            if kind == 0:
                remove(seq)
                generated += seq.output
                finished += 1
                last_finish = t
                continue
            if free_blocks == 0:  # preempt the most recently admitted sequence (maybe this one)
                victim = running[next(reversed(running))]
                done = t - victim.admit
                remove(victim)
                preemptions += 1
                generated += done
                recomputed += victim.prompt + done
                waiting.appendleft((victim.prompt + done, victim.output - done))
                if victim is seq:
                    continue
            seq.blocks += 1
            free_blocks -= 1
            blocks_used += 1
            push_grow(seq)
        # 2. admissions, first come first served
        admitted_now = 0
        while waiting:
            prompt, output = waiting[0]
            if paged:
                need = -(-(prompt + 1) // bs)
                if need > free_blocks:
                    break
            else:
                size = w.max_seq_len if policy == MAX_RESERVATION else prompt + output
                start = allocator.place(size)
                if start is None:
                    break
            waiting.popleft()
            seq = _Seq(counter, prompt, output, t)
            counter += 1
            running[seq.order] = seq
            k_sum += prompt - t + 1
            final_sum += prompt + output
            if paged:
                seq.blocks = need
                free_blocks -= need
                blocks_used += need
                push_grow(seq)
            else:
                seq.reserve, seq.start = size, start
                reserved_sum += size
            heapq.heappush(heap, (t + output, 0, seq.order, seq))
            admitted_now += 1
        if t == 0:
            admitted_at_fill = admitted_now
        n = len(running)
        peak = max(peak, n)
        if not running:
            # the queue is empty too: simulate checks that the pool holds one max_seq_len sequence, and a
            # preempted one is re-queued no longer than it was (the tests check that every request finishes)
            break
        while not heap[0][3].alive:
            heapq.heappop(heap)
        t_next = heap[0][0]
        # 3. the pool over steps [t, t_next)
        tokens_now = k_sum + n * t
        allocated = blocks_used * bs if paged else reserved_sum
        reservation_now = 0 if paged else final_sum - tokens_now
        internal_now = allocated - tokens_now - reservation_now
        spare = capacity - allocated
        if trace:
            snapshots.append(Snapshot(
                step=t, running=n, waiting=len(waiting), tokens=tokens_now, reservation=reservation_now,
                internal=internal_now, external=spare if waiting else 0, free=0 if waiting else spare,
                allocated=allocated, blocks_used=blocks_used if paged else 0,
                blocks_free=free_blocks if paged else 0,
                blocks_needed=sum(-(-s.length(t) // bs) for s in running.values()) if paged else 0,
                intervals=() if paged else allocator.layout()))
        steps = t_next - t if waiting else (1 if admitted_now else 0)
        if steps:
            tokens = steps * tokens_now + n * steps * (steps - 1) // 2
            acc["tokens"] += tokens
            if paged:
                acc["internal"] += steps * allocated - tokens
            else:
                acc["reservation"] += steps * final_sum - tokens
                acc["internal"] += steps * (reserved_sum - final_sum)
            acc["external" if waiting else "free"] += steps * spare
            acc["running"] += steps * n
            acc["steps"] += steps
        t = t_next

    return PolicyResult(
        policy=policy, workload=w.name, capacity_tokens=capacity, block_size=bs if paged else 1,
        num_requests=len(requests), window_steps=acc["steps"], token_slot_steps=acc["tokens"],
        reservation_slot_steps=acc["reservation"], internal_slot_steps=acc["internal"],
        external_slot_steps=acc["external"], free_slot_steps=acc["free"], running_steps=acc["running"],
        admitted_at_fill=admitted_at_fill, peak_running=peak, preemptions=preemptions,
        recomputed_tokens=recomputed, tokens_generated=generated, requests_finished=finished,
        makespan_steps=last_finish, snapshots=tuple(snapshots))


def compare(workload=None, *, capacity_tokens: int | None = None, capacity_bytes=None, bytes_per_token=None,
            block_size: int = DEFAULT_BLOCK_SIZE, seed: int = 0) -> dict:
    """All three policies on the same requests: {policy: PolicyResult}.

    The default chat workload in the default 32,768-slot pool: reserving
    max_seq_len leaves a quarter of the pool holding tokens (the
    PagedAttention paper measured 20.4-38.2% in earlier systems), the oracle
    about half, paging all but a few percent:

    >>> for name, r in compare().items():
    ...     print(f"{name:<16} {r.token_share:.0%} tokens, batch {r.mean_running:.0f}")
    max_reservation  25% tokens, batch 16
    oracle           49% tokens, batch 32
    paged            98% tokens, batch 71
    """
    return {p: simulate(workload, policy=p, capacity_tokens=capacity_tokens, capacity_bytes=capacity_bytes,
                        bytes_per_token=bytes_per_token, block_size=block_size, seed=seed) for p in POLICIES}


# --- partial-block waste, analytically -------------------------------------------------
def partial_block_waste(lengths, block_size: int) -> int:
    """Slots left empty in the last block of each sequence: ``sum((-len) mod bs)``.

    >>> partial_block_waste([16, 17, 31], 16)
    16
    """
    _int("block_size", block_size)
    return sum(-n % block_size for n in lengths)


def expected_partial_block_waste(num_seqs: int, block_size: int):
    """Expected empty slots in last blocks when lengths are uniform modulo ``bs``.

    Averages the waste ``(bs - r) mod bs`` over the ``bs`` residues r, which
    is ``(bs - 1) / 2`` per sequence -- the same value as
    ``kvlib.formulas.block_waste_tokens``, reached by enumeration instead of
    the closed form. [chains]: 200 sequences in 16-token blocks waste 1,500
    token slots:

    >>> expected_partial_block_waste(200, 16)
    1500
    """
    _int("num_seqs", num_seqs, minimum=0)
    _int("block_size", block_size)
    total = num_seqs * sum(-r % block_size for r in range(block_size))
    return formulas.exact_div(total, block_size)


# --- waste at admission, in closed form (ch04's exercise 5) ---------------------------------
def allocator_waste(requests, policy, block_size, max_seq_len, *, held_extra=1, last_block=None,
                    count_reservation=True):
    """Slots allocated that hold no token at the step every request is admitted (ch04's exercise 5).

    The closed form of what ``simulate`` shows at that step. Each request is (prompt, output);
    at admission it holds ``prompt + 1`` tokens. Policies as ``simulate``'s: 'max_reservation'
    reserves max_seq_len, 'oracle' prompt + output, 'paged' ceil(held / block_size) blocks. Each
    keyword changes one rule, so a wrong answer can be recomputed: ``held_extra`` the tokens held
    beyond the prompt, ``last_block="whole"`` a whole empty last block where the length is a
    multiple of the block size, ``count_reservation=False`` slots reserved for later tokens left
    out of the waste.

    >>> allocator_waste([(10, 6), (10, 6)], "max_reservation", 4, 20), allocator_waste([(10, 6)], "paged", 4, 20)
    (18, 1)
    """
    total = 0
    for prompt, output in requests:
        held = prompt + held_extra
        if policy == "paged":
            total += (block_size - held % block_size) if last_block == "whole" else -held % block_size
        else:
            size = max_seq_len if policy == "max_reservation" else prompt + output
            total += size - held if count_reservation else size - (prompt + output)
    return total
