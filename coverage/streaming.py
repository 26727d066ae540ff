"""Reading a large CSV or XES log in bounded batches into the canonical events parquet file."""

import lzma
import re
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
from itsmreview.coverage.engine import log_connection
from itsmreview.coverage.eventlog import (
    ARROW_UTF8,
    MAX_BAD_ROWS_SHOWN,
    ROLE_PREFIX,
    ColumnMapping,
    csv_columns,
    fit_standard_keys,
    formats_of,
    log_format,
    missing_times_message,
    missing_values_message,
    nul_message,
    outside_years,
    outside_years_message,
    parse_format,
    unmatched_times_message,
)
from itsmreview.coverage.filechecks import (
    Limits,
    check_columns,
    check_inflated_size,
    check_size,
    check_unique,
    check_xes,
    corrupt_message,
    csv_error,
    first_long_line,
)
from itsmreview.coverage.xes_stream import xes_batches, xes_schema

# the CSV reader's block: it holds several at once (parsed, converting, read ahead)
BLOCK_BYTES = 1 << 20
# rows of the ordered events handed from DuckDB to the parquet writer at a time (a row group)
ORDERED_BATCH_ROWS = 65_536
# the staging file is read once, soon: compression and statistics would only cost time
STAGING_OPTIONS = {"compression": "none", "write_statistics": False}
STREAMED_SUFFIXES = (".csv", ".tsv", ".txt", ".csv.gz", ".tsv.gz", ".txt.gz", ".xes", ".xes.gz")
RowsRead = Callable[[int, float], None]  # rows read so far, share of the file read


def streamable(path: Path, mapping: ColumnMapping | None) -> bool:
    """Whether `stream_csv` or `stream_xes` reads this log: a plain or gzipped CSV or XES
    whose mapping keeps no per-event counters (those are read whole,
    `eventlog.case_counters`)."""
    return (
        mapping is not None
        and not mapping.counters
        and log_format(path) in ("csv", "xes")
        and path.name.lower().endswith(STREAMED_SUFFIXES)
    )


@dataclass
class _Found:
    """One kind of bad value over the batches: how many, and the first rows (with values)."""

    count: int = 0
    shown: list[tuple[int, object]] = field(default_factory=list)

    def add(self, mask: np.ndarray, first_row: int, values: pa.Array | None = None) -> None:
        self.count += int(mask.sum())
        for i in np.flatnonzero(mask)[: MAX_BAD_ROWS_SHOWN - len(self.shown)]:
            value = None if values is None else values[int(i)].as_py()
            self.shown.append((first_row + int(i), value))

    def rows(self) -> list[int]:
        return [row for row, _ in self.shown]

    def examples(self) -> str:
        return ", ".join(f"row {row}: {value!r}" for row, value in self.shown)


@dataclass
class _Checks:
    """What `eventlog.normalise` refuses, gathered batch by batch and said as it says it."""

    source: str
    mapping: ColumnMapping
    limits: Limits
    nul: dict[str, str] = field(default_factory=dict)  # column: its first value with a NUL
    no_case: _Found = field(default_factory=_Found)
    no_activity: _Found = field(default_factory=_Found)
    unmatched: _Found = field(default_factory=_Found)
    no_time: _Found = field(default_factory=_Found)
    outside: _Found = field(default_factory=_Found)

    def failed(self) -> bool:
        return bool(
            self.nul
            or self.no_case.count
            or self.no_activity.count
            or self.unmatched.count
            or self.no_time.count
            or self.outside.count
        )

    def first_message(self) -> str | None:
        """The message `normalise` gives first for the problems found, None without any."""
        m, source = self.mapping, self.source
        for column in (m.case, m.activity):
            if column in self.nul:
                return nul_message(source, column, self.nul[column])
        for label, column, found in (
            ("case id", m.case, self.no_case),
            ("activity", m.activity, self.no_activity),
        ):
            if found.count:
                return missing_values_message(source, found.count, label, column, found.rows())
        if self.unmatched.count:
            formats = formats_of(m.timestamp_format)
            return unmatched_times_message(
                source, self.unmatched.count, m.timestamp, formats, self.unmatched.examples()
            )
        if self.no_time.count:
            found = self.no_time
            return missing_times_message(source, found.count, m.timestamp, found.rows())
        if self.outside.count:
            return outside_years_message(
                source, self.outside.count, m.timestamp, self.limits, self.outside.examples()
            )
        for column in [m.resource, *m.roles]:
            if column in self.nul:
                return nul_message(source, column, self.nul[column])
        return None


