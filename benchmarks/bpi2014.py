"""BPI 2014's four tables: `python benchmarks/bpi2014.py` (one command).

Writes the four tables at the public files' size (synthetic, about 690,000 rows), then runs
each contender in a fresh child process, 3 times (medians; ratios against pandas, measured in
the same run):

- read: `coverage.linked.read_linked` (events and case attributes, validated);
- import: `itsmreview log import FOLDER --preset bpi2014` as a service call into a fresh
  SQLite database (read, materialise variants, store, write parquet);
- pandas: `pandas.read_csv` of the four files plus the same join (`merge` of the incidents'
  attributes and the related change onto the activities, interactions counted per incident)
  and the day-first timestamps parsed;
- pm4py: the activity table alone, read with pandas, then pm4py's `format_dataframe` and
  `get_variants`;
- bare read: DuckDB's `COUNT(*)` over each of the four files (reading them once: issue 34's
  yardstick, "materialise in <= 2x the bare read");
- floor: DuckDB's sorted copy of the activity table alone to parquet, then the log engine
  (`floor.py`): a lower bound of any import that orders and materialises the events, even
  without the other three tables.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run with PYTHONSAFEPATH
from measure import peak_mb, run_json  # noqa: E402


def child(task: str, folder: str) -> dict:
    import pandas as pd
    from itsmreview.coverage.synthetic_bpi2014 import FILES, INCIDENT_STAMP, STAMP

    if task == "pm4py":
        import pm4py
    if task in ("bare-read", "floor"):  # imported before the clock starts, as pm4py is
        import duckdb
        from floor import sorted_copy_then_engine
    files = {k: Path(folder) / n for k, n in FILES.items()}
    start = time.perf_counter()
    extra = {}
    if task == "bare-read":
        connection = duckdb.connect()
        extra = {
            "rows": sum(
                connection.execute(
                    "SELECT count(*) FROM read_csv(?, delim = ';', header = true, "
                    "all_varchar = true, encoding = 'latin-1')",
                    [str(p)],
                ).fetchone()[0]
                for p in files.values()
            )
        }
    elif task == "floor":
        extra = sorted_copy_then_engine(
            files["activities"],
            case="Incident ID",
            activity="IncidentActivity_Type",
            timestamp="DateStamp",
            formats=[STAMP],
            roles=("Assignment Group",),
            sep=";",
            encoding="latin-1",
        )
    elif task == "read":
        from itsmreview.coverage.linked import read_linked

        found = read_linked(files)
        extra = {"events": len(found.events), "cases": len(found.cases)}
    elif task == "import":
        from itsmreview.coverage.service import import_log
        from itsmreview.db import create_db_engine, session_scope, upgrade_database

        with tempfile.TemporaryDirectory() as scratch:
            engine = create_db_engine(f"sqlite:///{scratch}/bench.db")
            upgrade_database(engine)
            _storage_in(scratch)
            start = time.perf_counter()
            with session_scope(engine) as session:
                log = import_log(folder, session=session, preset="bpi2014").log
                extra = {"events": log.n_events, "variants": log.n_variants}
    elif task == "pandas":
        read = {
            k: pd.read_csv(p, sep=";", encoding="latin-1", na_values=["#N/B", "#MULTIVALUE"])
            for k, p in files.items()
        }
        events = read["activities"]
        events["DateStamp"] = pd.to_datetime(events["DateStamp"], format=STAMP)
        incidents = read["incidents"].drop_duplicates("Incident ID")
        incidents = incidents.merge(
            read["changes"][["Change ID", "Change Type", "Risk Assessment"]],
            left_on="Related Change",
            right_on="Change ID",
            how="left",
        )
        for column in ("Open Time", "Resolved Time", "Close Time"):
            # the incident table writes its times with slashes, as the public file does
            incidents[column] = pd.to_datetime(incidents[column], format=INCIDENT_STAMP)
        counts = read["interactions"].groupby("Related Incident").size().rename("interactions")
        incidents = incidents.merge(counts, left_on="Incident ID", right_index=True, how="left")
        joined = events.merge(incidents, on="Incident ID", how="left")
        joined = joined.sort_values(["Incident ID", "DateStamp"], kind="stable")
        extra = {"events": len(joined)}
    elif task == "pm4py":
        frame = pd.read_csv(files["activities"], sep=";", encoding="latin-1")
        frame = pm4py.format_dataframe(
            frame,
            case_id="Incident ID",
            activity_key="IncidentActivity_Type",
            timestamp_key="DateStamp",
            timest_format=STAMP,
        )
        extra = {"variants": len(pm4py.get_variants(frame))}
    return {"seconds": time.perf_counter() - start, "peak_mb": peak_mb(), **extra}


def _storage_in(folder: str) -> None:
    """The log's files go to `folder` (the storage is a setting: ITSMREVIEW_STORAGE_URL)."""
    import os

    from itsmreview.settings import get_settings

    os.environ["ITSMREVIEW_STORAGE_URL"] = folder
    get_settings.cache_clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--incidents", type=int, default=0, help="default: the public size")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    with tempfile.TemporaryDirectory(prefix="itsmreview-bpi2014-") as scratch:
        _measure(Path(scratch), args)


def _measure(folder: Path, args) -> None:
    from itsmreview.coverage.synthetic_bpi2014 import generate_bpi2014, write_bpi2014

    started = time.perf_counter()
    tables = generate_bpi2014(
        incidents=args.incidents or 1, full_size=not args.incidents, seed=2014
    )
    write_bpi2014(tables, folder)
    rows = {k: len(v) for k, v in tables.items()}
    print(
        f"wrote {sum(rows.values()):,} rows ({rows}) in {time.perf_counter() - started:.0f} s, "
        f"{sum(p.stat().st_size for p in folder.iterdir()) / 2**20:.0f} MiB",
        flush=True,
    )
    results = {}
    for task in ("bare-read", "pandas", "read", "import", "pm4py", "floor"):
        runs = []
        for _ in range(args.repeats):
            runs.append(run_json(__file__, "--child", task, str(folder)))
        seconds = [r["seconds"] for r in runs]
        results[task] = {
            "median": statistics.median(seconds),
            "spread": (min(seconds), max(seconds)),
            "peak_mb": statistics.median(r["peak_mb"] for r in runs),
            **{k: v for k, v in runs[0].items() if k not in ("seconds", "peak_mb")},
        }
    base = results["pandas"]["median"]
    bare = results["bare-read"]["median"]
    print("\n| contender | median s (spread) | vs pandas | x bare read | peak MiB | result |")
    print("|---|---|---|---|---|---|")
    for task, r in results.items():
        shown = {k: v for k, v in r.items() if k not in ("median", "spread", "peak_mb")}
        print(
            f"| {task} | {r['median']:.2f} ({r['spread'][0]:.2f}-{r['spread'][1]:.2f}) | "
            f"{base / r['median']:.2f}x | {r['median'] / bare:.1f} | {r['peak_mb']:.0f} | "
            f"{shown} |"
        )


if __name__ == "__main__":
    main()
