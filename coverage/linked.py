"""Logs that come as several linked tables: the events from one table, case attributes from
the others, joined as a `LinkedSpec` says (docs/formats.md#logs-of-linked-tables): a case table
(one row per case: its attributes), counted tables (rows naming a case: how many), and lookup
tables (a row a case attribute names: some of its columns).

BPI Challenge 2014 (`bpi2014`) is the built-in spec: the incident activities are the events
(case `Incident ID`, activity `IncidentActivity_Type`, role `Assignment Group`); each
incident's row gives its case attributes; the interactions that name the incident (`Related
Incident`) their count; the change the incident names (`Related Change`) its type and risk.
Other exports (a ServiceNow incident table with its audit trail) are read with a spec file."""

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
from itsmreview.coverage.eventlog import (
    PRESETS,
    ColumnMapping,
    Limits,
    _check_columns,
    _check_inflated_size,
    _check_size,
    csv_columns,
    file_sha256,
    read_log,
)
from itsmreview.files import is_within, parse_yaml, read_text_bounded
from pydantic import BaseModel, Field, ValidationError

ATTRIBUTE_PREFIX = "attr:"
BPI2014_NAMES = {  # table -> file name of the public release
    "activities": "Detail_Incident_Activity.csv",
    "incidents": "Detail_Incident.csv",
    "interactions": "Detail_Interaction.csv",
    "changes": "Detail_Change.csv",
}
NO_VALUE = ("", "#N/B", "#MULTIVALUE", "NULL")
STAMP = "%d-%m-%Y %H:%M:%S"
# case attribute -> (incident column, kind)
INCIDENT_ATTRIBUTES = {
    "priority": ("Priority", "text"),
    "impact": ("Impact", "text"),
    "urgency": ("Urgency", "text"),
    "category": ("Category", "text"),
    "ci_type": ("CI Type (aff)", "text"),
    "ci_subtype": ("CI Subtype (aff)", "text"),
    "ci_name": ("CI Name (aff)", "text"),
    "closure_code": ("Closure Code", "text"),
    "reassignments": ("# Reassignments", "count"),
    "open_time": ("Open Time", "time"),
    "resolved_time": ("Resolved Time", "time"),
    "close_time": ("Close Time", "time"),
    "handle_time_hours": ("Handle Time (Hours)", "decimal"),
    "related_change": ("Related Change", "text"),
}


Kind = Literal["text", "time", "decimal", "count", "number"]


class CaseAttribute(BaseModel):
    column: str
    kind: Kind = "text"


class CaseTable(BaseModel):
    """One row per case: its attributes."""

    table: str
    id: str
    attributes: dict[str, CaseAttribute] = Field(min_length=1)


class CountedTable(BaseModel):
    """Rows that name a case in `link`: how many there are, as attribute `attribute`."""

    table: str
    link: str
    attribute: str


class LookupTable(BaseModel):
    """A row a case attribute (`via`) names by its `id`: some of its columns, as attributes."""

    table: str
    id: str
    via: str
    attributes: dict[str, str] = Field(min_length=1)


class EventsTable(BaseModel):
    table: str
    case: str
    activity: str
    timestamp: str
    resource: str | None = None
    roles: list[str] = Field(default_factory=list)


class LinkedSpec(BaseModel):
    """How a log of linked tables joins: which file is which table, how they are read, and
    what each table gives the cases."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    files: dict[str, str] = Field(min_length=1)  # table -> its file's name in the folder
    separator: str = ","
    encoding: str = "utf-8"
    timestamp_format: str = "ISO8601"
    missing: list[str] = Field(default_factory=lambda: [""])
    events: EventsTable
    cases: CaseTable | None = None
    counted: list[CountedTable] = Field(default_factory=list)
    lookups: list[LookupTable] = Field(default_factory=list)
    events_preset: str | None = None  # read the events table exactly as this preset does

    def mapping(self) -> ColumnMapping:
        if self.events_preset:
            return PRESETS[self.events_preset]
        return ColumnMapping(
            case=self.events.case,
            activity=self.events.activity,
            timestamp=self.events.timestamp,
            timestamp_format=None if self.timestamp_format == "ISO8601" else self.timestamp_format,
            resource=self.events.resource,
            roles=tuple(self.events.roles),
            sep=self.separator,
            na_values=tuple(m for m in self.missing if m),
            encoding=self.encoding,
        )


BPI2014 = LinkedSpec(
    name="bpi2014",
    events_preset="bpi2014",
    files=dict(BPI2014_NAMES),
    separator=";",
    encoding="latin-1",
    timestamp_format=STAMP,
    missing=list(NO_VALUE),
    events=EventsTable(
        table="activities",
        case="Incident ID",
        activity="IncidentActivity_Type",
        timestamp="DateStamp",
        roles=["Assignment Group"],
    ),
    cases=CaseTable(
        table="incidents",
        id="Incident ID",
        attributes={
            name: CaseAttribute(column=column, kind=kind)
            for name, (column, kind) in INCIDENT_ATTRIBUTES.items()
        },
    ),
    counted=[CountedTable(table="interactions", link="Related Incident", attribute="interactions")],
    lookups=[
        LookupTable(
            table="changes",
            id="Change ID",
            via="related_change",
            attributes={"change_type": "Change Type", "change_risk": "Risk Assessment"},
        )
    ],
)
MAX_SPEC_BYTES = 2**20


def spec_from_file(path: Path | str) -> LinkedSpec:
    """A linked-tables spec from YAML. Raises ValueError naming the file and the field."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such spec file")
    data = parse_yaml(read_text_bounded(path, MAX_SPEC_BYTES, what="linked-tables spec"), path)
    try:
        spec = LinkedSpec.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ValueError(f"{path}: {problems}") from None
    named = {spec.events.table} | {t.table for t in (*spec.counted, *spec.lookups)}
    if spec.cases:
        named.add(spec.cases.table)
    unknown = sorted(named - set(spec.files))
    if unknown:
        raise ValueError(f"{path}: tables {unknown} have no file under `files`")
    return spec


