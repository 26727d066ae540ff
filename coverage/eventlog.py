"""Reading event logs (CSV, XES, parquet) into one canonical, ordered event table.

The canonical table has the columns `case_id`, `activity`, `timestamp` (UTC),
`resource` and one `role:<attribute>` column per mapped role attribute, sorted by
case order of first appearance, then timestamp, ties kept in file order.
"""

import bz2
import codecs
import csv
import gzip
import hashlib
import json
import lzma
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

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


@dataclass(frozen=True)
class Limits:
    """Bounds checked while reading a log, before they can fill memory."""

    max_bytes: int = 4 * 2**30
    max_row_bytes: int = 4 * 2**20
    min_year: int = 1970
    max_year: int = 2100

    @classmethod
    def from_settings(cls) -> "Limits":
        from itsmreview.settings import get_settings

        settings = get_settings()
        return cls(
            settings.max_log_bytes,
            settings.max_log_row_bytes,
            settings.timestamp_min_year,
            settings.timestamp_max_year,
        )


_OPENERS = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}


def _compression(path: Path):
    return _OPENERS.get(path.suffix.lower())


def _check_inflated_size(path: Path, limits: Limits) -> None:
    """For a compressed file, inflate it once in bounded blocks and stop as soon as it passes
    the size limit: a 1 MB archive can hold terabytes of zeros. Uncompressed files are
    checked by their size alone."""
    opener = _compression(path)
    if opener is None:
        return
    total = 0
    try:
        with opener(path, "rb") as handle:
            while block := handle.read(1 << 20):
                total += len(block)
                if total > limits.max_bytes:
                    raise ValueError(
                        f"{path}: decompresses to more than {limits.max_bytes:,} bytes; raise "
                        "ITSMREVIEW_MAX_LOG_BYTES if the log really is this large"
                    )
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise ValueError(_corrupt(path, exc)) from None


def _corrupt(path: Path, exc: BaseException) -> str:
    return (
        f"{path}: the compressed file is truncated or corrupt ({exc}); download or compress it "
        "again"
    )


def _check_size(path: Path, limits: Limits) -> None:
    size = path.stat().st_size
    if size > limits.max_bytes:
        raise ValueError(
            f"{path}: {size:,} bytes, over the limit of {limits.max_bytes:,}; raise "
            "ITSMREVIEW_MAX_LOG_BYTES if the log really is this large"
        )


def check_encoding(encoding: str) -> None:
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise ValueError(
            f"unknown encoding {encoding!r}; use a Python codec name such as utf-8, latin-1 or "
            "cp1252"
        ) from None


def _header_sample(path: Path, limits: Limits) -> bytes:
    """The file's first row (decompressed), read in a bounded amount."""
    opener = _compression(path)
    try:
        with opener(path, "rb") if opener else open(path, "rb") as handle:
            sample = handle.read(min(limits.max_row_bytes, 1 << 20))
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise ValueError(_corrupt(path, exc)) from None
    if not sample.strip():
        raise ValueError(f"{path}: the file is empty; a CSV log starts with a header row")
    end = sample.find(b"\n")
    header = sample if end < 0 else sample[:end]
    if b"\x00" in header:
        raise ValueError(
            f"{path}: the first row holds NUL bytes, so this is not a text CSV file (a binary "
            "or sparse file?); export the log as CSV text"
        )
    if end < 0 and len(sample) >= min(limits.max_row_bytes, 1 << 20):
        raise ValueError(
            f"{path}: the header row is longer than {len(sample):,} bytes; is this a CSV log?"
        )
    return header


def csv_columns(
    path: Path, sep: str = ",", encoding: str = "utf-8-sig", limits: Limits | None = None
) -> list[str]:
    """The column names in the header of a CSV log (plain or compressed), read from a bounded
    sample. Raises ValueError for an unknown encoding or an undecodable or binary header."""
    check_encoding(encoding)
    if len(sep) != 1:
        raise ValueError(f"separator {sep!r} must be a single character, e.g. ',' or ';'")
    header = _header_sample(path, limits or Limits.from_settings())
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
    text = _header_sample(path, limits or Limits.from_settings()).decode("latin-1")

    def columns(sep: str) -> int:
        return len(next(csv.reader([text], delimiter=sep), []))

    best = max(CANDIDATE_SEPARATORS, key=lambda sep: (columns(sep), sep == ","))
    return best if columns(best) > 1 else ","


def _check_unique(path: Path, wanted: list[str], present: list[str]) -> None:
    """A mapped column whose name the header repeats is ambiguous: refuse it, naming both
    places (unmapped repeated names are harmless)."""
    for name in wanted:
        at = [i for i, column in enumerate(present, start=1) if column == name]
        if len(at) > 1:
            raise ValueError(
                f"{path}: column name {name!r} appears {len(at)} times in the header (columns "
                f"{', '.join(map(str, at))}); rename the copies so that the mapped column is "
                "named once"
            )


def log_columns(path: Path, sep: str = ",", encoding: str = "utf-8-sig") -> list[str]:
    """The columns a mapping can name: a CSV header or a parquet schema."""
    if log_format(path) == "parquet":
        return list(pq.read_schema(path).names)
    return csv_columns(path, sep, encoding)


