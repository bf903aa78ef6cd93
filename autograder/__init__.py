"""The course's autograder: the checks the notebooks call, and the grading CLI.

* ``autograder.checks`` -- each chapter's exercises as data (``chNN.py``) and one
  generic check; a notebook's test cell calls ``check("chNN_qN_name", fn)`` and a
  failing check raises AssertionError naming the slip (via ``kvcoach.slips``).
* ``python -m autograder grade SUBMISSION.ipynb --assignment chNN_slug [--json]``
  -- grade one notebook with nbgrader in a throwaway course outside the checkout.
* ``python -m autograder grade-class SUBMITTED_DIR --assignment chNN_slug`` --
  grade a class in parallel into a gradebook and a CSV (``autograder.grade``).
* ``autograder.course`` -- the course directory and its throwaway copies, shared
  with ``tools/build_course.py``; ``autograder.notebook`` -- the one notebook
  reader; ``autograder.chapter`` -- the chapter ids and notebook/checks agreement;
  ``autograder.packages`` -- the course's packages, visible in every sandbox.
* Grading by job: ``grade`` (Grader, one notebook), ``intake``, ``results``,
  ``seed``, ``classroom`` (grade-class), ``preflight`` (the sandbox sees the
  course), ``database`` (the gradebook URL), ``verdict`` + ``verdict_runner``,
  ``sandbox`` + ``kernel_launcher`` + ``kernel``; ``nbgrader_setup`` (what the
  course config sets up for plain nbgrader too: the sandboxed kernel, the
  outside check as a step of nbgrader's autograde, ``outside_check``, the
  feedback page in ``templates/``, quiet logs).
"""
