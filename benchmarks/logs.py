"""Event logs beyond memory (issue 34): `python benchmarks/logs.py [--events 1000000,10000000]`.

Writes, by streaming (memory flat in N), a synthetic ITSM incident log of N events in BPI
2013's columns (the `bpi2013` preset reads it) with the shape of a large service desk:

- power-law variants: each case follows one of 20,000 paths of a Markov walk, drawn with
  Zipf weights, so a few variants hold most cases and a long tail holds one case each;
- 120 assignment groups at levels L1-L3, also Zipf-weighted, with escalation and ping-pong
  between a case's first and second group, and waits for the user;
- a long tail of 250 rare activities;
- lognormal waits between events, a case's start spread over three years.

Then, per size, each contender in a fresh child process with its peak memory (VmHWM):

- bare read: DuckDB's `COUNT(*)` over the CSV (reading the file once, the floor of any import);
- import: `itsmreview log import`'s service into a fresh SQLite database and a local storage;
- engine: `coverage.engine.materialise_file` over the import's events parquet;
- coverage: the coverage report of the imported log against 1,000 tasks' declared variants;
- pages (`--tasks` names it): the lead's Coverage and Variant explorer pages' server time
  on the imported log, cold (a fresh process) and warm;
- floor (`--tasks` names it): DuckDB's sorted copy of the CSV to parquet, then the engine
  (`floor.py`): what no import that orders and materialises the events can beat.

Prints medians of the repeats (min-max), the ratio to the bare read and the peak memory.
"""

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from itsmreview.coverage.synthetic import COLUMNS  # BPI 2013's, read by the bpi2013 preset

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run with PYTHONSAFEPATH
from measure import page_views, peak_mb, run_json  # noqa: E402

PATHS = 20_000
GROUPS = 120
RARE = 250
CASES_PER_CHUNK = 100_000
START = np.datetime64("2012-01-01T00:00:00", "s")
COMMON = [
    ("Queued", "Awaiting Assignment"),
    ("Accepted", "In Progress"),
    ("Accepted", "Assigned"),
    ("Accepted", "Wait - User"),
    ("Accepted", "Wait - Vendor"),
    ("Accepted", "Wait - Implementation"),
    ("Completed", "Resolved"),
    ("Completed", "Closed"),
    ("Completed", "In Call"),
    ("Unmatched", "Unmatched"),
]
OPEN, PROGRESS, ASSIGNED, WAIT_USER, WAIT_VENDOR, WAIT_IMPL, RESOLVED, CLOSED, IN_CALL, _ = range(
    len(COMMON)
)
STATUSES = COMMON + [("Accepted", f"Rare step {i:03d}") for i in range(RARE)]
COUNTRIES = np.array(["Sweden", "Netherlands", "France", "Belgium", "Poland", "India", "USA"])
IMPACTS = np.array(["Low", "Medium", "High", "Major"])


def _zipf(n: int, exponent: float) -> np.ndarray:
    weights = 1.0 / np.arange(1, n + 1) ** exponent
    return weights / weights.sum()


def _paths(rng: np.random.Generator) -> list[list[tuple[int, int]]]:
    """The Markov walks cases follow: (activity, group slot) per event; slot 0 is the case's
    first group, 1 its second (after an escalation; ping-pong goes back and forth)."""
    rare = _zipf(RARE, 1.1)
    walks = []
    for _ in range(PATHS):
        slot = 0
        walk = [(OPEN, slot)] if rng.random() < 0.7 else [(IN_CALL, slot)]
        if walk[0][0] == IN_CALL and rng.random() < 0.6:
            walks.append(walk + [(CLOSED, slot)])
            continue
        walk.append((ASSIGNED, slot))
        while len(walk) < 60:
            step = rng.random()
            if step < 0.40:
                walk.append((PROGRESS, slot))
            elif step < 0.52:
                walk.append((WAIT_USER, slot))
                walk.append((PROGRESS, slot))
            elif step < 0.57:
                walk.append((int(rng.choice([WAIT_VENDOR, WAIT_IMPL])), slot))
            elif step < 0.70:  # escalation, or ping-pong back
                slot = 1 - slot
                walk.append((OPEN, slot))
                walk.append((ASSIGNED, slot))
            elif step < 0.73:
                walk.append((len(COMMON) + int(rng.choice(RARE, p=rare)), slot))
            else:
                break
        walk.append((RESOLVED, slot))
        if rng.random() < 0.8:
            walk.append((CLOSED, slot))
        walks.append(walk)
    return walks


