"""Reading event logs (CSV, XES, parquet) into one canonical, ordered event table.

The canonical table has the columns `case_id`, `activity`, `timestamp` (UTC),
`resource` and one `role:<attribute>` column per mapped role attribute, sorted by
case order of first appearance, then timestamp, ties kept in file order.
"""

import gzip
import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pandas as pd

ROLE_PREFIX = "role:"
XES_CASE, XES_ACTIVITY, XES_TIMESTAMP, XES_RESOURCE = (
    "case:concept:name",
    "concept:name",
    "time:timestamp",
    "org:resource",
)
MAX_BAD_ROWS_SHOWN = 5


@dataclass(frozen=True)
class ColumnMapping:
    """Where a log keeps case id, activity, timestamp, resource and role attributes."""

    case: str
    activity: str
    timestamp: str
    timestamp_format: str | None = None
    resource: str | None = None
    roles: tuple[str, ...] = ()
    sep: str = ","
    na_values: tuple[str, ...] = ()
    encoding: str = "utf-8-sig"

    def to_dict(self) -> dict:
        return asdict(self)

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()


PRESETS: dict[str, ColumnMapping] = {
    "bpi2013": ColumnMapping(
        case="SR Number",
        activity="Activity",
        timestamp="Change Date+Time",
        timestamp_format="ISO8601",
        resource="Resource",
        roles=(
            "Involved ST",
            "ST Level",
            "Involved Org line 3",
            "Involved ST Function Div",
            "Owner Country",
        ),
    ),
    "bpi2014": ColumnMapping(
        case="Incident ID",
        activity="IncidentActivity_Type",
        timestamp="DateStamp",
        timestamp_format="%d-%m-%Y %H:%M:%S",
        roles=("Assignment Group",),
        sep=";",
    ),
    "uci-incidents": ColumnMapping(
        case="number",
        activity="incident_state",
        timestamp="sys_updated_at",
        timestamp_format="%d/%m/%Y %H:%M",
        resource="assigned_to",
        roles=("assignment_group", "contact_type", "priority"),
        na_values=("?",),
    ),
    "helpdesk": ColumnMapping(
        case=XES_CASE,
        activity=XES_ACTIVITY,
        timestamp=XES_TIMESTAMP,
        timestamp_format="ISO8601",
        resource=XES_RESOURCE,
        roles=("workgroup", "support_section", "responsible_section"),
    ),
}
XES_DEFAULT = replace(PRESETS["helpdesk"], roles=())


def file_sha256(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def log_format(path: Path) -> str:
    name = path.name.lower()
    if name.endswith((".xes", ".xes.gz")):
        return "xes"
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith((".csv", ".csv.gz", ".tsv", ".txt", ".csv.zip")):
        return "csv"
    raise ValueError(
        f"{path}: cannot tell the format from the file name; expected .csv, .csv.gz, .xes, "
        ".xes.gz or .parquet"
    )


def read_raw(path: Path, mapping: ColumnMapping | None) -> pd.DataFrame:
    """The file as a dataframe of strings (CSV) or typed columns (XES, parquet)."""
    fmt = log_format(path)
    if fmt == "xes":
        return _read_xes(path)
    if fmt == "parquet":
        return pd.read_parquet(path)
    if mapping is None:
        raise ValueError(f"{path}: a CSV log needs a column mapping or a preset")
    wanted = [mapping.case, mapping.activity, mapping.timestamp, mapping.resource, *mapping.roles]
    wanted = list(dict.fromkeys(c for c in wanted if c))
    try:
        header = pd.read_csv(path, sep=mapping.sep, encoding=mapping.encoding, nrows=0)
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path}: not readable as {mapping.encoding} ({exc.reason} at byte {exc.start}); "
            "pass the file's encoding, e.g. --encoding latin-1"
        ) from None
    _check_columns(path, wanted, list(header.columns), mapping.sep)
    try:
        return pd.read_csv(
            path,
            sep=mapping.sep,
            encoding=mapping.encoding,
            usecols=wanted,
            dtype=str,
            na_values=list(mapping.na_values) or None,
            keep_default_na=True,
            engine="c",
        )
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path}: not readable as {mapping.encoding} ({exc.reason}); "
            "pass the file's encoding, e.g. --encoding latin-1"
        ) from None


def _read_xes(path: Path) -> pd.DataFrame:
    import pm4py

    if path.name.lower().endswith(".gz"):
        # pm4py's iterparse importer reads .gz itself; keep the check explicit for a clear error.
        with gzip.open(path, "rb") as handle:
            handle.read(1)
    try:
        return pm4py.read_xes(str(path), return_legacy_log_object=False, show_progress_bar=False)
    except TypeError:
        return pm4py.read_xes(str(path))


