"""The log engine: `variants.materialise`'s figures from an events parquet file, by DuckDB.

The events are read where they are and never all held in memory: DuckDB works within a
memory limit (`ITSMREVIEW_LOG_MEMORY`) and spills the rest to a temporary folder. Only the
small results (variants, pairs, activities, role values, one row per case) become pandas
frames, equal to `variants.materialise`'s for the same events: within a case events go by
timestamp, ties in file order (as `eventlog.normalise` orders them); cases and variants are
numbered in order of first appearance; rank 1 is the most frequent variant, ties go to the
variant seen first; example cases are a variant's first cases.
"""

import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
from itsmreview.coverage.eventlog import ROLE_PREFIX
from itsmreview.coverage.variants import EXAMPLE_CASES_PER_VARIANT, Materialised, variant_frame
from itsmreview.settings import get_settings

DEFAULT_MEMORY_FRACTION = 0.5
_HASHES = {"raw": "h1, h2", "collapsed": "c1, c2"}
REQUIRED_COLUMNS = ("case_id", "activity", "timestamp")
_SIZE = re.compile(r"^\s*\d+(\.\d+)?\s*([KMGT]i?B|B)\s*$", re.IGNORECASE)


def memory_limit(setting: str | None = None) -> str:
    """DuckDB's `memory_limit` for a setting: a size as given, a fraction (0 < f <= 1) of the
    machine's memory (`machine_memory`) in MiB; None reads ITSMREVIEW_LOG_MEMORY (default: a
    half).

    >>> memory_limit("4GB"), memory_limit(" 512 MiB ")
    ('4GB', '512 MiB')
    >>> memory_limit("1").endswith("MiB")
    True
    """
    text = setting if setting is not None else get_settings().log_memory
    text = (text or str(DEFAULT_MEMORY_FRACTION)).strip()
    if _SIZE.match(text):
        return text
    try:
        fraction = float(text)
    except ValueError:
        fraction = -1.0
    if not 0 < fraction <= 1:
        raise ValueError(
            f"ITSMREVIEW_LOG_MEMORY={text!r} is neither a size (e.g. 4GB, 512MiB) nor a "
            "fraction of the machine's memory between 0 and 1 (e.g. 0.25)"
        )
    return f"{max(int(machine_memory() * fraction) // 2**20, 1)}MiB"


# a container's memory limit (cgroup v2, then v1): a worker limited to 16 GiB on a larger host
CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def machine_memory(cgroup_limits: tuple[str, ...] = CGROUP_LIMITS) -> int:
    """Bytes of memory this process may use: the physical memory, or a smaller limit of the
    container it runs in."""
    found = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for name in cgroup_limits:
        try:
            text = Path(name).read_text().strip()
        except OSError:
            continue
        if text.isdigit():  # "max": no limit
            found = min(found, int(text))
    return found


def materialise_file(
    path: Path | str,
    *,
    memory: str | None = None,
    spill_dir: Path | str | None = None,
    threads: int | None = None,
    filesystem=None,
) -> Materialised:
    """`variants.materialise` of the events in the parquet file at `path` (the canonical
    event table's columns), computed out of core. The file need not be ordered: events are
    taken by case in order of first appearance, then timestamp, then file order, as
    `eventlog.normalise` orders them.

    `memory`: a size or fraction as ITSMREVIEW_LOG_MEMORY takes (default: that setting).
    `spill_dir`: where a temporary spill folder is made (default: the system's).
    `threads`: DuckDB's threads (default: one per core); each needs some memory of its own,
    so a very small limit wants few threads.
    `filesystem`: an fsspec file system DuckDB reads `path` through (an `s3://` storage).
    Raises ValueError for a missing column, events without case, activity or timestamp,
    an empty log, or a memory limit too small for the work (naming the setting).
    """
    with log_connection(
        path, "the log engine", memory=memory, spill_dir=spill_dir, threads=threads
    ) as connection:
        if filesystem is not None:
            connection.register_filesystem(filesystem)
        return _materialise(connection, str(path))


