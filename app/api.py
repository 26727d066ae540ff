"""The Python API a lab's script uses: one import for the steps the CLI runs (docs/api.md).

Every name here is a service function (role-checked where it changes state) or a result
type; the CLI is a thin client of the same functions. The modules behind these names may
move; scripts that import from `itsmreview.api` keep working.

    from itsmreview import api

    api.upgrade_database()
    with api.session_scope() as session:
        result = api.import_log("incidents.csv.gz", session=session, preset="bpi2013")
"""

from itsmreview.accounts.service import create_user, find_user
from itsmreview.catalog.importing import import_path as import_tasks
from itsmreview.catalog.service import latest_version_ids
from itsmreview.coverage.report import coverage_report
from itsmreview.coverage.service import import_log
from itsmreview.db import get_engine, session_scope, upgrade_database
from itsmreview.errors import (
    Conflict,
    InvalidInput,
    ItsmReviewError,
    LedgerIntegrityError,
    NotFound,
    PermissionDenied,
)
from itsmreview.exports.service import export_set, verify_export
from itsmreview.ledger.evidence.service import verify_ledger
from itsmreview.review.gate.item_agreement import round_agreement
from itsmreview.review.ratings.service import submit_rating
from itsmreview.review.rounds.assignment import claim_next
from itsmreview.review.rounds.service import create_round
from itsmreview.review.rubrics.service import ensure_rubric, load_rubric

__all__ = [
    # the database
    "get_engine",
    "session_scope",
    "upgrade_database",
    # people
    "create_user",
    "find_user",
    # event logs and tasks
    "import_log",
    "import_tasks",
    "latest_version_ids",
    # review
    "load_rubric",
    "ensure_rubric",
    "create_round",
    "claim_next",
    "submit_rating",
    # what the review and the logs say
    "round_agreement",
    "coverage_report",
    # exports and provenance
    "export_set",
    "verify_export",
    "verify_ledger",
    # errors
    "ItsmReviewError",
    "InvalidInput",
    "NotFound",
    "Conflict",
    "PermissionDenied",
    "LedgerIntegrityError",
]
