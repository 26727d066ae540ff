from itsmreview.summaries.models import Summary
from sqlalchemy import delete
from sqlmodel import Session, select


def stored(*, session: Session, kind: str, key: str) -> Summary | None:
    return session.exec(select(Summary).where(Summary.kind == kind, Summary.key == key)).first()


def replace(*, session: Session, summary: Summary) -> None:
    """Store `summary` in place of the one of its kind and key (the caller commits)."""
    session.exec(delete(Summary).where(Summary.kind == summary.kind, Summary.key == summary.key))
    session.add(summary)
