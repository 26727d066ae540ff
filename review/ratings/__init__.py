"""Ratings: an expert's submitted and draft ratings and turn notes, the expert's queue and view of
an assignment, machine checks of task versions, persona completeness reviews."""
