"""Rubrics' statements: a rubric's versions, its hash, the newest of a name."""

from __future__ import annotations

from itsmreview.review.models import Rubric
from sqlmodel import Session, select


def rubric_hash(*, session: Session, rubric_id: int) -> str | None:
    return session.exec(select(Rubric.content_hash).where(Rubric.id == rubric_id)).first()


def rubric_named(*, session: Session, name: str):
    return session.exec(select(Rubric).where(Rubric.name == name).limit(1)).first()


def rubric_names(*, session: Session) -> list[str]:
    """The name of every stored rubric, once, by name."""
    return list(session.exec(select(Rubric.name).distinct().order_by(Rubric.name)))


def rubric_versions(*, session: Session, name: str) -> list:
    """Every stored version of the rubric `name`, newest first."""
    return list(
        session.exec(
            select(Rubric).where(Rubric.name == name).order_by(Rubric.version.desc())
        ).all()
    )
