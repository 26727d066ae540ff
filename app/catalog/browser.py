"""The lead's task browser: filtered task list and one task in full."""

import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog import queries
from itsmreview.catalog.importing import show_task
from itsmreview.coverage.variants import sequence_key
from sqlmodel import Session


def task_table(
    *,
    session: Session,
    actor: User,
    personas: list[str] | None = None,
    tracks: list[str] | None = None,
    statuses: list[str] | None = None,
    text: str = "",
    variant_key: str | None = None,
) -> pd.DataFrame:
    """Tasks matching every given filter (empty filter = all). Leads only."""
    require_role(actor, Role.lead)
    frame = queries.browser_frame(session=session)
    if personas:
        frame = frame[frame["persona"].isin(personas)]
    if tracks:
        frame = frame[frame["track"].isin(tracks)]
    if statuses:
        frame = frame[frame["status"].isin(statuses)]
    if text:
        needle = text.lower()
        frame = frame[
            frame["id"].str.lower().str.contains(needle, regex=False)
            | frame["title"].str.lower().str.contains(needle, regex=False)
        ]
    if variant_key:
        frame = frame[
            frame["source"].map(
                lambda s: any(sequence_key(v) == variant_key for v in (s or {}).get("variants", []))
            )
        ]
    return frame.drop(columns=["source"]).reset_index(drop=True)


def task_detail(
    *, session: Session, actor: User, external_id: str, version: int | None = None
) -> dict:
    """A task version in native form with its status. Leads only."""
    require_role(actor, Role.lead)
    return show_task(session=session, external_id=external_id, version=version)


def declared_variants(*, session: Session, actor: User) -> dict[str, str]:
    """Sequence key -> readable sequence of every variant some task declares. Leads only."""
    require_role(actor, Role.lead)
    out = {}
    for source in queries.browser_frame(session=session)["source"]:
        for sequence in (source or {}).get("variants", []):
            out.setdefault(sequence_key(sequence), " → ".join(sequence))
    return dict(sorted(out.items(), key=lambda item: item[1]))


def rating_history(*, session: Session, actor: User, external_id: str) -> pd.DataFrame:
    """All submitted rating revisions of a task with their scores. Leads only (experts never
    see other experts' ratings)."""
    from itsmreview.review.queries import history_frame

    require_role(actor, Role.lead)
    return history_frame(session=session, external_id=external_id)


def turn_notes_of_task(*, session: Session, actor: User, external_id: str) -> pd.DataFrame:
    """Every expert's notes on the turns of the task's transcripts. Leads only."""
    from itsmreview.review.queries import turn_notes

    require_role(actor, Role.lead)
    return turn_notes(session=session, external_id=external_id)