def _trimmed(values: pa.Array) -> pa.Array:
    """Text without surrounding white space, empty text as missing (as `eventlog.encode`)."""
    trimmed = pc.utf8_trim_whitespace(values)
    return pc.if_else(pc.equal(trimmed, ""), pa.scalar(None, pa.string()), trimmed)


def _may_hold_nul(values: pa.Array) -> bool:
    """Whether a NUL byte may be among the text `values` (a scan of its bytes, much faster
    than a search value by value)."""
    if not pa.types.is_string(values.type):
        return True
    offsets, data = values.buffers()[1:3]
    if data is None:
        return False
    at = np.frombuffer(offsets, np.int32, count=len(values) + 1, offset=values.offset * 4)
    return b"\x00" in data.to_pybytes()[at[0] : at[-1]]


def _as_text(values: pa.Array) -> pa.Array:
    """A typed column (an XES int, float or boolean) as text, as `eventlog.encode` reads it."""
    return values if pa.types.is_string(values.type) else pc.cast(values, pa.string())


def _micros(values: pa.Array, mapping: ColumnMapping, source: str) -> pa.Array:
    """Microseconds since the epoch of each value the mapping's format(s) read, else null."""
    values = pa.chunked_array([values])
    micros = None
    for fmt in formats_of(mapping.timestamp_format):
        one = parse_format(values, fmt, source)
        micros = one if micros is None else pc.coalesce(micros, one)
        if micros.null_count == values.null_count:
            break
    return micros.combine_chunks()


def _canonical_batch(
    batch: pa.RecordBatch, mapping: ColumnMapping, checks: _Checks, first_row: int
) -> pa.Table:
    """A batch of the file as canonical columns (text trimmed, timestamps in UTC), its
    problems noted in `checks`; `first_row` is the file row of its first row."""
    columns: dict[str, pa.Array] = {}
    named = [("case_id", mapping.case), ("activity", mapping.activity)]
    if mapping.resource:
        named.append(("resource", mapping.resource))
    named += [(ROLE_PREFIX + role, role) for role in mapping.roles]
    for name, column in named:
        values = _trimmed(_as_text(batch.column(column)))
        if (
            column not in checks.nul
            and _may_hold_nul(values)
            and pc.any(pc.match_substring(values, "\x00")).as_py()
        ):
            at = pc.index(pc.match_substring(values, "\x00"), True).as_py()
            checks.nul[column] = values[at].as_py()
        columns[name] = values
    checks.no_case.add(pc.is_null(columns["case_id"]).to_numpy(zero_copy_only=False), first_row)
    checks.no_activity.add(
        pc.is_null(columns["activity"]).to_numpy(zero_copy_only=False), first_row
    )
    text = batch.column(mapping.timestamp)
    if pa.types.is_timestamp(text.type):  # typed (an XES date): no format to read it by
        zone = text if text.type.tz else pc.assume_timezone(text, "UTC")
        micros = pc.cast(pc.cast(zone, pa.timestamp("us", tz="UTC"), safe=False), pa.int64())
    else:
        text = pc.utf8_trim_whitespace(_as_text(text))
        micros = _micros(text, mapping, checks.source)
    given_null = pc.is_null(text).to_numpy(zero_copy_only=False)
    unread = pc.is_null(micros).to_numpy(zero_copy_only=False) & ~given_null
    checks.unmatched.add(unread, first_row, text)
    checks.no_time.add(given_null, first_row)
    checks.outside.add(~given_null & outside_years(micros, checks.limits), first_row, text)
    stamps = pc.multiply(micros, 1000).cast(pa.timestamp("ns", tz="UTC"))
    ordered = {"case_id": columns.pop("case_id"), "activity": columns.pop("activity")}
    return pa.table(ordered | {"timestamp": stamps} | columns)


