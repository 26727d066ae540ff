"""Platform-wide figures (the home page's counts)."""

from itsmreview.overview import queries
from sqlmodel import Session


def platform_counts(*, session: Session) -> dict[str, int]:
    """Event logs, tasks, review rounds and submitted expert ratings, by label."""
    return queries.platform_counts(session=session)
