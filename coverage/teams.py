"""Team mapping: a log's assignment groups (the values of one role attribute) mapped to the
teams practitioners distil them into (BPI 2014's 242 groups into about 20 teams), versioned,
recorded in the ledger, and read by coverage as a role attribute of its own, `team`."""

import csv
import io
from dataclasses import replace
from pathlib import Path

import pandas as pd
import yaml
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.coverage import queries
from itsmreview.coverage.metrics import LogTables, TaskSource
from itsmreview.coverage.models import TeamMapping
from itsmreview.errors import InvalidInput, NotFound
from itsmreview.files import _BoundedLoader, read_text_bounded
from itsmreview.ledger.chain import content_digest
from itsmreview.ledger.service import append_entry
from sqlmodel import Session

TEAM = "team"
LEVEL = "level"  # from the mapping's optional level or role per group
MAX_MAPPING_BYTES = 4 * 2**20
MAX_NAME = 256  # a group, team or level name
SOURCE_KINDS = ("expert", "external")


def _name(value, field: str, where: str) -> str:
    """A group, team or level name: text, at most MAX_NAME characters, no control characters
    (a NUL or a terminal escape sequence would be stored and printed as it is)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        kind = "a mapping" if isinstance(value, dict) else "a list"
        raise InvalidInput(f"{where}: the {field} is {kind}, not a name; write it as text")
    text = value.strip()
    bad = next((ch for ch in text if ord(ch) < 32 or 127 <= ord(ch) < 160), None)
    if bad is not None:
        shown = text[:40].encode("unicode_escape").decode("ascii")
        raise InvalidInput(
            f"{where}: the {field} '{shown}' holds a control character ({bad!r}); names are "
            "plain text"
        )
    if len(text) > MAX_NAME:
        raise InvalidInput(
            f"{where}: the {field} is longer than {MAX_NAME} characters ({text[:40]!r}...)"
        )
    return text


def _entry(group, team, level, where: str) -> tuple[str, str, str]:
    group, team = _name(group, "group", where), _name(team, "team", where)
    if not group or not team:
        raise InvalidInput(f"{where}: a group and its team are both needed")
    return group, team, _name(level, "level", where)


class _TextLoader(_BoundedLoader):
    """YAML whose plain values are all text: a group named ON, NO or 0012 stays that name
    (YAML 1.1 would make them True, False and 10)."""

    yaml_implicit_resolvers: dict = {}


def _parse_yaml_text(text: str, source: str):
    loader = _TextLoader(text)
    loader.name = source
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise InvalidInput(f"{source}: invalid YAML: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise InvalidInput(f"{source}: {exc}") from None
    finally:
        loader.dispose()


def parse_mapping(text: str, source: str) -> tuple[dict[str, str], dict[str, str]]:
    """(group -> team, group -> level) from CSV (`group,team[,level]`; `role` may stand for
    `level`) or YAML (`group: team`, `group: {team, level}`, or a list of such records).
    Raises InvalidInput naming the line or entry.

    >>> parse_mapping("group,team,level\\nTEAM0001,Service desk,L1\\n", "m.csv")
    ({'TEAM0001': 'Service desk'}, {'TEAM0001': 'L1'})
    >>> parse_mapping("TEAM0002: {team: Network, level: L2}\\nTEAM0003: Network\\n", "m.yaml")
    ({'TEAM0002': 'Network', 'TEAM0003': 'Network'}, {'TEAM0002': 'L2'})
    """
    rows: list[tuple[str, str, str]] = []
    if source.lower().endswith(".csv"):
        reader = csv.DictReader(io.StringIO(text))
        header = [h.strip().lower() for h in reader.fieldnames or []]
        if "group" not in header or "team" not in header:
            raise InvalidInput(f"{source}: the first line must name the columns group,team[,level]")
        reader.fieldnames = header
        for line, record in enumerate(reader, start=2):
            level = record.get("level") or record.get("role")
            rows.append(_entry(record.get("group"), record.get("team"), level, f"{source}:{line}"))
    else:
        data = _parse_yaml_text(text, source)
        if isinstance(data, dict):
            items = [
                {"group": g, **(v if isinstance(v, dict) else {"team": v})} for g, v in data.items()
            ]
        elif isinstance(data, list):
            items = data
        else:
            raise InvalidInput(f"{source}: a mapping of groups to teams, or a list of records")
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                raise InvalidInput(f"{source}: entry {index + 1} is not a record")
            level = item.get("level") or item.get("role")
            rows.append(
                _entry(item.get("group"), item.get("team"), level, f"{source}: entry {index + 1}")
            )
    teams, levels = {}, {}
    for group, team, level in rows:
        if group in teams and teams[group] != team:
            raise InvalidInput(
                f"{source}: group {group!r} is mapped to both {teams[group]!r} and {team!r}"
            )
        teams[group] = team
        if level:
            levels[group] = level
    if not teams:
        raise InvalidInput(f"{source}: the mapping is empty")
    return teams, levels


def read_mapping_file(path: Path | str) -> tuple[dict[str, str], dict[str, str]]:
    path = Path(path)
    if not path.is_file():
        raise InvalidInput(f"{path}: no such file")
    try:
        text = read_text_bounded(path, MAX_MAPPING_BYTES, what="team mapping")
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    return parse_mapping(text, path.name)


def _role_attributes(session: Session, log_name: str) -> list[str]:
    log = queries.latest_log(session=session, name=log_name)
    if log is None:
        raise NotFound(f"no log named {log_name!r}; `itsmreview log list` shows the names")
    return list((log.mapping or {}).get("roles") or [])


def set_team_mapping(
    *,
    session: Session,
    actor: User,
    log_name: str,
    teams: dict[str, str],
    levels: dict[str, str] | None = None,
    attribute: str | None = None,
    source_kind: str = "expert",
    reference: str = "",
) -> tuple[TeamMapping, list[str]]:
    """A new version of the log's team mapping (unless it equals the newest), recorded in the
    ledger with its source (an expert's judgement or an external document). Returns it and
    the mapped groups the log does not have. Leads only."""
    require_role(actor, Role.lead)
    attributes = _role_attributes(session, log_name)
    if not attributes:
        raise InvalidInput(f"log {log_name!r} has no role attribute to map to teams")
    attribute = attribute or attributes[0]
    if attribute not in attributes:
        raise InvalidInput(
            f"{attribute!r} is not a role attribute of {log_name!r}: {', '.join(attributes)}"
        )
    if source_kind not in SOURCE_KINDS:
        raise InvalidInput(f"source {source_kind!r} is not one of {', '.join(SOURCE_KINDS)}")
    checked = {}
    for index, (group, team) in enumerate(teams.items(), start=1):
        where = f"mapping entry {index}"
        if _name(team, "team", where):
            checked[_name(group, "group", where)] = _name(team, "team", where)
    teams = checked
    levels = {
        g: _name(v, "level", f"level of {g!r}")
        for g, v in (levels or {}).items()
        if g in teams and v
    }
    if not teams:
        raise InvalidInput("give at least one group its team")
    digest = content_digest({"attribute": attribute, "teams": teams, "levels": levels})
    newest = queries.newest_team_mapping(session=session, log_name=log_name, attribute=attribute)
    known = set(group_table(session=session, log_name=log_name, attribute=attribute)["group"])
    unknown = sorted(set(teams) - known)
    if newest is not None and newest.content_sha256 == digest:
        return newest, unknown
    mapping = TeamMapping(
        log_name=log_name,
        attribute=attribute,
        version=(newest.version + 1) if newest else 1,
        teams=teams,
        levels=levels,
        source_kind=source_kind,
        reference=reference.strip(),
        content_sha256=digest,
        created_by_id=actor.id,
    )
    session.add(mapping)
    session.flush()
    append_entry(
        session=session,
        artifact_type="team_mapping",
        artifact_id=f"{log_name}:{attribute}@v{mapping.version}",
        action="map-teams",
        source_kind=source_kind,
        reference=mapping.reference,
        actor_id=actor.id,
        payload={
            "groups": len(teams),
            "teams": len(set(teams.values())),
            "content_sha256": digest,
        },
    )
    return mapping, unknown


def group_table(*, session: Session, log_name: str, attribute: str | None = None) -> pd.DataFrame:
    """The attribute's values (groups) of the newest log version with their events and cases,
    and the team and level the newest mapping gives them (empty when unmapped)."""
    log = queries.latest_log(session=session, name=log_name)
    if log is None:
        raise NotFound(f"no log named {log_name!r}; `itsmreview log list` shows the names")
    attribute = attribute or next(iter((log.mapping or {}).get("roles") or []), None)
    roles = queries.role_values_frame(session=session, log_id=log.id)
    roles = roles[roles["attribute"] == attribute]
    mapping = queries.newest_team_mapping(session=session, log_name=log_name, attribute=attribute)
    teams = mapping.teams if mapping else {}
    levels = mapping.levels if mapping else {}
    return pd.DataFrame(
        {
            "group": roles["value"].astype(str).to_numpy(),
            "events": roles["event_count"].to_numpy(),
            "cases": roles["case_count"].to_numpy(),
            "team": [teams.get(v, "") for v in roles["value"].astype(str)],
            "level": [levels.get(v, "") for v in roles["value"].astype(str)],
        }
    )


def at_team_level(
    tables: LogTables,
    sources: list[TaskSource],
    attribute: str,
    teams: dict[str, str],
    levels: dict[str, str] | None = None,
) -> tuple[LogTables, list[TaskSource]]:
    """The log's role values and the tasks' declared roles with a `team` attribute added:
    each group's events counted for its team (unmapped groups count for none), and a task
    declaring a group, or a team under `roles.team`, declares that team.

    >>> roles = pd.DataFrame({"attribute": ["g"] * 3, "value": ["a", "b", "c"],
    ...                       "event_count": [5, 3, 2], "case_count": [2, 1, 1]})
    >>> tables = LogTables(None, None, None, None, roles, 3)
    >>> found, tasks = at_team_level(tables, [TaskSource("t", roles={"g": {"a"}})], "g",
    ...                              {"a": "Desk", "b": "Desk", "c": "Net"})
    >>> found.roles[found.roles.attribute == "team"][["value", "event_count"]].values.tolist()
    [['Desk', 8], ['Net', 2]]
    >>> tasks[0].roles["team"]
    {'Desk'}
    """
    groups = tables.roles[tables.roles["attribute"] == attribute]
    derived = [(TEAM, teams)] + ([(LEVEL, levels)] if levels else [])
    parts = [tables.roles]
    for name, of_group in derived:
        mapped = groups.assign(value=groups["value"].astype(str).map(of_group))
        parts.append(
            mapped.dropna(subset=["value"])
            .groupby("value", sort=False)[["event_count", "case_count"]]
            .sum()
            .reset_index()
            .assign(attribute=name)
            .sort_values("event_count", ascending=False, kind="stable")[tables.roles.columns]
        )
    roles = pd.concat(parts, ignore_index=True)
    widened = []
    for source in sources:
        roles_of = dict(source.roles)
        for name, of_group in derived:
            declared = {of_group[g] for g in source.roles.get(attribute, set()) if g in of_group}
            declared |= set(source.roles.get(name, set()))
            if declared:
                roles_of[name] = declared
        widened.append(replace(source, roles=roles_of))
    return replace(tables, roles=roles), widened


def role_attributes(*, session: Session, log_name: str) -> list[str]:
    """The role attributes of the log's newest version, whose values a mapping can map."""
    return _role_attributes(session, log_name)


def mapping_versions(*, session: Session, actor: User, log_name: str) -> pd.DataFrame:
    """Every version of the log's team mappings, newest first. Leads only."""
    require_role(actor, Role.lead)
    rows = [
        {
            "version": m.version,
            "attribute": m.attribute,
            "groups": len(m.teams),
            "teams": len(set(m.teams.values())),
            "source_kind": m.source_kind,
            "reference": m.reference,
            "created_at": m.created_at,
        }
        for m in queries.team_mapping_versions(session=session, log_name=log_name)
    ]
    return pd.DataFrame(
        rows,
        columns=[
            "version",
            "attribute",
            "groups",
            "teams",
            "source_kind",
            "reference",
            "created_at",
        ],
    )
