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
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Annotated, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from itsmreview.coverage.eventlog import (
    DAY_FIRST,
    PRESETS,
    ColumnMapping,
    csv_columns,
    file_sha256,
    formats_of,
    parse_times,
    read_log,
)
from itsmreview.coverage.filechecks import (
    Limits,
    check_columns,
    check_encoding,
    check_file,
    check_inflated_size,
    csv_error,
)
from itsmreview.files import is_within, parse_yaml, read_text_bounded, safe_join
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

ATTRIBUTE_PREFIX = "attr:"
BPI2014_NAMES = {  # table -> file name of the public release
    "activities": "Detail_Incident_Activity.csv",
    "incidents": "Detail_Incident.csv",
    "interactions": "Detail_Interaction.csv",
    "changes": "Detail_Change.csv",
}
NO_VALUE = ("", "#N/B", "#MULTIVALUE", "NULL")
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
NAME = r"^[A-Za-z][A-Za-z0-9_]{0,63}$"  # an attribute's or a table's name
Formats = str | list[str]  # one timestamp format, or several tried value by value
STRICT = ConfigDict(extra="forbid")


def _column_name(value: str) -> str:
    if not value.strip() or any(ord(ch) < 32 or 127 <= ord(ch) < 160 for ch in value):
        raise ValueError(
            f"column name {value!r} is empty or holds control characters; give the header's name"
        )
    return value


Column = Annotated[str, AfterValidator(_column_name)]
AttributeName = Annotated[str, Field(pattern=NAME)]


class CaseAttribute(BaseModel):
    model_config = STRICT
    column: Column
    kind: Kind = "text"
    format: Formats | None = None  # a time column's own format(s), over its table's


class CaseTable(BaseModel):
    """One row per case: its attributes."""

    model_config = STRICT
    table: str
    id: Column
    attributes: dict[AttributeName, CaseAttribute] = Field(min_length=1)


class CountedTable(BaseModel):
    """Rows that name a case in `link`: how many there are, as attribute `attribute`."""

    model_config = STRICT
    table: str
    link: Column
    attribute: AttributeName


class LookupTable(BaseModel):
    """A row a case attribute (`via`) names by its `id`: some of its columns, as attributes."""

    model_config = STRICT
    table: str
    id: Column
    via: str
    attributes: dict[AttributeName, Column] = Field(min_length=1)


class EventsTable(BaseModel):
    model_config = STRICT
    table: str
    case: Column
    activity: Column
    timestamp: Column
    resource: Column | None = None
    roles: list[Column] = Field(default_factory=list)


