"""Which rounds run as Delphi rounds, and where each stands: light (no numpy or pandas), for
the rounds list that starts without the heavy libraries."""

from itsmreview.review.consensus import queries
from sqlmodel import Session


def delphi_states(*, session: Session) -> dict[int, dict]:
    """Round id -> {mode, phase, stage} of every Delphi round (for the rounds list)."""
    return {
        round_id: {"mode": "delphi", "phase": d.phase, "stage": d.stage}
        for round_id, d in queries.delphi_rounds(session=session).items()
    }