def write_log(path: Path, events: int, seed: int = 34) -> dict:
    """A CSV log of at least `events` events, written chunk by chunk; returns its counts."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    rng = np.random.default_rng(seed)
    walks = _paths(np.random.default_rng(seed + 1))
    lengths = np.array([len(w) for w in walks])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    flat_activity = np.array([a for w in walks for a, _ in w])
    flat_slot = np.array([s for w in walks for _, s in w])
    path_weights = _zipf(PATHS, 1.05)
    group_weights = _zipf(GROUPS, 0.9)
    group_level = np.array(["L1", "L2", "L3"])[np.arange(GROUPS) % 3]
    group_names = np.array([f"G{g:03d} {group_level[g]}" for g in range(GROUPS)])
    status = np.array([s for s, _ in STATUSES])
    sub_status = np.array([s for _, s in STATUSES])
    activity = np.array([f"{s}-{sub}" for s, sub in STATUSES])
    written = cases = 0
    options = pacsv.WriteOptions(include_header=True)
    schema = pa.schema([(name, pa.string()) for name in COLUMNS])
    with pacsv.CSVWriter(str(path), schema, write_options=options) as writer:
        mean_length = float((lengths * path_weights).sum())
        while written < events:
            chunk = min(CASES_PER_CHUNK, int((events - written) / mean_length) + 1)
            chosen = rng.choice(PATHS, size=chunk, p=path_weights)
            n = lengths[chosen]
            total = int(n.sum())
            case_of = np.repeat(np.arange(chunk), n)
            first = np.repeat(np.cumsum(n) - n, n)
            index = np.repeat(starts[chosen], n) + np.arange(total) - first
            act, slot = flat_activity[index], flat_slot[index]
            groups = rng.choice(GROUPS, size=(chunk, 2), p=group_weights)
            group = groups[case_of, slot]
            gaps = rng.lognormal(mean=8.0, sigma=1.6, size=total).astype(np.int64)
            gaps[first == np.arange(total)] = 0
            offset = np.cumsum(gaps)
            offset -= np.repeat(offset[np.cumsum(n) - n], n)
            begin = rng.integers(0, 3 * 365 * 86400, size=chunk)
            stamps = START + (begin[case_of] + offset).astype("timedelta64[s]")
            country = rng.integers(0, len(COUNTRIES), size=chunk)
            impact = rng.choice(len(IMPACTS), size=chunk, p=[0.3, 0.55, 0.13, 0.02])
            product = rng.zipf(1.3, size=chunk) % 700
            numbers = np.char.add("1-", (cases + np.arange(chunk)).astype(str))
            resource = rng.integers(0, 8, size=total)
            columns = {
                "SR Number": numbers[case_of],
                "Change Date+Time": np.datetime_as_string(stamps, unit="s"),
                "Status": status[act],
                "Sub Status": sub_status[act],
                "Activity": activity[act],
                "Involved ST Function Div": np.char.add("F", (group % 11).astype(str)),
                "Involved Org line 3": np.char.add("Org line ", (group % 5).astype(str)),
                "Involved ST": group_names[group],
                "ST Level": group_level[group],
                "SR Latest Impact": IMPACTS[impact][case_of],
                "Product": np.char.add("PROD", product.astype(str))[case_of],
                "Country": COUNTRIES[country][case_of],
                "Owner Country": COUNTRIES[country][case_of],
                "Resource": np.char.add(
                    np.char.add(group_names[group], " #"), resource.astype(str)
                ),
            }
            writer.write_table(pa.table({k: pa.array(v) for k, v in columns.items()}, schema))
            written += total
            cases += chunk
    return {"events": written, "cases": cases, "mb": path.stat().st_size / 2**20}


def child(task: str, path: str) -> dict:
    """One contender once. `import` leaves its database and storage beside the log (in
    work/), and `engine` and `coverage` read what the last import left there."""
    folder = Path(path).parent / "work"
    os.environ.setdefault("ITSMREVIEW_STORAGE_URL", str(folder / "storage"))  # --storage s3
    size = Path(path).stat().st_size  # 100 M events are 16 GB, over the default bound
    os.environ["ITSMREVIEW_MAX_LOG_BYTES"] = str(max(size, 4 * 2**30))
    import duckdb
    from itsmreview.coverage.engine import materialise_file
    from itsmreview.coverage.service import import_log, latest_log
    from itsmreview.db import create_db_engine, session_scope, upgrade_database

    if task == "import":
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
    engine = create_db_engine(f"sqlite:///{folder}/bench.db")
    if task == "import":
        upgrade_database(engine)
    before = peak_mb()
    start = time.perf_counter()
    extra: dict = {}
    if task == "bare-read":
        connection = duckdb.connect()
        extra["rows"] = connection.execute(
            "SELECT count(*) FROM read_csv(?, all_varchar = true)", [path]
        ).fetchone()[0]
        connection.close()
    elif task == "import":
        with session_scope(engine) as session:
            extra["variants"] = import_log(
                path, session=session, preset="bpi2013", name="big"
            ).log.n_variants
    elif task == "engine":
        from itsmreview.storage import get_storage

        with session_scope(engine) as session:
            events_path = latest_log(session=session, name="big").events_path
        storage = get_storage()
        where = storage.path(events_path, "events.parquet")
        start = time.perf_counter()
        if storage.scheme == "s3":  # read where it lies, through the storage's file system
            found = materialise_file(f"s3://{where}", filesystem=storage.fs)
        else:
            found = materialise_file(where)
        extra["variants"] = found.summary["variants"]
    elif task == "floor":
        from floor import sorted_copy_then_engine
        from itsmreview.coverage.eventlog import PRESETS

        mapping = PRESETS["bpi2013"]
        extra = sorted_copy_then_engine(
            Path(path),
            case=mapping.case,
            activity=mapping.activity,
            timestamp=mapping.timestamp,
            resource=mapping.resource,
            roles=mapping.roles,
        )
    elif task == "coverage":
        extra.update(_coverage(engine))
    elif task == "pages":
        extra.update(_pages(engine, folder))
    else:
        raise SystemExit(f"unknown task {task}")
    return {
        "seconds": time.perf_counter() - start,
        "peak_mb": peak_mb(),
        "baseline_mb": before,
        **extra,
    }


def _coverage(engine) -> dict:
    """The coverage report of the imported log against 1,000 tasks' declared variants (the
    500 most frequent and 500 drawn from the tail), as the Coverage page computes it."""
    from itsmreview.coverage.metrics import TaskSource, compute_coverage
    from itsmreview.coverage.report import load_log_tables
    from itsmreview.coverage.service import latest_log
    from itsmreview.db import session_scope

    with session_scope(engine) as session:
        log = latest_log(session=session, name="big")
        start = time.perf_counter()
        tables = load_log_tables(session=session, log_id=log.id, n_cases=log.n_cases)
        read = time.perf_counter() - start
    raw = tables.raw
    picked = list(raw.sequence[:500]) + list(raw.sequence[500 :: max(1, len(raw) // 500)][:500])
    sources = [TaskSource(task_id=f"t{i}", sequences=[tuple(s)]) for i, s in enumerate(picked)]
    start = time.perf_counter()
    report = compute_coverage(tables, sources)
    return {
        "tables_seconds": read,
        "coverage_seconds": time.perf_counter() - start,
        "variant_coverage": report.variant_coverage,
    }


PASSWORD = "logs-bench-pass"
PAGES = ("coverage", "variants")


def _pages(engine, folder: Path, warm: int = 5) -> dict:
    """Server time of the lead's Coverage and Variant explorer pages on the imported log, as
    Streamlit's AppTest renders them in this fresh process: each page's first view (cold:
    nothing of the log read yet; for Coverage, the report it then computes in the
    background, and its view once that is done), then the median of `warm` views. The first
    call also writes a lead and 1,000 tasks declaring variants of the log (not timed)."""
    os.environ["ITSMREVIEW_DATABASE_URL"] = f"sqlite:///{folder}/bench.db"
    os.environ["ITSMREVIEW_DATA_DIR"] = str(folder)
    import itsmreview
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.accounts.service import create_user
    from itsmreview.catalog.native import NativeTask
    from itsmreview.catalog.service import import_tasks
    from itsmreview.coverage import queries as coverage_queries
    from itsmreview.coverage.service import latest_log
    from itsmreview.db import session_scope
    from streamlit.testing.v1 import AppTest

    with session_scope(engine) as session:
        if user_by_username(session=session, username="lead") is None:
            create_user(session=session, username="lead", role="lead", password=PASSWORD)
            log = latest_log(session=session, name="big")
            frame = coverage_queries.variants_frame(session=session, log_id=log.id)
            picked = list(frame.sequence[:500])
            picked += list(frame.sequence[500 :: max(1, len(frame) // 500)][:500])
            import_tasks(
                [
                    NativeTask(
                        id=f"big-{i:04d}",
                        title=f"Incident path {i}",
                        persona="L2 resolver",
                        track="single-agent",
                        instruction="Work the incident along its path in the log.",
                        source={"log": "big", "variants": [list(sequence)]},
                    )
                    for i, sequence in enumerate(picked)
                ],
                session=session,
            )
    app = str(Path(itsmreview.__file__).parent / "streamlit_app.py")
    at = AppTest.from_file(app, default_timeout=900)
    at.run()
    time.sleep(1.0)  # a person types their name and password
    at.text_input(key="login_username").input("lead")
    at.text_input(key="login_password").input(PASSWORD)
    at.button(key="FormSubmitter:login-Log in").click().run()
    out = {}
    for page in PAGES:
        times, waits = page_views(at, page, warm + 2, background_after=1)
        out[f"{page}_background_s"] = waits[0]
        out[f"{page}_cold_s"] = times[0]
        out[f"{page}_computed_s"] = times[1]
        out[f"{page}_warm_ms"] = statistics.median(times[2:]) * 1000
    # a rare variant's detail (the page's last choice), first view then again
    chosen = at.selectbox[1]
    for view in ("rare_variant_first_s", "rare_variant_again_s"):
        start = time.perf_counter()
        if view.endswith("first_s"):
            chosen.select_index(len(chosen.options) - 1).run()
        else:
            at.run()
        out[view] = time.perf_counter() - start
        if at.exception:
            raise SystemExit(f"a rare variant failed: {at.exception}")
    return out


@contextlib.contextmanager
def _s3_server(folder: Path):
    """SeaweedFS serving S3 on free ports of 127.0.0.1 for the run, as the team deployment
    starts it; the children's storage is a prefix of its bucket."""
    import socket
    import subprocess

    import s3fs
    from itsmreview.deploy.team import WEED_PORTS, weed, weed_mini

    def free(port: int) -> bool:
        with socket.socket() as probe:
            return probe.connect_ex(("127.0.0.1", port)) != 0

    offset = next(  # each server's gRPC port is its port + 10000
        o
        for o in range(1000, 9000, 500)
        if all(free(p + o) and free(p + o + 10000) for p in WEED_PORTS.values())
    )
    ports = {name: port + offset for name, port in WEED_PORTS.items()}
    keys = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench-secret"}
    folder.mkdir(parents=True)
    process = subprocess.Popen(
        weed_mini(weed(), folder, ports, "bench"),
        cwd=folder,
        env={**os.environ, **keys},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{ports['s3.port']}"
    os.environ.update(
        keys,
        AWS_ENDPOINT_URL=endpoint,
        AWS_REGION="us-east-1",
        ITSMREVIEW_STORAGE_URL="s3://bench/logs",
    )
    client = s3fs.S3FileSystem(
        client_kwargs={"endpoint_url": endpoint, "region_name": "us-east-1"},
        skip_instance_cache=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                client.ls("bench")
                break
            except Exception:  # noqa: BLE001 - not up yet
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("SeaweedFS did not start") from None
                time.sleep(0.5)
        print(f"storage: S3 at {endpoint}, bucket bench", flush=True)
        yield
    finally:
        process.terminate()
        process.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", default="1000000,10000000", help="sizes, comma-separated")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--tasks", default="bare-read,import,engine,coverage", help="contenders, comma-separated"
    )
    parser.add_argument("--keep", metavar="DIR", help="write the logs into DIR and reuse them")
    parser.add_argument(
        "--storage",
        choices=("local", "s3"),
        default="local",
        help="where imports put the log's files: a local folder, or S3 (SeaweedFS's "
        "`weed mini` on 127.0.0.1, started for the run)",
    )
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores shared)")
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        if args.storage == "s3":
            stack.enter_context(_s3_server(Path(tmp) / "s3"))
        folder = Path(args.keep or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for size in (int(float(s)) for s in args.events.split(",")):
            path = folder / f"itsm-{size}.csv"
            if not path.exists():
                start = time.perf_counter()
                made = write_log(path, size)
                print(
                    f"wrote {made['events']:,} events, {made['cases']:,} cases, "
                    f"{made['mb']:,.0f} MiB in {time.perf_counter() - start:.0f} s",
                    flush=True,
                )
            rows = {}
            for task in args.tasks.split(","):
                runs = [run_json(__file__, "--child", task, str(path)) for _ in range(args.repeats)]
                rows[task] = runs
                seconds = [r["seconds"] for r in runs]
                ratio = ""  # against the bare read of this run, for what reads the log
                if "bare-read" in rows and task in ("import", "engine", "floor"):
                    base = statistics.median(r["seconds"] for r in rows["bare-read"])
                    ratio = f"{statistics.median(seconds) / base:6.2f}x bare read  "
                peak = statistics.median(r["peak_mb"] for r in runs)
                detail = {
                    k: v
                    for k, v in runs[0].items()
                    if k not in ("seconds", "peak_mb", "baseline_mb")
                }
                print(
                    f"{size:>12,} events  {task:<10} {statistics.median(seconds):8.2f} s "
                    f"({min(seconds):.2f}-{max(seconds):.2f})  "
                    f"{ratio}"
                    f"peak {peak:,.0f} MiB  {json.dumps(detail)}",
                    flush=True,
                )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
