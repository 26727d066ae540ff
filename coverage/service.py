"""Importing an event log: read, validate, materialise, store all or nothing."""

import json
import shutil
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from itsmreview.coverage import queries
from itsmreview.coverage.eventlog import (
    PRESETS,
    XES_DEFAULT,
    ColumnMapping,
    file_sha256,
    log_format,
    read_log,
)
from itsmreview.coverage.models import (
    EventLog,
    LogActivity,
    LogDirectlyFollows,
    LogRoleValue,
    LogVariant,
)
from itsmreview.coverage.variants import materialise
from itsmreview.errors import InvalidInput
from itsmreview.ledger.service import append_entry
from itsmreview.settings import get_settings
from sqlalchemy import column as sa_column
from sqlalchemy import insert
from sqlalchemy import table as sa_table
from sqlmodel import Session

Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class ImportResult:
    log: EventLog
    created: bool


def resolve_mapping(
    path: Path, preset: str | None, mapping: ColumnMapping | None
) -> ColumnMapping | None:
    if preset:
        if preset not in PRESETS:
            raise InvalidInput(f"unknown preset {preset!r}; presets: {', '.join(sorted(PRESETS))}")
        return PRESETS[preset]
    if mapping is None and log_format(path) == "csv":
        raise InvalidInput(
            f"{path}: a CSV log needs --preset ({', '.join(sorted(PRESETS))}) or --case, "
            "--activity and --timestamp"
        )
    return mapping


def import_log(
    path: Path | str,
    *,
    session: Session,
    name: str | None = None,
    preset: str | None = None,
    mapping: ColumnMapping | None = None,
    actor_id: int | None = None,
    data_dir: Path | None = None,
    progress: Progress | None = None,
) -> ImportResult:
    """Import the log at `path`, or return the existing log when the same file and mapping
    were imported before. Raw events and cases go to parquet files under the data folder;
    everything else to the database in the caller's transaction.

    Raises InvalidInput with the file, rows and fix when the log cannot be read.
    """
    path = Path(path)
    if not path.is_file():
        raise InvalidInput(f"{path}: no such file")
    report = progress or (lambda _stage, _fraction: None)
    mapping = resolve_mapping(path, preset, mapping)
    mapping = mapping or XES_DEFAULT
    mapping_hash = mapping.digest()
    report("hashing", 0.05)
    with ThreadPoolExecutor(max_workers=1) as pool:
        # hashing and parsing both release the GIL, so they overlap on two cores
        hashing = pool.submit(file_sha256, path)
        if path.stat().st_size < PARALLEL_HASH_BYTES:
            hashing.result()
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
            events, used = read_log(path, mapping, progress=lambda stage: report(stage, 0.2))
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        sha = hashing.result()
    existing = queries.log_by_digest(session=session, sha256=sha, mapping_hash=mapping_hash)
    if existing is not None:
        return ImportResult(existing, created=False)
    report("materialising variants", 0.5)
    mat = materialise(events)
    name = name or path.name.split(".")[0]
    log = EventLog(
        name=name,
        version=queries.latest_version(session=session, name=name) + 1,
        source_path=str(path.resolve()),
        sha256=sha,
        mapping=used.to_dict(),
        mapping_hash=mapping_hash,
        preset=preset,
        n_cases=mat.summary["cases"],
        n_events=mat.summary["events"],
        n_activities=mat.summary["activities"],
        n_variants=mat.summary["variants"],
        n_collapsed_variants=mat.summary["collapsed_variants"],
        n_df_pairs=mat.summary["df_pairs"],
        n_singleton_variants=mat.summary["singleton_variants"],
        first_timestamp=mat.summary["first_timestamp"].to_pydatetime(),
        last_timestamp=mat.summary["last_timestamp"].to_pydatetime(),
        imported_by_id=actor_id,
    )
    session.add(log)
    session.flush()

    report("writing events", 0.7)
    target = (data_dir or get_settings().data_dir) / "logs" / f"{log.id}-{sha[:12]}"
    staging = Path(tempfile.mkdtemp(prefix=".import-", dir=_ensure(target.parent)))
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            # parquet files are written while the statistics go to the database
            written = pool.submit(_write_parquet, events, mat.cases, staging)
            report("storing statistics", 0.85)
            _insert_materialised(session, log.id, mat)
            written.result()
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    log.events_path = str(target.resolve())
    append_entry(
        session=session,
        artifact_type="event_log",
        artifact_id=f"{log.name}@{log.version}",
        action="import",
        source_kind="logs",
        reference=f"{path.name} sha256:{sha}",
        actor_id=actor_id,
        payload={"cases": log.n_cases, "events": log.n_events, "mapping": log.mapping},
    )
    session.flush()
    report("done", 1.0)
    return ImportResult(log, created=True)


PARALLEL_HASH_BYTES = 64 * 2**20  # smaller files are hashed first, so a re-import reads nothing


def _write_parquet(events, cases, folder: Path) -> None:
    events.to_parquet(folder / "events.parquet", index=False)
    cases.to_parquet(folder / "cases.parquet", index=False)


def _ensure(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# LogVariant's columns without SQL types: rows arrive with JSON already serialised, which
# spares SQLAlchemy a per-value conversion on imports with 100,000 variants
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
_RAW_VARIANTS = sa_table(LogVariant.__tablename__, *(sa_column(c) for c in _VARIANT_COLUMNS))


def _variant_rows(log_id: int, variants) -> list[dict]:
    medians = variants["median_throughput_s"].astype(float).to_numpy()
    return [
        {
            "log_id": log_id,
            "level": level,
            "rank": int(rank),
            "sequence": json.dumps(sequence),
            "sequence_key": key,
            "length": int(length),
            "case_count": int(count),
            "share": float(share),
            "median_throughput_s": None if median != median else median,
            "example_case_ids": json.dumps(examples),
        }
        for level, rank, sequence, key, length, count, share, median, examples in zip(
            variants["level"],
            variants["rank"],
            variants["sequence"],
            variants["sequence_key"],
            variants["length"],
            variants["case_count"],
            variants["share"],
            medians.tolist(),
            variants["example_case_ids"],
            strict=True,
        )
    ]


def _insert_materialised(session: Session, log_id: int, mat) -> None:
    session.execute(insert(_RAW_VARIANTS), _variant_rows(log_id, mat.variants))
    session.execute(
        insert(LogDirectlyFollows),
        [
            {
                "log_id": log_id,
                "source": str(r.source),
                "target": str(r.target),
                "count": int(r.count),
            }
            for r in mat.df_pairs.itertuples(index=False)
        ],
    )
    session.execute(
        insert(LogActivity),
        [
            {
                "log_id": log_id,
                "name": str(r.name),
                "event_count": int(r.event_count),
                "case_count": int(r.case_count),
            }
            for r in mat.activities.itertuples(index=False)
        ],
    )
    if len(mat.role_values):
        session.execute(
            insert(LogRoleValue),
            [
                {
                    "log_id": log_id,
                    "attribute": str(r.attribute),
                    "value": str(r.value),
                    "event_count": int(r.event_count),
                    "case_count": int(r.case_count),
                }
                for r in mat.role_values.itertuples(index=False)
            ],
        )
