"""The home page's counts, one statement each (platform-wide)."""

from itsmreview.catalog.models import Task
from itsmreview.coverage.models import EventLog
from itsmreview.review.models import Rating, ReviewRound
from sqlalchemy import func
from sqlmodel import Session, select


def platform_counts(*, session: Session) -> dict[str, int]:
    """Event logs, tasks, review rounds and submitted expert ratings."""

    def count(model) -> int:
        return session.exec(select(func.count()).select_from(model)).one()

    return {
        "Event logs": count(EventLog),
        "Tasks": count(Task),
        "Review rounds": count(ReviewRound),
        "Ratings": session.exec(
            select(func.count())
            .select_from(Rating)
            .where(Rating.status == "submitted", Rating.rater_kind == "human")
        ).one(),
    }
