"""Every chapter, as a learner meets it: JupyterLab from ``./dev.sh open`` in headless Chromium.

For each notebook in chapters/ (one JupyterLab server and one browser for the session,
a fresh page and kernel per chapter, tests in this order):

1. open: the notebook loads, its kernel goes idle, every cell is on the page, no news or
   update toast; every cell whose input is hidden (the generators of worked problems and errata)
   shows JupyterLab's collapsed-input placeholder, not its code, and no other cell does;
2. run all (Run menu): the kernel runs to the last cell (the release's test cells are tagged
   ``raises-exception``, so a failing check does not stop it); saved and read back, the notebook
   shows no error but in exercise test cells, and every code cell ran; a failed check shows
   its message under "✗ <grade id>" and none of the checker's frames;
3. slider: the explorer's slider, moved with ArrowRight and then End on its focused handle,
   changes the explorer's displayed number each time; every slider is wide and its label on one
   line; after Run All every worked answer is still folded;
4. wrong answer: a one-line answer with a known slip, typed into an exercise's answer cell
   and run with its check, makes the check name the slip, and its output shows the message
   only: no ``Traceback``, no ``core.py``, no ``autograder/`` path (and so for each of the
   plan's ``more_wrong`` answers, after step 5: among them the slips a chapter's prose warns about, each
   named by the check even when some visible cases raise in the learner's code);
5. validate (chapters that say so): nbgrader's toolbar Validate button shows the
   "Validation Results" dialog, failing, with the slip and the unfilled exercises in it;
6. console: no console error or uncaught page error, and still no toast.

Screenshots of each step go to artefacts/browser/<chapter>-NN-<step>.png, step timings to
the terminal summary and artefacts/browser/timings.txt. A chapter without an entry in
PLANS fails: say there which slider, number and slip to use. An ungraded chapter's plan
says why it has no explorer or exercise (``without``): steps 3-5 skip for it with that reason,
and step 2 then asserts that Run All finishes with no error at all and shows ``shows``.
"""

from __future__ import annotations

import contextlib
import http.cookiejar
import json
import os
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest

from autograder.chapter import CHAPTER_IDS
from described import describes

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]

CHAPTERS = list(CHAPTER_IDS)
DEFAULT_CHAPTER = "ch00_orientation"   # dev.sh's CHAPTER: what `./dev.sh open` shows first
TIMEOUT_MS = 60_000                    # any single wait; a whole chapter takes about 15 s
EXERCISE_ERRORS = {"AssertionError", "NotImplementedError"}
CHECKER_TEXT = ("Traceback", "core.py", "autograder/")   # a failed check shows none of these
TOAST = ".Toastify__toast"             # JupyterLab 4's notifications (news, updates) pop up as these
SCREENSHOTS = ("opened", "ran-all", "explorer", "slider-arrowright", "slider-end", "wrong-answer-slip",
               "validate-dialog", "engine-cell", "buttons")   # artefacts/browser/<chapter>-NN-<label>.png, NN fixed per label
# A long value shown raw: a whole digest in hex or as a bytes literal, or a list of ten or more numbers. A check
# shortens these ("32 bytes cad5c5b5…acafbe5d", "[89, 111, 117, …, 110, 115] (32 items)").
LONG_RAW_VALUES = (r"[0-9a-f]{24,}", r"b'\\x|b\"\\x", r"\d+(?:, \d+){9,}")
KNOWN_CONSOLE_NOISE: tuple[re.Pattern, ...] = (
    # None needed so far: JupyterLab 4.6.6 + nbgrader 0.9.6 + ipywidgets 8.1.9 log no error
    # in these steps. Add a pattern here only with a comment saying why it is unrelated.
)


@dataclass(frozen=True)
class Plan:
    """What to do on a chapter's page."""
    slider: str = ""       # label of the explorer slider to move
    number: str = ""       # regex whose group 1 is the explorer's displayed number
    answer_id: str = ""    # grade_id of the answer cell to type into
    wrong_answer: str = ""   # one line, typed key by key
    slip: str = ""         # what the check must say about that answer
    validate: tuple[str, ...] = ()   # if not empty: click Validate; the dialog must show these
    without: str = ""      # an ungraded chapter: why it has no explorer or exercise (those steps skip)
    shows: tuple[str, ...] = ()      # texts the page must show after Run All
    buttons: tuple[tuple[str, str, str], ...] = ()   # (text typed into the widget's text box first, or "";
                                                     #  button to click; regex a widget must then show)
    more_wrong: tuple[tuple, ...] = ()   # (answer_id, wrong_answer, slip or slips, each a text the check must
                                         # print[, regexes it must not print]): more answers, a cell may recur
    hidden_cells: tuple[str, ...] = ()   # ids of generator cells that must show the collapsed placeholder