def _canonical(name: str) -> str:
    return name.lower().replace(" ", "_")


def linked_files(
    path: Path, spec: LinkedSpec = BPI2014, given: dict[str, Path | None] | None = None
) -> dict[str, Path]:
    """The tables to read: from a folder holding them (found by the spec's file names, `_` or
    space alike, any case, `.gz` too; regular files inside the folder only), or the events
    file with the others `given` by table. Raises ValueError naming what is missing or refused."""
    given = {k: v for k, v in (given or {}).items() if v is not None}
    unknown = sorted(set(given) - set(spec.files))
    if unknown:
        raise ValueError(f"{spec.name} has no table {', '.join(unknown)}")
    found: dict[str, Path] = {}
    events = spec.events.table
    if path.is_dir():
        names = {_canonical(p.name): p for p in path.iterdir()}
        for table, name in spec.files.items():
            candidate = names.get(_canonical(name)) or names.get(_canonical(name) + ".gz")
            if candidate is None:
                continue
            if not candidate.is_file() or not is_within(path, candidate.resolve()):
                raise ValueError(f"{candidate}: not a regular file inside {path}; refused")
            found[table] = candidate
        if events not in found:
            raise ValueError(
                f"{path}: no {spec.files[events]} in the folder (the events); the folder should "
                f"hold {', '.join(spec.files.values())}"
            )
    else:
        found[events] = path
    for table, extra in given.items():
        if table in found and path.is_dir():
            raise ValueError(f"--{table} was given, but {path} holds {found[table].name} too")
        if not Path(extra).is_file():
            raise ValueError(f"{extra}: no such file (--{table})")
        found[table] = Path(extra)
    return found


def file_digests(files: dict[str, Path]) -> dict[str, str]:
    return {table: file_sha256(path) for table, path in files.items()}


def combined_sha256(digests: dict[str, str]) -> str:
    """One digest of the tables: sha256 over `table:sha256` lines in table order.

    >>> combined_sha256({"b": "2", "a": "1"}) == combined_sha256({"a": "1", "b": "2"})
    True
    """
    lines = [f"{table}:{digests[table]}" for table in sorted(digests)]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _read_text_columns(
    path: Path, columns: list[str], spec: LinkedSpec, limits: Limits
) -> pd.DataFrame:
    """Columns of a table as text (None where the file has no value)."""
    _check_size(path, limits)
    present = csv_columns(path, spec.separator, spec.encoding, limits)
    _check_columns(path, columns, present, spec.separator)
    _check_inflated_size(path, limits)
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(
                encoding="utf8" if spec.encoding.lower() in ("utf-8", "utf8") else spec.encoding,
                block_size=1 << 22,
            ),
            parse_options=pacsv.ParseOptions(delimiter=spec.separator),
            convert_options=pacsv.ConvertOptions(
                include_columns=columns,
                column_types=dict.fromkeys(columns, pa.string()),
                null_values=list(spec.missing),
                strings_can_be_null=True,
            ),
        )
    except (pa.ArrowInvalid, OSError) as exc:
        raise ValueError(f"{path}: cannot parse the table: {str(exc).splitlines()[0]}") from None
    return table.to_pandas()