class LinkedSpec(BaseModel):
    """How a log of linked tables joins: which file is which table, how they are read, and
    what each table gives the cases."""

    model_config = STRICT
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    files: dict[Annotated[str, Field(pattern=NAME)], str] = Field(min_length=1)
    optional: list[str] = Field(default_factory=list)  # tables whose file may be absent
    separator: str = Field(default=",", min_length=1, max_length=1)
    encoding: str = "utf-8"
    timestamp_format: Formats = "ISO8601"
    timestamp_formats: dict[str, Formats] = Field(default_factory=dict)  # per table
    missing: list[str] = Field(default_factory=lambda: [""])
    events: EventsTable
    cases: CaseTable | None = None
    counted: list[CountedTable] = Field(default_factory=list)
    lookups: list[LookupTable] = Field(default_factory=list)
    events_preset: str | None = None  # read the events table exactly as this preset does

    @field_validator("files")
    @classmethod
    def _plain_names(cls, files: dict[str, str]) -> dict[str, str]:
        for table, name in files.items():
            posix, windows = PurePosixPath(name.replace("\\", "/")), PureWindowsPath(name)
            if not name.strip() or "\x00" in name or not posix.name:
                raise ValueError(f"{table}: {name!r} is not a file name")
            if posix.is_absolute() or windows.drive or windows.root or ".." in posix.parts:
                raise ValueError(
                    f"{table}: {name!r} leaves the folder (an absolute path or '..'); name a "
                    "file inside the folder"
                )
        return files

    @field_validator("encoding")
    @classmethod
    def _text_codec(cls, encoding: str) -> str:
        check_encoding(encoding)
        return encoding

    @field_validator("timestamp_format", "timestamp_formats")
    @classmethod
    def _some_format(cls, value):
        for formats in value.values() if isinstance(value, dict) else [value]:
            if not formats_of(formats) or not all(f.strip() for f in formats_of(formats)):
                raise ValueError("a timestamp format is empty; give a strftime format or ISO8601")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> "LinkedSpec":
        named = {self.events.table} | {t.table for t in (*self.counted, *self.lookups)}
        if self.cases:
            named.add(self.cases.table)
        unknown = sorted(
            (named | set(self.timestamp_formats) | set(self.optional)) - set(self.files)
        )
        if unknown:
            raise ValueError(f"tables {unknown} have no file under `files`")
        if self.events.table in self.optional:
            raise ValueError(f"the events table {self.events.table!r} cannot be optional")
        if self.events_preset is not None and self.events_preset not in PRESETS:
            raise ValueError(f"events_preset {self.events_preset!r} is not a preset")
        given: dict[str, str] = {}
        sources = [("cases.attributes", n) for n in (self.cases.attributes if self.cases else [])]
        sources += [(f"counted[{i}].attribute", t.attribute) for i, t in enumerate(self.counted)]
        sources += [
            (f"lookups[{i}].attributes", n)
            for i, t in enumerate(self.lookups)
            for n in t.attributes
        ]
        for where, name in sources:
            if name in given:
                raise ValueError(
                    f"attribute {name!r} is given by both {given[name]} and {where}; rename one"
                )
            given[name] = where
        case_attributes = sorted(self.cases.attributes) if self.cases else []
        for i, lookup in enumerate(self.lookups):
            if lookup.via not in case_attributes:
                raise ValueError(
                    f"lookups[{i}].via: {lookup.via!r} is not an attribute of the cases table "
                    f"(they are: {', '.join(case_attributes) or 'none, there is no cases table'})"
                )
        return self

    def formats(self, table: str, column_format: Formats | None = None) -> Formats:
        """The timestamp format(s) of a column: its own, else its table's, else the spec's."""
        return column_format or self.timestamp_formats.get(table) or self.timestamp_format

    def mapping(self) -> ColumnMapping:
        if self.events_preset:
            # the preset's columns, read with the spec's separator and encoding
            return replace(PRESETS[self.events_preset], sep=self.separator, encoding=self.encoding)
        formats = formats_of(self.formats(self.events.table))
        return ColumnMapping(
            case=self.events.case,
            activity=self.events.activity,
            timestamp=self.events.timestamp,
            timestamp_format=None
            if formats == ("ISO8601",)
            else (formats[0] if len(formats) == 1 else formats),
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
    optional=["incidents", "interactions", "changes"],
    separator=";",
    encoding="latin-1",
    timestamp_format=list(DAY_FIRST),
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
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a spec is a mapping of fields (name, files, events, ...)")
    try:
        return LinkedSpec.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"{path}: {_problems(exc)}") from None


def _problems(exc: ValidationError) -> str:
    said = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"] if p != "[key]")
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "string_pattern_mismatch":
            message = (
                f"{error['input']!r} is not a usable name: letters, digits and _, starting "
                "with a letter, at most 64"
            )
        if error["type"] == "extra_forbidden":
            message = "unknown field (misspelt?); see docs/formats.md#logs-of-linked-tables"
        said.append(f"{where}: {message}" if where else message)
    return "; ".join(said)


def _canonical(name: str) -> str:
    return name.lower().replace(" ", "_")


