"""Chapter 04 (the pool, paging and what wastes memory): its five graded exercises, as data.

Grade ids, function names and parameter order are a contract with the grading pipeline;
points are on the source notebook's test cells.

===============================  ===================================================================
grade id                         the learner writes
===============================  ===================================================================
ch04_q1_pool_tokens              pool_tokens(label_bytes, reported_bytes, utilization, weight_bytes,
                                 other_bytes, bytes_per_token) -> int
ch04_q2_block_waste              expected_block_waste(num_seqs, block_size) -> float
ch04_q3_hybrid_sequence_bytes    hybrid_kv_bytes_per_sequence(config, seq_len, dtype_bytes=2) -> int
ch04_q4_fp8_pool_tokens          fp8_pool_tokens(available_bytes, layers, kv_heads, head_dim,
                                 block_size) -> int
ch04_q5_allocator_waste          allocator_waste(requests, policy, block_size, max_seq_len) -> int
===============================  ===================================================================

Expected values come from kvlib: q1 ``kv_pool_tokens`` (from the memory CUDA reports), q2
``block_waste_tokens``, q3 ``parse_config(config).kv_bytes_per_sequence`` (windowed layers
capped), q4 whole blocks of ``kv_bytes_per_token(L, K, D, 1) * block_size``, q5 kvlib's
allocator simulator (``kvlib.alloc_sim.simulate`` on the requests as a trace, in a pool large
enough that all are admitted at once: reservation + internal slots of that step).
Visible cases are real GPUs and bundled configs; hidden cases are drawn from a seed over the
GPU table, the bundled configs and random request lists.
"""

from __future__ import annotations

import copy
import random

import kvlib as kv
from kvlib import alloc_sim

from .answers import Float
from .schema import Edge, Exercise, exercises, with_sides

OTHER_BYTES = 3 * kv.GB            # activation peak and other allocations, as the chapter assumes

HIDDEN_NOTE_POOL = "(Hidden cases use other GPUs of the table, models, utilizations and other allocations.)"
HIDDEN_NOTE_WASTE = "(Hidden cases use other sequence counts and block sizes.)"
HIDDEN_NOTE_HYBRID = ("(Hidden cases use other windows, other patterns of sliding and full layers, other "
                      "layer counts, lengths and dtype_bytes of 1 or 2.)")
HIDDEN_NOTE_FP8 = "(Hidden cases use other models' geometry, pools and block sizes.)"
HIDDEN_NOTE_ALLOC = "(Hidden cases use other request lists, policies, block sizes and max_seq_len.)"


# --- q1: the pool from the memory CUDA reports -----------------------------------------------------
def pool_case(model: str, gpu: str, utilization: float, other_bytes: int, label: str, weight_dtype_bytes=2) -> dict:
    spec, device = kv.load_model(model), kv.get_gpu(gpu)
    kwargs = dict(label_bytes=device.memory_bytes, reported_bytes=device.cuda_memory_bytes,
                  utilization=utilization, weight_bytes=spec.weight_bytes(weight_dtype_bytes),
                  other_bytes=other_bytes, bytes_per_token=spec.kv_bytes_per_token())
    return {"label": label, "kwargs": kwargs, "context": {"model": spec.name, "gpu": device.name}}


def pool_expected(case: dict) -> int:
    k = case["kwargs"]
    return kv.kv_pool_tokens(k["reported_bytes"], k["utilization"], k["weight_bytes"], k["other_bytes"],
                             k["bytes_per_token"])


def pool_slip_inputs(case: dict) -> dict:
    k = case["kwargs"]
    return dict(gpu_bytes=k["reported_bytes"], label_bytes=k["label_bytes"], utilization=k["utilization"],
                weight_bytes=k["weight_bytes"], other_bytes=k["other_bytes"], bytes_per_token=k["bytes_per_token"])


