"""Writing catalog tasks back out in their formats."""

from pathlib import Path

from itsmreview.catalog import queries
from itsmreview.catalog.formats import export_tasks
from itsmreview.catalog.service import version_to_native
from itsmreview.errors import InvalidInput, NotFound
from sqlmodel import Session


def export_catalog(
    dest: Path | str,
    *,
    session: Session,
    fmt: str = "native",
    external_ids: list[str] | None = None,
) -> int:
    """Write the newest version of the chosen tasks (default all) to `dest` in `fmt`.
    Returns the number of tasks written. Raises NotFound or InvalidInput."""
    pairs = queries.latest_versions_of(session=session, external_ids=external_ids)
    if external_ids:
        missing = sorted(set(external_ids) - {t.external_id for t, _ in pairs})
        if missing:
            raise NotFound(f"no task(s) {', '.join(missing)}")
    if not pairs:
        raise NotFound("the catalog has no tasks to export")
    natives = [
        version_to_native(
            task, version, queries.transcripts_of(session=session, task_version_id=version.id)
        )
        for task, version in pairs
    ]
    dest = Path(dest)
    (dest if fmt == "harbor" else dest.parent).mkdir(parents=True, exist_ok=True)
    try:
        export_tasks(natives, fmt, dest)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    return len(natives)