def read_raw(path: Path, mapping: ColumnMapping | None, limits: Limits | None = None) -> pa.Table:
    """The file as an Arrow table: CSV columns as text, XES and parquet columns as typed."""
    limits = limits or Limits.from_settings()
    fmt = log_format(path)
    _check_size(path, limits)
    if fmt == "xes":
        frame = _read_xes(path, limits)
        if mapping is not None:
            wanted = [
                mapping.case,
                mapping.activity,
                mapping.timestamp,
                mapping.resource,
                *mapping.roles,
            ]
            frame = frame[[c for c in dict.fromkeys(wanted) if c and c in frame.columns]]
        return pa.Table.from_pandas(frame, preserve_index=False)
    if fmt == "parquet":
        try:
            return pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as exc:
            raise ValueError(f"{path}: not a readable parquet file ({exc})") from None
    if mapping is None:
        raise ValueError(f"{path}: a CSV log needs a column mapping or a preset")
    wanted = [mapping.case, mapping.activity, mapping.timestamp, mapping.resource, *mapping.roles]
    wanted = list(dict.fromkeys(c for c in wanted if c))
    present = csv_columns(path, mapping.sep, mapping.encoding, limits)
    _check_columns(path, wanted, present, mapping.sep)
    _check_unique(path, wanted, present)
    encoding = "utf8" if mapping.encoding.lower() in ARROW_UTF8 else mapping.encoding
    # text columns are dictionary-encoded while parsing (in parallel), timestamps stay text
    dictionary = pa.dictionary(pa.int32(), pa.string())
    types = {c: pa.string() if c == mapping.timestamp else dictionary for c in wanted}
    # small logs: smaller blocks from the system allocator, so reading a 1 MiB file does not
    # reserve tens of MiB of parsing buffers (large ones parse faster in 4 MiB blocks)
    small = path.stat().st_size < SMALL_CSV_BYTES
    block_size = min((1 << 20) if small else (1 << 22), limits.max_row_bytes)
    _check_inflated_size(path, limits)
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
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        text = str(exc)
        if "UTF8" in text or isinstance(exc, UnicodeDecodeError):
            raise ValueError(
                f"{path}: not readable as {mapping.encoding} ({text.splitlines()[0]}); "
                "pass the file's encoding, e.g. --encoding latin-1"
            ) from None
        if "straddl" in text:
            raise ValueError(
                f"{path}: a row is longer than {block_size:,} bytes (a quote left open, or "
                "binary data); fix the row, or raise ITSMREVIEW_MAX_LOG_ROW_BYTES"
            ) from None
        raise ValueError(f"{path}: cannot parse the CSV: {text.splitlines()[0]}") from None
    except (OSError, EOFError) as exc:
        raise ValueError(_corrupt(path, exc)) from None
    return table.unify_dictionaries()


def _check_xes(path: Path, limits: Limits) -> None:
    """Refuse an XES with a DTD (entity expansion, external entities: XES never needs one)
    and, for a compressed file, one that inflates past the size limit, before pm4py parses."""
    opener = _compression(path)
    try:
        with opener(path, "rb") if opener else open(path, "rb") as handle:
            prolog = handle.read(1 << 16)
            root = prolog.find(b"<log")
            head = prolog if root < 0 else prolog[:root]
            if b"<!DOCTYPE" in head or b"<!ENTITY" in head:
                raise ValueError(
                    f"{path}: declares a DTD or entities (<!DOCTYPE/<!ENTITY>), which XES never "
                    "needs and which can expand or read other files; remove the declaration"
                )
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise ValueError(_corrupt(path, exc)) from None
    _check_inflated_size(path, limits)