Q1_VISIBLE = (
    pool_case("llama-3.1-8b", "H100-SXM", 0.92, OTHER_BYTES, "Llama 3.1 8B on an H100, u = 0.92 (vLLM 0.20 on)"),
    pool_case("llama-3.1-8b", "H100-SXM", 0.90, OTHER_BYTES, "Llama 3.1 8B on an H100, u = 0.90 (before 0.20)"),
    pool_case("llama-3.1-8b", "L40S", 0.92, 2 * kv.GB, "Llama 3.1 8B on an L40S, 2 GB other"),
    pool_case("qwen2.5-7b", "A100-80GB", 0.90, 4 * kv.GB, "Qwen2.5 7B on an A100-80GB, u = 0.90, 4 GB other"),
    pool_case("llama-3.3-70b", "H200", 0.92, 5 * kv.GB, "Llama 3.3 70B with fp8 weights on an H200, 5 GB other",
              weight_dtype_bytes=1),
)


def pool_hidden(seed: int) -> tuple:
    rng = random.Random(seed)
    models = ["llama-3.1-8b", "qwen2.5-7b", "mistral-7b", "llama-2-7b", "qwen3-0.6b", "phi-3-mini"]
    gpus = [g for g in kv.GPUS if kv.GPUS[g].cuda_memory_bytes >= 30 * kv.GB]
    cases = []
    while len(cases) < 8:
        model, gpu = rng.choice(models), rng.choice(gpus)
        case = pool_case(model, gpu, rng.choice([0.8, 0.85, 0.9, 0.92, 0.95]), rng.randint(1, 6) * kv.GB,
                         f"{model} on {gpu}")
        if pool_expected(case) > 1000:
            cases.append(case)
    return tuple(cases)


# --- q2: expected waste of the last blocks ---------------------------------------------------------
def waste_case(num_seqs: int, block_size: int) -> dict:
    return {"label": f"{num_seqs:,} sequences in {block_size}-token blocks",
            "kwargs": {"num_seqs": num_seqs, "block_size": block_size}, "context": {}}


WASTE_EDGE = Edge("a 1-token block wastes nothing; one sequence still wastes its half block")
Q2_VISIBLE = (waste_case(200, 16), waste_case(200, 256), WASTE_EDGE.on(waste_case(1, 16)),
              WASTE_EDGE.on(waste_case(37, 1)), waste_case(1000, 32))


def waste_hidden(seed: int) -> tuple:
    rng = random.Random(seed)
    return tuple(waste_case(rng.randint(1, 5000), rng.choice([2, 8, 16, 32, 64, 128, 256, 512])) for _ in range(8))


# --- q3: one sequence of a hybrid (sliding-window + full) model --------------------------------------
def hybrid_case(name: str, config: dict, seq_len: int, dtype_bytes=None, variant="as published") -> dict:
    kwargs = {"config": config, "seq_len": seq_len}
    if dtype_bytes is not None:
        kwargs["dtype_bytes"] = dtype_bytes
    shown = "dtype_bytes left at its default" if dtype_bytes is None else f"dtype_bytes={dtype_bytes}"
    config_name = f"{name} config" + ("" if variant == "as published" else f" with {variant}")
    return {"label": f"{config_name}, {seq_len:,} tokens, {shown}", "kwargs": kwargs,
            "context": {"config_name": config_name}}


def hybrid_spec(case: dict):
    return kv.parse_config(case["kwargs"]["config"])


def hybrid_expected(case: dict) -> int:
    return hybrid_spec(case).kv_bytes_per_sequence(case["kwargs"]["seq_len"], case["kwargs"].get("dtype_bytes", 2))


def hybrid_slip_inputs(case: dict) -> dict:
    spec = hybrid_spec(case)
    kinds = spec.layer_kinds
    return dict(full_layers=kinds.count("full"), sliding_layers=kinds.count("sliding"), kv_heads=spec.num_kv_heads,
                head_dim=spec.head_dim, dtype_bytes=case["kwargs"].get("dtype_bytes", 2),
                seq_len=case["kwargs"]["seq_len"], sliding_window=spec.sliding_window, num_heads=spec.num_heads)


GPT_OSS = kv.bundled_config("openai/gpt-oss-20b")
GEMMA2_TINY = kv.vllm.read_cpu_engine_run("gemma2_hybrid", "kv1g_len6000").config

WINDOW_EDGE = Edge("a sliding-window layer holds min(seq_len, window) tokens: a sequence shorter than the window "
                   "holds only its own tokens (exactly the window, one token short, one past)")
