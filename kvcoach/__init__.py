"""kvcoach: the course's practice and mistake engine, beside the reference library kvlib.

kvlib computes the figures; the coach knows the mistakes learners make with them and asks
questions about them:

* ``kvcoach.slips`` -- the slip catalogue: each quantity recomputed with each known slip
  applied, so a wrong answer is named by the mistake that gives it (``diagnose``);
* ``kvcoach.drills`` -- seeded practice problems, and every learner's own graded ones;
  ``drill_history`` (what to review next), ``drill_assumptions`` (answers as key=value),
  ``drill_steps`` (the worked steps after a miss);
* ``kvcoach.learner`` -- who the learner is (the id their own questions are drawn for) and
  their question on a topic; the checks and kvdisplay's drills both ask it;
* ``kvcoach.guard`` -- whose code read a drill's answer: the learner's, or the course's own;
* ``kvcoach.cli`` -- ``kvlib drill``, registered on kvlib's command line through the
  ``kvlib.commands`` entry point (pyproject.toml), so kvlib imports nothing of the coach.

The coach may import kvlib; it never imports the autograder or kvdisplay
(tests/test_architecture.py holds that). Nothing is imported here: ``import kvcoach.slips``.
"""

__version__ = "0.1.0"