PLANS = {
    "ch01_kv_formula": Plan(
        slider="layers L",
        number=r"bytes per token:\s*([\d,]+ B)",
        answer_id="ch01_q2_answer",
        # Drops the 2 (K and V): half the right answer.
        wrong_answer="def kv_bytes_for_sequence(layers, kv_heads, head_dim, dtype_bytes, seq_len): "
                     "return layers * kv_heads * head_dim * dtype_bytes * seq_len",
        slip="the factor 2 for K and V is missing",
        validate=("the factor 2 for K and V is missing",                       # q2, as typed
                  "bytes_per_token_from_config is not written yet"),           # q1, left blank
        more_wrong=(
            # Exercise 1: query heads where the KV heads belong (the chapter's headline slip), written for
            # Llama-style field names only, so the GPT-2 cases raise KeyError: the slip is still named, from the
            # cases that returned, and the raising ones are said apart in words.
            ("ch01_q1_answer",
             "def bytes_per_token_from_config(config, dtype_bytes=2): return 2 * config['num_hidden_layers'] * "
             "config['num_attention_heads'] * (config.get('head_dim') or config['hidden_size'] // "
             "config['num_attention_heads']) * dtype_bytes",
             ("you multiplied by the query heads", "raised KeyError")),
            # Exercise 5: the utilization applied after the weights, (M - W) x u - O, the order section 9 warns of.
            ("ch01_q5_answer",
             "def sequences_on_gpu(gpu, num_params, weight_dtype_bytes, utilization, other_bytes, bytes_per_token, "
             "seq_len): return max(0, int(((gpu['cuda_total_gib'] * 2**30 - num_params * weight_dtype_bytes) * "
             "utilization - other_bytes) // (bytes_per_token * seq_len)))",
             "nor (M - W) x u - O"),
            # Exercise 5 again: the label's 80 GB instead of the 79.18 GiB CUDA reports.
            ("ch01_q5_answer",
             "def sequences_on_gpu(gpu, num_params, weight_dtype_bytes, utilization, other_bytes, bytes_per_token, "
             "seq_len): return max(0, int((gpu['label_gb'] * 10**9 * utilization - num_params * weight_dtype_bytes "
             "- other_bytes) // (bytes_per_token * seq_len)))",
             "instead of what CUDA reports"),
            # Exercise 6: the bytes per token counted with the query heads, not what that slip adds.
            ("ch01_q6_answer",
             "def kv_head_sharing(config, dtype_bytes=2): h = config.get('num_attention_heads') or config['n_head']; "
             "k = config.get('num_key_value_heads') or h; d = config.get('head_dim') or (config.get('hidden_size') "
             "or config['n_embd']) // h; return h // k, 2 * (config.get('num_hidden_layers') or config['n_layer']) "
             "* h * d * dtype_bytes",
             "counted with the query heads"),
        ),
        # the generators added with exercises 5 and 6 (section 9's pool example and a GPU as exercise 5
        # passes it) and the notation rows: inputs hidden like every other generator's
        hidden_cells=("notation_rows", "s9_pool_example", "s9_gpu_dict"),
    ),
    "ch02_gqa_tp": Plan(
        slider="TP (GPUs)",
        # TP opens at 8 (= K of the 70B): past it the per-GPU bytes stay put, what the GPUs store grows.
        number=r"GPUs store ([\d,]+ B) [^<]*per token between them",
        answer_id="ch02_q2_answer",
        # The whole model's bytes per token, not one GPU's share.
        wrong_answer="def kv_bytes_per_token_per_gpu(layers, kv_heads, head_dim, dtype_bytes, tp): "
                     "return 2 * layers * kv_heads * head_dim * dtype_bytes",
        slip="each GPU holds only its own KV heads",
    ),
    "ch03_mla": Plan(
        slider="layers L",
        number=r"MLA per GPU:\s*([\d,]+ B)",
        answer_id="ch03_q1_answer",
        # Counts the latent twice, as if it were a K and a V: twice the right answer.
        wrong_answer="def mla_bytes_per_token_from_config(config, dtype_bytes=2): "
                     "c = config.get('text_config') or config; "
                     "return 2 * c['num_hidden_layers'] * (c['kv_lora_rank'] + c['qk_rope_head_dim']) * dtype_bytes",
        slip="that is twice the right figure",
        validate=("that is twice the right figure",                            # q1, as typed
                  "kv_bytes_per_token_per_gpu is not written yet"),            # q2, left blank
        more_wrong=(
            # Exercise 1 again: the latent alone, the RoPE key left out. Every one of the 8 visible cases caches a
            # rope key, so all 8 fail and the one slip explains all 8 (the counts add up: no "N more fail").
            ("ch03_q1_answer",
             "def mla_bytes_per_token_from_config(config, dtype_bytes=2): c = config.get('text_config') or config; "
             "return c['num_hidden_layers'] * c['kv_lora_rank'] * dtype_bytes",
             ("the 64-wide decoupled RoPE key is missing", "explains all 8 failing cases")),
        ),
    ),
    "ch04_pool_paging": Plan(
        slider="block size (tokens)",
        number=r"blocks of \d+ tokens:\s*([\d,]+)",
        answer_id="ch04_q1_answer",
        # Starts from the label's memory instead of what CUDA reports.
        wrong_answer="def pool_tokens(label_bytes, reported_bytes, utilization, weight_bytes, other_bytes, "
                     "bytes_per_token): return int((label_bytes * utilization - weight_bytes - other_bytes) "
                     "// bytes_per_token)",
        slip="instead of what CUDA reports",
        validate=("instead of what CUDA reports",                              # q1, as typed
                  "expected_block_waste is not written yet"),                  # q2, left blank
        more_wrong=(
            # Exercise 1 again: round() where only whole tokens fit (floor).
            ("ch04_q1_answer",
             "def pool_tokens(label_bytes, reported_bytes, utilization, weight_bytes, other_bytes, bytes_per_token): "
             "return round((reported_bytes * utilization - weight_bytes - other_bytes) / bytes_per_token)",
             "rounded down (floor), not to the nearest whole number"),
            # Exercise 4: 2-byte (fp16) elements where fp8 is 1 byte: half the blocks (59,156,844,918 B //
            # 2,097,152 B a block = 28,208 blocks, 451,328 tokens, for 902,656). The message names the 2 used.
            ("ch04_q4_answer",
             "def fp8_pool_tokens(available_bytes, layers, kv_heads, head_dim, block_size): return available_bytes "
             "// (2 * layers * kv_heads * head_dim * 2 * block_size) * block_size",
             ("fp8 is 1 byte", "(you used 2)"), (r"you used 1\b",)),
        ),
    ),
    "ch06_crossover": Plan(
        slider="batch B (sequences)",
        number=r"step time at the bandwidth limit:\s*([\d.,]+ ms)",
        answer_id="ch06_q1_answer",
        # Rounds the crossover context down instead of up.
        wrong_answer="def crossover_context(weight_bytes, layers, kv_heads, head_dim, dtype_bytes, batch_size): "
                     "return weight_bytes // (2 * layers * kv_heads * head_dim * dtype_bytes * batch_size)",
        slip="round up (ceil)",
        validate=("round up (ceil)",                                            # q1, as typed
                  "decode_step_ms is not written yet"),                        # q2, left blank
        more_wrong=(
            # Exercise 6: every expert read, not the ones the batch's tokens touch. Mixtral (E = 8, k = 2) at batch
            # 1 reads 2 experts a layer on average (8 (1 - (6/8)^1)), so all 8 is 4x too much.
            ("ch06_q6_answer",
             "def expert_bytes_read(num_experts, top_k, batch_size, moe_layers, expert_params, dtype_bytes): "
             "return float(num_experts * moe_layers * expert_params * dtype_bytes)",
             ("4x too large", "that is every expert (the total, E = 8)", "only those some token was routed to")),
        ),
    ),
    "ch07_capacity_plan": Plan(
        slider="users",
        number=r"total KV cache:\s*([\d,.]+ GB)",
        answer_id="ch07_q1_answer",
        # Forgets the tensor-parallel split: every GPU counted as holding all KV heads.
        wrong_answer="def kv_per_sequence_per_gpu(layers, kv_heads, head_dim, dtype_bytes, context, tp): "
                     "return 2 * layers * kv_heads * head_dim * dtype_bytes * context",
        slip="each GPU holds only its own KV heads",
        validate=("each GPU holds only its own KV heads",                      # q1, as typed
                  "sequences_by_memory is not written yet"),                   # q2, left blank
        more_wrong=(
            # Exercise 4: ceil where a fraction of a sequence cannot be admitted (floor); self-contained, since
            # Exercise 1's answer above is wrong on purpose.
            ("ch07_q4_answer",
             "def sequences_by_itl(itl_target_ms, weight_bytes, tp, bandwidth_bytes_per_s, tp_overhead, efficiency, "
             "layers, kv_heads, head_dim, dtype_bytes, context): import math; slowdown = (1 + (tp_overhead if tp > 1 "
             "else 0)) / efficiency; readable = itl_target_ms / 1000 / slowdown * bandwidth_bytes_per_s; per_seq = 2 "
             "* layers * max(1, kv_heads // tp) * head_dim * dtype_bytes * context; return max(0, math.ceil((readable "
             "- math.ceil(weight_bytes / tp)) / per_seq))",
             "take the floor, not the ceiling"),
            # Exercise 5: each GPU counted as a replica (8 x 124 sequences a node: ceil(500 / 992) = 1, x 1.3
            # rounded up = 2, + 1 spare = 3 nodes for 8: ceil(500 / 124) = 5, x 1.3 = 6.5 -> 7, + 1).
            ("ch07_q5_answer",
             "def nodes(users, gpus_per_node, tp, sequences_by_memory, sequences_by_itl, spike_factor, "
             "redundancy_nodes): import math; per_node = gpus_per_node * min(sequences_by_memory, sequences_by_itl); "
             "return math.ceil(round(math.ceil(users / per_node) * spike_factor, 9)) + redundancy_nodes",
             "you counted each GPU as a replica"),
            # Exercise 5 again: the spike applied to the users before rounding to nodes (ceil(500 x 1.3 / 124) =
            # ceil(5.24) = 6, + 1 = 7 nodes for 8).
            ("ch07_q5_answer",
             "def nodes(users, gpus_per_node, tp, sequences_by_memory, sequences_by_itl, spike_factor, "
             "redundancy_nodes): import math; per_node = gpus_per_node // tp * min(sequences_by_memory, "
             "sequences_by_itl); return math.ceil(round(users * spike_factor / per_node, 9)) + redundancy_nodes",
             "round the users up to whole nodes first, then scale those nodes by the spike"),
            # Exercise 7: Little's law inverted, the rate divided by the time in system (10 per second over
            # 1 s + 300 x 50 ms = 16 s: 0.625 for 160 in flight).
            ("ch07_q7_answer",
             "def requests_in_flight(rate_per_s, ttft_ms, output_tokens, itl_ms): "
             "return rate_per_s / ((ttft_ms + output_tokens * itl_ms) / 1000)",
             ("Little's law multiplies", "one divided by the other is not a count of requests")),
        ),
    ),
    "ch00_orientation": Plan(
        without="ungraded orientation chapter: no explorer and no exercise",
        # Its live demonstration: chapter 01's check run on a function without the factor 2, and a drill.
        shows=("the factor 2 for K and V is missing", "not quite [query_heads]"),
    ),
    "ch05_prefix_reuse": Plan(
        slider="prompt T_p (tokens)",
        number=r"tokens recomputed per request:\s*([\d,]+)",
        answer_id="ch05_q1_answer",
        # Shares the partial last block too: whole blocks only.
        wrong_answer="def prefix_bytes_saved(prompt_tokens, num_requests, bytes_per_token, block_size): "
                     "return (num_requests - 1) * prompt_tokens * bytes_per_token",
        slip="only full blocks are shared",
        validate=("only full blocks are shared",                               # q1, as typed
                  "prefill_tokens_saved is not written yet"),                  # q2, left blank
        more_wrong=(
            # Exercise 3: every block hashed from NONE_HASH, not chained to the block before it. Three visible
            # cases have a full block past the first and fail; the one with no full block (NONE_HASH) passes.
            # The message names the chaining and shows no token list or digest in full.
            ("ch05_q3_answer",
             "def prefix_key(token_ids, block_size, cache_salt): keys = [kv.prefix_cache.hash_block("
             "kv.prefix_cache.NONE_HASH, token_ids[i:i + block_size], (('cache_salt', cache_salt),) if cache_salt "
             "is not None and i == 0 else None) for i in range(0, len(token_ids) - block_size + 1, block_size)]; "
             "return keys[-1] if keys else kv.prefix_cache.NONE_HASH",
             ("with the previous block's key as the parent", "so its key no longer says what came before it",
              "explains all 3 failing cases"),
             LONG_RAW_VALUES),
        ),
    ),
    "ch08_vllm_lab": Plan(
        slider="printed GiB",
        number=r"blocks:\s*([\d,]+ – [\d,]+)",
        answer_id="ch08_q5_answer",
        # Exercise 3 (graded): the utilization applied to what is left, (M - W - O) x u, not M u - W - O.
        wrong_answer="def pool_blocks(total_bytes, utilization, weights_bytes, activation_bytes, non_torch_bytes, "
                     "cudagraph_bytes, layers, kv_heads, head_dim, dtype_bytes, block_size, tp): return int((total_bytes "
                     "- weights_bytes - activation_bytes - non_torch_bytes - cudagraph_bytes) * utilization) // (2 * "
                     "layers * max(1, kv_heads // tp) * head_dim * dtype_bytes * block_size)",
        slip="not (M - W - O) x u",
        more_wrong=(
            # Practice A in the optional section (no points): one count from the printed figure, not the range its
            # rounding allows.
            ("ch08_q3_answer",
             "def block_range(available_gib, layers, kv_heads, head_dim, dtype_bytes, block_size, tp): "
             "n = round(float(available_gib) * 2**30) // (2 * layers * max(1, kv_heads // tp) * head_dim "
             "* dtype_bytes * block_size); return (n, n)",
             "allows a range of blocks"),
        ),
    ),
    "ch10_state_and_sparsity": Plan(
        slider="context T (tokens)",
        number=r"the hybrid, in all\s*([\d.,]+ GB)",
        answer_id="ch10_q1_answer",
        # The state counted per token: multiplied by the context with the KV.
        wrong_answer="def hybrid_sequence_bytes_per_gpu(attention_layers, state_layers, kv_heads, head_dim, "
                     "dtype_bytes, state_bytes_per_layer, context, tp): return (state_layers * "
                     "state_bytes_per_layer // tp + 2 * attention_layers * max(1, kv_heads // tp) * head_dim * "
                     "dtype_bytes) * context",
        slip="once per sequence, whatever its length",
    ),
    "ch09_interview_drills": Plan(
        slider="context T (tokens)",
        number=r"one sequence of [\d,]+ tokens:\s*([\d.,]+ GB)",
        answer_id="ch09_q1_answer",
        # Drops the 2 (K and V): half the right answer.
        wrong_answer="def kv_cache_bytes(layers, kv_heads, head_dim, seq_len, batch, dtype_bytes): "
                     "return layers * kv_heads * head_dim * seq_len * batch * dtype_bytes",
        slip="the factor 2 for K and V is missing",
        validate=("the factor 2 for K and V is missing",),                     # q1, as typed
        # Drill mode: a question drawn, then a (wrong) answer checked, timed and scored.
        buttons=(("", "new question", r"\(topic \w+; answer in"),
                 ("1", "check", r"score: \d / 1")),
    ),
}