Q3_VISIBLE = (
    hybrid_case("gpt-oss-20b", GPT_OSS, 131072),
    WINDOW_EDGE.on(hybrid_case("gpt-oss-20b", GPT_OSS, 100)),
    # the window's edge (gpt-oss-20b's 128 tokens): exactly the window, one token short of it, one past it
    WINDOW_EDGE.on(hybrid_case("gpt-oss-20b", GPT_OSS, 128)),
    WINDOW_EDGE.on(hybrid_case("gpt-oss-20b", GPT_OSS, 127, dtype_bytes=1)),
    WINDOW_EDGE.on(hybrid_case("gpt-oss-20b", GPT_OSS, 129)),
    hybrid_case("gpt-oss-20b", GPT_OSS, 32768, dtype_bytes=1),
    hybrid_case("tiny Gemma 2 (the CPU engine's)", GEMMA2_TINY, 6000),
)


def _pattern(rng: random.Random, layers: int) -> list:
    every = rng.choice([2, 3, 4, 6])   # one full-attention layer in every `every`
    return ["full_attention" if i % every == every - 1 else "sliding_attention" for i in range(layers)]


def _hybrid_drawn(rng: random.Random, seq_len=None, window_offset=None) -> dict:
    """A drawn hybrid config (other layers, pattern and window); ``window_offset``: seq_len = window + it."""
    config = copy.deepcopy(rng.choice([GPT_OSS, GEMMA2_TINY]))
    layers = rng.randint(4, 64)
    config.update(num_hidden_layers=layers, layer_types=_pattern(rng, layers),
                  sliding_window=rng.choice([64, 128, 256, 512, 1024, 4096]))
    if window_offset is not None:
        seq_len = config["sliding_window"] + window_offset
    elif seq_len is None:
        seq_len = rng.choice([rng.randint(1, 300_000), 2 ** rng.randint(6, 17)])
    case = hybrid_case(config["model_type"], config, seq_len, rng.choice([None, 1, 2]), "other layers and window")
    hybrid_expected(case)  # every hidden config must be one kvlib reads
    return case


def hybrid_hidden(seed: int) -> tuple:
    rng = random.Random(seed)
    return tuple(_hybrid_drawn(rng) for _ in range(8))


WINDOW_SIDES = {0: "exactly the window", -1: "one token short of the window", 1: "one token past the window"}


def window_side(case) -> str | None:
    """Which side of a sliding window's edge (held = min(seq_len, window)) a sequence sits on (None: off it,
    more than a token past)."""
    offset = case["kwargs"]["seq_len"] - hybrid_spec(case).sliding_window
    return WINDOW_SIDES.get(offset, "shorter than the window" if offset < 0 else None)


def _window_on_side(rng, side):
    if side == "shorter than the window":
        return _hybrid_drawn(rng, window_offset=-rng.randint(2, 63))
    return _hybrid_drawn(rng, window_offset=next(k for k, name in WINDOW_SIDES.items() if name == side))


