"""The lead's task browser: filtered task list and one task in full."""

from dataclasses import dataclass

import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog import queries
from itsmreview.catalog.importing import show_task
from itsmreview.sequences import sequence_key
from sqlmodel import Session


@dataclass(frozen=True)
class TaskList:
    """One page of the filtered task list, how many tasks match and how many there are."""

    rows: pd.DataFrame
    matching: int
    total: int


def task_table(
    *, session: Session, actor: User, offset: int = 0, limit: int = 50, **chosen
) -> TaskList:
    """The page of tasks matching every filter `chosen` (`task_filters`' keywords; none = all),
    by persona then id, counted and paged in the database. Leads only."""
    require_role(actor, Role.lead)
    filters = task_filters(**chosen)
    return TaskList(
        rows=queries.task_page(session=session, filters=filters, offset=offset, limit=limit),
        matching=queries.count_tasks(session=session, filters=filters),
        total=queries.count_tasks(session=session),
    )


def task_filters(
    *,
    personas: list[str] | None = None,
    tracks: list[str] | None = None,
    statuses: list[str] | None = None,
    text: str = "",
    variant_key: str | None = None,
    difficulties: list[str] | None = None,
    user_types: list[str] | None = None,
    backbones: list[str] | None = None,
    external_ids: list[str] | None = None,
) -> queries.TaskFilters:
    """The Tasks page's filters as one value (empty = any); the Rounds page selects by it."""
    return queries.TaskFilters(
        personas=tuple(personas or ()),
        tracks=tuple(tracks or ()),
        statuses=tuple(statuses or ()),
        text=text.strip(),
        variant_key=variant_key,
        difficulties=tuple(difficulties or ()),
        user_types=tuple(user_types or ()),
        backbones=tuple(backbones or ()),
        external_ids=tuple(external_ids or ()),
    )


def matching_tasks(
    *, session: Session, filters: queries.TaskFilters, limit: int = 10
) -> tuple[int, int, pd.DataFrame]:
    """How many tasks match, how many of them an open review round holds already, and the
    first `limit` rows as the task list shows them (no role check: callers check theirs)."""
    return (
        queries.count_tasks(session=session, filters=filters),
        queries.count_in_open_rounds(session=session, filters=filters),
        queries.task_page(session=session, filters=filters, limit=limit),
    )


def matching_version_ids(*, session: Session, filters: queries.TaskFilters) -> list[int]:
    """The newest version id of every task matching `filters`."""
    return queries.latest_version_ids(session=session, filters=filters)


def filter_choices(*, session: Session, actor: User) -> dict[str, list[str]]:
    """Personas, tracks and statuses present in the catalog. Leads only."""
    require_role(actor, Role.lead)
    return queries.filter_choices(session=session)


def task_detail(
    *, session: Session, actor: User, external_id: str, version: int | None = None
) -> dict:
    """A task version in native form with its status. Leads only."""
    require_role(actor, Role.lead)
    return show_task(session=session, external_id=external_id, version=version)


def declared_variants(*, session: Session, actor: User) -> dict[str, str]:
    """Sequence key -> readable sequence of every variant some task declares. Leads only."""
    require_role(actor, Role.lead)
    out = {
        key: " → ".join(sequence)
        for key, sequence in queries.declared_variant_sequences(session=session).items()
    }
    return dict(sorted(out.items(), key=lambda item: item[1]))


def tasks_declaring(*, session: Session, actor: User, sequence: list[str]) -> tuple[str, int]:
    """The key of a variant's activity sequence and how many tasks declare it as their source
    (their newest version does): what the Tasks page's source-variant filter selects. Leads."""
    require_role(actor, Role.lead)
    key = sequence_key(sequence)
    return key, queries.count_tasks(session=session, filters=task_filters(variant_key=key))


def personas_and_tracks(*, session: Session) -> tuple[list[str], list[str]]:
    """The personas and tracks of the catalogue's tasks, for filters."""
    return queries.personas_and_tracks(session=session)
