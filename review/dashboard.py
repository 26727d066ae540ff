"""Numbers for the lead's dashboard."""

from dataclasses import dataclass

import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog.queries import status_counts
from itsmreview.review import queries
from sqlmodel import Session


@dataclass
class Dashboard:
    progress: pd.DataFrame
    task_status: dict[str, int]
    rounds: list[dict]


def dashboard(*, session: Session, actor: User) -> Dashboard:
    """Progress per round and expert, task status counts and the rounds. Leads only."""
    require_role(actor, Role.lead)
    rounds = [
        {"name": r.name, "status": r.status, "k": r.k, "created_at": r.created_at}
        for r in queries.list_rounds(session=session)
    ]
    return Dashboard(
        progress=queries.progress_frame(session=session),
        task_status=status_counts(session=session),
        rounds=rounds,
    )