def _skip_without(chapter) -> None:
    if chapter.plan and chapter.plan.without:
        pytest.skip(f"{chapter.name}: {chapter.plan.without}")


def _kind(cell) -> str | None:
    meta = cell.metadata.get("nbgrader", {})
    if meta.get("solution"):
        return "answer"
    if meta.get("grade") and cell.cell_type == "code":
        return "test"
    return None


class ChapterPage:
    """One chapter open in one browser page; each step runs once, when first needed."""

    def __init__(self, name: str, page, server: dict, artefacts: Path, timings: list):
        self.name, self.page, self.server, self.artefacts = name, page, server, artefacts
        self.timings = timings
        self.path = server["root"] / f"{name}.ipynb"
        self.nb = nbformat.read(self.path, as_version=4)
        self.plan = PLANS.get(name)
        self.console: list[str] = []
        self.done: set[str] = set()
        self.wrong_output = ""
        self.typed: set[str] = set()       # answer cells already typed into (no longer the blank stub)
        page.on("console", lambda m: self.console.append(f"console.{m.type}: {m.text}") if m.type == "error"
                else None)
        page.on("pageerror", lambda e: self.console.append(f"uncaught: {e}"))

    # -- helpers ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def step(self, label: str):
        start = time.monotonic()
        yield
        self.timings.append((self.name, label, time.monotonic() - start))

    def shot(self, label: str) -> None:
        number = SCREENSHOTS.index(label) + 1
        self.page.screenshot(path=str(self.artefacts / f"{self.name}-{number:02d}-{label}.png"))

    @property
    def cells(self):
        return self.page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell")

    def index(self, grade_id: str) -> int:
        for i, cell in enumerate(self.nb.cells):
            if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
                return i
        raise AssertionError(f"{self.name}: no cell with grade_id {grade_id}")

    def wait_kernel_named(self) -> None:
        """The toolbar names the notebook's kernel. On a loaded machine Lab can show "No Kernel" for a moment
        after the page loads, with the execution indicator already reading idle (seen in a CI rehearsal, the
        first chapter opened after 20 minutes of other tests): wait for the name, fail if it never comes."""
        toolbar = self.page.locator(".jp-NotebookPanel-toolbar")
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while time.monotonic() < deadline:
            if "Python 3" in toolbar.inner_text():
                return
            time.sleep(0.2)
        raise AssertionError(f"kernel not shown in the toolbar: {toolbar.inner_text()!r}")

    def wait_idle(self) -> None:
        self.page.wait_for_selector(".jp-NotebookPanel .jp-Notebook-ExecutionIndicator[data-status='idle']")

    def wait_prompt_changes(self, index: int, before: str) -> str:
        """Wait until cell ``index`` has run again: its prompt shows a new [n]."""
        prompt = self.cells.nth(index).locator(".jp-InputArea-prompt")
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while time.monotonic() < deadline:
            text = prompt.inner_text().strip()
            if re.search(r"\[\d+\]", text) and text != before:
                return text
            time.sleep(0.1)
        raise AssertionError(f"{self.name}: cell {index} did not run (prompt still {before!r})")

    def wait_prompt_changes_within(self, index: int, before: str, seconds: float) -> str:
        """``wait_prompt_changes`` with a longer limit (a cell that starts an engine)."""
        prompt = self.cells.nth(index).locator(".jp-InputArea-prompt")
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            text = prompt.inner_text().strip()
            if re.search(r"\[\d+\]", text) and text != before:
                return text
            time.sleep(0.5)
        raise AssertionError(f"{self.name}: cell {index} did not finish within {seconds:.0f} s")

    def assert_hidden_inputs(self) -> None:
        """Cells with ``source_hidden`` show the collapsed placeholder, others their editor."""
        wrong = []
        for i, cell in enumerate(self.nb.cells):
            hidden = bool(cell.metadata.get("jupyter", {}).get("source_hidden"))
            shown = self.cells.nth(i)
            placeholder = shown.locator(".jp-InputPlaceholder").count() > 0
            if placeholder != hidden:
                wrong.append(f"cell {i}: source_hidden={hidden}, placeholder shown={placeholder}")
            code = [line for line in cell.source.splitlines()[1:] if len(line.strip()) > 8]
            if hidden and code and code[0].strip() in shown.inner_text():
                wrong.append(f"cell {i}: its hidden code is on the page")   # (the first line is a caption)
        ids = {cell.get("id"): i for i, cell in enumerate(self.nb.cells)}
        for cell_id in self.plan.hidden_cells if self.plan else ():
            if cell_id not in ids:
                wrong.append(f"no cell with id {cell_id!r} (the plan's hidden_cells)")
            elif not self.cells.nth(ids[cell_id]).locator(".jp-InputPlaceholder").count():
                wrong.append(f"cell {cell_id!r}: its input is not hidden")
        assert wrong == [], "hidden inputs:\n" + "\n".join(wrong)
        assert any(c.metadata.get("jupyter", {}).get("source_hidden") for c in self.nb.cells), \
            f"{self.name}: no generator cell has a hidden input"

    def assert_no_toast(self) -> None:
        toasts = self.page.locator(TOAST)
        assert toasts.count() == 0, f"a notification is over the page: {toasts.all_inner_texts()}"

    def run_menu(self, menu: str, item: str) -> None:
        self.page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{menu}$")).click()
        self.page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")).click()

    def saved(self):
        """Save (File > Save Notebook) into the scratch root and read the notebook back."""
        before = self.path.stat().st_mtime_ns
        self.run_menu("File", "Save Notebook")
        deadline = time.monotonic() + 20
        while self.path.stat().st_mtime_ns == before:
            assert time.monotonic() < deadline, "File > Save Notebook did not write the notebook"
            time.sleep(0.1)
        time.sleep(0.2)   # the contents API writes atomically, but let it finish
        return nbformat.read(self.path, as_version=4)

    # -- steps -----------------------------------------------------------------------------------
    def ensure_open(self) -> None:
        if "open" in self.done:
            return
        assert self.plan, (f"{self.name} has no entry in PLANS (tests/browser/test_lab.py): name its explorer "
                           "slider, displayed number, an answer cell and a slip to type")
        with self.step("open: page load to kernel idle"):
            # ?reset: start from an empty workspace, whatever an earlier session left open
            self.page.goto(f"{self.server['url']}/lab/tree/{self.name}.ipynb?reset")
            self.wait_kernel_named()
            self.wait_idle()
            self.cells.nth(len(self.nb.cells) - 1).wait_for(state="attached")
        assert self.cells.count() == len(self.nb.cells)
        self.assert_hidden_inputs()
        self.assert_no_toast()
        self.shot("opened")
        self.done.add("open")

    def ensure_ran(self) -> None:
        if "ran" in self.done:
            return
        self.ensure_open()
        with self.step("run all: Run > Run All Cells to kernel idle"):
            self.run_menu("Run", "Run All Cells")
            # Done when some cell has a number and none is queued or running ([*]).
            self.page.wait_for_function(
                """() => {
                    const p = [...document.querySelectorAll('.jp-NotebookPanel .jp-CodeCell .jp-InputArea-prompt')]
                        .map(e => e.textContent.trim());
                    return p.some(t => /\\d/.test(t)) && !p.some(t => t.includes('*'));
                }""", timeout=TIMEOUT_MS)
            self.wait_idle()
        self.done.add("ran")

    def ensure_wrong_answer(self) -> str:
        """Type the plan's wrong answer, run it and its check; the check's output text."""
        if "wrong" in self.done:
            return self.wrong_output
        self.wrong_output = self.type_and_check(self.plan.answer_id, self.plan.wrong_answer)
        self.done.add("wrong")
        return self.wrong_output

    def type_and_check(self, answer_id: str, wrong_answer: str) -> str:
        """Type ``wrong_answer`` into the answer cell ``answer_id``, run it and its check; the check's output."""
        from playwright.sync_api import expect   # here: the module must import without playwright

        self.ensure_ran()
        answer = self.index(answer_id)
        test = next(i for i in range(answer + 1, len(self.nb.cells)) if _kind(self.nb.cells[i]) == "test")
        with self.step(f"wrong answer: type into {answer_id}, run it and its check"):
            cell = self.cells.nth(answer)
            cell.scroll_into_view_if_needed()
            editor = cell.locator(".cm-content")
            if answer_id not in self.typed:
                expect(editor).to_contain_text("NotImplementedError")   # the blank stub, once drawn
            self.typed.add(answer_id)
            editor.click()
            self.page.keyboard.press("Control+a")
            self.page.keyboard.type(wrong_answer)
            typed = editor.inner_text().strip()
            assert typed == wrong_answer, f"the editor holds {typed!r}"
            answer_prompt = cell.locator(".jp-InputArea-prompt").inner_text().strip()
            test_prompt = self.cells.nth(test).locator(".jp-InputArea-prompt").inner_text().strip()
            self.page.keyboard.press("Shift+Enter")                     # run the answer cell
            self.wait_prompt_changes(answer, answer_prompt)
            self.cells.nth(test).locator(".jp-InputArea-prompt").click()  # select its check
            self.page.keyboard.press("Shift+Enter")                     # and run it
            self.wait_prompt_changes(test, test_prompt)
            self.wait_idle()
        assert self.cells.nth(answer).locator(".jp-OutputArea-output").count() == 0, \
            "the answer cell itself printed something (an error?)"
        output = self.cells.nth(test).locator(".jp-OutputArea").inner_text()
        self.cells.nth(test).scroll_into_view_if_needed()
        self.shot("wrong-answer-slip")
        return output


