"""Importing an event log: read, validate, materialise, store all or nothing."""

import hashlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from pathlib import Path
from tempfile import TemporaryDirectory

from itsmreview.coverage import queries
from itsmreview.coverage.engine import materialise_file
from itsmreview.coverage.eventlog import (
    PRESETS,
    XES_DEFAULT,
    ColumnMapping,
    case_counters,
    file_sha256,
    log_format,
    read_log,
)
from itsmreview.coverage.filechecks import check_encoding, check_file
from itsmreview.coverage.leases import Lease, sweep_leftovers
from itsmreview.coverage.linked import (
    BPI2014,
    LinkedSpec,
    check_tables,
    combined_sha256,
    file_digests,
    linked_files,
    read_linked,
    spec_from_file,
)
from itsmreview.coverage.models import (
    EventLog,
    LogActivity,
    LogDirectlyFollows,
    LogRoleValue,
    LogVariant,
)
from itsmreview.coverage.samples import SAMPLES_FILE, sample_frame, write_sample_file
from itsmreview.coverage.streaming import stream_csv, stream_xes, streamable
from itsmreview.coverage.variants import Materialised, materialise
from itsmreview.db import analyze, bulk_insert
from itsmreview.errors import InvalidInput
from itsmreview.ledger.service import append_entry
from itsmreview.settings import get_settings
from itsmreview.storage import get_storage
from sqlmodel import Session

Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class ImportResult:
    log: EventLog
    created: bool


def resolve_mapping(
    path: Path, preset: str | None, mapping: ColumnMapping | None
) -> ColumnMapping | None:
    """The mapping to read `path` with. A preset may come with a mapping that changes only
    how the file is read (separator, encoding, missing tokens), never which columns mean what.
    Raises InvalidInput for an unknown preset or encoding, or columns that clash with it."""
    if preset:
        if preset not in PRESETS:
            raise InvalidInput(f"unknown preset {preset!r}; presets: {', '.join(sorted(PRESETS))}")
        chosen = PRESETS[preset]
        columns = ("case", "activity", "timestamp", "timestamp_format", "resource", "roles")
        clashing = [c for c in columns if mapping and getattr(mapping, c) != getattr(chosen, c)]
        if clashing:
            raise InvalidInput(
                f"preset {preset!r} fixes the columns, but a different "
                f"{', '.join(clashing)} was given too; drop --preset to map the columns "
                "yourself, or drop the column options to use the preset"
            )
        mapping = mapping or chosen
    elif mapping is None and log_format(path) == "csv":
        raise InvalidInput(
            f"{path}: a CSV log needs --preset ({', '.join(sorted(PRESETS))}) or --case, "
            "--activity and --timestamp"
        )
    if mapping is not None:
        try:
            check_encoding(mapping.encoding)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
    return mapping


def import_log(
    path: Path | str,
    *,
    session: Session,
    name: str | None = None,
    preset: str | None = None,
    mapping: ColumnMapping | None = None,
    actor_id: int | None = None,
    progress: Progress | None = None,
    linked: dict[str, Path | None] | None = None,
    linked_spec: Path | None = None,
) -> ImportResult:
    """Import the log at `path`, or return the existing log when the same file and mapping
    were imported before. Raw events and cases go to parquet files in the storage
    (ITSMREVIEW_STORAGE_URL, itsmreview.storage) under a key of their own;
    everything else to the database in the caller's transaction. With preset `bpi2014`,
    `path` may be a folder holding the four tables, or the activity table with the others in
    `linked` (incidents, interactions, changes): their case attributes join the cases. Other
    linked tables are read as the YAML spec `linked_spec` says (coverage.linked.LinkedSpec).

    Raises InvalidInput with the file, rows and fix when the log cannot be read.
    """
    path = Path(path)
    linked = {k: v for k, v in (linked or {}).items() if v is not None}
    spec = _linked_spec(path, preset=preset, mapping=mapping, linked=linked, spec_file=linked_spec)
    if spec is None:
        try:  # kind and size from the metadata, before the file is hashed or read
            check_file(path)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        return _import_file(
            path,
            session=session,
            name=name,
            preset=preset,
            mapping=mapping,
            actor_id=actor_id,
            progress=progress,
        )
    try:
        tables = linked_files(path, spec, linked)
        check_tables(tables, spec, events_mapping(spec, mapping))
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    return _import_linked(
        path,
        tables,
        spec,
        session=session,
        name=name,
        preset=preset or spec.name,
        actor_id=actor_id,
        progress=progress,
        mapping=events_mapping(spec, mapping),
    )


