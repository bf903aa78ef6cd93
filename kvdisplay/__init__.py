"""kvdisplay: the notebook side of kv-course -- how a chapter shows what kvlib computes.

kvlib computes (and knows nothing of notebooks); kvdisplay only presents: Markdown built
from computed values, worked problems with folded answers, erratum boxes and footnotes,
the formula's build-up, a KV cache as a numpy array, plots with labelled axes, and the
explorer widget (a plain function returns its view, so tests and benchmarks need no
widgets). A chapter's setup cell is::

    import kvlib as kv
    import kvdisplay as kd

Every helper's docstring names the chapters that use it (``Used in:``); a test holds
those back-links to the chapter sources.
"""

from .alt_text import figure_alt
from .arrays import KV_CACHE_AXES, kv_cache_array, numpy_dtype
from .bars import bar_plot
from .crossover import (crossover_explorer, crossover_view, figure_img, roofline_plot, step_bytes_figure,
                        step_ops_figure)
from .course import notation_table, terminal
from .derivation import build_up
from .drills import DrillSession, drill_mode, drill_view, my_question, my_questions, show_question, use_student_id
from .drills import clock_text, drill_stats, history_figure, history_view, plans_view
from .interview import interview_sheet, interview_sheet_view
from .explorer import ExplorerPreset, kv_explorer, kv_explorer_view, presets_from_models
from .mla import MLA_LATENT_AXES, MLA_ROPE_AXES, mla_cache_arrays, mla_explorer, mla_explorer_view
from .plots import figure_text, line_plot, show_figure_text
from .pool import pool_explorer, pool_explorer_view
from .planner import planner_explorer, planner_view
from .plan_drill import plan_clock_text, plan_mode, plan_view
from .problems import erratum, footnote, footnote_ref, worked_problem
from .serving_problems import serving_problem, serving_worked_problems
from .reuse import fetch_recompute_explorer, fetch_recompute_view, prefix_sharing_explorer, prefix_sharing_view
from .state import all_attention_bytes_per_token, sequence_memory_view, state_arrays, state_explorer
from .text import config_fields_table, md, model_name, show, show_json, table
from .tp import heads_held, tp_explorer, tp_explorer_view, tp_kv_slices
from .vllm_lab import (ENGINE_GEOMETRIES, block_window_explorer, block_window_view, engine_geometry, engine_lab,
                       engine_lab_view, log_presets, log_source_words, pool_sizing_table, release_span,
                       stats_lines_table, stats_source_words)

__all__ = [
    "KV_CACHE_AXES", "kv_cache_array", "numpy_dtype", "build_up", "ExplorerPreset", "kv_explorer",
    "kv_explorer_view", "presets_from_models", "line_plot", "figure_text", "figure_alt", "pool_explorer",
    "pool_explorer_view", "erratum", "footnote", "footnote_ref",
    "worked_problem", "config_fields_table", "md", "model_name", "show", "show_json", "table",
    "heads_held", "tp_explorer", "tp_explorer_view", "tp_kv_slices",
    "bar_plot", "MLA_LATENT_AXES", "MLA_ROPE_AXES", "mla_cache_arrays", "mla_explorer", "mla_explorer_view",
    "crossover_explorer", "crossover_view", "figure_img", "roofline_plot", "step_bytes_figure", "step_ops_figure",
    "planner_explorer", "planner_view",
    "notation_table", "terminal",
    "fetch_recompute_explorer", "fetch_recompute_view", "prefix_sharing_explorer", "prefix_sharing_view",
    "ENGINE_GEOMETRIES", "block_window_explorer", "block_window_view", "engine_geometry", "engine_lab",
    "engine_lab_view", "log_presets", "log_source_words", "pool_sizing_table", "release_span", "stats_lines_table",
    "stats_source_words",
    "DrillSession", "drill_mode", "drill_view", "my_question", "my_questions", "show_question", "use_student_id",
    "interview_sheet", "interview_sheet_view",
    "clock_text", "drill_stats", "history_figure", "history_view", "plans_view",
    "plan_clock_text", "plan_mode", "plan_view",
    "serving_problem",
    "serving_worked_problems",
    "all_attention_bytes_per_token", "sequence_memory_view", "state_arrays", "state_explorer",
]

show_figure_text()   # a figure's text/plain output says its title and legend (tests/leaks.py reads it), its PNG has alt text
