"""Markdown built from computed values: a paragraph, a table, a config, a config's fields.

Each helper returns an IPython display object (a cell that ends with one shows it;
``show`` shows several from one cell). Nothing here computes a figure: the
notebook computes with kvlib and passes the results in.

Used in: ch01_kv_formula, ch02_gqa_tp.
"""

from __future__ import annotations

import json

from IPython.display import Markdown, display


def md(text: str) -> Markdown:
    """Markdown from a string the notebook built out of computed values.

    >>> md("**131,072 B** per token").data
    '**131,072 B** per token'

    Used in: ch01_kv_formula, ch02_gqa_tp, ch03_mla, ch04_pool_paging, ch06_crossover, ch00_orientation, ch05_prefix_reuse, ch08_vllm_lab, ch09_interview_drills, ch10_state_and_sparsity.
    """  # noqa: E501
    return Markdown(text)


def show(*objects) -> None:
    """Display several objects from one cell, in order (``display`` under a name that says so).

    Used in: ch02_gqa_tp, ch03_mla, ch04_pool_paging, ch05_prefix_reuse, ch06_crossover, ch07_capacity_plan, ch08_vllm_lab, ch10_state_and_sparsity.
    """  # noqa: E501
    display(*objects)


def _cell(value) -> str:
    text = f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def table(headers, rows, note: str = "") -> Markdown:
    """A Markdown table; ints get thousands separators, ``|`` in a cell is escaped.

    >>> print(table(["model", "bytes/token"], [["Llama-3.1-8B", 131072]]).data)
    | model | bytes/token |
    |---|---|
    | Llama-3.1-8B | 131,072 |

    ``note`` goes under the table as its own paragraph. Raises ValueError when a row
    has a different number of cells than the header.

    Used in: ch01_kv_formula, ch02_gqa_tp, ch03_mla, ch04_pool_paging, ch06_crossover, ch07_capacity_plan, ch05_prefix_reuse, ch08_vllm_lab, ch09_interview_drills, ch10_state_and_sparsity.
    """  # noqa: E501
    headers = list(headers)
    lines = ["| " + " | ".join(_cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    for number, row in enumerate(rows, 1):
        row = list(row)
        if len(row) != len(headers):
            raise ValueError(f"table row {number} has {len(row)} cells, the header {len(headers)}")
        lines.append("| " + " | ".join(_cell(c) for c in row) + " |")
    text = "\n".join(lines)
    return Markdown(text + (f"\n\n{note}" if note else ""))


def show_json(data: dict) -> Markdown:
    """A dict as an indented JSON code block (a config.json as the learner would open it).

    >>> print(show_json({"num_hidden_layers": 32}).data)
    ```json
    {
     "num_hidden_layers": 32
    }
    ```

    Used in: ch01_kv_formula.
    """
    return Markdown("```json\n" + json.dumps(data, indent=1) + "\n```")


ABSENT = "—"


def config_fields_table(configs: dict, fields) -> Markdown:
    """Raw config fields, one row per field and one column per model, so wide tables never clip.

    ``configs`` maps a column title to a config dict. A field the config lacks shows
    as "—", a JSON null as ``null``; the note under the table says so.

    >>> print(config_fields_table({"A": {"n_head": 20, "head_dim": None}}, ["n_head", "head_dim", "n_layer"]).data)
    | field | A |
    |---|---|
    | `n_head` | 20 |
    | `head_dim` | null |
    | `n_layer` | — |
    <BLANKLINE>
    — the config has no such field; null: the field is there, set to null (None in Python)

    Used in: ch01_kv_formula (the attention fields before Exercise 1), ch02_gqa_tp, ch03_mla.
    """
    def value(config, field):
        if field not in config:
            return ABSENT
        return "null" if config[field] is None else config[field]

    rows = [[f"`{field}`"] + [value(config, field) for config in configs.values()] for field in fields]
    return table(["field"] + list(configs), rows,
                 note=f"{ABSENT} the config has no such field; null: the field is there, set to null "
                      "(None in Python)")


def model_name(spec) -> str:
    """A model's name without its organisation, for prose and tables: 'Llama-3.1-8B'.

    >>> import kvlib
    >>> model_name(kvlib.load_model("llama-3.1-8b"))
    'Llama-3.1-8B'

    Used in: ch01_kv_formula, ch02_gqa_tp, ch03_mla, ch04_pool_paging, ch06_crossover, ch07_capacity_plan, ch05_prefix_reuse, ch08_vllm_lab, ch09_interview_drills, ch10_state_and_sparsity.
    """  # noqa: E501
    return spec.name.split("/", 1)[-1]