# --- q4: the fp8 pool, in whole blocks ---------------------------------------------------------------
def fp8_case(model: str, available_bytes: int, block_size: int, label: str, tp: int = 1) -> dict:
    spec = kv.load_model(model)
    kwargs = dict(available_bytes=available_bytes, layers=spec.num_kv_layers, kv_heads=spec.kv_heads_per_gpu(tp),
                  head_dim=spec.head_dim, block_size=block_size)
    return {"label": label, "kwargs": kwargs, "context": {"num_heads": spec.num_heads // tp}}


def fp8_expected(case: dict) -> int:
    k = case["kwargs"]
    block_bytes = kv.kv_bytes_per_token(k["layers"], k["kv_heads"], k["head_dim"], 1) * k["block_size"]
    return k["available_bytes"] // block_bytes * k["block_size"]


def fp8_slip_inputs(case: dict) -> dict:
    # the cache's element is fp8's one byte: a 16-bit slip's words name the 2 the learner used
    return dict(case["kwargs"], num_heads=case["context"]["num_heads"], dtype_bytes=1)


_H100_POOL = kv.kv_pool_bytes(kv.get_gpu("H100-SXM").cuda_memory_bytes, 0.92,
                              kv.load_model("llama-3.1-8b").weight_bytes(2), OTHER_BYTES)
WHOLE_BLOCKS_EDGE = Edge("whole blocks only: exactly k blocks, one byte short of them (one block fewer), one byte over")
WHOLE_BLOCKS_AND_A_LITTLE_EDGE = Edge("whole blocks only: a pool of whole blocks and a little")
Q4_VISIBLE = (
    fp8_case("llama-3.1-8b", _H100_POOL, 16, "Llama 3.1 8B, the H100 pool of exercise 1, 16-token blocks"),
    fp8_case("llama-3.3-70b", 50 * kv.GiB, 16, "Llama 3.3 70B at TP 4 (2 KV heads a rank), 50 GiB, 16-token blocks",
             tp=4),
    WHOLE_BLOCKS_AND_A_LITTLE_EDGE.on(
        fp8_case("qwen2.5-7b", 30 * kv.GiB + 12345, 32, "Qwen2.5 7B, 30 GiB and a little, 32-token blocks")),
    fp8_case("mistral-7b", 20 * kv.GB, 128, "Mistral 7B, 20 GB, 128-token blocks"),
    fp8_case("gpt2-large", 10 * kv.GiB, 16, "GPT-2 large (MHA, head_dim 64), 10 GiB, 16-token blocks"),
    # the whole-block edge: Llama 3.1 8B's fp8 16-token block is 65,536 x 16 B = 1 MiB
    *WHOLE_BLOCKS_EDGE.on_each((
        fp8_case("llama-3.1-8b", 1000 * kv.MiB, 16, "Llama 3.1 8B, exactly 1,000 fp8 blocks (1,000 MiB), 16-token blocks"),
        fp8_case("llama-3.1-8b", 1000 * kv.MiB - 1, 16, "Llama 3.1 8B, one byte short of 1,000 fp8 blocks, 16-token blocks"),
        fp8_case("llama-3.1-8b", 1000 * kv.MiB + 1, 16, "Llama 3.1 8B, one byte over 1,000 fp8 blocks, 16-token blocks"),
    )),
)
FP8_MODELS = ["llama-3.1-8b", "qwen2.5-7b", "mistral-7b", "llama-2-7b", "qwen2.5-32b", "llama-3.3-70b"]


def fp8_hidden(seed: int) -> tuple:
    rng = random.Random(seed)
    return tuple(fp8_case(m, rng.randint(1 * kv.GB, 120 * kv.GB), rng.choice([16, 32, 64, 128, 256]), m)
                 for m in (rng.choice(FP8_MODELS) for _ in range(8)))


def _fp8_block_bytes(case: dict) -> int:
    k = case["kwargs"]
    return kv.kv_bytes_per_token(k["layers"], k["kv_heads"], k["head_dim"], 1) * k["block_size"]


BLOCK_SIDES = {0: "exactly whole blocks", -1: "one byte short of whole blocks", 1: "one byte over whole blocks"}


def block_side(case) -> str | None:
    """Which side of the whole-block edge a pool sits on (None: off it)."""
    block, pool = _fp8_block_bytes(case), case["kwargs"]["available_bytes"]
    return BLOCK_SIDES.get(pool % block - block if pool % block == block - 1 else pool % block)


def _fp8_on_side(rng, side):
    model = rng.choice(FP8_MODELS)
    case = fp8_case(model, 0, rng.choice([16, 32, 64, 128, 256]), model)
    offset = next(k for k, name in BLOCK_SIDES.items() if name == side)
    case["kwargs"]["available_bytes"] = rng.randint(1000, 100_000) * _fp8_block_bytes(case) + offset
    return case


# --- q5: the learner's allocator against kvlib's simulator ------------------------------------------
def alloc_case(requests, policy: str, block_size: int, max_seq_len: int, label: str) -> dict:
    kwargs = dict(requests=[list(pair) for pair in requests], policy=policy, block_size=block_size,
                  max_seq_len=max_seq_len)
    return {"label": label, "kwargs": kwargs, "context": {}}


def alloc_expected(case: dict) -> int:
    """Reservation + internal slots in the step every request is admitted, from kvlib's simulator."""
    k = case["kwargs"]
    pairs = [tuple(pair) for pair in k["requests"]]
    capacity = len(pairs) * (k["max_seq_len"] + k["block_size"])   # all admitted at once, nobody waits
    r = alloc_sim.simulate(alloc_sim.trace_workload(pairs, max_seq_len=k["max_seq_len"]), policy=k["policy"],
                           capacity_tokens=capacity, block_size=k["block_size"])
    if r.window_steps != 1 or r.admitted_at_fill != len(pairs):
        raise AssertionError("alloc case: not every request was admitted at step 0")
    return r.reservation_slot_steps + r.internal_slot_steps


_CHAT = ((97, 206), (160, 340), (15, 1200), (640, 88), (31, 1))
ALLOCATOR_EDGE = Edge("paged: ceil(held / block_size) blocks; a request that fills its last block exactly wastes "
                      "nothing in it, one a token past needs a whole new block; the oracle reserves exactly prompt + "
                      "output (no extra slot)")
Q5_VISIBLE = (
    alloc_case(((10, 6), (10, 6)), "max_reservation", 4, 20, "two requests of 10 + 6 tokens, reserve 20 each"),
    alloc_case(((10, 6), (10, 6)), "paged", 4, 20, "the same two requests, paged in blocks of 4"),
    ALLOCATOR_EDGE.on(alloc_case(((100, 50), (7, 300), (512, 1)), "oracle", 16, 2048,
                                 "three requests, each reserving its own length")),
    ALLOCATOR_EDGE.on(alloc_case(((15, 3), (16, 1), (31, 10), (1000, 24)), "paged", 16, 2048,
                                 "four requests paged in 16-token blocks (one fills its block exactly)")),
    alloc_case(_CHAT, "max_reservation", 16, 2048, "five chat-like requests, reserve max_seq_len = 2,048"),
    alloc_case(_CHAT, "paged", 256, 2048, "the same five requests, paged in 256-token blocks"),
    # the ceiling's other side: 16 + 1 tokens held need a second 16-token block, 15 of it empty (floor: none)
    ALLOCATOR_EDGE.on(alloc_case(((16, 4),), "paged", 16, 2048, "one request a token past a 16-token block")),
)


def _alloc_drawn(rng: random.Random, policy=None, held_mod=None) -> dict:
    """Drawn requests; ``held_mod``: the first one holds a multiple of the block size plus it at admission."""
    msl, bs = rng.choice([1024, 2048, 4096]), rng.choice([8, 16, 32, 256])
    pairs = []
    for _ in range(rng.randint(3, 30)):
        prompt = rng.randint(1, msl - 1)
        pairs.append((prompt, rng.randint(1, msl - prompt)))
    if held_mod is not None:       # prompt + 1 held: k whole blocks, and held_mod tokens past them
        if held_mod:               # and none of the others fills its block exactly (one token more held)
            pairs = [(p - 1, o) if (p + 1) % bs == 0 else (p, o) for p, o in pairs]
        prompt = rng.randint(1, (msl - 2) // bs) * bs + held_mod - 1
        pairs[0] = (prompt, rng.randint(1, msl - prompt))
    return alloc_case(pairs, policy or rng.choice(alloc_sim.POLICIES), bs, msl, "random")


def alloc_hidden(seed: int) -> tuple:
    rng = random.Random(seed)
    return tuple(_alloc_drawn(rng) for _ in range(8))


def alloc_side(case) -> str | None:
    """Exercise 5's edges: a paged request that fills its last block exactly (else one a token past a block), or
    the oracle's exact reservation (None: off them)."""
    k = case["kwargs"]
    if k["policy"] == "oracle":
        return "oracle"
    if k["policy"] != "paged":
        return None
    held = [(p + 1) % k["block_size"] for p, _ in k["requests"]]
    return "fills its block exactly" if 0 in held else "a token past a block" if 1 in held else None


def _alloc_on_side(rng, side):
    if side == "oracle":
        return _alloc_drawn(rng, policy="oracle")
    return _alloc_drawn(rng, policy="paged", held_mod=0 if side == "fills its block exactly" else 1)


def waste_side(case) -> str | None:
    """Exercise 2's edges: 1-token blocks (no waste), one sequence (still half a block), else None."""
    k = case["kwargs"]
    return "1-token blocks" if k["block_size"] == 1 else "one sequence" if k["num_seqs"] == 1 else None


def _waste_on_side(rng, side):
    if side == "1-token blocks":
        return waste_case(rng.randint(2, 5000), 1)
    return waste_case(1, rng.choice([2, 8, 16, 32, 64, 128, 256, 512]))


#: The edges the exercise text decides (a tie, a rounding direction, a tolerance, an "other"), each
#: with the visible cases that sit on it (tests/test_case_variants.py checks that they exist).
EDGES = {
    "ch04_q2_block_waste": (WASTE_EDGE.listing(waste_side),),
    "ch04_q3_hybrid_sequence_bytes": (WINDOW_EDGE.listing(window_side),),
    "ch04_q4_fp8_pool_tokens": (WHOLE_BLOCKS_EDGE.listing(block_side), WHOLE_BLOCKS_AND_A_LITTLE_EDGE.listing()),
    "ch04_q5_allocator_waste": (ALLOCATOR_EDGE.listing(alloc_side),),
}


EXERCISES = exercises(
    Exercise(grade_id="ch04_q1_pool_tokens", function_name="pool_tokens",
             params=("label_bytes", "reported_bytes", "utilization", "weight_bytes", "other_bytes", "bytes_per_token"),
             visible_cases=Q1_VISIBLE, hidden_cases=pool_hidden, expected=pool_expected,
             quantity="pool_tokens_reported", slip_inputs=pool_slip_inputs, unit="tokens",
             hidden_note=HIDDEN_NOTE_POOL),
    Exercise(grade_id="ch04_q2_block_waste", function_name="expected_block_waste",
             params=("num_seqs", "block_size"), visible_cases=Q2_VISIBLE,
             hidden_cases=with_sides(waste_hidden, waste_side, ('1-token blocks', 'one sequence'), _waste_on_side),
             expected=lambda case: float(kv.block_waste_tokens(**case["kwargs"])), answer=Float(rel_tol=1e-9),
             quantity="block_waste_tokens", slip_inputs=lambda case: dict(case["kwargs"]), unit="token slots",
             hidden_note=HIDDEN_NOTE_WASTE),
    Exercise(grade_id="ch04_q3_hybrid_sequence_bytes", function_name="hybrid_kv_bytes_per_sequence",
             params=("config", "seq_len", "dtype_bytes"), visible_cases=Q3_VISIBLE,
             hidden_cases=with_sides(hybrid_hidden, window_side,
                                     ('shorter than the window',) + tuple(WINDOW_SIDES.values()), _window_on_side),
             expected=hybrid_expected, quantity="hybrid_kv_bytes_per_sequence", slip_inputs=hybrid_slip_inputs,
             hidden_note=HIDDEN_NOTE_HYBRID),
    Exercise(grade_id="ch04_q4_fp8_pool_tokens", function_name="fp8_pool_tokens",
             params=("available_bytes", "layers", "kv_heads", "head_dim", "block_size"),
             visible_cases=Q4_VISIBLE,
             hidden_cases=with_sides(fp8_hidden, block_side, tuple(BLOCK_SIDES.values()), _fp8_on_side),
             expected=fp8_expected, quantity="fp8_pool_tokens",
             slip_inputs=fp8_slip_inputs, unit="tokens", hidden_note=HIDDEN_NOTE_FP8),
    Exercise(grade_id="ch04_q5_allocator_waste", function_name="allocator_waste",
             params=("requests", "policy", "block_size", "max_seq_len"), visible_cases=Q5_VISIBLE,
             hidden_cases=with_sides(alloc_hidden, alloc_side,
                                     ('fills its block exactly', 'a token past a block', 'oracle'), _alloc_on_side),
             expected=alloc_expected, quantity="allocator_waste",
             slip_inputs=lambda case: dict(case["kwargs"]), unit="token slots", hidden_note=HIDDEN_NOTE_ALLOC),
)