def linked_files(
    path: Path,
    spec: LinkedSpec = BPI2014,
    given: dict[str, Path | None] | None = None,
    limits: Limits | None = None,
) -> dict[str, Path]:
    """The tables to read: from a folder holding them (found by the spec's file names, `_` or
    space alike, any case, `.gz` too), or the events file with the others `given` by table.
    Each must be a regular file (no FIFO or device; in a folder, no link out of it) within the
    size limit, checked from its metadata before anything reads or hashes it. A table the spec
    does not list as optional must be there. Raises ValueError naming what is missing or
    refused."""
    limits = limits or Limits.from_settings()
    given = {k: v for k, v in (given or {}).items() if v is not None}
    unknown = sorted(set(given) - set(spec.files))
    if unknown:
        raise ValueError(f"{spec.name} has no table {', '.join(unknown)}")
    found: dict[str, Path] = {}
    events = spec.events.table
    if path.is_dir():
        names = {_canonical(p.name): p for p in path.iterdir()}
        for table, name in spec.files.items():
            candidate = safe_join(path, name) if ("/" in name or "\\" in name) else None
            if candidate is None or not (candidate.exists() or candidate.is_symlink()):
                candidate = names.get(_canonical(name)) or names.get(_canonical(name) + ".gz")
            if candidate is None:
                if table == events:
                    raise ValueError(
                        f"{path}: no {spec.files[events]} in the folder (the events); the folder "
                        f"should hold {', '.join(spec.files.values())}"
                    )
                if table in spec.optional or table in given:
                    continue
                raise ValueError(
                    f"{path}: no file {name!r} for table {table!r} (files.{table}); the folder "
                    "holds " + (", ".join(sorted(p.name for p in names.values())[:20]) or "nothing")
                )
            if candidate.is_symlink() and not is_within(path, candidate):
                raise ValueError(f"{candidate}: not a regular file inside {path}; refused")
            check_file(candidate, limits, what=f"{table} table")
            found[table] = candidate
    else:
        check_file(path, limits, what=f"{events} table")
        found[events] = path
    for table, extra in given.items():
        if table in found and path.is_dir():
            raise ValueError(f"--{table} was given, but {path} holds {found[table].name} too")
        check_file(Path(extra), limits, what=f"--{table} table")
        found[table] = Path(extra)
    return found


def _needed_columns(spec: LinkedSpec, table: str) -> list[str]:
    """The columns read from `table` (its events columns come from the mapping)."""
    columns: list[str] = []
    if spec.cases and spec.cases.table == table:
        columns += [spec.cases.id, *[a.column for a in spec.cases.attributes.values()]]
    columns += [c.link for c in spec.counted if c.table == table]
    for lookup in spec.lookups:
        if lookup.table == table:
            columns += [lookup.id, *lookup.attributes.values()]
    return list(dict.fromkeys(columns))


def check_tables(
    files: dict[str, Path],
    spec: LinkedSpec,
    mapping: ColumnMapping | None = None,
    limits: Limits | None = None,
) -> None:
    """Each table's header read from a bounded sample (a binary, NUL-filled or undecodable
    file is refused at once) and checked for the columns the spec reads from it, before the
    files are hashed or parsed. Raises ValueError naming the file and the columns."""
    limits = limits or Limits.from_settings()
    mapping = mapping or spec.mapping()
    for table, path in files.items():
        if table == spec.events.table:
            wanted = [mapping.case, mapping.activity, mapping.timestamp, mapping.resource]
            wanted = [c for c in [*wanted, *mapping.roles] if c]
            present = csv_columns(path, mapping.sep, mapping.encoding, limits)
        else:
            wanted = _needed_columns(spec, table)
            present = csv_columns(path, spec.separator, spec.encoding, limits)
        check_columns(path, wanted, present, spec.separator)


def file_digests(files: dict[str, Path]) -> dict[str, str]:
    return {table: file_sha256(path) for table, path in files.items()}


def combined_sha256(digests: dict[str, str]) -> str:
    """One digest of the tables: sha256 over `table:sha256` lines in table order.

    >>> combined_sha256({"b": "2", "a": "1"}) == combined_sha256({"a": "1", "b": "2"})
    True
    """
    lines = [f"{table}:{digests[table]}" for table in sorted(digests)]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


ROW = "__row"  # each value's line in its file, kept through filtering for messages


