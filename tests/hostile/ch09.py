"""Hostile submissions for chapter 09's graded drills ([drills §5]), with the score each must get.

Chapter 09's drills are value exercises: the answer cell binds ``answer_<topic>`` to a number and the
test cell checks that number against the learner's own problem (``kvcoach.drills.student_problem``). The coach's
drill object holds the answer, so one line (``answer_pool = drills.student_problem(me, "pool").answer``)
would score. Every route that reads the answer of the learner's own problem from the drill object must
score 0 for that exercise, with a one-line reason, in the kernel's check and in the outside verdict; a
learner who practises (other problems' answers, ``Problem.check`` without the answer shown) and then works
the arithmetic keeps full marks.

``CASES``: ``(name, what, answers, verdict_score)``, ``answers`` being ``{topic: answer-cell source}``
(``None``: the source's own cells, which compute from the drawn question). ``notebook(source, case)``
builds the submission from any chapter-09 source (the fixture of ``tests/ch09_drill_answers`` or the
chapter). Points: q1 2, each drill 1 (11 in all).
"""

from __future__ import annotations

import copy

import ch09_drill_answers as D

ME = "from autograder.checks import current_student as _me\nfrom kvcoach import drills as _drills\n"
SWAPPED = D.POINTS[D.Q1]     # only q1 (the formula function) left


def _read_attribute(topic: str) -> str:
    return ME + f'answer_{topic} = _drills.student_problem(_me(), "{topic}").answer\n'


def _read_feedback(topic: str) -> str:
    """The answer parsed out of ``Problem.check``'s feedback, which shows it when ``reveal`` is left on."""
    return ME + ("import re as _re\n"
                 f'_said = _drills.student_problem(_me(), "{topic}").check(0)[1]\n'
                 "_n = _re.search(r'The answer is ([0-9][0-9,.]*)', _said).group(1).replace(',', '').rstrip('.')\n"
                 f"answer_{topic} = float(_n) if '.' in _n else int(_n)\n")


def _read_repr(topic: str) -> str:
    return ME + ("import re as _re\n"
                 f'_n = _re.search(r"answer=([0-9.e+-]+)", repr(_drills.student_problem(_me(), "{topic}"))).group(1)\n'
                 f"answer_{topic} = float(_n) if '.' in _n else int(_n)\n")


def _read_then_rewrite_id(topic: str) -> str:
    """The graded student's own answer read from the drill object, then the id rewritten (the grader's variable and
    a claim), so a check that asked for the student only afterwards would look for reads of another student's
    problem. The first cell keeps the real id for the later ones (``_real``)."""
    return ME + ("import os as _os\n"
                 "from autograder.checks import claim_student as _claim\n"
                 "_real = globals().get('_real') or _me()\n"
                 f'answer_{topic} = _drills.student_problem(_real, "{topic}").answer\n'
                 "_os.environ['KV_COURSE_GRADING_STUDENT'] = 'someone-else'\n"
                 "_claim('someone-else')\n")


def _practice_then_work(topic: str) -> str:
    """Drill practice first (other problems' answers, the own problem's check without the answer), then the
    arithmetic on the question's figures (the same expression as the solution)."""
    return ME + ("import math\n"
                 f'_drills.generate("{topic}", 7).answer\n'
                 f'_drills.generate("{topic}", 7).check(1)\n'
                 f'_drills.student_problem(_me(), "{topic}").check(1, reveal=False)\n'
                 f'q = _drills.student_problem(_me(), "{topic}").public().params\n'
                 f"answer_{topic} = {D.EXPRESSIONS[topic]}\n")


CASES = [
    ("honest", "the source's own answer cells (arithmetic on the drawn question)", None, D.FULL),
    ("practice_then_work", "practises on other drill problems and the own problem's check(reveal=False), then "
     "works the arithmetic", {t: _practice_then_work(t) for t in D.TOPICS}, D.FULL),
    ("drill_answer", "every drill: answer_<topic> = drills.student_problem(me, topic).answer",
     {t: _read_attribute(t) for t in D.TOPICS}, SWAPPED),
    ("drill_check_feedback", "every drill: the answer parsed from Problem.check's feedback (reveal left on)",
     {t: _read_feedback(t) for t in D.TOPICS}, SWAPPED),
    ("drill_repr", "every drill: the answer parsed from repr() of the drill object",
     {t: _read_repr(t) for t in D.TOPICS}, SWAPPED),
    ("drill_answer_id_rewritten", "every drill: the own answer read from the drill object, then the student id "
     "rewritten (KV_COURSE_GRADING_STUDENT and claim_student) before the check runs",
     {t: _read_then_rewrite_id(t) for t in D.TOPICS}, SWAPPED),
]
BY_NAME = {c[0]: c for c in CASES}


def notebook(source: dict, name: str) -> dict:
    """The submission of case ``name`` on a chapter-09 source notebook."""
    _, _, answers, _ = BY_NAME[name]
    nb = copy.deepcopy(source)
    for topic, text in (answers or {}).items():
        D.answer_cell(nb, topic)["source"] = text
    return nb