@pytest.fixture(scope="module", params=CHAPTERS)
def chapter(request, lab_server, browser, artefacts, step_timings):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    try:
        yield ChapterPage(request.param, page, lab_server, artefacts, step_timings)
    finally:
        context.close()
        _shut_down_kernels(lab_server["url"], f"{request.param}.ipynb")


def _shut_down_kernels(url: str, path: str) -> None:
    """Delete the server sessions (and kernels) of ``path``: one chapter's kernel at a time.

    With no token, jupyter-server still wants its _xsrf cookie echoed on a DELETE."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(f"{url}/lab", timeout=10).close()
    xsrf = next((c.value for c in jar if c.name == "_xsrf"), "")
    with opener.open(f"{url}/api/sessions", timeout=10) as response:
        sessions = json.load(response)
    for session in sessions:
        if session.get("path") == path:
            request = urllib.request.Request(f"{url}/api/sessions/{session['id']}", method="DELETE",
                                             headers={"X-XSRFToken": xsrf})
            opener.open(request, timeout=30).close()


def test_dev_sh_open_lands_on_chapter_00(lab_server):
    """`./dev.sh open --root DIR` serves DIR (the copies of chapters/), and / leads to chapter 00."""
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args):
            return None
    opener = urllib.request.build_opener(NoRedirect)
    try:
        opener.open(f"{lab_server['url']}/", timeout=10)
        location = None
    except urllib.error.HTTPError as redirect:
        location = redirect.headers.get("Location")
    assert location and location.rstrip("?").endswith(f"/lab/tree/{DEFAULT_CHAPTER}.ipynb"), location
    with urllib.request.urlopen(f"{lab_server['url']}/api/contents", timeout=10) as response:
        listed = {item["name"] for item in json.load(response)["content"]}
    assert {f"{c}.ipynb" for c in CHAPTERS} <= listed


def test_opens_idle_without_toast(chapter):
    chapter.ensure_open()


def test_run_all_fails_only_in_exercise_checks(chapter):
    chapter.ensure_ran()
    nb = chapter.saved()
    errors, not_run = [], []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        kind = _kind(cell)
        for out in cell.get("outputs", []):
            if out.output_type != "error" or (kind == "answer" and out.ename == "NotImplementedError"):
                continue                                   # not an error, or a value answer's blank stub
            if kind != "test" or out.ename not in EXERCISE_ERRORS:
                errors.append(f"cell {i} ({kind or 'not an exercise'}): {out.ename}: {out.evalue}")
        if cell.get("execution_count") is None:
            not_run.append(f"cell {i} ({kind or 'not an exercise'}): "
                           f"{cell.source.splitlines()[0] if cell.source else ''}")
    assert errors == [], "cells that errored:\n" + "\n".join(errors)
    assert not_run == [], "Run All stopped before these cells ran (a failing check must not stop it):\n" + \
        "\n".join(not_run)
    text = chapter.page.locator(".jp-NotebookPanel .jp-Notebook").text_content() or ""
    missing = [shown for shown in chapter.plan.shows if shown not in text]
    assert missing == [], f"not on the page after Run All: {missing}"
    if chapter.plan.without:      # ungraded: nothing may fail, and every code cell ran
        assert not any(o.output_type == "error" for c in nb.cells for o in c.get("outputs", [])), \
            "an ungraded chapter showed an error"
        assert all(c.get("execution_count") for c in nb.cells if c.cell_type == "code")
        chapter.assert_no_toast()
        chapter.shot("ran-all")
        return
    failed = [i for i, cell in enumerate(nb.cells)
              if any(o.output_type == "error" for o in cell.get("outputs", []))]
    assert failed, "no exercise check failed on the blank notebook"
    # The learner sees the check's message under the first failing check: "✗ <grade id>", then the message.
    first = nb.cells[failed[0]]
    message = next(o for o in first.outputs if o.output_type == "error").traceback[0]
    assert message == f"✗ {first.metadata['nbgrader']['grade_id']}", message
    shown = chapter.cells.nth(failed[0])
    shown.scroll_into_view_if_needed()
    # A cell far from where Run All left the view is drawn only after it is scrolled to (JupyterLab's windowed
    # notebook; ch09's first check is some 50 cells above the end): wait for its output to be drawn.
    # On a busy machine the first scroll can land before the windowed list settles: scroll again while waiting.
    output = shown.locator(".jp-OutputArea")
    deadline = time.monotonic() + 30
    while message[:60] not in output.inner_text() and time.monotonic() < deadline:
        time.sleep(0.2)
        shown.scroll_into_view_if_needed()
    assert message[:60] in output.inner_text()
    assert not [t for t in CHECKER_TEXT if t in output.inner_text()], output.inner_text()
    chapter.assert_no_toast()
    chapter.shot("ran-all")


def test_slider_changes_the_displayed_number(chapter):
    _skip_without(chapter)
    chapter.ensure_ran()
    page, plan = chapter.page, chapter.plan
    number = re.compile(plan.number)
    slider = page.locator(".widget-hslider").filter(
        has=page.locator(".widget-label", has_text=re.compile(f"^{re.escape(plan.slider)}$")))
    assert slider.count() == 1, f"{slider.count()} sliders labelled {plan.slider!r}"
    view = page.locator(".widget-html").filter(has_text=number)
    assert view.count() == 1, f"{view.count()} explorer views show {plan.number!r}"
    view.evaluate("e => e.scrollIntoView({block: 'center'})")   # the sliders above it, the number in sight

    def read():
        match = number.search(view.text_content() or "")
        return (match.group(1) if match else None), slider.locator(".widget-readout").text_content()

    seen = [read()]
    chapter.shot("explorer")
    handle = slider.locator(".noUi-handle")
    for key in ("ArrowRight", "End"):
        with chapter.step(f"slider: {key} to the number redrawn"):
            handle.focus()
            page.keyboard.press(key)
            deadline = time.monotonic() + 10
            while read()[0] == seen[-1][0] and time.monotonic() < deadline:
                time.sleep(0.05)
        seen.append(read())
        chapter.shot(f"slider-{key.lower()}")
    values = [s[0] for s in seen]
    readouts = [s[1] for s in seen]
    assert None not in values, f"the explorer stopped showing {plan.number!r}: {values}"
    assert len(set(values)) == 3, f"the number did not change at each key press: {values} (slider {readouts})"
    assert len(set(readouts)) == 3, f"the slider's readout did not move each time: {readouts}"
    # Readable at 1,400 px: sliders wide enough for their ranges, every label on one line.
    for i in range(page.locator(".widget-hslider").count()):
        one = page.locator(".widget-hslider").nth(i)
        label = one.locator(".widget-label")
        width = one.bounding_box()["width"]
        assert width >= 600, f"slider {label.text_content()!r} is {width:.0f} px wide"
        assert label.evaluate("e => e.scrollWidth <= e.clientWidth && e.getClientRects().length == 1"), \
            f"slider label {label.text_content()!r} is cut off or wraps"


def test_worked_answers_stay_folded(chapter):
    """After Run All, the answers of worked problems are on the page but folded."""
    chapter.ensure_ran()
    page = chapter.page
    folded = page.locator(".jp-RenderedMarkdown details")
    assert folded.count() >= 1, "no folded answer in the chapter"
    assert page.locator(".jp-RenderedMarkdown details[open]").count() == 0, "an answer is open before the learner opens it"
    summary = folded.first.locator("summary")
    assert (summary.text_content() or "").strip() == "Show the answer"


def test_a_plot_shows_its_alt_text(chapter):
    """JupyterLab draws the chapter's first plot with the alt text its kernel wrote into the output (kvdisplay's
    ``figure_alt``, which JupyterLab reads through kvdisplay/labextension): what a screen reader reads there."""
    chapter.ensure_ran()
    nb = nbformat.read(chapter.path, as_version=4)     # as the Run All test saved it, else saved now
    if not any(cell.get("outputs") for cell in nb.cells):
        nb = chapter.saved()
    plots = [(i, (o.get("metadata", {}).get("image/png") or {}).get("alt"))
             for i, cell in enumerate(nb.cells) for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
    if not plots:
        pytest.skip(f"{chapter.name} draws no plot")
    index, alt = plots[0]
    assert describes(alt), alt
    cell = chapter.cells.nth(index)
    cell.scroll_into_view_if_needed()
    image = cell.locator(".jp-RenderedImage img").first
    image.wait_for(state="attached")
    assert image.get_attribute("alt") == alt


def test_wrong_answer_names_the_slip(chapter):
    _skip_without(chapter)
    output = chapter.ensure_wrong_answer()
    assert output.lstrip().startswith("✗ "), output
    assert chapter.plan.slip in output, f"the check did not name the slip {chapter.plan.slip!r}:\n{output}"
    assert not [t for t in CHECKER_TEXT if t in output], f"the check showed the checker's frames:\n{output}"


def test_validate_button_reports(chapter):
    if not chapter.plan or not chapter.plan.validate:
        pytest.skip(f"{chapter.name}: the plan does not validate")
    chapter.ensure_wrong_answer()
    page = chapter.page
    with chapter.step("validate: button to the results dialog"):
        page.locator(".jp-NotebookPanel-toolbar .validate-button").click()
        dialog = page.locator(".jp-Dialog")
        dialog.wait_for(state="visible", timeout=120_000)   # nbgrader saves, then runs the whole notebook
    header = dialog.locator(".jp-Dialog-header").inner_text()
    body = dialog.locator(".jp-Dialog-body").inner_text()
    chapter.shot("validate-dialog")
    assert header.strip() == "Validation Results", f"{header}\n{body}"
    message = dialog.locator("#validation-message")
    assert "validation-failed" in (message.get_attribute("class") or ""), body
    for expected in chapter.plan.validate:
        assert expected in body, f"{expected!r} not in the validation dialog:\n{body}"
    dialog.locator(".jp-Dialog-footer button").last.click()
    dialog.wait_for(state="detached")


def test_buttons_redraw_their_widget(chapter):
    """A widget driven by buttons (ch09's drill mode): each click, after typing into its text box, redraws it."""
    if not chapter.plan or not chapter.plan.buttons:
        pytest.skip(f"{chapter.name}: the plan clicks no widget button")
    chapter.ensure_ran()
    page = chapter.page
    for typed, label, shows in chapter.plan.buttons:
        button = page.locator(".widget-button", has_text=re.compile(f"^{re.escape(label)}$"))
        assert button.count() == 1, f"{button.count()} buttons labelled {label!r}"
        with chapter.step(f"button: {label} to its widget redrawn"):
            if typed:
                # the text box of the button's own widget (ch09 also shows plan mode's boxes further down)
                widget = button.locator("xpath=ancestor::div[.//div[contains(@class, 'widget-text')]][1]")
                box = widget.locator(".widget-text input")
                assert box.count() == 1, f"{box.count()} text boxes in the widget of {label!r}"
                box.fill(typed)
            button.scroll_into_view_if_needed()
            button.click()
            page.locator(".widget-html", has_text=re.compile(shows)).first.wait_for(timeout=10_000)
    chapter.shot("buttons")


def test_more_wrong_answers_name_their_slips(chapter):
    """The plan's other wrong answers (ch01's 1, 5 and 6, ch03's 1, ch04's 1 and 4, ch05's 3, ch06's 6, ch07's 4, 5
    and 7): each gets its own named message, and none shows what its entry says it must not (ch05: a long raw
    value, LONG_RAW_VALUES)."""
    if not chapter.plan or not chapter.plan.more_wrong:
        pytest.skip(f"{chapter.name}: the plan types one wrong answer only")
    for answer_id, wrong_answer, slips, *not_shown in chapter.plan.more_wrong:
        output = chapter.type_and_check(answer_id, wrong_answer)
        for slip in (slips,) if isinstance(slips, str) else slips:
            assert slip in output, f"{answer_id}: the check did not name {slip!r}:\n{output}"
        for pattern in not_shown[0] if not_shown else ():
            shown = re.search(pattern, output)
            assert shown is None, f"{answer_id}: the check printed {shown.group(0)!r} ({pattern}):\n{output}"
        assert output.lstrip().startswith("✗ ") and not [t for t in CHECKER_TEXT if t in output], output


ENGINE_CELL_FLAG = "START_ENGINE = False"
ENGINE_CELL_LIMIT_S = 420      # the cell's own timeout_s is 300; the model build and the page add to it


def test_engine_cell_starts_the_engine(chapter):
    """ch08's engine cell, as a learner runs it: START_ENGINE set to True, the cell run; vLLM's CPU
    build starts, and the page shows its own KV line beside kvlib's prediction, which agrees.
    Needs the engine (./dev.sh engine); REQUIRE_ENGINE=1 (CI) makes a missing one a failure."""
    if chapter.name != "ch08_vllm_lab":
        pytest.skip("the engine cell is in ch08_vllm_lab")
    import conftest                                          # tests/conftest.py
    if os.environ.get(conftest.ENGINE_PENDING_ENV):          # .ci/run: the install may still be running
        conftest.wait_for_engine_install(Path(os.environ[conftest.ENGINE_PENDING_ENV]))
    from kvlib.vllm.cpu_engine import engine_python
    if engine_python() is None:
        message = "vLLM's CPU build is not installed (./dev.sh engine): the engine cell's engine branch is not run"
        if os.environ.get("REQUIRE_ENGINE") == "1":
            pytest.fail(message + " (REQUIRE_ENGINE=1)")
        pytest.skip(message)
    chapter.ensure_ran()
    index = next(i for i, c in enumerate(chapter.nb.cells) if ENGINE_CELL_FLAG in c.source)
    cell = chapter.cells.nth(index)
    with chapter.step("engine cell: START_ENGINE = True, run, vLLM's lines on the page"):
        cell.scroll_into_view_if_needed()
        editor = cell.locator(".cm-content")
        editor.click()
        chapter.page.keyboard.press("Control+Home")
        chapter.page.keyboard.press("Shift+End")          # the first line: START_ENGINE = False  # ...
        chapter.page.keyboard.type("START_ENGINE = True")
        assert editor.inner_text().startswith("START_ENGINE = True"), editor.inner_text()[:80]
        before = cell.locator(".jp-InputArea-prompt").inner_text().strip()
        chapter.page.keyboard.press("Shift+Enter")
        chapter.wait_prompt_changes_within(index, before, ENGINE_CELL_LIMIT_S)
    output = cell.locator(".jp-OutputArea").inner_text()
    cell.scroll_into_view_if_needed()
    chapter.shot("engine-cell")
    assert "vLLM ran" in output, output[:800]
    assert "CPU KV cache size" in output and "kvlib agrees with the engine" in output, output[:1500]


def test_no_console_errors(chapter):
    """Runs last for each chapter: everything the page logged as an error, over all steps."""
    chapter.ensure_open()
    chapter.assert_no_toast()
    errors = [m for m in chapter.console if not any(p.search(m) for p in KNOWN_CONSOLE_NOISE)]
    assert errors == [], "browser console errors:\n" + "\n".join(errors)

