"""A streamed CSV import's peak memory stays flat in the number of events (issue 34): each
import runs in a process of its own, whose high-water mark (VmHWM) is read at the end.

Not a timing test: about 30 seconds on two cores."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from itsmreview.coverage.synthetic import generate_log

CHILD = """
import sys
from pathlib import Path
from itsmreview.coverage.service import import_log
from itsmreview.db import session_scope

with session_scope() as session:
    log = import_log(Path(sys.argv[1]), session=session, preset="bpi2013").log
    assert log.n_events == int(sys.argv[2]), log.n_events
status = Path("/proc/self/status").read_text().splitlines()
print(next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) // 1024)
"""
BASE_EVENTS = 200_000
MARGIN_MIB = 100  # more events may add this much to a streamed import's peak, no more


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> dict[int, Path]:
    """Synthetic BPI 2013 CSV logs of 0.6 and 2.4 million events: copies of one generated
    log, each copy's cases renamed."""
    folder = tmp_path_factory.mktemp("large-logs")
    header, body = generate_log(events=BASE_EVENTS, seed=1).to_csv(index=False).split("\n", 1)
    found = {}
    for copies in (3, 12):
        path = folder / f"log-{copies}.csv"
        with open(path, "w", encoding="utf-8") as out:
            out.write(header + "\n")
            for k in range(copies):
                out.write(("\n" + body).replace("\n1-", f"\n{k + 1}-")[1:])
        found[copies * BASE_EVENTS] = path
    return found


def _peak_mib(path: Path, events: int, *, streamed: bool, template: Path, folder: Path) -> int:
    """The peak memory (MiB) of a process importing `path` into a fresh SQLite database."""
    database = folder / "import.db"
    for leftover in folder.glob("import.db*"):
        leftover.unlink()
    shutil.copyfile(template, database)
    shutil.rmtree(folder / "data", ignore_errors=True)
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONSAFEPATH": "1",
        "ITSMREVIEW_DATABASE_URL": f"sqlite:///{database}",
        "ITSMREVIEW_DATA_DIR": str(folder / "data"),
        "ITSMREVIEW_LOG_MEMORY": "128MB",
        "ITSMREVIEW_LOG_STREAM_BYTES": "0" if streamed else str(2**40),
    }
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), str(events)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return int(done.stdout.split()[-1])


def test_a_streamed_import_stays_flat_where_the_in_memory_one_grows(
    logs, migrated_templates, tmp_path
):
    template = migrated_templates["sqlite"]
    small, large = sorted(logs)

    def peak(events: int, streamed: bool) -> int:
        return _peak_mib(
            logs[events], events, streamed=streamed, template=template, folder=tmp_path
        )

    bound = peak(small, streamed=True) + MARGIN_MIB
    streamed_large, in_memory_large = peak(large, streamed=True), peak(large, streamed=False)
    print(f"peak MiB: bound {bound}, streamed {streamed_large}, in memory {in_memory_large}")
    assert streamed_large < bound < in_memory_large
