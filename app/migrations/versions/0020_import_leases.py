"""import leases, log locations relative to the storage root

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-05

Issue 30: a log's files were stored at the importing replica's absolute path, so a replica
that saw the shared folder under another path took every other log's folder for an orphan and
deleted it. Locations are now keys relative to the storage root (ITSMREVIEW_STORAGE_URL, by
default the data folder), and an import holds a lease (`import_leases`) on the key it stages
under; cleanup removes only what an ended or expired lease names.

This revision creates the lease table and rewrites every absolute `event_logs.events_path`
that lies under the configured local storage root (as configured, or with its links resolved)
into a key relative to it. Others (another folder, or an S3 storage) are left as they are and
named in a warning: move their folder under the root and set the key by hand, or import the
log again. The downgrade keeps the relative keys (they stay readable by nothing older), and
drops the table.
"""

import logging
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

log = logging.getLogger("alembic.runtime.migration")


def upgrade() -> None:
    op.create_table(
        "import_leases",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("holder", sa.String(length=255), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("started_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.Column("expires_at", sqlmodel.sql.sqltypes.UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("key"),
    )
    with op.batch_alter_table("import_leases", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_import_leases_expires_at"), ["expires_at"], unique=False
        )
    relative_locations(op.get_bind())


def relative_locations(bind) -> list[tuple[int, str]]:
    """Rewrite absolute log locations under the storage root into relative keys; return
    (log id, location) of those left as they were."""
    from itsmreview.storage import storage_from_url
    from itsmreview.settings import get_settings

    settings = get_settings()
    storage = storage_from_url(settings.storage_url, data_dir=settings.data_dir)
    roots = []
    if storage.scheme == "file":
        roots = list(dict.fromkeys([Path(storage.root), Path(storage.root).resolve()]))
    rows = bind.execute(
        sa.text("SELECT id, events_path FROM event_logs WHERE events_path IS NOT NULL")
    ).all()
    left = []
    for log_id, location in rows:
        path = Path(location)
        if not path.is_absolute():
            continue
        key = _relative(path, roots)
        if key is None:
            left.append((log_id, location))
            continue
        bind.execute(
            sa.text("UPDATE event_logs SET events_path = :key WHERE id = :id"),
            {"key": key, "id": log_id},
        )
    for log_id, location in left:
        log.warning(
            "event log %s: its files at %s are not under the storage root %s; left as they "
            "are (readers refuse an absolute location): move the folder under the root and "
            "set event_logs.events_path to its relative key, or import the log again",
            log_id,
            location,
            storage.location(),
        )
    return left


def _relative(path: Path, roots: list[Path]) -> str | None:
    for candidate in dict.fromkeys([path, path.resolve()]):
        for root in roots:
            try:
                key = PurePosixPath(candidate.relative_to(root).as_posix())
            except ValueError:
                continue
            if key.parts and ".." not in key.parts:
                return key.as_posix()
    return None


def downgrade() -> None:
    with op.batch_alter_table("import_leases", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_import_leases_expires_at"))
    op.drop_table("import_leases")
