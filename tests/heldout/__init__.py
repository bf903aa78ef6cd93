"""Held-out wrong answers, written from the student notebooks of chapters 01-05 alone.

Each chapter module (``chNN``) lists ``ANSWERS``: realistic wrong answers a learner of that chapter
would type into a graded exercise, with one sentence, in the chapter's words, saying what the learner
did wrong. They were written before reading the slip catalogue, the checks or their tests, so that
they test whether the feedback names a slip it was not tuned to. ``tests/test_heldout_answers.py``
runs each through the check the learner's notebook calls and says what the message must name.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    check_id: str     # the id the notebook's test cell passes to autograder.checks.check
    function: str     # the function the answer cell defines
    name: str         # this answer's name, unique within its chapter
    code: str         # the answer cell, as the learner typed it
    intent: str       # what the learner did wrong, in the chapter's words