def _read_text_columns(
    path: Path, columns: list[str], spec: LinkedSpec, limits: Limits
) -> pd.DataFrame:
    """Columns of a table as text (None where the file has no value), with ROW: the file
    line of each row (header = line 1)."""
    check_file(path, limits)
    present = csv_columns(path, spec.separator, spec.encoding, limits)
    check_columns(path, columns, present, spec.separator)
    check_inflated_size(path, limits)
    block_size = min(1 << 22, limits.max_row_bytes)
    encoding = "utf8" if spec.encoding.lower().replace("_", "-") in ("utf-8", "utf8") else None
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(
                encoding=encoding or spec.encoding, block_size=block_size
            ),
            parse_options=pacsv.ParseOptions(delimiter=spec.separator),
            convert_options=pacsv.ConvertOptions(
                include_columns=columns,
                column_types=dict.fromkeys(columns, pa.string()),
                null_values=list(spec.missing),
                strings_can_be_null=True,
            ),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError, OSError, EOFError) as exc:
        raise ValueError(csv_error(path, exc, spec.encoding, block_size)) from None
    frame = table.to_pandas()
    frame[ROW] = np.arange(len(frame)) + 2
    return frame


def _times(
    values: pd.Series, rows: np.ndarray, column: str, path: Path, formats: Formats, limits: Limits
) -> pd.Series:
    """A time column in UTC (NaT where missing), read as parse_times reads event times:
    formats tried value by value, the year bounds, the file's rows named."""
    micros = parse_times(
        pa.array(values.to_numpy(dtype=object), pa.string(), from_pandas=True),
        formats,
        column=column,
        source=str(path),
        rows=rows,
        limits=limits,
        allow_missing=True,
    )
    stamps = pc.cast(micros, pa.timestamp("us", tz="UTC")).to_pandas()
    return pd.Series(stamps.to_numpy(), index=values.index).astype("datetime64[ns, UTC]")


# one convention per kind: `count` whole numbers from 0, `number` a decimal point
# (3.8744, 1e3), `decimal` a decimal comma (3,8744, 1.234,5: points only between thousands
# and only with a comma); infinities and NaN are no numbers
NUMBER_PATTERNS = {
    "count": (r"\+?\d{1,18}", "whole numbers from 0 (like 3)"),
    "number": (
        r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,3})?",
        "numbers with a decimal point (like 3.8744)",
    ),
    "decimal": (
        r"[+-]?(?:\d+|\d{1,3}(?:\.\d{3})+(?=,))(?:,\d+)?",
        "numbers with a decimal comma (like 3,8744)",
    ),
}


def _numbers(values: pd.Series, rows: np.ndarray, column: str, path: Path, kind: str) -> pd.Series:
    pattern, described = NUMBER_PATTERNS[kind]
    text = values.str.strip()
    bad = values.notna() & ~text.str.fullmatch(pattern).fillna(False).astype(bool)
    if kind == "decimal":
        text = text.str.replace(".", "", regex=False).str.replace(",", ".", regex=False)
    parsed = pd.to_numeric(text.where(~bad), errors="coerce")
    bad |= values.notna() & ~np.isfinite(parsed.fillna(0.0))
    if bad.any():
        shown = [
            f"row {int(r)}: {v!r}"
            for r, v in zip(rows[bad.to_numpy()][:5], values[bad][:5], strict=True)
        ]
        other = {
            "decimal": "; a decimal point? give the column kind number",
            "number": "; a decimal comma? give the column kind decimal",
            "count": "",
        }[kind]
        raise ValueError(
            f"{path}: {int(bad.sum())} value(s) of {column!r} are not {described} "
            f"({', '.join(shown)}){other}"
        )
    return parsed.astype("Int64") if kind == "count" else parsed


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
    mapping: ColumnMapping | None = None,
) -> LinkedLog:
    """The events of the spec's events table (read with `mapping` if given, else the spec's)
    and the case attributes the others give."""
    limits = limits or Limits.from_settings()
    mapping = mapping or spec.mapping()
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
        rows = frame[ROW].to_numpy()
        for name, attribute in table.attributes.items():
            values, column = frame[attribute.column], attribute.column
            if attribute.kind == "time":
                formats = spec.formats(table.table, attribute.format)
                values = _times(values, rows, column, path, formats, limits)
            elif attribute.kind in ("decimal", "count", "number"):
                values = _numbers(values, rows, column, path, attribute.kind)
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
        # the spec checked that `via` is a case attribute; without the cases table's file
        # (an optional table) there is nothing to look up by
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
