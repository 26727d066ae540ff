"""Every select of the stored summaries."""

from itsmreview.summaries.models import Summary
from sqlmodel import Session, select


def stored(*, session: Session, kind: str, key: str) -> Summary | None:
    return session.exec(select(Summary).where(Summary.kind == kind, Summary.key == key)).first()


def replace(*, session: Session, summary: Summary) -> None:
    """Store `summary` in place of the one of its kind and key; flushes (the caller commits)."""
    existing = stored(session=session, kind=summary.kind, key=summary.key)
    if existing is None:
        session.add(summary)
    else:
        for name in ("fingerprint", "payload", "computed_at", "seconds"):
            setattr(existing, name, getattr(summary, name))
    session.flush()
