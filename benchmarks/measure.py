"""What every benchmark script measures the same way (imported beside them)."""

import resource


def peak_mb() -> float:
    """This process's peak resident memory (VmHWM). Unlike ru_maxrss, which Linux carries
    over exec from the parent, it counts only what this program used."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_json(script: str, *args: str) -> dict:
    """Run `script` with `args` in a fresh interpreter; its last line of output, as JSON."""
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, script, *args], capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        raise SystemExit(f"{script} {' '.join(args)} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def family_pss_mb(pid: int) -> float:
    """The proportional set size (PSS: a shared page counted once, split between its
    sharers) of process `pid` and its descendants together, in MB: the memory a piece of
    work shared by forked processes takes. 0 once the process has ended."""
    total = 0
    for member in [pid, *_descendants(pid)]:
        try:
            with open(f"/proc/{member}/smaps_rollup") as rollup:
                total += next(int(x.split()[1]) for x in rollup if x.startswith("Pss:"))
        except (OSError, StopIteration):
            continue  # ended between the listing and the read
    return total / 1024


def run_sampled(command: list[str], every: float = 0.5) -> tuple[str, str, int, float]:
    """Run `command`; its output, error output, exit code and the peak of `family_pss_mb`
    sampled every `every` seconds from outside (a thread inside would change the work:
    the app spawns rather than forks where threads run)."""
    import contextlib
    import subprocess
    import tempfile

    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, text=True)
        peak = 0.0
        while process.poll() is None:
            peak = max(peak, family_pss_mb(process.pid))
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(every)
        out.seek(0), err.seek(0)
        return out.read(), err.read(), process.returncode, peak


def _descendants(pid: int) -> list[int]:
    import os

    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as listed:
                found += [int(c) for c in listed.read().split()]
        except OSError:
            continue
    return found + [g for c in found for g in _descendants(c)]


def page_views(at, page: str, runs: int, *, background_after: int) -> tuple[list, list]:
    """Render `page` `runs` times in the AppTest session `at`: the seconds of each view, and
    the seconds waited for the work the page started in the background after each of the
    first `background_after` views."""
    import time

    from itsmreview.summaries.service import wait_for_background

    times, waits = [], []
    for run in range(runs):
        start = time.perf_counter()
        at.switch_page(f"views/{page}.py").run()
        times.append(time.perf_counter() - start)
        if at.exception:
            raise SystemExit(f"page {page} failed: {at.exception}")
        if run < background_after:
            start = time.perf_counter()
            wait_for_background(timeout=900)
            waits.append(time.perf_counter() - start)
    return times, waits
