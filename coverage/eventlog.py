"""Reading event logs (CSV, XES, parquet) into one canonical, ordered event table.

The canonical table has the columns `case_id`, `activity`, `timestamp` (UTC),
`resource` and one `role:<attribute>` column per mapped role attribute, sorted by
case order of first appearance, then timestamp, ties kept in file order.
"""

import csv
import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from itsmreview.coverage.filechecks import (
    Limits,
    check_columns,
    check_encoding,
    check_file,
    check_inflated_size,
    check_size,
    check_unique,
    check_xes,
    corrupt_message,
    csv_error,
    header_sample,
)

ROLE_PREFIX = "role:"
COUNTER_PREFIX = "counter:"  # a per-event counter column of the event table, before import
XES_CASE, XES_ACTIVITY, XES_TIMESTAMP, XES_RESOURCE = (
    "case:concept:name",
    "concept:name",
    "time:timestamp",
    "org:resource",
)
MAX_BAD_ROWS_SHOWN = 5
# BPI 2014's tables write day-first times four ways: `07-01-2013 08:17:17` (activities),
# `05/02/2012 13:32:57` (incidents), `9-9-2011 9:23` (interactions), and slashes without
# seconds; a value is read by the first of these forms that fits it
DAY_FIRST = ("%d-%m-%Y %H:%M:%S", "%d/%m/%Y %H:%M:%S", "%d-%m-%Y %H:%M", "%d/%m/%Y %H:%M")


@dataclass(frozen=True)
class ColumnMapping:
    """Where a log keeps case id, activity, timestamp, resource and role attributes."""

    case: str
    activity: str
    timestamp: str
    # one strftime format, "ISO8601", or several tried value by value in order
    timestamp_format: str | tuple[str, ...] | None = None
    resource: str | None = None
    roles: tuple[str, ...] = ()
    sep: str = ","
    na_values: tuple[str, ...] = ()
    encoding: str = "utf-8-sig"
    # (attribute, column): a running count the log keeps on every event of a case (UCI's
    # `reassignment_count`); the case's highest value becomes case attribute `attribute`
    counters: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict:
        found = asdict(self)
        if not self.counters:
            del found["counters"]  # digests of mappings without counters stay as they were
        return found

    def columns(self) -> list[str]:
        """The file's columns this mapping reads, each once, in order."""
        named = [self.case, self.activity, self.timestamp, self.resource, *self.roles]
        named += [column for _, column in self.counters]
        return list(dict.fromkeys(c for c in named if c))

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
        timestamp_format=DAY_FIRST,
        roles=("Assignment Group",),
        sep=";",
        na_values=("#N/B",),
        encoding="latin-1",
    ),
    "uci-incidents": ColumnMapping(
        case="number",
        activity="incident_state",
        timestamp="sys_updated_at",
        timestamp_format="%d/%m/%Y %H:%M",
        resource="assigned_to",
        roles=("assignment_group", "contact_type", "priority"),
        na_values=("?",),
        counters=(("reassignments", "reassignment_count"), ("reopens", "reopen_count")),
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


ARROW_UTF8 = {"utf-8", "utf8", "utf-8-sig", "utf_8", "utf_8_sig"}


SMALL_CSV_BYTES = 64 * 2**20


def csv_columns(
    path: Path, sep: str = ",", encoding: str = "utf-8-sig", limits: Limits | None = None
) -> list[str]:
    """The column names in the header of a CSV log (plain or compressed), read from a bounded
    sample. Raises ValueError for an unknown encoding or an undecodable or binary header."""
    check_encoding(encoding)
    if len(sep) != 1:
        raise ValueError(f"separator {sep!r} must be a single character, e.g. ',' or ';'")
    header = header_sample(path, limits or Limits.from_settings())
    try:
        text = header.decode(encoding).rstrip("\r")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path}: not readable as {encoding} ({exc.reason} at byte {exc.start} of the "
            "header); pass the file's encoding, e.g. --encoding latin-1"
        ) from None
    return next(csv.reader([text.lstrip("\ufeff")], delimiter=sep), [])


CANDIDATE_SEPARATORS = (",", ";", "\t", "|")