def _read_xes(path: Path, limits: Limits) -> pd.DataFrame:
    import pm4py
    from lxml import etree

    _check_xes(path, limits)
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
        raise ValueError(_corrupt(path, exc)) from None
    if frame is None or len(frame) == 0:
        raise ValueError(f"{path}: the XES file holds no events")
    return frame


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
        raise ValueError(
            f"{source}: column {column!r} has a value with a NUL character ({bad[:40]!r}); "
            "text with NUL cannot be stored: clean the export"
        )
    return codes, labels


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
    wanted = [mapping.case, mapping.activity, mapping.timestamp, mapping.resource, *mapping.roles]
    _check_columns(Path(source), [c for c in wanted if c], table.column_names, mapping.sep)
    case_codes, case_labels = _encode_checked(table, mapping.case, source)
    act_codes, act_labels = _encode_checked(table, mapping.activity, source)
    for label, column, codes in (
        ("case id", mapping.case, case_codes),
        ("activity", mapping.activity, act_codes),
    ):
        missing = codes < 0
        if missing.any():
            raise ValueError(
                f"{source}: {int(missing.sum())} event(s) have no {label} (column {column!r}); "
                f"first at row(s) {_rows(missing, header_rows)}; fill them or drop those rows"
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
    return events


def _bad_timestamps(
    values: pa.ChunkedArray,
    parsed_null: np.ndarray,
    mapping: ColumnMapping,
    fmt: str,
    source: str,
    header_rows: int,
) -> None:
    given_null = _null_mask(values)
    bad = parsed_null & ~given_null
    if bad.any():
        examples = [
            f"row {int(index) + 1 + header_rows}: {values[int(index)].as_py()!r}"
            for index in np.flatnonzero(bad)[:MAX_BAD_ROWS_SHOWN]
        ]
        raise ValueError(
            f"{source}: {int(bad.sum())} timestamp(s) in column {mapping.timestamp!r} do not match "
            f"format {fmt!r} ({', '.join(examples)}); give the right --timestamp-format, e.g. "
            "'%d/%m/%Y %H:%M' for day-first dates"
        )
    if given_null.any():
        raise ValueError(
            f"{source}: {int(given_null.sum())} event(s) have no timestamp (column "
            f"{mapping.timestamp!r}); first at row(s) {_rows(given_null, header_rows)}"
        )


def _bounded_ns(
    micros: pa.Array | pa.ChunkedArray,
    values: pa.ChunkedArray,
    mapping: ColumnMapping,
    source: str,
    header_rows: int,
    limits: Limits,
) -> np.ndarray:
    """Microsecond timestamps checked against the year bounds, as int64 nanoseconds (inside
    the bounds the conversion cannot overflow)."""
    us = pc.cast(micros, pa.int64()).to_numpy(zero_copy_only=False)
    low = int(pd.Timestamp(year=limits.min_year, month=1, day=1).value // 1000)
    high = int(pd.Timestamp(year=limits.max_year + 1, month=1, day=1).value // 1000)
    outside = (us < low) | (us >= high)
    if outside.any():
        examples = [
            f"row {int(i) + 1 + header_rows}: {values[int(i)].as_py()!r}"
            for i in np.flatnonzero(outside)[:MAX_BAD_ROWS_SHOWN]
        ]
        raise ValueError(
            f"{source}: {int(outside.sum())} timestamp(s) in column {mapping.timestamp!r} lie "
            f"outside the years {limits.min_year}-{limits.max_year} ({', '.join(examples)}); "
            "correct them, or widen ITSMREVIEW_TIMESTAMP_MIN_YEAR / _MAX_YEAR"
        )
    return us * 1000


def parse_timestamps(
    values: pa.ChunkedArray,
    mapping: ColumnMapping,
    source: str,
    header_rows: int = 1,
    limits: Limits | None = None,
) -> np.ndarray:
    """Timestamps as int64 nanoseconds since the epoch, UTC. A format that fails on any row,
    or a year outside the bounds, is an error listing the first bad rows, never a guess or a
    wrap-around; text without an offset is UTC."""
    limits = limits or Limits.from_settings()

    def bounded(micros):
        return _bounded_ns(micros, values, mapping, source, header_rows, limits)

    if pa.types.is_timestamp(values.type):
        unit_values = values if values.type.tz else pc.assume_timezone(values, "UTC")
        try:
            parsed = pc.cast(unit_values, pa.timestamp("us", tz="UTC"), safe=False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise ValueError(f"{source}: unreadable timestamps: {exc}") from None
        _bad_timestamps(values, _null_mask(parsed), mapping, "timestamp", source, header_rows)
        return bounded(parsed)
    values = _text(values)
    fmt = mapping.timestamp_format or "ISO8601"
    parsed = None
    if fmt == "ISO8601":
        for candidate in (values, None):
            if candidate is None:
                candidate = values = pc.utf8_trim_whitespace(values)
            for target in (pa.timestamp("us", tz="UTC"), pa.timestamp("us")):
                try:
                    parsed = pc.cast(candidate, target)
                    break
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    continue
            if parsed is not None:
                break
        if parsed is None:
            as_pandas = pd.Series(values.to_numpy(zero_copy_only=False), dtype=object)
            converted = pd.to_datetime(as_pandas, format="ISO8601", utc=True, errors="coerce")
            _bad_timestamps(values, converted.isna().to_numpy(), mapping, fmt, source, header_rows)
            return bounded(pa.array(converted.dt.as_unit("us")))
    else:
        values = pc.utf8_trim_whitespace(values)
        try:
            parsed = pc.strptime(values, format=fmt, unit="us", error_is_null=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise ValueError(f"{source}: timestamp format {fmt!r} is not usable: {exc}") from None
    _bad_timestamps(values, _null_mask(parsed), mapping, fmt, source, header_rows)
    return bounded(parsed)


def read_log(
    path: Path | str,
    mapping: ColumnMapping | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    limits: Limits | None = None,
) -> tuple[pd.DataFrame, ColumnMapping]:
    """Read and normalise the log at `path`; XES without a mapping uses the standard keys."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a folder; give the log file inside it")
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    limits = limits or Limits.from_settings()
    fmt = log_format(path)
    if mapping is None and fmt in ("xes", "parquet"):
        mapping = XES_DEFAULT
    if progress:
        progress("reading")
    raw = read_raw(path, mapping, limits)
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