@contextmanager
def log_connection(
    subject,
    doing: str,
    *,
    memory: str | None = None,
    spill_dir: Path | str | None = None,
    threads: int | None = None,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB connection within `memory` (as ITSMREVIEW_LOG_MEMORY takes;
    default: that setting) that spills to a temporary folder in `spill_dir` (the system's by
    default; removed afterwards), insertion order off (results are ordered explicitly).
    Running out of memory inside is a ValueError naming `subject` (a file), what was being
    done and the setting."""
    limit = memory_limit(memory)
    with tempfile.TemporaryDirectory(prefix="itsmreview-log-", dir=spill_dir) as spill:
        # work tables are ordinary tables of an in-memory database: DuckDB spills them too
        connection = duckdb.connect(
            ":memory:",
            config={
                "memory_limit": limit,
                "temp_directory": spill,
                # unordered work may spill and run in parallel
                "preserve_insertion_order": False,
            }
            | ({"threads": threads} if threads else {}),
        )
        try:
            yield connection
        except duckdb.OutOfMemoryException as exc:
            # DuckDB's first line says what it lacked; its advice names its own SET commands
            raise ValueError(
                f"{subject}: {doing} ran out of memory within memory_limit={limit} "
                f"({str(exc).splitlines()[0]}); raise ITSMREVIEW_LOG_MEMORY"
            ) from None
        finally:
            connection.close()


def _materialise(con: duckdb.DuckDBPyConnection, path: str) -> Materialised:
    columns = _columns(con, path)
    roles = [c for c in columns if c.startswith(ROLE_PREFIX)]
    con.read_parquet(path, file_row_number=True).create_view("events_file")
    n_events, missing, first_ns, last_ns = con.execute(
        "SELECT count(*), count(*) - least(count(case_id), count(activity), count(timestamp)),"
        " epoch_ns(min(timestamp)), epoch_ns(max(timestamp)) FROM events_file"
    ).fetchone()
    if n_events == 0:
        raise ValueError("cannot materialise an empty log")
    if missing:
        raise ValueError(
            f"{path}: {missing} event(s) lack a case id, activity or timestamp; "
            "normalise the log first"
        )
    names = _run(
        con,
        """
        CREATE TABLE activity_codes AS
        SELECT activity::VARCHAR AS name, (row_number() OVER (ORDER BY activity) - 1)::INTEGER
               AS code
        FROM (SELECT DISTINCT activity FROM events_file)
        """,
        "SELECT name FROM activity_codes ORDER BY code",
    )["name"]
    # every event with its place in its case (timestamp, ties in file order), the activity
    # before it, and its place in the collapsed sequence (runs of one activity folded)
    _run(
        con,
        """
        CREATE TABLE steps AS
        SELECT case_id, code, previous, file_row_number, timestamp_ns,
               row_number() OVER w AS pos,
               CASE WHEN code IS DISTINCT FROM previous
                    THEN sum((code IS DISTINCT FROM previous)::INTEGER) OVER w END AS cpos
        FROM (SELECT e.case_id::VARCHAR AS case_id, a.code, e.file_row_number,
                     epoch_ns(e.timestamp) AS timestamp_ns,
                     lag(a.code) OVER (PARTITION BY e.case_id
                                       ORDER BY e.timestamp, e.file_row_number) AS previous
              FROM events_file e JOIN activity_codes a ON e.activity = a.name)
        WINDOW w AS (PARTITION BY case_id ORDER BY timestamp_ns, file_row_number
                     ROWS UNBOUNDED PRECEDING)
        """,
    )
    # a sequence's identity: its length and two hashes of its (position, activity) pairs,
    # fixed-size states that spill; `_check_variants` then proves every group holds one
    # sequence, so the grouping is exact
    _run(
        con,
        f"""
        CREATE TABLE case_rows AS
        SELECT case_id, min(file_row_number) AS first_row, count(*) AS n_events,
               min(timestamp_ns) AS started_ns, max(timestamp_ns) AS ended_ns,
               {_sequence_hashes("pos", "h1", "h2")},
               count(cpos) AS n_kept, {_sequence_hashes("cpos", "c1", "c2")}
        FROM steps GROUP BY case_id
        """,
        """
        CREATE TABLE cases AS
        SELECT row_number() OVER (ORDER BY first_row) - 1 AS ord, case_id, n_events,
               started_ns, ended_ns, (ended_ns - started_ns)::DOUBLE / 1e9 AS throughput_s,
               n_events AS raw_length, h1, h2, n_kept AS collapsed_length, c1, c2
        FROM case_rows
        """,
        "DROP TABLE case_rows",
    )
    for level in ("raw", "collapsed"):
        con.execute(
            f"""
            CREATE TABLE {level}_variants AS
            SELECT row_number() OVER (ORDER BY first_ord) - 1 AS id, *
            FROM (SELECT {level}_length AS length, {_HASHES[level]}, count(*) AS case_count,
                         min(ord) AS first_ord
                  FROM cases GROUP BY ALL)
            """
        )
    con.execute(
        f"""
        CREATE TABLE case_variants AS
        SELECT c.ord, c.case_id, c.n_events, c.started_ns, c.ended_ns, c.throughput_s,
               r.id AS raw_id, k.id AS collapsed_id
        FROM cases c
        JOIN raw_variants r ON c.raw_length = r.length AND {_matching("c", "r", "raw")}
        JOIN collapsed_variants k
          ON c.collapsed_length = k.length AND {_matching("c", "k", "collapsed")}
        """
    )
    _run(con, "DROP TABLE cases", "ALTER TABLE case_variants RENAME TO cases")
    _check_variants(con, path)
    cases = _run(
        con,
        "SELECT case_id, n_events, started_ns, ended_ns, throughput_s, raw_id, collapsed_id "
        "FROM cases ORDER BY ord",
    )
    n_cases = len(cases["case_id"])
    raw = _variant_table(con, "raw", names, n_cases)
    collapsed = _variant_table(con, "collapsed", names, n_cases)
    df_pairs = _df_pairs(con, names)
    case_frame = pd.DataFrame(
        {
            "case_id": cases["case_id"],
            "n_events": cases["n_events"].astype(np.int64),
            "started_at": pd.to_datetime(cases["started_ns"], unit="ns", utc=True),
            "ended_at": pd.to_datetime(cases["ended_ns"], unit="ns", utc=True),
            "throughput_s": cases["throughput_s"],
            "variant_key": pd.Categorical.from_codes(cases["raw_id"], raw.keys),
            "collapsed_variant_key": pd.Categorical.from_codes(
                cases["collapsed_id"], collapsed.keys
            ),
        }
    )
    summary = {
        "cases": len(case_frame),
        "events": int(n_events),
        "activities": len(names),
        "variants": len(raw.counts),
        "collapsed_variants": len(collapsed.counts),
        "df_pairs": len(df_pairs),
        "singleton_variants": int((raw.counts == 1).sum()),
        "first_timestamp": pd.Timestamp(int(first_ns), unit="ns", tz="UTC"),
        "last_timestamp": pd.Timestamp(int(last_ns), unit="ns", tz="UTC"),
    }
    return Materialised(
        pd.concat([raw.table, collapsed.table], ignore_index=True),
        df_pairs,
        _activities(names, raw),
        _role_values(con, roles),
        case_frame,
        summary,
    )


def _sequence_hashes(position: str, first: str, second: str) -> str:
    """SQL: two independent hashes of a case's (position, activity) pairs, as columns `first`
    and `second`; events without a position (NULL) are left out."""
    kept = f"FILTER (WHERE {position} IS NOT NULL)"
    return (
        f"sum(hash({position}, code)) {kept} AS {first}, "
        f"bit_xor(hash(code, {position}, 'second')) {kept} AS {second}"
    )


def _matching(left: str, right: str, level: str) -> str:
    """SQL: the hashes of `level` equal in tables `left` and `right`."""
    return " AND ".join(f"{left}.{h} = {right}.{h}" for h in _HASHES[level].split(", "))


def _check_variants(con: duckdb.DuckDBPyConnection, path: str) -> None:
    """Raise when two different sequences share their length and hashes (not seen yet;
    the chance is about 2^-100 per pair): then some position holds two activities."""
    # one join, both levels: rows without a collapsed position are grouped but not judged
    found = con.execute(
        """
        SELECT count(*) FILTER (WHERE raw), count(*) FILTER (WHERE NOT raw) FROM (
            SELECT grouping(s.pos) = 0 AS raw
            FROM steps s JOIN cases c ON s.case_id = c.case_id
            GROUP BY GROUPING SETS ((c.raw_id, s.pos), (c.collapsed_id, s.cpos))
            HAVING min(s.code) <> max(s.code) AND (grouping(s.cpos) = 1 OR s.cpos IS NOT NULL))
        """
    ).fetchone()
    for level, clashes in zip(("raw", "collapsed"), found, strict=True):
        if clashes:
            raise ValueError(
                f"{path}: two different {level} sequences share a hash; materialise the log "
                "with itsmreview.coverage.variants.materialise instead"
            )


def _sequences(con: duckdb.DuckDBPyConnection, level: str) -> np.ndarray:
    """Each variant's activity codes (by variant id), read from its first case."""
    position = "pos" if level == "raw" else "cpos"
    return _run(
        con,
        f"""
        SELECT v.id, list(s.code ORDER BY s.{position}) AS seq
        FROM {level}_variants v JOIN cases c ON c.ord = v.first_ord
        JOIN steps s ON s.case_id = c.case_id
        WHERE s.{position} IS NOT NULL
        GROUP BY v.id ORDER BY v.id
        """,
    )["seq"]


def _columns(con: duckdb.DuckDBPyConnection, path: str) -> list[str]:
    """The file's columns; ValueError naming the file when it is unreadable or lacks one."""
    try:
        found = [
            row[0] for row in con.execute("SELECT name FROM parquet_schema(?)", [path]).fetchall()
        ]
    except duckdb.Error as exc:
        raise ValueError(f"{path}: not a readable parquet file ({exc})") from None
    lacking = [c for c in REQUIRED_COLUMNS if c not in found]
    if lacking:
        raise ValueError(
            f"{path}: not an event table: no column {', '.join(map(repr, lacking))} "
            f"(it has {', '.join(map(repr, found[1:]))})"
        )
    return found[1:]  # the first row is the schema's root


def _run(con: duckdb.DuckDBPyConnection, *statements: str) -> dict[str, np.ndarray]:
    """Run statements in turn; the last one's result as numpy columns (none: empty)."""
    for statement in statements[:-1]:
        con.execute(statement)
    result = con.execute(statements[-1])
    return result.fetchnumpy() if result.description else {}


@dataclass
class _Level:
    """A level's variants: the table by rank; keys, activity codes and case counts by id."""

    table: pd.DataFrame
    keys: np.ndarray
    codes: list[np.ndarray]
    counts: np.ndarray


def _variant_table(
    con: duckdb.DuckDBPyConnection, level: str, names: np.ndarray, n_cases: int
) -> _Level:
    """A level's variants, from the cases' variant ids and each variant's first case."""
    table, id_column = f"{level}_variants", f"{level}_id"
    found = _run(
        con,
        f"""
        WITH ranked AS (
            SELECT {id_column} AS id, ord, case_id, throughput_s,
                   row_number() OVER (PARTITION BY {id_column} ORDER BY throughput_s) AS k,
                   count(*) OVER (PARTITION BY {id_column}) AS n,
                   row_number() OVER (PARTITION BY {id_column} ORDER BY ord) AS nth
            FROM cases),
        per_variant AS (
            -- pandas' median: the middle value, or the mean of the middle two
            SELECT id,
                   (min(throughput_s) FILTER (WHERE k = (n + 1) // 2)
                    + max(throughput_s) FILTER (WHERE k = n // 2 + 1)) / 2 AS median,
                   list(case_id ORDER BY ord) FILTER (WHERE nth <= {EXAMPLE_CASES_PER_VARIANT})
                       AS examples
            FROM ranked GROUP BY id)
        SELECT v.id, v.case_count, p.median, p.examples
        FROM {table} v JOIN per_variant p ON v.id = p.id
        ORDER BY v.id
        """,
    )
    counts = found["case_count"].astype(np.int64)
    n_variants = len(counts)
    order = np.lexsort((np.arange(n_variants), -counts))
    rank = np.empty(n_variants, dtype=np.int64)
    rank[order] = np.arange(1, n_variants + 1)
    codes = [np.asarray(c, dtype=np.int64) for c in _sequences(con, level)]
    sequences = [names[c].tolist() for c in codes]
    table_frame = variant_frame(
        level,
        rank,
        sequences,
        counts,
        n_cases,
        found["median"].astype(np.float64),
        [list(e) for e in found["examples"]],
    )
    return _Level(
        table_frame.iloc[order].reset_index(drop=True),
        table_frame["sequence_key"].to_numpy(),
        codes,
        counts,
    )


def _df_pairs(con: duckdb.DuckDBPyConnection, names: np.ndarray) -> pd.DataFrame:
    """Directly-follows pairs inside cases with their counts, most frequent first."""
    found = _run(
        con,
        """
        SELECT previous AS source, code AS target, count(*) AS count
        FROM steps WHERE previous IS NOT NULL GROUP BY ALL
        """,
    )
    return pd.DataFrame(
        {
            "source": names[found["source"]],
            "target": names[found["target"]],
            "count": found["count"].astype(np.int64),
        }
    ).sort_values(["count", "source", "target"], ascending=[False, True, True], ignore_index=True)


def _activities(names: np.ndarray, raw: _Level) -> pd.DataFrame:
    """Each activity's event and case counts, most events first: from the raw variants, as
    every case holds exactly its variant's sequence (no pass over the events)."""
    n_names = len(names)
    variant = np.repeat(np.arange(len(raw.codes)), [len(c) for c in raw.codes])
    flat = np.concatenate(raw.codes)
    pairs = np.unique(variant * n_names + flat)  # each variant's activities, once
    frame = pd.DataFrame(
        {
            "name": names,
            "event_count": np.bincount(flat, weights=raw.counts[variant], minlength=n_names),
            "case_count": np.bincount(
                pairs % n_names, weights=raw.counts[pairs // n_names], minlength=n_names
            ),
        }
    ).astype({"event_count": np.int64, "case_count": np.int64})
    return frame.sort_values(["event_count", "name"], ascending=[False, True], ignore_index=True)


def _role_values(con: duckdb.DuckDBPyConnection, roles: list[str]) -> pd.DataFrame:
    """Per role attribute (in column order) and value (sorted), its event and case counts."""
    if not roles:
        return pd.DataFrame(columns=["attribute", "value", "event_count", "case_count"])
    # per role column (its index), each value's events and cases; a scan reads two columns
    parts = []
    for index, role in enumerate(roles):
        column = '"' + role.replace('"', '""') + '"'
        parts.append(
            f"""
            SELECT {index} AS attribute, value, sum(events)::BIGINT AS event_count,
                   count(*) AS case_count
            FROM (SELECT {column}::VARCHAR AS value, case_id, count(*) AS events
                  FROM events_file WHERE {column} IS NOT NULL GROUP BY ALL)
            GROUP BY value
            """
        )
    found = _run(con, " UNION ALL ".join(parts))
    frame = pd.DataFrame(
        {
            "attribute": found["attribute"],
            "value": found["value"],
            "event_count": found["event_count"].astype(np.int64),
            "case_count": found["case_count"].astype(np.int64),
        }
    )
    tables = []
    for index, role in enumerate(roles):
        table = frame[frame["attribute"] == index]
        tables.append(
            pd.DataFrame(
                {
                    "attribute": role[len(ROLE_PREFIX) :],
                    "value": table["value"].to_numpy(dtype=object),
                    "event_count": table["event_count"].to_numpy(),
                    "case_count": table["case_count"].to_numpy(),
                }
            ).sort_values("value", ignore_index=True)
        )
    return pd.concat(tables, ignore_index=True)