def _linked_spec(
    path: Path,
    *,
    preset: str | None,
    mapping: ColumnMapping | None,
    linked: dict[str, Path],
    spec_file: Path | None,
) -> LinkedSpec | None:
    """How the linked tables of an import are read, or None when `path` is one log file.
    Raises InvalidInput for a spec file given with a preset or columns, linked tables without
    `bpi2014`, or a folder that holds no linked tables."""
    if spec_file is not None:
        if preset or mapping:
            raise InvalidInput("a linked-tables spec names the columns itself: drop --preset")
        try:
            return spec_from_file(spec_file)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
    if preset == "bpi2014" and (path.is_dir() or linked):
        if mapping is None:
            return BPI2014
        # reading options given with the preset (--encoding, --sep, --na) read every table
        resolve_mapping(path, preset, mapping)
        return BPI2014.model_copy(
            update={
                "encoding": mapping.encoding,
                "separator": mapping.sep,
                "missing": list(dict.fromkeys([*BPI2014.missing, *mapping.na_values])),
            }
        )
    if linked:
        raise InvalidInput("linked tables (incidents, interactions, changes) need --preset bpi2014")
    if path.is_dir():
        raise InvalidInput(
            f"{path}: is a folder; give the log file inside it (a folder of BPI 2014's four "
            "tables is read with --preset bpi2014, other linked tables with --linked SPEC)"
        )
    return None


def _import_file(
    path: Path,
    *,
    session: Session,
    name: str | None,
    preset: str | None,
    mapping: ColumnMapping | None,
    actor_id: int | None,
    progress: Progress | None,
) -> ImportResult:
    """A log in one file (CSV, XES, parquet), hashed while it is parsed; a small file, or
    one imported from the same place before, is hashed first, so a re-import parses nothing."""
    report = progress or (lambda _stage, _fraction: None)
    mapping = resolve_mapping(path, preset, mapping)
    mapping = mapping or XES_DEFAULT
    mapping_hash = mapping.digest()
    report("hashing", 0.05)
    with ExitStack() as stack:  # a streamed log's working folder lives until it is stored
        return _read_and_store(
            path,
            stack,
            session=session,
            name=name,
            preset=preset,
            mapping=mapping,
            mapping_hash=mapping_hash,
            actor_id=actor_id,
            report=report,
        )


def streams(path: Path, mapping: ColumnMapping) -> bool:
    """Whether the import of `path` reads it in bounded batches through the log engine
    (`coverage.streaming`): a CSV or XES log of ITSMREVIEW_LOG_STREAM_BYTES or more."""
    return streamable(path, mapping) and path.stat().st_size >= get_settings().log_stream_bytes


def _read_streamed(
    path: Path, mapping: ColumnMapping, work: Path, report: Progress
) -> tuple[Path, Materialised, ColumnMapping]:
    """The canonical events file of a streamed CSV or XES log (in `work`), its
    materialisation by the log engine, and the mapping used (an XES mapping fitted to the
    keys the file has)."""
    events_file = work / EVENTS_FILE
    started = time.monotonic()

    def rows_read(rows: int, share: float) -> None:
        seconds = time.monotonic() - started
        rate = f", {rows / seconds:,.0f} events/s" if seconds > 0 else ""
        report(f"reading: {rows:,} rows{rate}", 0.05 + 0.35 * share)

    if log_format(path) == "xes":
        _, mapping = stream_xes(path, mapping, events_file, work=work, progress=rows_read)
    else:
        stream_csv(path, mapping, events_file, work=work, progress=rows_read)
    report("materialising variants", 0.45)
    mat = materialise_file(events_file, spill_dir=work)
    report("sampling each variant's cases", 0.7)
    write_sample_file(events_file, mat.cases, work / SAMPLES_FILE, spill_dir=work)
    return events_file, mat, mapping


