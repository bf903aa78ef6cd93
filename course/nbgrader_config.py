"""nbgrader configuration for kv-course (the instructor's course directory).

The course root is the folder holding this file, computed when nbgrader loads
it, so the same file works in the checkout and in the throwaway course copies
that ``tools/build_course.py`` and ``python -m autograder`` make in a temp dir.
"""

import os

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import GetGrades

from autograder.feedback import ClearHiddenTestsInTestCells, SanitizeActiveContent
from autograder.nbgrader_setup import configure

c = get_config()  # noqa: F821 (injected by traitlets' config loader)

c.CourseDirectory.course_id = "kv-course"
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))

# Per-cell limit in seconds (nbgrader's own default is 30). Chapter cells run in
# well under a second; the first import of matplotlib on a fresh machine may
# take a few. `python -m autograder grade --timeout N` overrides it.
c.Execute.timeout = 30
c.Execute.interrupt_on_timeout = True
# No history file written during grading, and one-line tracebacks: a failing
# assert then shows its message, never the neighbouring hidden-test lines.
c.Execute.extra_arguments = ["--HistoryManager.hist_file=:memory:", "--InteractiveShell.xmode=Minimal"]

# Students' code never runs unsandboxed: every notebook nbgrader executes with this config
# (`nbgrader autograde`, the formgrader) runs in the kernel kv-sandboxed (autograder.kernel:
# no network, not this folder, not the solutions; refused where the machine cannot hide the file
# system). KV_COURSE_UNSANDBOXED=1 in the environment runs them on python3 instead, on request.
# Learners' own Validate and Run in JupyterLab use python3 (they never load this file).
# The kernel sees the student nbgrader grades as KV_COURSE_GRADING_STUDENT (the autograde
# preprocessor GradingStudentExecute in place of nbgrader's Execute): per-learner problems (ch09)
# are graded as the submission's own, whatever id the notebook claims.
# Also: feedback pages naming each exercise, maths as MathML (no CDN), quiet known warnings
# (autograder.nbgrader_setup).
configure(c)

# A test cell a student deleted is put back and run (nbgrader's default would
# leave the points to a manual grade).
c.OverwriteCells.add_missing_cells = True

# Feedback shows grades and the student's own work, never the hidden tests
# (cleared from test cells only: a student's cell that merely mentions the marker
# must not cost them their feedback), and nothing of theirs that could run in
# whoever opens it (an instructor, from a Jupyter server holding their token).
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTestsInTestCells, SanitizeActiveContent,
                                    CSSHTMLHeaderPreprocessor]
