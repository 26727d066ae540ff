"""Rounds that tests open on the demo database (test code, never in the wheel)."""

from itsmreview.accounts.queries import user_by_username
from itsmreview.catalog.task_list import task_filters
from itsmreview.db import session_scope
from itsmreview.review.rounds.service import open_round
from itsmreview.review.rubrics.service import load_rubric


def open_round_of_its_own(name: str, external_id: str, expert: str = "expert1") -> None:
    """A round `name` over the imported task `external_id`, `expert` its one member (the
    demo's lead opens it)."""
    with session_scope() as session:
        open_round(
            session=session,
            actor=user_by_username(session=session, username="lead"),
            name=name,
            rubric=load_rubric(),
            filters=task_filters(external_ids=[external_id]),
            k=1,
            members=[expert],
        )