def _times(values: pd.Series, column: str, path: Path, stamp: str) -> pd.Series:
    parsed = pd.to_datetime(values, format=stamp, errors="coerce", utc=True)
    bad = values.notna() & parsed.isna()
    if bad.any():
        rows = (np.flatnonzero(bad.to_numpy())[:5] + 2).tolist()
        example = "like 07-01-2013 08:17:17" if stamp == STAMP else f"in the format {stamp}"
        raise ValueError(
            f"{path}: {int(bad.sum())} value(s) of {column!r} are not timestamps {example}; "
            f"first at row(s) {rows}"
        )
    return parsed


def _numbers(values: pd.Series, column: str, path: Path, *, decimal_comma: bool) -> pd.Series:
    text = values.str.replace(".", "", regex=False).str.replace(",", ".", regex=False)
    parsed = pd.to_numeric(text if decimal_comma else values, errors="coerce")
    bad = values.notna() & parsed.isna()
    if bad.any():
        rows = (np.flatnonzero(bad.to_numpy())[:5] + 2).tolist()
        raise ValueError(
            f"{path}: {int(bad.sum())} value(s) of {column!r} are not numbers"
            + (" with a decimal comma (3,8744)" if decimal_comma else "")
            + f"; first at row(s) {rows}"
        )
    return parsed


@dataclass
class LinkedLog:
    events: pd.DataFrame  # the canonical events (eventlog.normalise)
    cases: pd.DataFrame  # case_id and one attr:<name> column per case attribute
    mapping: ColumnMapping
    tables: dict = field(default_factory=dict)  # per table: file, rows, sha256, matched


def read_linked(
    files: dict[str, Path],
    spec: LinkedSpec = BPI2014,
    digests: dict[str, str] | None = None,
    limits: Limits | None = None,
) -> LinkedLog:
    """The events of the spec's events table and the case attributes the others give."""
    limits = limits or Limits.from_settings()
    mapping = spec.mapping()
    events, mapping = read_log(files[spec.events.table], mapping, limits=limits)
    case_ids = pd.Index(events["case_id"].cat.categories, name="case_id")
    cases = pd.DataFrame(index=case_ids)
    tables = {spec.events.table: {"file": files[spec.events.table].name, "rows": len(events)}}
    if spec.cases and spec.cases.table in files:
        table = spec.cases
        path = files[table.table]
        columns = [table.id, *[a.column for a in table.attributes.values()]]
        frame = _read_text_columns(path, list(dict.fromkeys(columns)), spec, limits)
        frame = frame.dropna(subset=[table.id]).drop_duplicates(table.id, keep="first")
        frame = frame.set_index(table.id)
        for name, attribute in table.attributes.items():
            values, column = frame[attribute.column], attribute.column
            if attribute.kind == "time":
                values = _times(values, column, path, spec.timestamp_format)
            elif attribute.kind in ("decimal", "count", "number"):
                values = _numbers(values, column, path, decimal_comma=attribute.kind == "decimal")
            cases[ATTRIBUTE_PREFIX + name] = values.reindex(case_ids)
        tables[table.table] = {
            "file": path.name,
            "rows": len(frame),
            "matched_cases": int(case_ids.isin(frame.index).sum()),
        }
    for counted in spec.counted:
        if counted.table not in files:
            continue
        path = files[counted.table]
        frame = _read_text_columns(path, [counted.link], spec, limits)
        linked = frame.dropna(subset=[counted.link])
        counts = linked.groupby(counted.link).size()
        cases[ATTRIBUTE_PREFIX + counted.attribute] = counts.reindex(case_ids).fillna(0).astype(int)
        tables[counted.table] = {
            "file": path.name,
            "rows": len(frame),
            "linked_to_cases": int(linked[counted.link].isin(case_ids).sum()),
        }
    for lookup in spec.lookups:
        if lookup.table not in files:
            continue
        path = files[lookup.table]
        columns = list(dict.fromkeys([lookup.id, *lookup.attributes.values()]))
        frame = _read_text_columns(path, columns, spec, limits)
        frame = frame.dropna(subset=[lookup.id]).drop_duplicates(lookup.id).set_index(lookup.id)
        via = cases.get(ATTRIBUTE_PREFIX + lookup.via)
        if via is not None:
            for name, column in lookup.attributes.items():
                cases[ATTRIBUTE_PREFIX + name] = via.map(frame[column])
        tables[lookup.table] = {
            "file": path.name,
            "rows": len(frame),
            "linked_to_cases": int(via.isin(frame.index).sum()) if via is not None else 0,
        }
    digests = digests or file_digests(files)
    for table in files:
        tables[table]["sha256"] = digests[table]
    return LinkedLog(events, cases.reset_index(), mapping, tables)