def _read_and_store(
    path: Path,
    stack: ExitStack,
    *,
    session: Session,
    name: str | None,
    preset: str | None,
    mapping: ColumnMapping,
    mapping_hash: str,
    actor_id: int | None,
    report: Progress,
) -> ImportResult:
    with ThreadPoolExecutor(max_workers=1) as pool:
        # the worker hashes the file while it is parsed
        hashing = pool.submit(file_sha256, path)
        if path.stat().st_size < PARALLEL_HASH_BYTES or queries.imported_from(
            session=session, source_path=str(path.resolve()), mapping_hash=mapping_hash
        ):
            hashing.result()  # small, or likely a re-import: hash first, maybe parse nothing
        existing = (
            queries.log_by_digest(
                session=session, sha256=hashing.result(), mapping_hash=mapping_hash
            )
            if hashing.done()
            else None
        )
        if existing is not None:
            return ImportResult(existing, created=False)
        try:
            if streams(path, mapping):
                work = Path(stack.enter_context(TemporaryDirectory(prefix="itsmreview-import-")))
                events, counters = None, None
                events_file, mat, used = _read_streamed(path, mapping, work, report)
                streamed = (events_file, mat)
            else:
                events, used = read_log(path, mapping, progress=lambda stage: report(stage, 0.2))
                events, counters = case_counters(events)
                streamed = None
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        sha = hashing.result()
    existing = queries.log_by_digest(session=session, sha256=sha, mapping_hash=mapping_hash)
    if existing is not None:
        return ImportResult(existing, created=False)
    return _store_log(
        session=session,
        events=events,
        streamed=streamed,
        case_attributes=counters,
        mapping=used.to_dict(),
        mapping_hash=mapping_hash,
        sha=sha,
        source=path,
        reference=f"{path.name} sha256:{sha}",
        name=name or path.name.split(".")[0],
        preset=preset,
        actor_id=actor_id,
        report=report,
    )


def events_mapping(spec: LinkedSpec, mapping: ColumnMapping | None) -> ColumnMapping:
    """How a linked log's events table is read: the spec's mapping, or the preset mapping
    given with the reading options (--encoding, --sep, --na) applied."""
    return mapping if mapping is not None and spec.events_preset else spec.mapping()


def _import_linked(
    path: Path,
    files: dict[str, Path],
    spec: LinkedSpec,
    *,
    session: Session,
    name: str | None,
    preset: str,
    actor_id: int | None,
    progress: Progress | None,
    mapping: ColumnMapping | None = None,
) -> ImportResult:
    """A log of linked tables (BPI 2014): events from the activity table, case attributes
    from the others (coverage.linked)."""
    report = progress or (lambda _stage, _fraction: None)
    report("hashing", 0.05)
    digests = file_digests(files)
    sha = combined_sha256(digests)
    mapping_hash = hashlib.sha256(
        (spec.model_dump_json() + " linked " + ",".join(sorted(files))).encode()
    ).hexdigest()
    existing = queries.log_by_digest(session=session, sha256=sha, mapping_hash=mapping_hash)
    if existing is not None:
        return ImportResult(existing, created=False)
    report("reading the tables", 0.2)
    try:
        found = read_linked(files, spec, digests, mapping=mapping)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    default_name = path.name if path.is_dir() else path.name.split(".")[0]
    return _store_log(
        session=session,
        events=found.events,
        mapping=found.mapping.to_dict() | {"linked": found.tables},
        mapping_hash=mapping_hash,
        sha=sha,
        source=path,
        reference=", ".join(f"{t['file']} sha256:{t['sha256']}" for t in found.tables.values()),
        name=name or default_name,
        preset=preset,
        actor_id=actor_id,
        report=report,
        case_attributes=found.cases,
    )


