"""Logs that come as several linked tables: the events from one table, case attributes from
the others, joined as the preset documents (docs/formats.md#bpi-challenge-2014-four-tables).

BPI Challenge 2014 (`bpi2014`): the incident activities are the events (case `Incident ID`,
activity `IncidentActivity_Type`, role `Assignment Group`); each incident's row of the
incident table gives its case attributes; the interactions that name the incident (`Related
Incident`) give their count and whether any was resolved at first call; the change the
incident names (`Related Change`) gives its type and risk."""

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

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
from itsmreview.files import is_within

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


def _canonical(name: str) -> str:
    return name.lower().replace(" ", "_")


def linked_files(
    path: Path,
    *,
    incidents: Path | None = None,
    interactions: Path | None = None,
    changes: Path | None = None,
) -> dict[str, Path]:
    """The BPI 2014 tables to read: from a folder holding them (found by their public names,
    `_` or space alike, any case; regular files inside the folder only), or the activity
    file with the others given. Raises ValueError naming what is missing or refused."""
    given = {"incidents": incidents, "interactions": interactions, "changes": changes}
    found: dict[str, Path] = {}
    if path.is_dir():
        names = {_canonical(p.name): p for p in path.iterdir()}
        for table, name in BPI2014_NAMES.items():
            candidate = names.get(_canonical(name)) or names.get(_canonical(name) + ".gz")
            if candidate is None:
                continue
            if not candidate.is_file() or not is_within(path, candidate.resolve()):
                raise ValueError(f"{candidate}: not a regular file inside {path}; refused")
            found[table] = candidate
        if "activities" not in found:
            raise ValueError(
                f"{path}: no {BPI2014_NAMES['activities']} in the folder (the events); the "
                f"folder should hold {', '.join(BPI2014_NAMES.values())}"
            )
    else:
        found["activities"] = path
    for table, extra in given.items():
        if extra is None:
            continue
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


def _read_text_columns(path: Path, columns: list[str], limits: Limits) -> pd.DataFrame:
    """Columns of a `;`-separated Latin-1 table as text (None where the file has no value)."""
    _check_size(path, limits)
    present = csv_columns(path, ";", "latin-1", limits)
    _check_columns(path, columns, present, ";")
    _check_inflated_size(path, limits)
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(encoding="latin-1", block_size=1 << 22),
            parse_options=pacsv.ParseOptions(delimiter=";"),
            convert_options=pacsv.ConvertOptions(
                include_columns=columns,
                column_types=dict.fromkeys(columns, pa.string()),
                null_values=list(NO_VALUE),
                strings_can_be_null=True,
            ),
        )
    except (pa.ArrowInvalid, OSError) as exc:
        raise ValueError(f"{path}: cannot parse the table: {str(exc).splitlines()[0]}") from None
    return table.to_pandas()


def _times(values: pd.Series, column: str, path: Path) -> pd.Series:
    parsed = pd.to_datetime(values, format=STAMP, errors="coerce", utc=True)
    bad = values.notna() & parsed.isna()
    if bad.any():
        rows = (np.flatnonzero(bad.to_numpy())[:5] + 2).tolist()
        raise ValueError(
            f"{path}: {int(bad.sum())} value(s) of {column!r} are not day-first timestamps like "
            f"07-01-2013 08:17:17; first at row(s) {rows}"
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


def read_bpi2014(
    files: dict[str, Path], digests: dict[str, str] | None = None, limits: Limits | None = None
) -> LinkedLog:
    """The events of the activity table and the case attributes the other tables give."""
    limits = limits or Limits.from_settings()
    mapping = PRESETS["bpi2014"]
    events, mapping = read_log(files["activities"], mapping, limits=limits)
    case_ids = pd.Index(events["case_id"].cat.categories, name="case_id")
    cases = pd.DataFrame(index=case_ids)
    tables = {"activities": {"file": files["activities"].name, "rows": len(events)}}
    if "incidents" in files:
        path = files["incidents"]
        columns = ["Incident ID", *[c for c, _ in INCIDENT_ATTRIBUTES.values()]]
        frame = _read_text_columns(path, list(dict.fromkeys(columns)), limits)
        frame = frame.dropna(subset=["Incident ID"]).drop_duplicates("Incident ID", keep="first")
        frame = frame.set_index("Incident ID")
        for name, (column, kind) in INCIDENT_ATTRIBUTES.items():
            values = frame[column]
            if kind == "time":
                values = _times(values, column, path)
            elif kind == "decimal":
                values = _numbers(values, column, path, decimal_comma=True)
            elif kind == "count":
                values = _numbers(values, column, path, decimal_comma=False)
            cases[ATTRIBUTE_PREFIX + name] = values.reindex(case_ids)
        tables["incidents"] = {
            "file": path.name,
            "rows": len(frame),
            "matched_cases": int(case_ids.isin(frame.index).sum()),
        }
    if "interactions" in files:
        path = files["interactions"]
        frame = _read_text_columns(
            path, ["Interaction ID", "Related Incident", "First Call Resolution"], limits
        )
        linked = frame.dropna(subset=["Related Incident"])
        counts = linked.groupby("Related Incident").size()
        cases[ATTRIBUTE_PREFIX + "interactions"] = counts.reindex(case_ids).fillna(0).astype(int)
        tables["interactions"] = {
            "file": path.name,
            "rows": len(frame),
            "linked_to_cases": int(linked["Related Incident"].isin(case_ids).sum()),
        }
    if "changes" in files:
        path = files["changes"]
        frame = _read_text_columns(path, ["Change ID", "Change Type", "Risk Assessment"], limits)
        frame = (
            frame.dropna(subset=["Change ID"]).drop_duplicates("Change ID").set_index("Change ID")
        )
        related = cases.get(ATTRIBUTE_PREFIX + "related_change")
        if related is not None:
            cases[ATTRIBUTE_PREFIX + "change_type"] = related.map(frame["Change Type"])
            cases[ATTRIBUTE_PREFIX + "change_risk"] = related.map(frame["Risk Assessment"])
        tables["changes"] = {
            "file": path.name,
            "rows": len(frame),
            "linked_to_cases": int(related.isin(frame.index).sum()) if related is not None else 0,
        }
    digests = digests or file_digests(files)
    for table in files:
        tables[table]["sha256"] = digests[table]
    return LinkedLog(events, cases.reset_index(), mapping, tables)
