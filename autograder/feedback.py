"""nbgrader preprocessors for the feedback the grading CLI writes (``grade-class --feedback``)."""

from __future__ import annotations

from nbgrader.preprocessors import ClearHiddenTests
from nbgrader.utils import is_grade


class ClearHiddenTestsInTestCells(ClearHiddenTests):
    """nbgrader's ClearHiddenTests on test (grade) cells only.

    The stock preprocessor reads every cell and raises when a student's own
    cell mentions "BEGIN HIDDEN TESTS" (an unmatched marker, or one outside a
    grade cell), which would cost that student their feedback. Hidden tests
    live only in test cells, which autograde restored from the instructor's
    source, so those are the cells to clear.
    """

    def preprocess_cell(self, cell, resources, cell_index):
        if not is_grade(cell):
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)
