"""Instant checks for the chapters' graded exercises (one module per chapter: ``ch01`` ...).

A test cell reads ``from autograder.checks import ch01`` then ``ch01.check_q1(fn)``.
The machinery shared by every chapter is in ``autograder.checks.core``.
"""
