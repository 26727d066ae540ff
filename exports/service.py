import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.exports import queries
from sqlmodel import Session


def list_exports(*, session: Session, actor: User) -> pd.DataFrame:
    """Exports made so far, newest first. Leads only."""
    require_role(actor, Role.lead)
    return queries.exports_frame(session=session)
