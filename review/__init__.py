"""Rubrics, review rounds, assignment, ratings, agreement and approval."""