def guess_separator(path: Path, limits: Limits | None = None) -> str:
    """The separator of a CSV log's header: the candidate (`,` `;` tab `|`) that splits it
    into the most columns outside quotes, `,` when none splits it. Reads a bounded sample.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> (folder / "bpi.csv").write_text('"Incident ID";"DateStamp";"IncidentActivity_Type"')
    49
    >>> guess_separator(folder / "bpi.csv")
    ';'
    """
    text = header_sample(path, limits or Limits.from_settings()).decode("latin-1")

    def columns(sep: str) -> int:
        return len(next(csv.reader([text], delimiter=sep), []))

    best = max(CANDIDATE_SEPARATORS, key=lambda sep: (columns(sep), sep == ","))
    return best if columns(best) > 1 else ","


def log_columns(path: Path, sep: str = ",", encoding: str = "utf-8-sig") -> list[str]:
    """The columns a mapping can name: a CSV header or a parquet schema."""
    if log_format(path) == "parquet":
        return list(pq.read_schema(path).names)
    return csv_columns(path, sep, encoding)


def read_raw(path: Path, mapping: ColumnMapping | None, limits: Limits | None = None) -> pa.Table:
    """The file as an Arrow table: CSV columns as text, XES and parquet columns as typed."""
    limits = limits or Limits.from_settings()
    fmt = log_format(path)
    check_size(path, limits)
    if fmt == "xes":
        frame = _read_xes(path, limits)
        if mapping is not None:
            mapping = fit_standard_keys(mapping, list(frame.columns))
            wanted = mapping.columns()
            # checked here, against every key the file has, before the others are dropped
            check_columns(path, wanted, [str(c) for c in frame.columns], mapping.sep)
            frame = frame[wanted]
        return pa.Table.from_pandas(frame, preserve_index=False)
    if fmt == "parquet":
        try:
            return pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as exc:
            raise ValueError(f"{path}: not a readable parquet file ({exc})") from None
    if mapping is None:
        raise ValueError(f"{path}: a CSV log needs a column mapping or a preset")
    wanted = mapping.columns()
    present = csv_columns(path, mapping.sep, mapping.encoding, limits)
    check_columns(path, wanted, present, mapping.sep)
    check_unique(path, wanted, present)
    encoding = "utf8" if mapping.encoding.lower() in ARROW_UTF8 else mapping.encoding
    # text columns are dictionary-encoded while parsing (in parallel), timestamps stay text
    dictionary = pa.dictionary(pa.int32(), pa.string())
    types = {c: pa.string() if c == mapping.timestamp else dictionary for c in wanted}
    # small logs: smaller blocks from the system allocator, so reading a 1 MiB file does not
    # reserve tens of MiB of parsing buffers (large ones parse faster in 4 MiB blocks)
    small = path.stat().st_size < SMALL_CSV_BYTES
    block_size = min((1 << 20) if small else (1 << 22), limits.max_row_bytes)
    check_inflated_size(path, limits)
    try:
        table = pacsv.read_csv(
            path,
            memory_pool=pa.system_memory_pool() if small else None,
            read_options=pacsv.ReadOptions(encoding=encoding, block_size=block_size),
            parse_options=pacsv.ParseOptions(delimiter=mapping.sep),
            convert_options=pacsv.ConvertOptions(
                include_columns=wanted,
                column_types=types,
                null_values=["", *mapping.na_values],
                strings_can_be_null=True,
                quoted_strings_can_be_null=False,
            ),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError, OSError, EOFError) as exc:
        raise ValueError(csv_error(path, exc, mapping.encoding, block_size)) from None
    return table.unify_dictionaries()


def fit_standard_keys(mapping: ColumnMapping, present: list[str]) -> ColumnMapping:
    """An XES or parquet mapping fitted to the keys the file has: `org:resource`, the standard
    resource key, is read only when the file has it (many XES files, BPI 2014's conversion
    among them, have none); every other key stays required."""
    if mapping.resource == XES_RESOURCE and XES_RESOURCE not in present:
        return replace(mapping, resource=None)
    return mapping


