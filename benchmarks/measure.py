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
