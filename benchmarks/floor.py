"""The floor of any import that orders a CSV log's events and materialises them: DuckDB alone
reads the CSV (every column text, no trimming or checks), writes the events sorted by case
and time to a parquet file (`COPY ... ORDER BY`), then the log engine's passes run over that
file. Nothing else (checks, encodings, the database, the storage) is done, so an import
cannot be faster than this; `logs.py` and `bpi2014.py` time it beside the bare read."""

import tempfile
import time
from pathlib import Path

import duckdb
from itsmreview.coverage.engine import materialise_file, memory_limit


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def sorted_copy_then_engine(
    csv: Path,
    *,
    case: str,
    activity: str,
    timestamp: str,
    formats: list[str] | None = None,
    resource: str | None = None,
    roles: tuple[str, ...] = (),
    sep: str = ",",
    encoding: str = "utf-8",
) -> dict:
    """Seconds of the sorted copy and of the engine, and the variants found. `formats`:
    strptime formats of the timestamps (None: ISO 8601, cast)."""
    stamp = (
        f"CAST({_quoted(timestamp)} AS TIMESTAMP)"
        if formats is None
        else f"strptime({_quoted(timestamp)}, {list(formats)!r})"
    )
    picked = [
        f"{_quoted(case)} AS case_id",
        f"{_quoted(activity)} AS activity",
        f"{stamp} AS timestamp",
        *([f"{_quoted(resource)} AS resource"] if resource else []),
        *(_quoted(role) for role in roles),
    ]
    with tempfile.TemporaryDirectory(prefix="itsmreview-floor-") as scratch:
        out = Path(scratch) / "events.parquet"
        connection = duckdb.connect(
            config={"memory_limit": memory_limit(None), "temp_directory": scratch}
        )
        start = time.perf_counter()
        connection.execute(
            f"COPY (SELECT {', '.join(picked)} FROM read_csv(?, delim = ?, header = true, "
            "all_varchar = true, encoding = ?, ignore_errors = false) "
            f"ORDER BY case_id, timestamp) TO '{out}' (FORMAT parquet)",
            [str(csv), sep, encoding],
        )
        copied = time.perf_counter() - start
        connection.close()
        start = time.perf_counter()
        found = materialise_file(out)
        return {
            "copy_seconds": copied,
            "engine_seconds": time.perf_counter() - start,
            "variants": found.summary["variants"],
        }