def standard_mapping(
    *,
    case: str | None = None,
    activity: str | None = None,
    timestamp: str | None = None,
    timestamp_format: str | tuple[str, ...] | None = None,
    resource: str | None = None,
    roles: tuple[str, ...] = (),
) -> ColumnMapping:
    """A mapping for an XES or parquet log: the standard XES keys (`case:concept:name`,
    `concept:name`, `time:timestamp`, `org:resource` where present) for whatever is not given.

    >>> standard_mapping(roles=("workgroup",)).case
    'case:concept:name'
    """
    return replace(
        XES_DEFAULT,
        case=case or XES_CASE,
        activity=activity or XES_ACTIVITY,
        timestamp=timestamp or XES_TIMESTAMP,
        timestamp_format=timestamp_format or XES_DEFAULT.timestamp_format,
        resource=resource or XES_RESOURCE,
        roles=tuple(roles),
    )


def _read_xes(path: Path, limits: Limits) -> pd.DataFrame:
    import pm4py
    from lxml import etree

    check_xes(path, limits)
    try:
        try:
            frame = pm4py.read_xes(
                str(path), return_legacy_log_object=False, show_progress_bar=False
            )
        except TypeError:
            frame = pm4py.read_xes(str(path))
    except etree.XMLSyntaxError as exc:
        raise ValueError(f"{path}: not a well-formed XES (XML) file: {exc}") from None
    except (OSError, EOFError) as exc:
        raise ValueError(corrupt_message(path, exc)) from None
    if frame is None or len(frame) == 0:
        raise ValueError(f"{path}: the XES file holds no events")
    return frame


def _rows(mask: np.ndarray, header_rows: int) -> list[int]:
    return [int(i) + 1 + header_rows for i in np.flatnonzero(mask)[:MAX_BAD_ROWS_SHOWN]]


def _text(column: pa.ChunkedArray) -> pa.ChunkedArray:
    if pa.types.is_dictionary(column.type):
        column = column.cast(column.type.value_type)
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        column = pc.cast(column, pa.string())
    return column


def _null_mask(column: pa.ChunkedArray) -> np.ndarray:
    return pc.is_null(column).to_numpy(zero_copy_only=False)


def _shares_dictionary(column: pa.ChunkedArray) -> bool:
    """Whether every chunk uses one dictionary (as after Table.unify_dictionaries)."""
    if column.num_chunks <= 1:
        return True
    first = column.chunk(0).dictionary
    address = [b.address if b is not None else 0 for b in first.buffers()]
    return all(
        [b.address if b is not None else 0 for b in chunk.dictionary.buffers()] == address
        for chunk in column.chunks
    )