def _store_log(
    *,
    session: Session,
    events,
    mapping: dict,
    mapping_hash: str,
    sha: str,
    source: Path,
    reference: str,
    name: str,
    preset: str | None,
    actor_id: int | None,
    report: Progress,
    case_attributes=None,
    streamed: tuple[Path, Materialised] | None = None,
) -> ImportResult:
    """Materialise and store a read log (`events`, or a streamed log's events file and its
    materialisation): parquet files under a new key of the storage, held
    by a lease (`ImportLease`) while they are written, statistics in the caller's
    transaction, a ledger entry. The log is published when the caller commits: the same
    transaction points the log at the key and marks the lease published."""
    storage = get_storage()
    sweep_leftovers(session=session, storage=storage)
    lease = Lease(session, storage.key(LOGS_PREFIX, uuid.uuid4().hex))
    lease.begin()
    key = lease.key
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            # parquet files are written while variants are materialised and stored: both
            # release the GIL for long spells
            if streamed is None:
                events_written = pool.submit(storage.write_frame, events, key, EVENTS_FILE)
                report("materialising variants", 0.5)
                mat = materialise(events)
                samples = sample_frame(events, mat.cases)
                samples_written = pool.submit(storage.write_frame, samples, key, SAMPLES_FILE)
            else:
                events_file, mat = streamed
                events_written = pool.submit(storage.upload, events_file, key, EVENTS_FILE)
                samples_written = pool.submit(
                    storage.upload, events_file.with_name(SAMPLES_FILE), key, SAMPLES_FILE
                )
            cases = _with_case_attributes(mat.cases, case_attributes)
            cases_written = pool.submit(storage.write_frame, cases, key, CASES_FILE)
            log = EventLog(
                name=name,
                version=queries.latest_version(session=session, name=name) + 1,
                source_path=str(source.resolve()),
                sha256=sha,
                mapping=mapping,
                mapping_hash=mapping_hash,
                preset=preset,
                events_path=key,
                imported_by_id=actor_id,
                **_summary_columns(mat.summary),
            )
            session.add(log)
            session.flush()
            report("storing statistics", 0.8)
            _insert_materialised(session, log.id, mat)
            analyze(session, *MATERIALISED_TABLES)
            report("writing events", 0.9)
            events_written.result()
            samples_written.result()
            cases_written.result()
        lease.publish(session)
    except BaseException:
        lease.abandon(storage)
        raise
    _record_import(session=session, log=log, reference=reference, actor_id=actor_id)
    report("done", 1.0)
    return ImportResult(log, created=True)


def _with_case_attributes(cases, case_attributes):
    """The materialised cases with a linked log's case attributes joined (left) on the id."""
    if case_attributes is None:
        return cases
    return cases.merge(
        case_attributes.astype({"case_id": cases["case_id"].dtype}),
        on="case_id",
        how="left",
    )


def _summary_columns(summary: dict) -> dict:
    """An EventLog's counts and time span from `materialise`'s summary."""
    return {
        "n_cases": summary["cases"],
        "n_events": summary["events"],
        "n_activities": summary["activities"],
        "n_variants": summary["variants"],
        "n_collapsed_variants": summary["collapsed_variants"],
        "n_df_pairs": summary["df_pairs"],
        "n_singleton_variants": summary["singleton_variants"],
        "first_timestamp": summary["first_timestamp"].to_pydatetime(),
        "last_timestamp": summary["last_timestamp"].to_pydatetime(),
    }


def _record_import(
    *, session: Session, log: EventLog, reference: str, actor_id: int | None
) -> None:
    """The import's ledger entry: the log's name and version, its files' digests."""
    append_entry(
        session=session,
        artifact_type="event_log",
        artifact_id=f"{log.name}@{log.version}",
        action="import",
        source_kind="logs",
        reference=reference,
        actor_id=actor_id,
        payload={"cases": log.n_cases, "events": log.n_events, "mapping": log.mapping},
    )
    session.flush()


