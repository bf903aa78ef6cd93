"""The course's autograder: the checks the notebooks call, and the grading CLI.

* ``autograder.checks.chNN`` -- one small check per exercise; a notebook's test
  cell calls ``chNN.check_qN(fn)`` and a failing check raises AssertionError
  naming the slip (via ``kvlib.slips``).
* ``python -m autograder grade SUBMISSION.ipynb --assignment chNN_slug [--json]``
  -- grade one notebook with nbgrader in a throwaway course outside the checkout.
* ``python -m autograder grade-class SUBMITTED_DIR --assignment chNN_slug`` --
  grade a class in parallel into a gradebook and a CSV (``autograder.grade``).
* ``autograder.course`` -- the course directory and its throwaway copies, shared
  with ``tools/build_course.py``.
"""