def _check_columns(path: Path, wanted: list[str], present: list[str], sep: str) -> None:
    missing = [c for c in wanted if c not in present]
    if not missing:
        return
    hint = ""
    if len(present) == 1 and sep in (",", ";", "\t"):
        hint = f" (only one column was found: is the separator {sep!r} right?)"
    raise ValueError(
        f"{path}: mapped column(s) {', '.join(repr(c) for c in missing)} not in the file{hint}; "
        f"columns present: {', '.join(repr(c) for c in present)}"
    )


def _row_numbers(mask: pd.Series, header_rows: int) -> list[int]:
    return [int(i) + 1 + header_rows for i in mask[mask].index[:MAX_BAD_ROWS_SHOWN]]


def normalise(
    raw: pd.DataFrame, mapping: ColumnMapping, *, source: str = "log", header_rows: int = 1
) -> pd.DataFrame:
    """The canonical, ordered event table of `raw`, or ValueError naming the bad rows.

    Row numbers in messages count file lines (header included) for CSV.
    """
    if raw.empty:
        raise ValueError(f"{source}: the log has no events")
    raw = raw.reset_index(drop=True)
    wanted = [mapping.case, mapping.activity, mapping.timestamp, mapping.resource, *mapping.roles]
    _check_columns(Path(source), [c for c in wanted if c], list(raw.columns), mapping.sep)

    def text(column: str) -> pd.Series:
        values = raw[column]
        out = values.astype("string").str.strip()
        return out.mask(out == "")

    case = text(mapping.case)
    activity = text(mapping.activity)
    for label, column, series in (
        ("case id", mapping.case, case),
        ("activity", mapping.activity, activity),
    ):
        missing = series.isna()
        if missing.any():
            raise ValueError(
                f"{source}: {int(missing.sum())} event(s) have no {label} (column {column!r}); "
                f"first at row(s) {_row_numbers(missing, header_rows)}; "
                "fill them or drop those rows"
            )
    timestamp = parse_timestamps(raw[mapping.timestamp], mapping, source, header_rows)
    events = pd.DataFrame({"case_id": case, "activity": activity, "timestamp": timestamp})
    events["resource"] = text(mapping.resource) if mapping.resource else pd.NA
    for role in mapping.roles:
        events[ROLE_PREFIX + role] = text(role)
    events["_row"] = range(len(events))
    first_seen = events.groupby("case_id", sort=False).ngroup()
    events["_case_order"] = first_seen
    events = events.sort_values(["_case_order", "timestamp", "_row"], kind="stable")
    return events.drop(columns=["_row", "_case_order"]).reset_index(drop=True)


def parse_timestamps(
    values: pd.Series, mapping: ColumnMapping, source: str, header_rows: int = 1
) -> pd.Series:
    """Timestamps as UTC; a format that fails on any row is an error, never a guess."""
    if pd.api.types.is_datetime64_any_dtype(values):
        parsed = values
        if getattr(parsed.dt, "tz", None) is None:
            parsed = parsed.dt.tz_localize("UTC")
        return parsed.dt.tz_convert("UTC")
    fmt = mapping.timestamp_format or "ISO8601"
    try:
        parsed = pd.to_datetime(values, format=fmt, utc=True, errors="coerce")
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{source}: timestamp format {fmt!r} is not usable: {exc}") from None
    bad = parsed.isna() & values.notna()
    missing = values.isna()
    if bad.any():
        examples = ", ".join(
            f"row {int(i) + 1 + header_rows}: {values[i]!r}"
            for i in bad[bad].index[:MAX_BAD_ROWS_SHOWN]
        )
        raise ValueError(
            f"{source}: {int(bad.sum())} timestamp(s) in column {mapping.timestamp!r} do not match "
            f"format {fmt!r} ({examples}); give the right --timestamp-format, e.g. "
            "'%d/%m/%Y %H:%M' for day-first dates"
        )
    if missing.any():
        raise ValueError(
            f"{source}: {int(missing.sum())} event(s) have no timestamp (column "
            f"{mapping.timestamp!r}); first at row(s) {_row_numbers(missing, header_rows)}"
        )
    return parsed


def read_log(
    path: Path | str,
    mapping: ColumnMapping | None = None,
    *,
    progress: Callable[[str], None] | None = None,
) -> tuple[pd.DataFrame, ColumnMapping]:
    """Read and normalise the log at `path`; XES without a mapping uses the standard keys."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    fmt = log_format(path)
    if mapping is None and fmt in ("xes", "parquet"):
        mapping = XES_DEFAULT
    if progress:
        progress("reading")
    raw = read_raw(path, mapping)
    if progress:
        progress("ordering events")
    return normalise(raw, mapping, source=str(path), header_rows=1 if fmt == "csv" else 0), mapping


def role_columns(events: pd.DataFrame) -> list[str]:
    return [c for c in events.columns if c.startswith(ROLE_PREFIX)]


__all__ = [
    "PRESETS",
    "ColumnMapping",
    "file_sha256",
    "normalise",
    "read_log",
    "role_columns",
]
