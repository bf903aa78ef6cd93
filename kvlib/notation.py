"""The course's one notation table: a letter for derivations, a name for code, a field in real configs.

Each row says what one quantity is called in each of the three places a learner meets it:

* ``letter``: the sympy symbol (and the letter in docstring formulas), e.g. ``L``, ``d_c``;
* ``name``: the name notebooks and new kvlib functions give it (``num_layers``);
* ``kvlib_keywords``: the keyword names existing kvlib functions already use for it (a contract:
  ``kv_bytes_per_token(layers, kv_heads, head_dim, dtype_bytes)``);
* ``config_fields``: the fields of a Hugging Face ``config.json`` that give it;
* ``engine_settings``: vLLM's setting for it where the engine, not the model, decides
  (``tensor_parallel_size``, ``gpu_memory_utilization``);
* ``meaning`` and ``unit``; ``chapter``: the chapter that introduces it.

A letter means one thing everywhere. Chapter 00 (ch00_orientation) shows this table;
``kvlib.formulas``' docstrings, every chapter's sympy symbols and every letter in a chapter's
LaTeX (``$...$`` in markdown cells, in worked problems' formulas and substitutions, in what
``kvdisplay`` renders) use only its letters (``tests/test_notation.py`` fails on a letter that
is not here: add its row first). Words go in ``\\text{...}``, a paper's vectors in bold
(``\\mathbf{c}^{KV}``), and ``INDICES`` number things (the i-th sequence, turn k).

>>> by_letter("K").name, by_letter("K").kvlib_keywords
('num_kv_heads', ('kv_heads',))
>>> by_letter("d_c").config_fields
('kv_lora_rank',)
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Symbol", "SYMBOLS", "INDICES", "GREEK", "by_letter", "letters", "code_names"]

#: Letters that number things (the i-th sequence, turn k) rather than name a quantity: allowed anywhere
#: in LaTeX, and as a subscript (T_i, T_k) they make an instance of the letter they follow.
INDICES = ("i", "j", "k")
#: Greek letters are written as their LaTeX names in the table (``tau``) and rendered as ``\\tau``.
GREEK = frozenset({"alpha", "beta", "gamma", "delta", "epsilon", "eta", "theta", "kappa", "lambda", "mu",
                   "nu", "pi", "rho", "sigma", "tau", "phi", "chi", "psi", "omega"})


@dataclass(frozen=True)
class Symbol:
    """One row of the notation table."""

    letter: str                      # sympy name: "L", "d_c", "bs"
    name: str                        # in notebooks and new code: "num_layers"
    meaning: str
    unit: str                        # "count", "B" (bytes), "tokens", "elements" ...
    config_fields: tuple = ()        # config.json fields that give it (first found wins)
    engine_settings: tuple = ()      # vLLM's setting for it, where the engine decides
    kvlib_keywords: tuple = ()       # keyword names (and spec fields) existing kvlib code uses for it
    chapter: str = "ch01_kv_formula"

    @property
    def latex(self) -> str:
        """The letter as LaTeX: ``d_c`` -> ``d_{c}``, ``bs`` -> ``\\mathit{bs}``, ``tau`` -> ``\\tau``.

        >>> by_letter("tau").latex, by_letter("b_tok").latex, by_letter("BW").latex
        ('\\\\tau', 'b_{tok}', '\\\\mathit{BW}')
        """
        if "_" in self.letter:
            base, sub = self.letter.split("_", 1)
            head = base if len(base) == 1 else rf"\mathit{{{base}}}"      # BW_x: \mathit{BW}_{x}, one letter
            return f"{head}_{{{sub}}}"
        if self.letter in GREEK:
            return "\\" + self.letter
        return self.letter if len(self.letter) == 1 else rf"\mathit{{{self.letter}}}"


SYMBOLS: tuple[Symbol, ...] = (
    # The KV-cache formula, 2 * L * K * D * b per token, times T and B.
    Symbol("L", "num_layers", "transformer layers that keep a KV cache", "count",
           ("num_hidden_layers", "n_layer"), kvlib_keywords=("layers",)),
    Symbol("H", "num_heads", "query heads per layer (not a factor of the cache)", "count",
           ("num_attention_heads", "n_head"), kvlib_keywords=("num_heads",)),
    Symbol("G", "group_size", "query heads that share one KV head: H / K", "count", chapter="ch02_gqa_tp"),
    Symbol("K", "num_kv_heads", "key/value heads per layer; a config without the field (or null) means K = H",
           "count", ("num_key_value_heads",), kvlib_keywords=("kv_heads",)),
    Symbol("D", "head_dim", "numbers in one key (and in one value); no field: hidden_size / num_attention_heads",
           "elements", ("head_dim",), kvlib_keywords=("head_dim",)),
    Symbol("d", "hidden_size", "width of the residual stream (it feeds the parameter count, not the cache)",
           "elements", ("hidden_size", "n_embd"), kvlib_keywords=("hidden_size",)),
    Symbol("b", "dtype_bytes", "bytes per stored number: the weights' dtype unless the engine sets the cache's",
           "B", ("torch_dtype",), ("kv_cache_dtype",), ("dtype_bytes", "kv_dtype_bytes")),
    Symbol("T", "seq_len", "tokens in one sequence so far (its context); max_position_embeddings caps it",
           "tokens", ("max_position_embeddings",), ("max_model_len",), ("seq_len", "context")),
    Symbol("B", "batch_size", "sequences held at once", "sequences", (), ("max_num_seqs",),
           ("batch_size", "batch", "num_seqs")),
    Symbol("d_qk", "qk_head_dim", "numbers per head in a query-key dot product (D; MLA's no-RoPE part plus d_R)",
           "elements", chapter="ch05_prefix_reuse"),
    Symbol("d_v", "v_head_dim", "numbers per value head (D; MLA sets its own)", "elements", ("v_head_dim",),
           chapter="ch05_prefix_reuse"),
    # Multi-head latent attention.
    Symbol("d_c", "kv_lora_rank", "width of MLA's compressed latent, which stands in for keys and values",
           "elements", ("kv_lora_rank",), (), ("latent_dim",), "ch03_mla"),
    Symbol("d_kv", "kv_width", "numbers one token caches in one layer: 2 K D, or MLA's d_c + d_R", "elements",
           chapter="ch03_mla"),
    Symbol("d_R", "qk_rope_head_dim", "width of MLA's decoupled RoPE key, cached beside the latent", "elements",
           ("qk_rope_head_dim",), (), ("rope_dim",), "ch03_mla"),
    # Splitting over GPUs.
    Symbol("t", "tp", "tensor-parallel degree: the GPUs each layer's heads are split over", "count",
           (), ("tensor_parallel_size",), ("tp",), "ch02_gqa_tp"),
    Symbol("p", "pp", "pipeline-parallel degree: the stages the layers are split over", "count",
           (), ("pipeline_parallel_size",), ("pp",), "ch08_vllm_lab"),
    Symbol("N", "num_gpus", "GPUs in a node or a plan", "count", (), (), ("gpus", "gpus_per_node")),
    # The pool an engine reserves.
    Symbol("M", "gpu_bytes", "memory of one GPU as CUDA reports it (not the label)", "B",
           kvlib_keywords=("gpu_bytes", "cuda_memory_bytes")),
    Symbol("u", "utilization", "fraction of M the engine may take", "fraction", (), ("gpu_memory_utilization",),
           ("utilization",), "ch04_pool_paging"),
    Symbol("W", "weight_bytes", "bytes of the model's weights", "B", kvlib_keywords=("weight_bytes",)),
    Symbol("P", "num_params", "parameters of the model, counted from its config", "count",
           kvlib_keywords=("num_params",)),
    Symbol("O", "other_bytes", "what else the engine keeps: activations, workspace, CUDA graphs", "B",
           kvlib_keywords=("other_bytes",), chapter="ch04_pool_paging"),
    Symbol("bs", "block_size", "tokens per block of the paged pool", "tokens", (), ("block_size",),
           ("block_size",), "ch04_pool_paging"),
    Symbol("r", "last_block_tokens", "tokens in a sequence's last block: its length mod bs (0: the block is full)",
           "tokens", chapter="ch04_pool_paging"),
    Symbol("b_tok", "kv_bytes_per_token", "bytes of KV cache one token takes: 2 L K D b, or MLA's L (d_c + d_R) b",
           "B", kvlib_keywords=("bytes_per_token",), chapter="ch04_pool_paging"),
    Symbol("L_full", "num_full_layers", "layers that attend over the whole context", "count",
           chapter="ch04_pool_paging"),
    Symbol("L_window", "num_sliding_layers", "layers that attend over a sliding window of w tokens", "count",
           chapter="ch04_pool_paging"),
    Symbol("w", "sliding_window", "tokens a sliding-window layer keeps", "tokens", ("sliding_window",), (),
           ("sliding_window",), "ch04_pool_paging"),
    # Sharing a prompt.
    Symbol("T_p", "prompt_tokens", "tokens of the prompt that requests share (a prefix of each sequence)", "tokens",
           chapter="ch05_prefix_reuse"),
    Symbol("T_c", "cached_tokens", "tokens of a request already in the prefix cache", "tokens",
           chapter="ch05_prefix_reuse"),
    Symbol("n", "num_turns", "turns of a conversation, or steps of an agent run", "count",
           chapter="ch05_prefix_reuse"),
    # Time.
    Symbol("BW", "bandwidth_bytes_per_s", "memory bandwidth of one GPU", "B/s",
           kvlib_keywords=("bandwidth_bytes_per_s",), chapter="ch06_crossover"),
    Symbol("e", "efficiency", "fraction of BW real kernels reach", "fraction",
           kvlib_keywords=("efficiency",), chapter="ch06_crossover"),
    Symbol("F", "peak_flops_per_s", "peak compute of one GPU (dense, in the step's dtype)", "FLOP/s",
           chapter="ch06_crossover"),
    Symbol("I", "arithmetic_intensity", "FLOPs a step does per byte it reads; its ridge I* = F / BW", "FLOP/B",
           chapter="ch06_crossover"),
    # A capacity plan.
    Symbol("K_g", "kv_heads_per_gpu", "KV heads one GPU of a TP group keeps: K / t, at least 1 (copied past t = K)",
           "count", chapter="ch07_capacity_plan"),
    Symbol("S_g", "kv_bytes_per_sequence_per_gpu", "bytes of one sequence's cache on one GPU of a TP group", "B",
           kvlib_keywords=("kv_bytes_per_sequence_per_gpu",), chapter="ch07_capacity_plan"),
    Symbol("M_kv", "kv_pool_bytes_per_gpu", "the KV pool of one GPU: ceil(M u) - W / t - O", "B",
           kvlib_keywords=("kv_pool_bytes_per_gpu",), chapter="ch07_capacity_plan"),
    Symbol("l", "allreduce_latency_s", "latency of one tensor-parallel all-reduce in a decode step (two per layer: "
           "2 L l a step when t > 1)", "s", kvlib_keywords=("allreduce_latency_s",), chapter="ch07_capacity_plan"),
    Symbol("o", "tp_overhead", "the all-reduce charged as a fraction of the step instead: a pessimistic bound "
           "(0 when t = 1)", "fraction", kvlib_keywords=("tp_overhead",), chapter="ch07_capacity_plan"),
    Symbol("s", "slowdown", "how much longer a real decode step takes than the bandwidth bound: 1 / e, or "
           "(1 + o) / e under the bound", "ratio", kvlib_keywords=("slowdown",), chapter="ch07_capacity_plan"),
    Symbol("tau", "itl_target_s", "inter-token latency target, usually at the 95th percentile", "s",
           kvlib_keywords=("itl_target_s",), chapter="ch07_capacity_plan"),
    Symbol("B_mem", "sequences_per_replica_by_memory", "sequences a replica's KV pool holds: floor(M_kv / S_g)",
           "sequences", kvlib_keywords=("sequences_per_replica_by_memory",), chapter="ch07_capacity_plan"),
    Symbol("B_itl", "sequences_per_replica_by_latency", "most sequences a replica holds and still meets the ITL target",
           "sequences", kvlib_keywords=("sequences_per_replica_by_latency",), chapter="ch07_capacity_plan"),
    Symbol("B_node", "sequences_per_node", "sequences one node holds: (N / t) min(B_mem, B_itl)", "sequences",
           kvlib_keywords=("sequences_per_node",), chapter="ch07_capacity_plan"),
    Symbol("U", "users", "users served at once, each with one sequence in flight", "sequences",
           kvlib_keywords=("users",), chapter="ch07_capacity_plan"),
    Symbol("n_nodes", "nodes", "nodes that carry the average load: ceil(U / B_node)", "count",
           kvlib_keywords=("nodes",), chapter="ch07_capacity_plan"),
    Symbol("f", "spike_factor", "traffic peak over the average a plan must absorb", "ratio",
           kvlib_keywords=("spike_factor",), chapter="ch07_capacity_plan"),
    # vLLM's own figures (its log and its pool).
    Symbol("O_act", "activation_bytes", "activation peak of the profiling run (torch peak less the weights)", "B",
           kvlib_keywords=("activation_bytes",), chapter="ch08_vllm_lab"),
    Symbol("O_nt", "non_torch_bytes", "memory outside torch's allocator (NCCL, CUDA context)", "B",
           kvlib_keywords=("non_torch_bytes",), chapter="ch08_vllm_lab"),
    Symbol("O_cg", "cudagraph_bytes", "CUDA graphs' memory, estimated before sizing from vLLM 0.20", "B",
           kvlib_keywords=("cudagraph_bytes",), chapter="ch08_vllm_lab"),
    Symbol("b_blk", "block_bytes", "bytes of one block on one GPU: b_tok bs", "B", chapter="ch08_vllm_lab"),
    Symbol("n_blocks", "num_gpu_blocks", "blocks in the paged pool, as vLLM's log prints them", "blocks",
           kvlib_keywords=("num_gpu_blocks",), chapter="ch08_vllm_lab"),
    Symbol("X", "printed_gib", "a memory figure as vLLM's log prints it: GiB, to two decimals", "GiB",
           chapter="ch08_vllm_lab"),
    Symbol("lo", "window_low_bytes", "fewest bytes a printed X can stand for: (X - 0.005) 2^30, rounded up", "B",
           chapter="ch08_vllm_lab"),
    Symbol("hi", "window_high_bytes", "most bytes a printed X can stand for: below (X + 0.005) 2^30", "B",
           chapter="ch08_vllm_lab"),
    Symbol("n_spare", "redundancy_nodes", "spare nodes a plan adds for failures (N+1: one)", "count",
           kvlib_keywords=("redundancy_nodes",), chapter="ch07_capacity_plan"),
    Symbol("V", "vocab_size", "tokens in the vocabulary: rows of the embedding table", "count", ("vocab_size",),
           chapter="ch06_crossover"),
    # Serving beyond the cache (ch09's serving families, kvlib.serving; the drills' worked steps).
    Symbol("eta", "mfu", "model FLOPs utilization: the FLOP/s a step achieves over the peak F", "fraction",
           chapter="ch09_interview_drills"),
    Symbol("C", "chunk_tokens", "prompt tokens of one chunked-prefill chunk, computed in a step beside the decodes",
           "tokens", (), ("max_num_batched_tokens",), chapter="ch09_interview_drills"),
    Symbol("T_o", "output_tokens", "tokens one request generates (its output)", "tokens",
           chapter="ch09_interview_drills"),
    Symbol("alpha", "acceptance", "probability that the target accepts one drafted token (speculative decoding)",
           "fraction", chapter="ch09_interview_drills"),
    Symbol("gamma", "draft_tokens", "tokens the draft proposes per verification step", "tokens",
           chapter="ch09_interview_drills"),
    Symbol("c_d", "cost_ratio", "one draft step's time over one target step's (Leviathan et al. 2023 call it c)", "ratio",
           chapter="ch09_interview_drills"),
    Symbol("E", "expected_tokens", "tokens one verification step yields on average: (1 - alpha^(gamma + 1)) / (1 - alpha)",
           "tokens", chapter="ch09_interview_drills"),
    Symbol("W_d", "draft_weight_bytes", "bytes of a speculative draft model's weights", "B",
           chapter="ch09_interview_drills"),
    Symbol("W_q", "quant_weight_bytes", "bytes of the weights after weight-only quantization (scales included)", "B",
           chapter="ch09_interview_drills"),
    Symbol("C_h", "price_per_gpu_hour", "what one GPU costs per hour", "dollars", chapter="ch09_interview_drills"),
    Symbol("W_r", "weight_bytes_read", "weight bytes one decode step reads: W less the embedding rows no token "
           "of the batch looks up, W - (V - B) d b; of a mixture of experts, only the experts its tokens touch",
           "B", chapter="ch06_crossover"),
    Symbol("N_e", "num_experts", "routed experts in one MoE layer", "experts",
           ("num_local_experts", "n_routed_experts", "num_experts"), chapter="ch06_crossover"),
    Symbol("k_e", "num_experts_per_tok", "routed experts each token is sent to (top-k)", "experts",
           ("num_experts_per_tok",), chapter="ch06_crossover"),
    Symbol("N_B", "experts_touched", "routed experts a batch of B tokens touches per MoE layer, uniform routing: "
           "N_e (1 - (1 - k_e / N_e)^B)", "experts", chapter="ch06_crossover"),
    Symbol("P_e", "expert_params", "parameters of one routed expert in one MoE layer (its gated MLP)", "count",
           chapter="ch06_crossover"),
    Symbol("lambda", "rate_per_s", "requests arriving per second (the rate Little's law multiplies)", "requests/s",
           chapter="ch07_capacity_plan"),
    Symbol("S_x", "disagg_transfer_bytes", "KV bytes a disaggregated prefill hands to decode per request: its "
           "prompt's cache, t S_g (MLA: L (d_c + d_R) b T_p)", "B", chapter="ch07_capacity_plan"),
    Symbol("BW_x", "link_bytes_per_s", "one GPU's link to another GPU, one direction: NVLink, or a NIC between nodes",
           "B/s", chapter="ch07_capacity_plan"),
    Symbol("t_x", "transfer_seconds", "time one GPU takes to send its share of S_x over its link BW_x", "s",
           chapter="ch07_capacity_plan"),
    Symbol("h_p", "prefix_hit_rate", "share of a prompt's tokens the prefix cache serves (not computed again)",
           "fraction", chapter="ch07_capacity_plan"),
    Symbol("W_v", "verify_weight_bytes", "weight bytes a speculative verify of gamma + 1 tokens reads (a MoE target: "
           "the experts they touch)", "B", chapter="ch09_interview_drills"),
    Symbol("W_h", "draft_head_bytes", "weight bytes one step of a draft head reads (an EAGLE head, an MTP module): "
           "a 2d -> d projection, one decoder layer and the target's LM head", "B", chapter="ch09_interview_drills"),
    Symbol("c_v", "verify_ratio", "a verify step's time over a plain target step's (1 for a dense target)", "ratio",
           chapter="ch09_interview_drills"),
    Symbol("L_s", "num_state_layers", "layers that keep a constant state per sequence (Mamba2, Gated DeltaNet)",
           "count", ("layer_types", "hybrid_override_pattern", "full_attention_interval"),
           chapter="ch10_state_and_sparsity"),
    Symbol("S_st", "state_bytes_per_sequence", "bytes of state one sequence keeps in every state layer, at any "
           "context", "B", kvlib_keywords=("state_bytes",), chapter="ch10_state_and_sparsity"),
    Symbol("b_dense", "dense_bytes_per_token", "bytes per token of the model a hybrid is compared with, which keeps "
           "no state", "B", kvlib_keywords=("dense_bytes_per_token",), chapter="ch10_state_and_sparsity"),
    Symbol("L_idx", "num_indexer_layers", "layers that build a sparse-attention indexer key per token (DSA)",
           "count", chapter="ch10_state_and_sparsity"),
    Symbol("L_e", "moe_layers", "layers whose MLP is a mixture of routed experts", "count",
           chapter="ch09_interview_drills"),
    Symbol("n_d", "decode_tokens", "running decodes scheduled in a step, one token each, before a prompt's chunk",
           "tokens", chapter="ch09_interview_drills"),
    Symbol("D_idx", "index_head_dim", "values in one sparse-attention indexer key (DeepSeek-V3.2, GLM-5)", "elements",
           ("index_head_dim",), chapter="ch09_interview_drills"),
    Symbol("r_p", "prefill_tokens_per_gpu_s", "prompt tokens one prefill GPU processes per second", "tokens/s",
           chapter="ch09_interview_drills"),
    Symbol("r_d", "decode_tokens_per_gpu_s", "tokens one decode GPU generates per second at its SLO batch", "tokens/s",
           chapter="ch09_interview_drills"),
)

def by_letter(letter: str) -> Symbol:
    """The row of ``letter``; KeyError naming it when the table has none.

    >>> by_letter("Q")
    Traceback (most recent call last):
    KeyError: "no letter 'Q' in the notation table (kvlib/notation.py)"
    """
    for symbol in SYMBOLS:
        if symbol.letter == letter:
            return symbol
    raise KeyError(f"no letter {letter!r} in the notation table (kvlib/notation.py)")


def letters() -> frozenset:
    """Every letter of the table.

    >>> sorted(letters() & {"L", "K", "D", "b", "d_c", "x"})     # x is no letter of the table
    ['D', 'K', 'L', 'b', 'd_c']
    """
    return frozenset(s.letter for s in SYMBOLS)


def code_names() -> frozenset:
    """Every name code may use for a quantity of the table: ``name`` and ``kvlib_keywords``.

    >>> sorted(code_names() & {"num_kv_heads", "kv_heads", "latent_dim", "K"})   # K is a letter, not a name
    ['kv_heads', 'latent_dim', 'num_kv_heads']
    """
    return frozenset(n for s in SYMBOLS for n in (s.name, *s.kvlib_keywords))
