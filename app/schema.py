"""Imports every table module so that SQLModel.metadata is complete (Alembic, tests)."""

from itsmreview.accounts import models as accounts_models
from itsmreview.catalog import models as catalog_models
from itsmreview.coverage import models as coverage_models
from itsmreview.exports import models as exports_models
from itsmreview.jobs import models as jobs_models
from itsmreview.ledger import models as ledger_models
from itsmreview.realism import models as realism_models
from itsmreview.review import models as review_models
from itsmreview.review.assist import models as assist_models
from itsmreview.summaries import models as summaries_models
from sqlmodel import SQLModel

metadata = SQLModel.metadata

__all__ = [
    "accounts_models",
    "assist_models",
    "catalog_models",
    "coverage_models",
    "exports_models",
    "jobs_models",
    "ledger_models",
    "metadata",
    "realism_models",
    "review_models",
    "summaries_models",
]
