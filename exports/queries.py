import pandas as pd
from itsmreview.exports.models import Export
from sqlmodel import Session, select


def exports_frame(*, session: Session) -> pd.DataFrame:
    rows = session.exec(
        select(
            Export.name, Export.format, Export.task_count, Export.content_hash, Export.created_at
        ).order_by(Export.created_at.desc())
    ).all()
    return pd.DataFrame(
        [tuple(r) for r in rows], columns=["name", "format", "tasks", "content_hash", "created_at"]
    )
