"""Each task item's spread in a Delphi round (delphi_spreads): written by the gate's work in
phase 1 and by each revision after, counted by a phase change."""

from itsmreview.db import in_ids
from itsmreview.review.models import DelphiRound, DelphiSpread
from sqlalchemy import delete, func, insert
from sqlmodel import Session, select


def collects_blind_spreads(*, session: Session, round_id: int) -> bool:
    """Whether the round is a Delphi round in its blind phase (the gate keeps its spreads)."""
    query = select(DelphiRound.round_id).where(
        DelphiRound.round_id == round_id, DelphiRound.stage == "rating"
    )
    return session.exec(query).first() is not None


def blind_phase_over(*, session: Session, round_id: int) -> bool:
    """Whether the round is a Delphi round whose blind phase has ended (its ratings are
    phase 1's answers, frozen). Share-locks its Delphi row on PostgreSQL until the caller's
    transaction ends: a phase change (which locks it for update) waits for a submit that
    read it, and a submit waits for a phase change under way."""
    query = select(DelphiRound.stage).where(DelphiRound.round_id == round_id)
    if session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(read=True)
    stage = session.exec(query).first()
    return stage is not None and stage != "rating"


def replace_spreads(
    *, session: Session, round_id: int, tasks: list[int], spreads: dict[tuple[int, str], float]
) -> None:
    """The spreads of these tasks become `spreads` ((task version id, item) -> IQR): those of
    their items without an answer are gone."""
    if not tasks:
        return
    session.exec(
        delete(DelphiSpread).where(
            DelphiSpread.round_id == round_id, in_ids(session, DelphiSpread.task_version_id, tasks)
        )
    )
    if spreads:
        session.connection().execute(
            insert(DelphiSpread.__table__),
            [
                {"round_id": round_id, "task_version_id": task, "item": item, "iqr": float(iqr)}
                for (task, item), iqr in spreads.items()
            ],
        )


def clear_spreads(*, session: Session, round_id: int) -> None:
    session.exec(delete(DelphiSpread).where(DelphiSpread.round_id == round_id))


def wide_count(*, session: Session, round_id: int, iqr_max: float) -> int:
    """How many task items' answers spread wider than `iqr_max`."""
    query = select(func.count()).where(
        DelphiSpread.round_id == round_id, DelphiSpread.iqr > iqr_max
    )
    return int(session.exec(query).one())


def wide_tasks(*, session: Session, round_id: int, iqr_max: float) -> set[int]:
    """The tasks with an item whose answers spread wider than `iqr_max`."""
    query = (
        select(DelphiSpread.task_version_id)
        .where(DelphiSpread.round_id == round_id, DelphiSpread.iqr > iqr_max)
        .distinct()
    )
    return {int(t) for t in session.exec(query).all()}
