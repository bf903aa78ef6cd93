"""From a block count to the figures vLLM prints: tokens and concurrency, by engine and release.

Tokens vLLM prints: V0 (and the max-seq-len error) ``N * bs``; V1 before 0.20
``(N // groups) * bs``; from 0.20 ``int(N / bpr * max_model_len)`` with
``bpr`` the blocks one request needs (``ceil(max_model_len / bs)`` per full
group, the worst step per sliding or chunked group, the state pages per
Mamba2 / Gated DeltaNet group; each group at its own block where kinds differ).
Concurrency: V0 ``N * bs / max_model_len``; V1 ``N / bpr``.

Under pipeline parallelism every stage sizes its own pool from its own
available memory and its own layers; the engine keeps the smallest block
count (vLLM V1's ``unify_kv_cache_configs``, V0's minimum over workers), so
``Scenario.blocks`` takes one window per stage when the log gives them.

Taught in ch08_vllm_lab.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from ..spec import CHUNKED, FULL, SLIDING, STATE_KINDS, ModelSpec

__all__ = ["Scenario", "fmt2"]


def _blocks_per_request(groups, spec: ModelSpec, bs: int, mml: int, f_tokens, layout=None) -> int | None:
    """Blocks one request at ``mml`` needs: the sum over groups of ceil(max memory usage / page).

    vLLM's ``get_max_concurrency_for_kv_cache_config``: full ``ceil(mml / b)``; sliding
    ``ceil(min(W - 1 + F, mml) / b) + 1``; chunked ``ceil(min(chunk + F, mml) / b)``; a state
    group its state pages ('align' mode 2 + checkpoint pages, 'none' 1); ``b`` the group's block
    (``layout.block_size_of``, else ``bs``).
    """
    total = 0
    for kind in groups:
        b = bs if layout is None else layout.block_size_of(kind, bs)
        if kind == FULL:
            total += -(-mml // b)
        elif kind == SLIDING:
            if f_tokens is None:
                return None
            total += -(-min(spec.sliding_window - 1 + f_tokens, mml) // b) + 1
        elif kind == CHUNKED:
            if f_tokens is None:
                return None
            total += -(-min(spec.attention_chunk_size + f_tokens, mml) // b)
        elif kind in STATE_KINDS:
            if layout is None:
                return None
            total += layout.state_pages
    return total


def fmt2(x: float) -> Decimal:
    return Decimal(f"{x:.2f}")


@dataclass(frozen=True)
class Scenario:
    """One way vLLM may have turned bytes into blocks and blocks into printed figures."""

    engine: str
    token_formula: str      # 'blocks' (N*bs), 'floor' ((N//g)*bs), 'concurrency' (int(c*mml))
    group_rule: str
    f_multiplier: int
    layouts: tuple
    bs: int
    mml: int | None
    f_tokens: int | None
    spec: ModelSpec = field(compare=False, repr=False)
    tp: int = 1             # ranks per pipeline stage: rank r belongs to stage r // tp

    @property
    def b_max(self) -> int:
        return max(layout.bytes_per_block for layout in self.layouts)

    @property
    def b_min(self) -> int:
        return min(layout.bytes_per_block for layout in self.layouts)

    @property
    def groups(self) -> tuple:
        return self.layouts[0].groups

    def blocks(self, lo: int, hi: int, stage_windows=None) -> tuple[int, int]:
        """[N_min, N_max] the engine can report for available bytes in [lo, hi].

        With ``stage_windows`` (one (lo, hi) per pipeline stage, from each
        stage's own printed figure) N = min over stages of A_s // B_s, each
        stage with its own block; without, the one window is set against the
        largest and smallest stage block (every split the figure allows).
        """
        if stage_windows is not None:
            pairs = list(zip(stage_windows, self.layouts))
            return (min(w[0] // layout.bytes_per_block for w, layout in pairs),
                    min(w[1] // layout.bytes_per_block for w, layout in pairs))
        return lo // self.b_max, hi // self.b_min

    def bpr(self) -> int | None:
        if self.mml is None:
            return None
        f = None if self.f_tokens is None else self.f_tokens * self.f_multiplier
        return _blocks_per_request(self.groups, self.spec, self.bs, self.mml, f, self.layouts[0])

    def tokens(self, n: int) -> int | None:
        if self.token_formula == "blocks":
            return n * self.bs
        if self.token_formula == "floor":
            return (n // len(self.groups)) * self.bs
        bpr = self.bpr()
        if bpr is None or bpr <= 0:
            return None
        return int(n / bpr * self.mml)

    def concurrency(self, n: int) -> float | None:
        if self.mml is None:
            return None
        if self.token_formula == "blocks":
            return n * self.bs / self.mml
        bpr = self.bpr()
        return None if bpr is None or bpr <= 0 else n / bpr

    def blocks_for_tokens(self, tokens: int) -> tuple[int, int] | None:
        """All N whose printed token figure is ``tokens`` (tokens(N) is non-decreasing)."""
        if self.tokens(0) is None:
            return None

        def first_at_least(target):
            lo, hi = 0, 1
            while self.tokens(hi) < target:
                lo, hi = hi, hi * 2
                if hi > 1 << 80:
                    return None
            while lo < hi:
                mid = (lo + hi) // 2
                if self.tokens(mid) < target:
                    lo = mid + 1
                else:
                    hi = mid
            return lo

        a = first_at_least(tokens)
        if a is None or self.tokens(a) != tokens:
            return None
        b = first_at_least(tokens + 1)
        return a, (b - 1 if b is not None else a)

    def describe(self) -> str:
        formula = {"blocks": "tokens = N x bs", "floor": "tokens = (N // groups) x bs",
                   "concurrency": "tokens = int(N / blocks_per_request x max_model_len)"}[self.token_formula]
        text = f"{self.engine.upper()}, {formula}"
        if len(self.groups) > 1:
            text += f", {len(self.groups)} KV-cache groups of {self.layouts[0].group_size} layers"
        return text
