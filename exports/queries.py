import pandas as pd
from itsmreview.db import frame_of
from itsmreview.exports.models import Export
from sqlmodel import Session, select


def exports_frame(*, session: Session) -> pd.DataFrame:
    return frame_of(
        session,
        select(
            Export.name,
            Export.format,
            Export.task_count.label("tasks"),
            Export.content_hash,
            Export.created_at,
        ).order_by(Export.created_at.desc()),
    )