def _read_options(
    mapping: ColumnMapping, block_size: int, use_threads: bool = True
) -> dict[str, object]:
    wanted = mapping.columns()
    encoding = "utf8" if mapping.encoding.lower() in ARROW_UTF8 else mapping.encoding
    return {
        "read_options": pacsv.ReadOptions(
            encoding=encoding, block_size=block_size, use_threads=use_threads
        ),
        "parse_options": pacsv.ParseOptions(delimiter=mapping.sep),
        "convert_options": pacsv.ConvertOptions(
            include_columns=wanted,
            column_types={c: pa.string() for c in wanted},
            null_values=["", *mapping.na_values],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    }


def _input(path: Path) -> tuple[pa.NativeFile, pa.NativeFile]:
    """The file as Arrow reads it (gzip inflated), and the raw file whose position says how
    much of it has been read."""
    raw = pa.OSFile(str(path))
    if path.name.lower().endswith(".gz"):
        return pa.CompressedInputStream(raw, "gzip"), raw
    return raw, raw


def _failing_line(path: Path, mapping: ColumnMapping, block_size: int) -> int | None:
    """The line of the row the reader refused: read again on one thread, which counts rows
    (only after a failure, so an import is not slowed by it)."""
    options = _read_options(mapping, block_size, use_threads=False)
    stream, raw = _input(path)
    try:
        for _ in pacsv.open_csv(stream, **options):
            pass
    except (pa.ArrowInvalid, UnicodeDecodeError, OSError, EOFError) as exc:
        found = re.search(r"Row #(\d+)", str(exc))
        return int(found.group(1)) if found else None
    finally:
        raw.close()
    return None


def _stage(
    path: Path,
    mapping: ColumnMapping,
    staging: Path,
    limits: Limits,
    progress: RowsRead | None,
) -> int:
    """Write the file's canonical rows in file order to `staging`; the number of events.
    Raises ValueError for what `read_log` refuses, after reading the whole file (so counts
    and first rows are said as `read_log` says them), or at a row the reader cannot parse.
    Blocks are small (the reader holds several at once); a row longer than one is read
    again in blocks of the longest row allowed."""
    block_size = min(BLOCK_BYTES, limits.max_row_bytes)
    try:
        return _stage_in_blocks(path, mapping, staging, limits, progress, block_size)
    except _LongRow as long_row:
        # the reader takes a row over up to two blocks: the bound is checked line by line
        if first_long_line(path, limits.max_row_bytes):
            message = csv_error(path, long_row.error, mapping.encoding, limits.max_row_bytes)
            raise ValueError(message) from None
        return _stage_in_blocks(path, mapping, staging, limits, progress, limits.max_row_bytes)


class _LongRow(Exception):
    """A row longer than the reader's block, which is smaller than the longest row allowed."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def _stage_in_blocks(
    path: Path,
    mapping: ColumnMapping,
    staging: Path,
    limits: Limits,
    progress: RowsRead | None,
    block_size: int,
) -> int:
    source = str(path)
    options = _read_options(mapping, block_size)
    checks = _Checks(source, mapping, limits)
    stream, raw = _input(path)
    size = max(path.stat().st_size, 1)
    n_events = 0
    writer = None
    try:
        try:
            reader = pacsv.open_csv(stream, **options)
            for batch in reader:
                if not batch.num_rows:
                    continue
                table = _canonical_batch(batch, mapping, checks, first_row=n_events + 2)
                n_events += batch.num_rows
                if not checks.failed():
                    if writer is None:
                        writer = pq.ParquetWriter(staging, table.schema, **STAGING_OPTIONS)
                    writer.write_table(table)
                if progress:
                    progress(n_events, min(raw.tell() / size, 1.0))
        except (pa.ArrowInvalid, UnicodeDecodeError, OSError, EOFError) as exc:
            if "straddl" in str(exc) and block_size < limits.max_row_bytes:
                raise _LongRow(exc) from None
            line = None
            if "Expected" in str(exc):
                line = _failing_line(path, mapping, block_size)
            raise ValueError(csv_error(path, exc, mapping.encoding, block_size, line)) from None
    finally:
        raw.close()
        if writer is not None:
            writer.close()
        pa.default_memory_pool().release_unused()  # the reader's blocks, before DuckDB's work
    message = checks.first_message()
    if message:
        raise ValueError(message)
    if n_events == 0:
        raise ValueError(f"{source}: the log has no events")
    return n_events


def _canonical_schema(mapping: ColumnMapping) -> pa.Schema:
    """events.parquet's columns as an import in memory writes them (text as dictionaries)."""
    text = pa.dictionary(pa.int32(), pa.string())
    fields = [
        pa.field("case_id", text),
        pa.field("activity", text),
        pa.field("timestamp", pa.timestamp("ns", tz="UTC")),
        pa.field("resource", text if mapping.resource else pa.dictionary(pa.int8(), pa.null())),
    ]
    return pa.schema(fields + [pa.field(ROLE_PREFIX + role, text) for role in mapping.roles])


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _canonical_types(batch: pa.RecordBatch, schema: pa.Schema) -> pa.Table:
    """An ordered batch from DuckDB in events.parquet's types (text as dictionaries)."""
    arrays = []
    for spec in schema:
        if spec.name not in batch.schema.names:  # no resource column
            arrays.append(
                pa.DictionaryArray.from_arrays(
                    pa.nulls(batch.num_rows, pa.int8()), pa.array([], pa.null())
                )
            )
        elif spec.name == "timestamp":
            arrays.append(pc.cast(batch.column(spec.name), spec.type))
        else:
            arrays.append(pc.dictionary_encode(pc.cast(batch.column(spec.name), pa.string())))
    return pa.Table.from_arrays(arrays, schema=schema)


def _write_ordered(
    staging: Path, target: Path, mapping: ColumnMapping, work: Path, memory: str | None
) -> None:
    """`target`: the staged events in `normalise`'s order (cases in order of first
    appearance, then timestamp, ties in file order), sorted by DuckDB out of core."""
    schema = _canonical_schema(mapping)
    kept = [f.name for f in schema if f.name != "resource" or mapping.resource]
    with (
        log_connection(staging, "ordering the events", memory=memory, spill_dir=work) as connection,
        pq.ParquetWriter(target, schema) as writer,
    ):
        reader = connection.sql(
            f"""
            SELECT {", ".join("e." + _quoted(c) for c in kept)}
            FROM read_parquet(?, file_row_number = true) e
            JOIN (SELECT case_id, min(file_row_number) AS first_row
                  FROM read_parquet(?, file_row_number = true) GROUP BY case_id) f
              ON e.case_id = f.case_id
            ORDER BY f.first_row, e.timestamp, e.file_row_number
            """,
            params=[str(staging), str(staging)],
        ).to_arrow_reader(ORDERED_BATCH_ROWS)
        # a batch is encoded while the one before it is written (both free the GIL)
        with ThreadPoolExecutor(max_workers=1) as encoder:
            pending: deque[Future[pa.Table]] = deque()
            for batch in reader:
                pending.append(encoder.submit(_canonical_types, batch, schema))
                if len(pending) > 1:
                    writer.write_table(pending.popleft().result())
            for encoded in pending:
                writer.write_table(encoded.result())


def stream_csv(
    path: Path,
    mapping: ColumnMapping,
    target: Path,
    *,
    work: Path,
    limits: Limits | None = None,
    memory: str | None = None,
    progress: RowsRead | None = None,
) -> int:
    """Write the canonical event table of the CSV log at `path` (plain or gzipped) to the
    parquet file `target`, as `eventlog.read_log` reads it (same columns, values and order),
    reading the file in bounded batches and ordering it with DuckDB within `memory` (a size
    or fraction as ITSMREVIEW_LOG_MEMORY takes; default: that setting), spilling to `work`.
    `progress` is called after each batch with the rows read and the share of the file.

    Returns the number of events. Raises ValueError with `read_log`'s messages (file, row,
    column) for what it refuses, and for a row the reader cannot parse its line.
    """
    limits = limits or Limits.from_settings()
    check_size(path, limits)
    wanted = mapping.columns()
    present = csv_columns(path, mapping.sep, mapping.encoding, limits)
    check_columns(path, wanted, present, mapping.sep)
    check_unique(path, wanted, present)
    check_inflated_size(path, limits)
    staging = work / "staged-events.parquet"
    try:
        n_events = _stage(path, mapping, staging, limits, progress)
        _write_ordered(staging, target, mapping, work, memory)
    finally:
        staging.unlink(missing_ok=True)
    return n_events


# XES ---------------------------------------------------------------------------------------


def _stage_xes(
    path: Path,
    mapping: ColumnMapping,
    staging: Path,
    limits: Limits,
    progress: RowsRead | None,
) -> tuple[int, ColumnMapping]:
    """Write the XES log's canonical rows in document order to `staging`, read by
    `coverage.xes_stream` (pm4py's columns and types; only the mapped ones); the number of
    events and the mapping fitted to the keys the file has (`eventlog.fit_standard_keys`).
    Raises ValueError as `read_log` does for an XES log."""
    from lxml import etree

    try:
        schema = xes_schema(path)
        if all(name.startswith("case:") for name in schema.names):
            raise ValueError(f"{path}: the XES file holds no events")
        fitted = fit_standard_keys(mapping, schema.names)
        # checked against every key the file has, as `eventlog.read_raw` checks it
        check_columns(path, fitted.columns(), schema.names, mapping.sep)
        batches = xes_batches(path, schema=pa.schema([schema.field(c) for c in fitted.columns()]))
        checks = _Checks(str(path), fitted, limits)
        n_events, writer = 0, None
        try:
            for batch in batches:
                table = _canonical_batch(batch, fitted, checks, first_row=n_events + 1)
                n_events += batch.num_rows
                if not checks.failed():
                    if writer is None:
                        writer = pq.ParquetWriter(staging, table.schema, **STAGING_OPTIONS)
                    writer.write_table(table)
                if progress:
                    progress(n_events, 0.0)  # how much of the file is read is not known
        finally:
            if writer is not None:
                writer.close()
    except etree.XMLSyntaxError as exc:
        raise ValueError(f"{path}: not a well-formed XES (XML) file: {exc}") from None
    except (OSError, EOFError, lzma.LZMAError) as exc:
        raise ValueError(corrupt_message(path, exc)) from None
    if n_events == 0:
        raise ValueError(f"{path}: the XES file holds no events")
    message = checks.first_message()
    if message:
        raise ValueError(message)
    return n_events, fitted


def stream_xes(
    path: Path,
    mapping: ColumnMapping,
    target: Path,
    *,
    work: Path,
    limits: Limits | None = None,
    memory: str | None = None,
    progress: RowsRead | None = None,
) -> tuple[int, ColumnMapping]:
    """`stream_csv` for an XES log (plain or gzipped), read by `coverage.xes_stream`
    (`lxml.etree.iterparse`, one trace and one batch at a time) with pm4py's columns and
    types: trace attributes are `case:<key>`, typed values become text as `read_log` makes
    them, a `date` timestamp needs no format. Returns the number of events and the mapping
    fitted to the file's keys (`org:resource` only where present). Raises ValueError as
    `read_log` does."""
    limits = limits or Limits.from_settings()
    check_size(path, limits)
    check_xes(path, limits)
    staging = work / "staged-events.parquet"
    try:
        n_events, fitted = _stage_xes(path, mapping, staging, limits, progress)
        _write_ordered(staging, target, fitted, work, memory)
    finally:
        staging.unlink(missing_ok=True)
    return n_events, fitted