LOGS_PREFIX = "logs"  # every log's files: logs/<import key>/events.parquet, cases.parquet
EVENTS_FILE = "events.parquet"
CASES_FILE = "cases.parquet"


def discard_files(log: EventLog) -> None:
    """Remove the files an import wrote for `log` when its transaction will not commit (a
    step after the import failed), so a refused import leaves the storage as it was. Its
    lease stays running, expires, and a later cleanup forgets it."""
    if log.events_path:
        get_storage().delete(log.events_path)


def import_log_as(path: Path | str, *, session: Session, actor, **options) -> ImportResult:
    """`import_log` on behalf of a lead or admin (the Imports page). Raises PermissionDenied."""
    from itsmreview.accounts.models import Role
    from itsmreview.accounts.service import require_role

    require_role(actor, Role.lead)
    return import_log(path, session=session, actor_id=actor.id, **options)


PARALLEL_HASH_BYTES = 64 * 2**20  # smaller files are hashed first, so a re-import reads nothing


def _json_strings(items) -> str:
    """json.dumps of a list of strings, without building an encoder per call (an import
    encodes two lists per variant)."""
    try:
        return "[" + ", ".join(map(encode_basestring_ascii, items)) + "]"
    except TypeError:  # not all text
        return json.dumps(list(items))


_VARIANT_COLUMNS = (
    "log_id",
    "level",
    "rank",
    "sequence",
    "sequence_key",
    "length",
    "case_count",
    "share",
    "median_throughput_s",
    "example_case_ids",
)


def _variant_rows(log_id: int, variants) -> Iterator[tuple]:
    medians = variants["median_throughput_s"].astype(float).to_numpy().tolist()
    for level, rank, sequence, key, length, count, share, median, examples in zip(
        variants["level"].tolist(),
        variants["rank"].tolist(),
        variants["sequence"].tolist(),
        variants["sequence_key"].tolist(),
        variants["length"].tolist(),
        variants["case_count"].tolist(),
        variants["share"].tolist(),
        medians,
        variants["example_case_ids"].tolist(),
        strict=True,
    ):
        yield (
            log_id,
            level,
            int(rank),
            _json_strings(sequence),
            key,
            int(length),
            int(count),
            float(share),
            None if median != median else median,
            _json_strings(examples),
        )


MATERIALISED_TABLES = ("log_variants", "log_directly_follows", "log_activities", "log_role_values")


def _insert_materialised(session: Session, log_id: int, mat) -> None:
    bulk_insert(
        session, LogVariant.__tablename__, _VARIANT_COLUMNS, _variant_rows(log_id, mat.variants)
    )
    bulk_insert(
        session,
        LogDirectlyFollows.__tablename__,
        ("log_id", "source", "target", "count"),
        [
            (log_id, str(r.source), str(r.target), int(r.count))
            for r in mat.df_pairs.itertuples(index=False)
        ],
    )
    bulk_insert(
        session,
        LogActivity.__tablename__,
        ("log_id", "name", "event_count", "case_count"),
        [
            (log_id, str(r.name), int(r.event_count), int(r.case_count))
            for r in mat.activities.itertuples(index=False)
        ],
    )
    bulk_insert(
        session,
        LogRoleValue.__tablename__,
        ("log_id", "attribute", "value", "event_count", "case_count"),
        [
            (log_id, str(r.attribute), str(r.value), int(r.event_count), int(r.case_count))
            for r in mat.role_values.itertuples(index=False)
        ],
    )


def list_logs(*, session: Session) -> list[EventLog]:
    """Every imported log version."""
    return queries.list_logs(session=session)


def latest_log(*, session: Session, name: str) -> EventLog | None:
    """The newest version of the log `name`, or None when none is imported."""
    return queries.latest_log(session=session, name=name)