def encode(column: pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """Codes (-1 = missing) and labels in order of first appearance, with surrounding white
    space trimmed and empty text treated as missing. Trims the distinct values only."""
    if not (pa.types.is_dictionary(column.type) and pa.types.is_string(column.type.value_type)):
        column = pa.chunked_array([pc.dictionary_encode(_text(column).combine_chunks())])
    elif not _shares_dictionary(column):
        column = column.unify_dictionaries()
    dictionary = column.chunk(0).dictionary if column.num_chunks else pa.array([], pa.string())
    trimmed = pc.utf8_trim_whitespace(dictionary).to_numpy(zero_copy_only=False)
    remap, labels = pd.factorize(trimmed.astype(object), sort=False)
    remap = np.append(remap, -1)  # index -1 (missing) maps to -1
    empty = np.flatnonzero(np.asarray(labels, dtype=object) == "")
    if len(empty):
        remap[remap == empty[0]] = -1
        remap[remap > empty[0]] -= 1
        labels = np.delete(np.asarray(labels, dtype=object), empty[0])
    parts = [pc.fill_null(chunk.indices, -1).to_numpy() for chunk in column.chunks]
    indices = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
    return remap[indices].astype(np.int32), [str(x) for x in labels]


def _encode_checked(table: pa.Table, column: str, source: str) -> tuple[np.ndarray, list[str]]:
    """`encode` of a column whose values may be stored as text: no NUL characters."""
    codes, labels = encode(table.column(column))
    bad = next((label for label in labels if "\x00" in label), None)
    if bad is not None:
        raise ValueError(nul_message(source, column, bad))
    return codes, labels


def nul_message(source: str, column: str, value: str) -> str:
    return (
        f"{source}: column {column!r} has a value with a NUL character ({value[:40]!r}); "
        "text with NUL cannot be stored: clean the export"
    )


def missing_values_message(source: str, count: int, label: str, column: str, rows) -> str:
    return (
        f"{source}: {count} event(s) have no {label} (column {column!r}); "
        f"first at row(s) {list(rows)}; fill them or drop those rows"
    )


def normalise(
    raw: pd.DataFrame | pa.Table,
    mapping: ColumnMapping,
    *,
    source: str = "log",
    header_rows: int = 1,
    limits: Limits | None = None,
) -> pd.DataFrame:
    """The canonical, ordered event table of `raw`, or ValueError naming the bad rows.

    Row numbers in messages count file lines (header included) for CSV. Text columns come
    back as categoricals whose categories are in order of first appearance.
    """
    table = raw if isinstance(raw, pa.Table) else pa.Table.from_pandas(raw, preserve_index=False)
    if table.num_rows == 0:
        raise ValueError(f"{source}: the log has no events")
    check_columns(Path(source), mapping.columns(), table.column_names, mapping.sep)
    case_codes, case_labels = _encode_checked(table, mapping.case, source)
    act_codes, act_labels = _encode_checked(table, mapping.activity, source)
    for label, column, codes in (
        ("case id", mapping.case, case_codes),
        ("activity", mapping.activity, act_codes),
    ):
        missing = codes < 0
        if missing.any():
            raise ValueError(
                missing_values_message(
                    source, int(missing.sum()), label, column, _rows(missing, header_rows)
                )
            )
    stamps = parse_timestamps(table.column(mapping.timestamp), mapping, source, header_rows, limits)
    same_case = case_codes[1:] == case_codes[:-1]
    ordered = bool(np.all(case_codes[1:] >= case_codes[:-1])) and bool(
        np.all(stamps[1:][same_case] >= stamps[:-1][same_case])
    )
    # sorting by case code keeps cases in order of first appearance; lexsort is stable
    order = None if ordered else np.lexsort((stamps, case_codes))

    def categorical(codes: np.ndarray, labels: list[str]) -> pd.Categorical:
        return pd.Categorical.from_codes(
            codes if order is None else codes[order], categories=labels
        )

    events = pd.DataFrame(
        {
            "case_id": categorical(case_codes, case_labels),
            "activity": categorical(act_codes, act_labels),
            "timestamp": pd.to_datetime(
                stamps if order is None else stamps[order], unit="ns", utc=True
            ),
        }
    )
    if mapping.resource:
        events["resource"] = categorical(*_encode_checked(table, mapping.resource, source))
    else:
        events["resource"] = pd.Categorical.from_codes(np.full(len(events), -1), categories=[])
    for role in mapping.roles:
        events[ROLE_PREFIX + role] = categorical(*_encode_checked(table, role, source))
    for attribute, column in mapping.counters:
        counts = _counts(table.column(column), column, source, header_rows)
        events[COUNTER_PREFIX + attribute] = counts if order is None else counts[order]
    return events


def _counts(values: pa.ChunkedArray, column: str, source: str, header_rows: int) -> np.ndarray:
    """A counter column as float64 (NaN where missing); ValueError naming the rows of a value
    that is not a whole number of at least 0."""
    text = pd.Series(_text(values).to_numpy(zero_copy_only=False), dtype=object)
    numbers = pd.to_numeric(text.str.strip(), errors="coerce").to_numpy(dtype=np.float64)
    with np.errstate(invalid="ignore"):
        bad = text.notna().to_numpy() & ~((numbers >= 0) & (numbers == np.floor(numbers)))
    if bad.any():
        shown = ", ".join(
            f"row {r}: {text.iloc[r - 1 - header_rows]!r}" for r in _rows(bad, header_rows)
        )
        raise ValueError(
            f"{source}: {int(bad.sum())} value(s) of counter column {column!r} are not whole "
            f"numbers of 0 or more ({shown}); fix them or mark them missing"
        )
    return numbers


def case_counters(events: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """The event table without its counter columns, and the cases' counters (case_id and one
    `attr:<name>` column each: the highest value on the case's events), None without any."""
    named = [c for c in events.columns if c.startswith(COUNTER_PREFIX)]
    if not named:
        return events, None
    per_case = events.groupby("case_id", observed=True, sort=False)[named].max().reset_index()
    per_case = per_case.rename(columns={c: "attr:" + c[len(COUNTER_PREFIX) :] for c in named})
    return events.drop(columns=named), per_case


def formats_of(timestamp_format: str | tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
    """The formats a mapping's `timestamp_format` stands for, in the order they are tried.

    >>> formats_of(None), formats_of("%d/%m/%Y %H:%M"), formats_of(["%Y", "%Y-%m"])
    (('ISO8601',), ('%d/%m/%Y %H:%M',), ('%Y', '%Y-%m'))
    """
    if not timestamp_format:
        return ("ISO8601",)
    if isinstance(timestamp_format, str):
        return (timestamp_format,)
    return tuple(timestamp_format)


def _described(formats: tuple[str, ...]) -> str:
    if len(formats) == 1:
        return f"format {formats[0]!r}"
    return "any of the formats " + ", ".join(repr(f) for f in formats)


def _examples(values: pa.ChunkedArray, mask: np.ndarray, rows: np.ndarray) -> str:
    return ", ".join(
        f"row {int(rows[int(i)])}: {values[int(i)].as_py()!r}"
        for i in np.flatnonzero(mask)[:MAX_BAD_ROWS_SHOWN]
    )


def _casts(values: pa.ChunkedArray, target: pa.DataType) -> bool:
    try:
        pc.cast(values, target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


def parse_format(values: pa.ChunkedArray, fmt: str, source: str) -> pa.ChunkedArray:
    """Microseconds since the epoch (UTC) of each value `fmt` reads, null where it does not."""
    if fmt == "ISO8601":
        # at most one of the two reads a column with a value; a cast that fails costs some
        # 30 times one that reads, so the one that reads the first values goes first
        zoned, naive = pa.timestamp("us", tz="UTC"), pa.timestamp("us")
        targets = (naive, zoned) if _casts(values.slice(0, 64), naive) else (zoned, naive)
        for target in targets:
            try:
                return pc.cast(pc.cast(values, target), pa.int64())
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                continue
        as_pandas = pd.Series(values.to_numpy(zero_copy_only=False), dtype=object)
        converted = pd.to_datetime(as_pandas, format="ISO8601", utc=True, errors="coerce")
        return pa.chunked_array([pc.cast(pa.array(converted.dt.as_unit("us")), pa.int64())])
    try:
        parsed = pc.strptime(values, format=fmt, unit="us", error_is_null=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValueError(f"{source}: timestamp format {fmt!r} is not usable: {exc}") from None
    return pc.cast(parsed, pa.int64())


def parse_times(
    values: pa.ChunkedArray | pa.Array,
    timestamp_format: str | tuple[str, ...] | list[str] | None,
    *,
    column: str,
    source: str,
    rows: np.ndarray | None = None,
    header_rows: int = 1,
    limits: Limits | None = None,
    allow_missing: bool = False,
) -> pa.ChunkedArray:
    """Microseconds since the epoch, UTC (int64, null where a value is missing), of a column
    of timestamps. Text is read with the given format(s) (strftime or `ISO8601`; with several,
    each value by the first that reads it) and is UTC without an offset. A value no format
    reads, a missing one (unless `allow_missing`) or a year outside the bounds is an error
    naming `source`, `column` and the first rows (`rows`: each value's file row; by default
    its position after `header_rows`), never a guess or a wrap-around.

    >>> text = pa.array(["05/02/2012 13:32:57", "9-9-2011 9:23"])
    >>> us = parse_times(text, DAY_FIRST, column="t", source="x.csv")
    >>> [str(pd.Timestamp(v, unit="us")) for v in us.to_pylist()]
    ['2012-02-05 13:32:57', '2011-09-09 09:23:00']
    """
    limits = limits or Limits.from_settings()
    if isinstance(values, pa.Array):
        values = pa.chunked_array([values])
    if rows is None:
        rows = np.arange(len(values)) + 1 + header_rows
    if pa.types.is_timestamp(values.type):
        unit_values = values if values.type.tz else pc.assume_timezone(values, "UTC")
        try:
            micros = pc.cast(
                pc.cast(unit_values, pa.timestamp("us", tz="UTC"), safe=False), pa.int64()
            )
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise ValueError(f"{source}: unreadable timestamps in {column!r}: {exc}") from None
        formats: tuple[str, ...] = ("timestamp",)
    else:
        values = pc.utf8_trim_whitespace(_text(values))
        formats = formats_of(timestamp_format)
        micros = None
        for fmt in formats:
            one = parse_format(values, fmt, source)
            micros = one if micros is None else pc.coalesce(micros, one)
            if micros.null_count == values.null_count:
                break  # every value read: the later forms need not be tried
    given_null = _null_mask(values)
    bad = _null_mask(micros) & ~given_null
    if bad.any():
        raise ValueError(
            unmatched_times_message(
                source, int(bad.sum()), column, formats, _examples(values, bad, rows)
            )
        )
    if given_null.any() and not allow_missing:
        raise ValueError(
            missing_times_message(
                source, int(given_null.sum()), column, rows[given_null][:MAX_BAD_ROWS_SHOWN]
            )
        )
    outside = ~given_null & outside_years(micros, limits)
    if outside.any():
        raise ValueError(
            outside_years_message(
                source, int(outside.sum()), column, limits, _examples(values, outside, rows)
            )
        )
    return micros


def outside_years(micros: pa.ChunkedArray | pa.Array, limits: Limits) -> np.ndarray:
    """Where microseconds since the epoch lie outside the years `limits` allow (missing: no)."""
    us = micros.to_numpy(zero_copy_only=False)
    low = int(pd.Timestamp(year=limits.min_year, month=1, day=1).value // 1000)
    high = int(pd.Timestamp(year=limits.max_year + 1, month=1, day=1).value // 1000)
    with np.errstate(invalid="ignore"):
        return (us < low) | (us >= high)


def unmatched_times_message(
    source: str, count: int, column: str, formats: tuple[str, ...], examples: str
) -> str:
    return (
        f"{source}: {count} timestamp(s) in column {column!r} do not match "
        f"{_described(formats)} ({examples}); give the right "
        "timestamp format, e.g. '%d/%m/%Y %H:%M' for day-first dates"
    )


def missing_times_message(source: str, count: int, column: str, rows) -> str:
    return (
        f"{source}: {count} event(s) have no timestamp (column {column!r}); "
        f"first at row(s) {[int(r) for r in rows]}"
    )


def outside_years_message(
    source: str, count: int, column: str, limits: Limits, examples: str
) -> str:
    return (
        f"{source}: {count} timestamp(s) in column {column!r} lie outside the "
        f"years {limits.min_year}-{limits.max_year} ({examples}); "
        "correct them, or widen ITSMREVIEW_TIMESTAMP_MIN_YEAR / _MAX_YEAR"
    )


def parse_timestamps(
    values: pa.ChunkedArray,
    mapping: ColumnMapping,
    source: str,
    header_rows: int = 1,
    limits: Limits | None = None,
) -> np.ndarray:
    """The mapping's timestamp column as int64 nanoseconds since the epoch, UTC (see
    `parse_times`: every event needs one)."""
    micros = parse_times(
        values,
        mapping.timestamp_format,
        column=mapping.timestamp,
        source=source,
        header_rows=header_rows,
        limits=limits,
    )
    # inside the year bounds the conversion to nanoseconds cannot overflow
    return micros.to_numpy(zero_copy_only=False).astype(np.int64) * 1000


def read_log(
    path: Path | str,
    mapping: ColumnMapping | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    limits: Limits | None = None,
) -> tuple[pd.DataFrame, ColumnMapping]:
    """Read and normalise the log at `path`; XES without a mapping uses the standard keys."""
    path = Path(path)
    limits = limits or Limits.from_settings()
    check_file(path, limits)
    fmt = log_format(path)
    if mapping is None and fmt in ("xes", "parquet"):
        mapping = XES_DEFAULT
    if progress:
        progress("reading")
    raw = read_raw(path, mapping, limits)
    if fmt in ("xes", "parquet"):
        mapping = fit_standard_keys(mapping, raw.column_names)
    if progress:
        progress("ordering events")
    header_rows = 1 if fmt == "csv" else 0
    events = normalise(raw, mapping, source=str(path), header_rows=header_rows, limits=limits)
    return events, mapping


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
