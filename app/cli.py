"""The `itsmreview` command line: a thin client of the service functions."""

import functools
import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from itsmreview import __version__
from itsmreview.errors import ItsmReviewError
from itsmreview.settings import get_settings

app = typer.Typer(
    help="itsmreview: expert review of ITSM agent-benchmark tasks next to real process logs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Database migrations.", no_args_is_help=True)
users_app = typer.Typer(help="User accounts (experts, leads, admins).", no_args_is_help=True)
log_app = typer.Typer(help="Event logs: import and statistics.", no_args_is_help=True)
tasks_app = typer.Typer(help="The task catalog.", no_args_is_help=True)
ledger_app = typer.Typer(help="The provenance ledger.", no_args_is_help=True)
round_app = typer.Typer(help="Review rounds.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(users_app, name="users")
app.add_typer(log_app, name="log")
app.add_typer(tasks_app, name="tasks")
app.add_typer(ledger_app, name="ledger")
app.add_typer(round_app, name="round")

STREAMLIT_APP = Path(__file__).parent / "streamlit_app.py"


def _fail(message: str) -> None:
    typer.secho(f"error: {message}", err=True, fg=typer.colors.RED)
    raise typer.Exit(1)


def boundary(command):
    """Translate domain errors into a message and a non-zero exit, once, at the edge."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except ItsmReviewError as exc:
            _fail(str(exc))
        except ValueError as exc:
            _fail(str(exc))
        except OSError as exc:  # a file the command was pointed at: name it, no traceback
            where = f"{exc.filename}: " if exc.filename else ""
            _fail(f"{where}{exc.strerror or exc}")

    return wrapper


def _echo_json(value) -> None:
    typer.echo(json.dumps(value, indent=2, default=str, ensure_ascii=False))


def _session():
    from itsmreview.db import session_scope

    return session_scope()


def _ensure_schema() -> None:
    from itsmreview.db import current_revision, describe_url, get_engine, upgrade_database

    engine = get_engine()
    try:
        current_revision(engine)
    except Exception as exc:  # connection problems surface here, with the URL
        _fail(f"cannot reach the database {describe_url(str(engine.url))}: {exc}")
    upgrade_database(engine)


@app.callback(invoke_without_command=True)
def _root(
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    if version:
        typer.echo(__version__)
        raise typer.Exit()


LOCAL_ADDRESS = "127.0.0.1"


@app.command()
@boundary
def demo(
    port: Annotated[int | None, typer.Option(help="Port (default: ITSMREVIEW_PORT or 8501).")] = (
        None
    ),
    no_serve: Annotated[
        bool, typer.Option("--no-serve", help="Load the demo, do not serve.")
    ] = False,
    seed: Annotated[int | None, typer.Option(help="Seed of the synthetic log.")] = None,
    cases: Annotated[int | None, typer.Option(help="Cases in the synthetic log.")] = None,
    address: Annotated[
        str,
        typer.Option(
            help="Address to serve on; the demo's passwords are public, so this machine only "
            "by default."
        ),
    ] = LOCAL_ADDRESS,
) -> None:
    """Create or upgrade the database, load the demo content (idempotent), then serve."""
    from itsmreview.db import describe_url
    from itsmreview.demo.loader import DEMO_PASSWORD, DEMO_USERS, load_demo

    settings = get_settings()
    typer.echo(f"database: {describe_url(settings.resolved_database_url())}")
    _ensure_schema()
    with _session() as session:
        summary = load_demo(
            session=session,
            data_dir=settings.data_dir,
            seed=seed if seed is not None else settings.demo_seed,
            cases=cases if cases is not None else settings.demo_cases,
            progress=lambda message: typer.echo(f"  loading {message} ..."),
        )
    typer.echo(
        f"demo ready: {summary.users} users, log {summary.log_name!r}, "
        f"{summary.ratings} ratings ({'new' if summary.round_created else 'already loaded'})"
    )
    port = port or settings.port
    typer.echo(f"\nOpen http://localhost:{port} and log in as one of (password {DEMO_PASSWORD!r}):")
    for username, role, display, _ in DEMO_USERS:
        typer.echo(f"  {username:<9} {role.value:<7} {display}")
    if not no_serve:
        serve(port=port, address=address)


@app.command()
@boundary
def serve(
    port: Annotated[
        int | None, typer.Option(help="Port (default: ITSMREVIEW_PORT or 8501).")
    ] = None,
    address: Annotated[
        str,
        typer.Option(
            help="Address to listen on: this machine only by default; 0.0.0.0 for a team "
            "(behind a TLS proxy)."
        ),
    ] = LOCAL_ADDRESS,
) -> None:
    """Serve the Streamlit app on the configured database."""
    settings = get_settings()
    port = port or settings.port
    env = dict(os.environ)
    env["ITSMREVIEW_DATABASE_URL"] = settings.resolved_database_url()
    env["ITSMREVIEW_DATA_DIR"] = str(settings.data_dir.resolve())
    command = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(STREAMLIT_APP),
        "--server.port",
        str(port),
        "--server.address",
        address,
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
        "--client.toolbarMode",
        "minimal",
    ]
    typer.echo(f"serving on http://localhost:{port} (Ctrl+C stops)")
    sys.stdout.flush()
    # exec, not a child process: signals (Ctrl+C, SIGTERM from a supervisor) reach Streamlit
    os.execve(sys.executable, command, env)


@db_app.command("upgrade")
@boundary
def db_upgrade(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
) -> None:
    """Apply migrations up to REVISION (default: the newest)."""
    from itsmreview.db import current_revision, describe_url, get_engine, upgrade_database

    engine = get_engine()
    before = current_revision(engine)
    upgrade_database(engine, revision)
    after = current_revision(engine)
    typer.echo(f"{describe_url(str(engine.url))}: {before or 'empty'} -> {after}")


@db_app.command("current")
@boundary
def db_current() -> None:
    """Print the revision the database is at."""
    from itsmreview.db import current_revision

    typer.echo(current_revision() or "empty (run `itsmreview db upgrade`)")


@users_app.command("add")
@boundary
def users_add(
    name: Annotated[str, typer.Argument(help="Login name: lowercase letters, digits, . _ -")],
    role: Annotated[str, typer.Option(help="expert, lead or admin.")],
    display_name: Annotated[str | None, typer.Option(help="Name shown in the app.")] = None,
    email: Annotated[
        str | None, typer.Option(help="E-mail address single sign-on maps to this account.")
    ] = None,
    expertise: Annotated[
        list[str] | None, typer.Option(help="A persona the expert knows (repeatable).")
    ] = None,
    ask: Annotated[
        bool, typer.Option("--ask", help="Ask for the password instead of generating one.")
    ] = False,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from standard input.")
    ] = False,
) -> None:
    """Add a user; without --ask or --password-stdin a password is generated and printed once."""
    from itsmreview.accounts.service import create_user

    password = None
    if password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    elif ask:
        password = typer.prompt("password", hide_input=True, confirmation_prompt=True)
    _ensure_schema()
    with _session() as session:
        user, generated = create_user(
            session=session,
            username=name,
            role=role,
            password=password,
            display_name=display_name,
            expertise=expertise or (),
            email=email,
        )
    typer.echo(f"added {user.username} ({user.role})")
    if generated:
        typer.echo(f"password: {generated}  (shown once; store it now)")


@users_app.command("list")
@boundary
def users_list(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List users with their roles."""
    from itsmreview.accounts.models import UserPublic
    from itsmreview.accounts.queries import list_users

    _ensure_schema()
    with _session() as session:
        users = [
            UserPublic.model_validate(u, from_attributes=True) for u in list_users(session=session)
        ]
    if as_json:
        _echo_json([u.model_dump(mode="json") for u in users])
        return
    for user in users:
        typer.echo(f"{user.username:<16} {user.role.value:<7} {user.display_name}")


def _mapping_from_options(
    preset, case, activity, timestamp, timestamp_format, resource, roles, sep, na, encoding
):
    from dataclasses import replace

    from itsmreview.coverage.eventlog import PRESETS, ColumnMapping

    given = [case, activity, timestamp]
    reading = {"sep": sep, "encoding": encoding, "na_values": tuple(na) if na else None}
    reading = {k: v for k, v in reading.items() if v is not None}
    if preset:
        column_options = [case, activity, timestamp, timestamp_format, resource, roles]
        if any(column_options):
            _fail(
                f"--preset {preset} fixes the columns; give either --preset or the column "
                "options (--case, --activity, --timestamp, --timestamp-format, --resource, "
                "--role), not both. --sep, --encoding and --na may go with a preset."
            )
        return replace(PRESETS[preset], **reading) if reading and preset in PRESETS else None
    if not any(given):
        if reading or timestamp_format or resource or roles:
            _fail("a column mapping needs --case, --activity and --timestamp (or --preset)")
        return None
    if not all(given):
        _fail("a column mapping needs all of --case, --activity and --timestamp")
    return ColumnMapping(
        case=case,
        activity=activity,
        timestamp=timestamp,
        timestamp_format=timestamp_format,
        resource=resource,
        roles=tuple(roles or ()),
        sep=sep or ",",
        na_values=tuple(na or ()),
        encoding=encoding or "utf-8-sig",
    )


@log_app.command("import")
@boundary
def log_import(
    path: Annotated[
        Path, typer.Argument(help="CSV (.csv/.csv.gz), XES (.xes/.xes.gz) or parquet.")
    ],
    name: Annotated[str | None, typer.Option(help="Log name (default: the file name).")] = None,
    preset: Annotated[
        str | None, typer.Option(help="bpi2013, bpi2014, uci-incidents or helpdesk.")
    ] = None,
    case: Annotated[str | None, typer.Option(help="Case id column.")] = None,
    activity: Annotated[str | None, typer.Option(help="Activity column.")] = None,
    timestamp: Annotated[str | None, typer.Option(help="Timestamp column.")] = None,
    timestamp_format: Annotated[
        str | None, typer.Option(help="strftime format, e.g. '%d/%m/%Y %H:%M' (default ISO 8601).")
    ] = None,
    resource: Annotated[str | None, typer.Option(help="Resource column.")] = None,
    role: Annotated[
        list[str] | None, typer.Option(help="Role attribute column (repeatable).")
    ] = None,
    sep: Annotated[str | None, typer.Option(help="CSV separator (default ',').")] = None,
    na: Annotated[
        list[str] | None, typer.Option(help="Extra missing-value token (repeatable).")
    ] = None,
    encoding: Annotated[
        str | None, typer.Option(help="CSV encoding, e.g. latin-1 (default UTF-8).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Import an event log and materialise its variants, DF pairs, activities and roles."""
    from itsmreview.coverage.service import import_log

    mapping = _mapping_from_options(
        preset, case, activity, timestamp, timestamp_format, resource, role, sep, na, encoding
    )
    _ensure_schema()
    with typer.progressbar(length=100, label="importing", file=sys.stderr) as bar:
        done = [0]

        def progress(stage: str, fraction: float) -> None:
            step = int(fraction * 100) - done[0]
            if step > 0:
                bar.update(step)
                done[0] += step
            bar.label = stage

        with _session() as session:
            result = import_log(
                path, session=session, name=name, preset=preset, mapping=mapping, progress=progress
            )
    log = result.log
    info = {
        "name": log.name,
        "version": log.version,
        "created": result.created,
        "cases": log.n_cases,
        "events": log.n_events,
        "variants": log.n_variants,
    }
    if as_json:
        _echo_json(info)
    else:
        state = "imported" if result.created else "unchanged (already imported)"
        typer.echo(
            f"{log.name} v{log.version} {state}: {log.n_cases} cases, {log.n_events} "
            f"events, {log.n_variants} variants"
        )


@log_app.command("list")
@boundary
def log_list(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List imported logs."""
    from itsmreview.coverage.queries import list_logs

    _ensure_schema()
    with _session() as session:
        logs = [
            {
                "name": lg.name,
                "version": lg.version,
                "cases": lg.n_cases,
                "events": lg.n_events,
                "variants": lg.n_variants,
                "imported_at": lg.imported_at,
            }
            for lg in list_logs(session=session)
        ]
    if as_json:
        _echo_json(logs)
        return
    for lg in logs:
        typer.echo(
            f"{lg['name']:<24} v{lg['version']:<3} {lg['cases']:>8} cases "
            f"{lg['events']:>10} events {lg['variants']:>7} variants"
        )


@log_app.command("stats")
@boundary
def log_stats(
    name: Annotated[str, typer.Argument(help="Log name (its newest version).")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Counts of a log: cases, events, activities, variants, DF pairs, singletons."""
    from itsmreview.coverage.queries import latest_log
    from itsmreview.errors import NotFound

    _ensure_schema()
    with _session() as session:
        log = latest_log(session=session, name=name)
        if log is None:
            raise NotFound(f"no log named {name!r}; `itsmreview log list` shows the names")
        stats = {
            "name": log.name,
            "version": log.version,
            "cases": log.n_cases,
            "events": log.n_events,
            "activities": log.n_activities,
            "variants": log.n_variants,
            "collapsed_variants": log.n_collapsed_variants,
            "df_pairs": log.n_df_pairs,
            "singleton_variants": log.n_singleton_variants,
            "first_timestamp": log.first_timestamp,
            "last_timestamp": log.last_timestamp,
        }
    if as_json:
        _echo_json(stats)
        return
    for key, value in stats.items():
        typer.echo(f"{key:<20} {value}")


@app.command("coverage")
@boundary
def coverage_command(
    log: Annotated[str, typer.Argument(help="Log name (its newest version).")],
    tasks: Annotated[str, typer.Option(help="Which tasks count: approved, rated or all.")] = "all",
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Frequency-weighted coverage of a log's variants, DF pairs, activities and roles."""
    from itsmreview.coverage.report import coverage_report

    _ensure_schema()
    with _session() as session:
        report, unresolved = coverage_report(session=session, log_name=log, task_filter=tasks)
    result = report.as_dict() | {"unresolved_case_ids": unresolved}
    if as_json:
        _echo_json(result)
        return
    typer.echo(f"{report.tasks} task(s) over log {log!r}")
    for key in (
        "variant_coverage",
        "variant_coverage_collapsed",
        "df_coverage",
        "activity_coverage",
    ):
        typer.echo(f"  {key:<28} {result[key]:.1%}")
    for attribute, share in report.role_coverage.items():
        typer.echo(f"  role {attribute:<23} {share:.1%}")
    reach = report.gaps["greedy_tasks_to_reach"]
    typer.echo(
        "  more tasks to reach         "
        + ", ".join(f"{k}: {'-' if v is None else v}" for k, v in reach.items())
    )
    for absent in report.absent_sequences:
        typer.echo(
            f"  not in the log: {' > '.join(absent.sequence)} (tasks {', '.join(absent.task_ids)})"
        )


@app.command("agreement")
@boundary
def agreement_command(
    round_name: Annotated[
        str | None, typer.Option("--round", help="Round name (default: the newest).")
    ] = None,
    bootstrap: Annotated[int, typer.Option(help="Bootstrap samples for the CI (0: none).")] = 1000,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Krippendorff's alpha per rubric item of a round, with bootstrap CI and Gwet's AC."""
    from itsmreview.accounts.models import Role, User
    from itsmreview.review.reliability import round_agreement

    _ensure_schema()
    operator = User(id=None, username="cli", display_name="cli", role=Role.admin, password_hash="")
    with _session() as session:
        review_round, items = round_agreement(
            session=session, actor=operator, round_name=round_name, bootstrap=bootstrap, seed=seed
        )
    if as_json:
        _echo_json({"round": review_round.name, "items": [i.as_dict() for i in items]})
        return
    typer.echo(f"round {review_round.name!r} (human ratings)")
    for item in items:
        a = item.alpha
        if a.value is None:
            typer.echo(f"  {item.label:<36} undefined: {a.reason}")
            continue
        ci = f" [{a.ci_low:.3f}, {a.ci_high:.3f}]" if a.ci_low is not None else ""
        typer.echo(
            f"  {item.label:<36} alpha {a.value:6.3f}{ci}  {a.level:<8} "
            f"{a.units} units, {a.pairable_values} values"
        )


@app.command("alpha")
@boundary
def alpha_command(
    path: Annotated[
        Path,
        typer.Argument(help="CSV: one row per rater, one column per unit, empty cells missing."),
    ],
    level: Annotated[str, typer.Option(help="nominal, ordinal, interval or ratio.")] = "ordinal",
    bootstrap: Annotated[int, typer.Option(help="Bootstrap samples for the CI (0: none).")] = 0,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap.")] = 0,
    header: Annotated[
        bool,
        typer.Option(
            "--header/--no-header",
            help="Whether the first row names the units (default); --no-header numbers them.",
        ),
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Krippendorff's alpha of a reliability-data CSV file."""
    from itsmreview.review.agreement import alpha
    from itsmreview.review.reliability_csv import read_reliability_csv

    data = read_reliability_csv(path, level, header=header)
    result = alpha(data, level, bootstrap=bootstrap, seed=seed)
    if as_json:
        _echo_json(result.as_dict())
        return
    if result.value is None:
        typer.echo(f"alpha undefined: {result.reason}")
        return
    line = (
        f"alpha = {result.value:.4f} ({level}, {result.units} units, "
        f"{result.pairable_values} pairable values)"
    )
    if result.ci_low is not None:
        line += f"; 95% CI [{result.ci_low:.4f}, {result.ci_high:.4f}] from {bootstrap} samples"
    typer.echo(line)


@tasks_app.command("import")
@boundary
def tasks_import(
    path: Annotated[
        Path,
        typer.Argument(
            help="File or folder: native bundle (.json, .jsonl, "
            ".yaml), Harbor task folder(s), tau2 tasks.json, "
            "EnterpriseOps-Gym task, or transcripts."
        ),
    ],
    fmt: Annotated[
        str,
        typer.Option(
            "--format", help="auto, native, harbor, tau2, eogym, tau2-sim, taubench or atif."
        ),
    ] = "auto",
    log: Annotated[str | None, typer.Option(help="Event log the tasks derive from.")] = None,
    task: Annotated[str | None, typer.Option(help="Attach transcripts to this task id.")] = None,
    persona: Annotated[str, typer.Option(help="Job persona for formats that name none.")] = (
        "L1 service desk agent"
    ),
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Report, change nothing.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Import tasks, or transcripts of existing tasks; all or nothing, unchanged tasks skipped."""
    from itsmreview.catalog.importing import import_path

    _ensure_schema()
    with _session() as session:
        result = import_path(
            path, session=session, fmt=fmt, log=log, task=task, persona=persona, dry_run=dry_run
        )
    if as_json:
        _echo_json(result.as_dict())
        return
    report = result.report
    prefix = "would import" if dry_run else "imported"
    typer.echo(
        f"{prefix} ({result.format}): {len(report.created)} new, "
        f"{len(report.new_versions)} new versions, {len(report.unchanged)} unchanged"
    )
    for task_id, missing in result.unresolved.items():
        typer.echo(f"  {task_id}: not in the log: {json.dumps(missing, ensure_ascii=False)}")


@tasks_app.command("show")
@boundary
def tasks_show(
    task_id: Annotated[str, typer.Argument(help="Task id.")],
    version: Annotated[int | None, typer.Option(help="Version number (default: newest).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show one task version with its transcripts."""
    from itsmreview.catalog.importing import show_task

    _ensure_schema()
    with _session() as session:
        shown = show_task(session=session, external_id=task_id, version=version)
    if as_json:
        _echo_json(shown)
        return
    task = shown["task"]
    typer.echo(f"{task['id']} v{shown['version']} ({shown['status']}): {task['title']}")
    typer.echo(f"{task['persona']} · {task['track']}")
    for label in ("instruction", "environment", "ground_truth", "verifier"):
        if task.get(label):
            typer.echo(f"\n[{label}]\n{task[label]}")
    for transcript in task["transcripts"]:
        typer.echo(f"\n[transcript {transcript['id']}] {len(transcript['messages'])} turns")


@tasks_app.command("export")
@boundary
def tasks_export(
    dest: Annotated[Path, typer.Argument(help="File (or folder for harbor) to write.")],
    fmt: Annotated[str, typer.Option("--format", help="native, harbor, tau2 or eogym.")] = (
        "native"
    ),
    task_ids: Annotated[
        list[str] | None, typer.Option("--id", help="Task id (repeatable; default: all).")
    ] = None,
) -> None:
    """Export the newest versions of tasks; foreign formats reproduce the imported files."""
    from itsmreview.catalog.exporting import export_catalog

    _ensure_schema()
    with _session() as session:
        count = export_catalog(dest, session=session, fmt=fmt, external_ids=task_ids)
    typer.echo(f"exported {count} task(s) as {fmt} to {dest}")


@tasks_app.command("list")
@boundary
def tasks_list(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List tasks with persona, track, status and newest version."""
    from itsmreview.catalog.queries import tasks_frame

    _ensure_schema()
    with _session() as session:
        frame = tasks_frame(session=session)
    if as_json:
        _echo_json(frame.drop(columns=["id"]).to_dict("records"))
        return
    for row in frame.itertuples(index=False):
        typer.echo(f"{row.external_id:<40} v{row.version:<3} {row.status:<12} {row.persona}")


@ledger_app.command("verify")
@boundary
def ledger_verify() -> None:
    """Recompute the ledger's hash chain; exit 1 at the first broken entry."""
    from itsmreview.ledger.service import verify_chain

    _ensure_schema()
    with _session() as session:
        report = verify_chain(session=session)
    if not report.ok:
        _fail(f"ledger entry {report.broken_at}: {report.problem} ({report.entries} entries read)")
    typer.echo(f"ledger ok: {report.entries} entries, chain intact")


def _operator():
    from itsmreview.accounts.models import Role, User

    return User(id=None, username="cli", display_name="cli", role=Role.admin, password_hash="")


@round_app.command("create")
@boundary
def round_create(
    name: Annotated[str, typer.Argument(help="Round name.")],
    k: Annotated[int, typer.Option(help="Experts per task.")] = 3,
    rubric: Annotated[Path | None, typer.Option(help="Rubric YAML (default: ITSM realism).")] = (
        None
    ),
    task_ids: Annotated[
        list[str] | None, typer.Option("--id", help="Task id (repeatable; default: every task).")
    ] = None,
) -> None:
    """Open a review round over the newest versions of tasks; experts then claim them."""
    from itsmreview.catalog.queries import latest_versions_of
    from itsmreview.review.rubrics import DEFAULT_RUBRIC, ensure_rubric, load_rubric
    from itsmreview.review.service import create_round

    _ensure_schema()
    with _session() as session:
        definition = ensure_rubric(load_rubric(rubric or DEFAULT_RUBRIC), session=session)
        versions = [v.id for _, v in latest_versions_of(session=session, external_ids=task_ids)]
        if not versions:
            _fail("no tasks to review; import some with `itsmreview tasks import`")
        review_round = create_round(
            session=session,
            actor=_operator(),
            name=name,
            rubric=definition,
            task_version_ids=versions,
            k=k,
        )
    typer.echo(
        f"opened round {review_round.name!r}: {len(versions)} task(s), k={k}, rubric "
        f"{definition.name} v{definition.version}"
    )


@round_app.command("gate")
@boundary
def round_gate(
    name: Annotated[str, typer.Argument(help="Round name.")],
    k_min: Annotated[int | None, typer.Option(help="Human ratings a task needs.")] = None,
    dimension_min: Annotated[
        float | None, typer.Option(help="Median each gating dimension must reach.")
    ] = None,
    alpha_min: Annotated[
        float | None, typer.Option(help="Round alpha each gating dimension must reach.")
    ] = None,
    disagreement_range: Annotated[
        float | None, typer.Option(help="Rating spread that sends a task to a lead.")
    ] = None,
    gating: Annotated[
        list[str] | None, typer.Option(help="Gating dimension (repeatable; replaces the list).")
    ] = None,
    blocking: Annotated[
        list[str] | None, typer.Option(help="Blocking flag (repeatable; replaces the list).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show a round's approval gate, or change it and re-decide every task of the round."""
    from collections import Counter
    from dataclasses import asdict

    from itsmreview.review.reliability import current_gate, set_gate

    changes = {
        key: value
        for key, value in {
            "k_min": k_min,
            "dimension_min": dimension_min,
            "alpha_min": alpha_min,
            "disagreement_range": disagreement_range,
            "gating_dimensions": gating,
            "blocking_flags": blocking,
        }.items()
        if value is not None
    }
    _ensure_schema()
    with _session() as session:
        if changes:
            config, decisions = set_gate(
                session=session, actor=_operator(), round_name=name, changes=changes
            )
            statuses = dict(Counter(d.status for d in decisions.values()))
        else:
            config, statuses = current_gate(session=session, round_name=name)[0], None
    shown = {**asdict(config), "statuses": statuses}
    if as_json:
        _echo_json(shown)
        return
    for key, value in asdict(config).items():
        typer.echo(f"{key:<20} {', '.join(value) if isinstance(value, tuple) else value}")
    if statuses is not None:
        typer.echo("tasks now: " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())))


@round_app.command("close")
@boundary
def round_close(name: Annotated[str, typer.Argument(help="Round name.")]) -> None:
    """Close a round: no more claims or ratings; open reservations are released."""
    from itsmreview.review.assignment import close_round

    _ensure_schema()
    with _session() as session:
        close_round(session=session, actor=_operator(), round_name=name)
    typer.echo(f"closed round {name!r}")


@round_app.command("experts")
@boundary
def round_experts(
    name: Annotated[str, typer.Argument(help="Round name.")],
    add: Annotated[list[str] | None, typer.Option(help="Expert to admit (repeatable).")] = None,
    remove: Annotated[
        list[str] | None,
        typer.Option(help="Expert to remove (repeatable); their open reservations are released."),
    ] = None,
) -> None:
    """Admit experts to a round or remove them; a round without members is open to all."""
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.errors import NotFound
    from itsmreview.review.assignment import set_round_experts

    _ensure_schema()
    with _session() as session:

        def users(names):
            found = []
            for username in names or []:
                user = user_by_username(session=session, username=username)
                if user is None:
                    raise NotFound(f"no user {username!r}")
                found.append(user)
            return found

        members = set_round_experts(
            session=session,
            actor=_operator(),
            round_name=name,
            add=users(add),
            remove=users(remove),
        )
    typer.echo(f"round {name!r}: {len(members) or 'every'} expert(s) admitted")


@round_app.command("reassign")
@boundary
def round_reassign(
    assignment_id: Annotated[int, typer.Argument(help="Assignment id (see the lead's views).")],
    to: Annotated[str, typer.Option("--to", help="Username of the expert who takes it.")],
) -> None:
    """Move an unsubmitted assignment to another expert."""
    from itsmreview.accounts.queries import user_by_username
    from itsmreview.errors import NotFound
    from itsmreview.review.assignment import reassign

    _ensure_schema()
    with _session() as session:
        expert = user_by_username(session=session, username=to)
        if expert is None:
            raise NotFound(f"no user {to!r}")
        moved = reassign(
            session=session, actor=_operator(), assignment_id=assignment_id, expert=expert
        )
    typer.echo(f"assignment {assignment_id} moved to {to} as assignment {moved.id}")


@round_app.command("list")
@boundary
def round_list(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List review rounds with their progress."""
    from itsmreview.review.queries import list_rounds, progress_frame

    _ensure_schema()
    with _session() as session:
        rounds = list_rounds(session=session)
        progress = progress_frame(session=session)
    rows = []
    for r in rounds:
        mine = progress[progress["round"] == r.name]
        rows.append(
            {
                "name": r.name,
                "status": r.status,
                "k": r.k,
                "assigned": int(mine["assigned"].sum()),
                "submitted": int(mine["submitted"].sum()),
            }
        )
    if as_json:
        _echo_json(rows)
        return
    for row in rows:
        typer.echo(
            f"{row['name']:<24} {row['status']:<7} k={row['k']}  "
            f"{row['submitted']}/{row['assigned']} rated"
        )


def main() -> None:
    app()


if __name__ == "__main__":
    main()
