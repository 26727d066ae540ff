"""`itsmreview` commands: simulator realism against the logs (issue 36): a log's own behaviour
profile, transcripts mapped to events by a spec, and a simulator against its log."""

import json
import shlex
from pathlib import Path
from typing import Annotated

import typer
from itsmreview.cli.base import (
    app,
    boundary,
    echo_json,
    ensure_schema,
    fail,
    open_session,
    operator,
    progress_bar,
)
from itsmreview.cli.logs import _shown as shown

realism_app = typer.Typer(help="Simulator realism measured against the logs.", no_args_is_help=True)
app.add_typer(realism_app, name="realism")

LABELS = {
    "ping_pong_rate": "ping-pong rate",
    "reassignments_per_case": "reassignments per case",
    "wait_user_rate": "wait-user rate",
    "wait_user_per_case": "wait-user count per case",
    "cancel_rate": "cancel rate",
    "reopen_rate": "reopen rate",
    "no_reply_closure_rate": "closed with no reply",
    "case_length": "case length (events)",
    "fitness": "fitness to the log's model",
}
COUNTER_LABELS = LABELS | {"reopens_per_case": "reopenings per case"}


def _number(kind: str, value: float) -> str:
    if kind != "rate":
        return f"{value:.3f}"
    return f"{value:.1%}" if value >= 0.01 or value == 0 else f"{value:.3%}"  # a rare cancel


def _rows(report: dict) -> list[tuple[str, ...]]:
    """The metrics as table rows: metric, value, interval, noise floor (or the reason)."""
    rows = []
    for key, label in LABELS.items():
        if key not in report["metrics"]:
            continue
        found = report["metrics"][key]
        if not found["available"]:
            rows.append((label, found["reason"]))
            continue
        kind, (low, high) = found["kind"], found["interval"]
        rows.append(
            (
                label,
                _number(kind, found["value"]),
                f"{_number(kind, low)} - {_number(kind, high)}",
                _number(kind, found["noise_floor"]),
            )
        )
    return rows


def _table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    """Rows aligned under `header`: the first column left, the others right; a row of two
    cells (a metric and why it is missing) runs across."""
    full = [r for r in rows if len(r) == len(header)]
    widths = [max(len(r[i]) for r in [header, *full]) for i in range(len(header))]
    widths[0] = max(len(r[0]) for r in [header, *rows])

    def line(row):
        if len(row) != len(header):
            return f"{row[0]:<{widths[0]}}  {row[1]}"
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        return "  ".join(cells).rstrip()

    return [line(header), "  ".join("-" * w for w in widths), *map(line, rows)]


def _role_line(role: dict, cases: int) -> str:
    return (
        f"real cases: the {cases:,} in which {shown(role['attribute'])} = "
        f"{shown(role['value'])} takes part"
    )


def _echo_text(report: dict) -> None:
    vocab = report["vocabulary"]
    typer.echo(
        f"{report['log']} v{report['version']}: {report['cases']:,} cases, "
        f"{report['events']:,} events; assignment group: {shown(vocab['group_attribute'] or '-')}; "
        f"wait-user: {shown(', '.join(vocab['wait_user'])) or '-'} ({vocab['source']})"
    )
    if vocab["absent"]:
        typer.echo(f"named but not in the log: {shown(', '.join(vocab['absent']))}")
    if report.get("role"):
        typer.echo(_role_line(report["role"], report["cases"]))
    typer.echo("")
    header = ("metric", "value", "95% interval", "noise floor")
    for line in _table(header, _rows(report)):
        typer.echo(line)
    for key, check in report["counter_checks"].items():
        typer.echo(
            f"{COUNTER_LABELS[key]}: the log's own counter {check['attribute']!r} has mean "
            f"{check['log_mean']:.3f} (computed {check['computed_mean']:.3f}; equal in "
            f"{check['equal_share']:.1%} of {check['cases']:,} cases)"
        )
    distribution = report["activity_distribution"]
    typer.echo("")
    rows = [
        (shown(activity), f"{events:,}", f"{distribution['share'][activity]:.1%}")
        for activity, events in distribution["events"].items()
    ]
    for line in _table(("activity", "events", "share"), rows):
        typer.echo(line)
    typer.echo(f"noise floor (Jensen-Shannon divergence): {distribution['noise_floor']:.6f}")


@realism_app.command("report")
@boundary
def realism_report(
    log: Annotated[
        str | None,
        typer.Option(
            help="Log name (its newest version): its own behaviour profile; with --simulator, "
            "the log to compare with (default: the one the mapping spec names)."
        ),
    ] = None,
    simulator: Annotated[
        str | None,
        typer.Option(
            help="A simulator's mapped transcripts against the log (`realism simulators` "
            "lists them)."
        ),
    ] = None,
    spec: Annotated[
        str | None,
        typer.Option(help="With --simulator: the mapping spec (when it has several)."),
    ] = None,
    persona: Annotated[
        str | None,
        typer.Option(help="With --simulator: only the transcripts of this persona's tasks."),
    ] = None,
    by_persona: Annotated[
        bool,
        typer.Option("--by-persona", help="With --simulator: one report per persona."),
    ] = False,
    role: Annotated[
        str | None,
        typer.Option(
            help="ATTRIBUTE=VALUE: only the real cases in which this role of the log takes part, "
            "e.g. 'ST Level=L2' (an L2 persona beside the log's L2 cases)."
        ),
    ] = None,
    group: Annotated[
        str | None,
        typer.Option(help="Role attribute holding the assignment group (default: the preset's)."),
    ] = None,
    wait_user: Annotated[
        list[str] | None,
        typer.Option(help="Activity meaning the case waits for its user (repeatable)."),
    ] = None,
    cancel: Annotated[
        list[str] | None, typer.Option(help="Activity meaning a cancellation (repeatable).")
    ] = None,
    reopen: Annotated[
        list[str] | None, typer.Option(help="Activity meaning a reopening (repeatable).")
    ] = None,
    close: Annotated[
        list[str] | None,
        typer.Option(help="Activity that closes a case (repeatable; for closed with no reply)."),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap and the random halves.")] = 36,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """A log's behaviour (--log): ping-pong, waits for the user, reassignments, case length,
    cancel and reopen rates and the activity distribution, with 95% intervals and the noise
    floor of two random halves of its cases. A simulator (--simulator): the same figures for
    its mapped transcripts beside the real cases, the gap with its interval and the floor.
    --role limits the real cases to those a team or level of the log takes part in."""
    from itsmreview.realism.service import log_profile, parse_role, simulator_report

    try:
        picked_role = parse_role(role) if role is not None else None
    except ValueError as exc:
        fail(f"--role: {exc}")

    if simulator is None and (spec is not None or persona is not None or by_persona):
        fail("--spec, --persona and --by-persona are for a simulator: give --simulator too")
    if persona is not None and by_persona:
        fail("give --persona NAME or --by-persona, not both")
    if log is None and simulator is None:
        fail(
            "give --log NAME (`itsmreview log list` shows the names) or --simulator NAME "
            "(`itsmreview realism simulators`)"
        )
    if simulator is not None and (group or wait_user or cancel or reopen or close):
        fail(
            "--group, --wait-user, --cancel, --reopen and --close are for a log's profile "
            "(--log alone)"
        )
    ensure_schema()
    with open_session() as session:
        if simulator is not None and by_persona:
            first = simulator_report(
                session=session,
                simulator=simulator,
                spec=spec,
                log=log,
                seed=seed,
                role=picked_role,
            )
            report = {
                "simulator": simulator,
                "role": first["role"],
                "personas": {
                    name: simulator_report(
                        session=session,
                        simulator=simulator,
                        spec=spec,
                        log=log,
                        seed=seed,
                        persona=name,
                        role=picked_role,
                    )
                    for name in first["personas"]
                },
            }
        elif simulator is not None:
            report = simulator_report(
                session=session,
                simulator=simulator,
                spec=spec,
                log=log,
                seed=seed,
                persona=persona,
                role=picked_role,
            )
        else:
            report = log_profile(
                session=session,
                name=log,
                group=group,
                wait_user=tuple(wait_user) if wait_user else None,
                cancel=tuple(cancel) if cancel else None,
                reopen=tuple(reopen) if reopen else None,
                close=tuple(close) if close else None,
                role=picked_role,
                seed=seed,
            )
    if as_json:
        typer.echo(json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False))
        return
    if by_persona:
        _echo_personas(report)
        return
    (_echo_simulator if simulator is not None else _echo_text)(report)


def _echo_personas(report: dict) -> None:
    """One line per persona: transcripts, real cases, and the figures beyond the floor."""
    rows = []
    for name, one in report["personas"].items():
        beyond = [
            LABELS.get(key, key)
            for key, item in one["metrics"].items()
            if item.get("available") and item["verdict"] == "beyond"
        ]
        beyond += [
            label
            for key, label in (
                ("activity_distribution", "activities"),
                ("directly_follows", "pairs"),
            )
            if one[key]["verdict"] == "beyond"
        ]
        rows.append(
            (
                shown(name),
                f"{one['simulated_cases']:,}",
                f"{one['real_cases']:,}",
                ", ".join(beyond) or "none",
            )
        )
    typer.echo(f"simulator {shown(report['simulator'])}, per persona of its tasks:")
    if report.get("role"):
        role = report["role"]
        typer.echo(
            f"real cases: those in which {shown(role['attribute'])} = {shown(role['value'])} "
            "takes part"
        )
    for line in _table(("persona", "simulated", "real cases", "beyond the floor"), rows):
        typer.echo(line)


def _compare_rows(report: dict) -> list[tuple[str, ...]]:
    rows = []
    for key, label in LABELS.items():
        if key not in report["metrics"]:
            continue
        found = report["metrics"][key]
        if not found["available"]:
            rows.append((label, found["reason"]))
            continue
        kind = found["kind"]
        low, high = found["gap_interval"]
        rows.append(
            (
                label,
                _number(kind, found["real"]["value"]),
                _number(kind, found["simulated"]["value"]),
                f"{_signed(kind, found['gap'])} ({_signed(kind, low)} to {_signed(kind, high)})",
                _number(kind, found["noise_floor"]),
                found["verdict"],
            )
        )
    for key, label in (
        ("activity_distribution", "activities (JSD)"),
        ("directly_follows", "directly-follows (JSD)"),
    ):
        found = report[key]
        cells = ("", "", f"{found['divergence']:.3f}", f"{found['noise_floor']:.3f}")
        rows.append((label, *cells, found["verdict"]))
    return rows


def _signed(kind: str, value: float) -> str:
    text = _number(kind, abs(value))
    return f"-{text}" if value < 0 else f"+{text}"


def _echo_simulator(report: dict) -> None:
    scope = report["real_scope"]
    if scope["kind"] == "declared variants":
        real = (
            f"{report['real_cases']:,} real cases of the {scope['matched_variants']:,} "
            f"variant(s) the tasks declare"
        )
    else:
        whole = "every case of the role" if report.get("role") else "the whole log"
        real = f"{report['real_cases']:,} real cases ({whole}: {scope['reason']})"
    spec = report["spec"]
    typer.echo(
        f"simulator {shown(report['simulator'])}: {report['simulated_cases']:,} of "
        f"{report['transcripts']:,} transcript(s) with events, mapped by "
        f"{shown(spec['name'])} v{spec['version']} ({report['mapped_share']:.0%} of "
        f"{report['units']:,} turns covered by a rule)"
    )
    if report.get("persona"):
        typer.echo(f"the transcripts of persona {shown(report['persona'])}'s tasks only")
    if report.get("role"):
        typer.echo(_role_line(report["role"], report["real_scope"]["role_cases"]))
    typer.echo(f"against {shown(report['log'])} v{report['log_version']}: {real}")
    typer.echo(
        f"noise floor: the same figure between {report['floor_sample']:,} random real cases "
        "and the rest (95th percentile); 'beyond' = the simulator departs from the log more "
        "than the log from itself"
    )
    typer.echo("")
    header = ("metric", "real", "simulated", "gap (95% interval)", "noise floor", "verdict")
    for line in _table(header, _compare_rows(report)):
        typer.echo(line)
    only = report["activity_distribution"]["only_simulated"]
    if only:
        typer.echo(f"activities the log never records: {shown(', '.join(only))}")


@realism_app.command("map")
@boundary
def realism_map(
    spec: Annotated[Path, typer.Option(help="Mapping spec (YAML; docs/realism.md).")],
    task: Annotated[
        list[str] | None,
        typer.Option(help="Map only this task's transcripts (repeatable; default: every task)."),
    ] = None,
    simulator: Annotated[
        str | None,
        typer.Option(help="Simulator name for transcripts that name none (default: unnamed)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Map the transcripts of every task's newest version to events in a log's vocabulary
    with a mapping spec, store them (replacing this spec's earlier mapping) and record the
    spec in the ledger."""
    from itsmreview.realism.mapping import load_spec
    from itsmreview.realism.service import map_transcripts

    parsed = load_spec(spec)
    ensure_schema()
    with open_session() as session, progress_bar("mapping") as progress:
        result = map_transcripts(
            session=session,
            actor=operator(),
            spec=parsed,
            simulator=simulator,
            external_ids=list(task) if task else None,
            report=progress,
        )
    if as_json:
        echo_json(result.__dict__)
        return
    share = result.unmapped / result.units if result.units else 0.0
    named = ", ".join(f"{shown(name)} ({n:,})" for name, n in result.simulators.items())
    typer.echo(
        f"mapped {result.transcripts:,} transcript(s) with {shown(result.spec)} "
        f"v{result.version}: {result.events:,} events; {result.unmapped:,} of "
        f"{result.units:,} turns matched no rule ({share:.0%})"
    )
    typer.echo(f"simulators: {named}")
    first = max(result.simulators, key=result.simulators.get)
    typer.echo(f"next: itsmreview realism report --simulator {shlex.quote(shown(first))}")


@realism_app.command("simulators")
@boundary
def realism_simulators(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Simulators with mapped transcripts: by spec, the log it maps to and how many."""
    from itsmreview.realism.service import simulators

    ensure_schema()
    with open_session() as session:
        found = simulators(session=session)
    if as_json:
        echo_json(found)
        return
    if not found:
        typer.echo("no mapped transcripts yet: itsmreview realism map --spec FILE")
        return
    rows = [
        (
            shown(r["simulator"]),
            shown(r["spec"]),
            str(r["spec_version"]),
            shown(r["log"]),
            f"{r['transcripts']:,}",
        )
        for r in found
    ]
    for line in _table(("simulator", "spec", "version", "log", "transcripts"), rows):
        typer.echo(line)


@realism_app.command("waive")
@boundary
def realism_waive(
    simulator: Annotated[str, typer.Option(help="The simulator whose departures are waived.")],
    reason: Annotated[
        str, typer.Option(help="Why the set may go out anyway (the ledger keeps it).")
    ],
    spec: Annotated[
        str | None, typer.Option(help="The mapping spec (when the simulator has several).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Waive a simulator's departures from its log for releases that require realism (a
    round's gate with --realism-required). The waiver names the figures beyond the floor and
    holds for this mapping only: mapping again with a changed spec needs a new one."""
    from itsmreview.realism.service import waive

    ensure_schema()
    with open_session() as session:
        waived = waive(
            session=session, actor=operator(), simulator=simulator, reason=reason, spec=spec
        )
    if as_json:
        echo_json(waived)
        return
    typer.echo(
        f"waived for {shown(simulator)} (spec {shown(waived['spec'])}): "
        f"{', '.join(waived['beyond'])} beyond the noise floor of {shown(waived['log'])}"
    )


blind_app = typer.Typer(
    help="Blind tests: experts tell real cases from a simulator's, unlabelled.",
    no_args_is_help=True,
)
realism_app.add_typer(blind_app, name="blind")


@blind_app.command("create")
@boundary
def blind_create(
    name: Annotated[str, typer.Argument(help="The test's name.")],
    simulator: Annotated[str, typer.Option(help="Whose mapped transcripts are drawn.")],
    spec: Annotated[
        str | None, typer.Option(help="The mapping spec (when the simulator has several).")
    ] = None,
    fragments: Annotated[
        int, typer.Option(help="Fragments in all, half real and half simulated (4-400).")
    ] = 40,
    seed: Annotated[int, typer.Option(help="Seed of the draw and the shuffle.")] = 36,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Draw a blind test: simulated cases and windows of real cases of the same length, teams
    renamed, shuffled; experts answer on the Blind test page."""
    from itsmreview.realism.blind_tests import create_blind_test, fragment_count

    ensure_schema()
    with open_session() as session:
        test = create_blind_test(
            session=session,
            actor=operator(),
            name=name,
            simulator=simulator,
            spec=spec,
            fragments=fragments,
            seed=seed,
        )
        count = fragment_count(session=session, test=test)
        created = {"name": test.name, "simulator": test.simulator, "fragments": count}
    if as_json:
        echo_json(created)
        return
    typer.echo(
        f"blind test {shown(name)}: {count} fragments of {shown(simulator)} and its log, "
        "shuffled; experts answer on the Blind test page"
    )


@blind_app.command("report")
@boundary
def blind_report_command(
    name: Annotated[str, typer.Argument(help="The test's name.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Can the experts tell? Hits, false alarms, accuracy, d' with its 95% interval and the
    binomial test against chance, overall and per expert."""
    from itsmreview.realism.blind_tests import blind_report

    ensure_schema()
    with open_session() as session:
        report = blind_report(session=session, actor=operator(), name=name)
    if as_json:
        typer.echo(json.dumps(report, indent=2, sort_keys=True, ensure_ascii=False))
        return
    typer.echo(
        f"blind test {shown(report['name'])} ({report['state']}): {report['fragments']} "
        f"fragments of {shown(report['simulator'])} against {shown(report['log'])}, "
        f"{report['experts']} expert(s)"
    )
    rows = (
        [("all experts", report["overall"])]
        + [(shown(user), figures) for user, figures in report["per_expert"].items()]
        + [(f"role: {shown(role)}", figures) for role, figures in report["per_role"].items()]
    )
    table = []
    for label, f in rows:
        interval = f["d_prime_interval"]
        table.append(
            (
                label,
                str(f["answers"]),
                "-" if f["accuracy"] is None else f"{f['accuracy']:.1%}",
                "-" if f["d_prime"] is None else f"{f['d_prime']:.2f}",
                "-" if interval is None else f"{interval[0]:.2f} to {interval[1]:.2f}",
                "-" if f["p_value"] is None else f"{f['p_value']:.4f}",
            )
        )
    header = ("who", "answers", "accuracy", "d'", "95% interval", "p (vs chance)")
    for line in _table(header, table):
        typer.echo(line)


@blind_app.command("close")
@boundary
def blind_close(name: Annotated[str, typer.Argument(help="The test's name.")]) -> None:
    """Close a blind test (no more answers) and record its result in the ledger."""
    from itsmreview.realism.blind_tests import close_blind_test

    ensure_schema()
    with open_session() as session:
        result = close_blind_test(session=session, actor=operator(), name=name)
    overall = result["overall"]
    typer.echo(f"blind test {shown(name)} closed: {overall['answers']} answers recorded")


@realism_app.command("label")
@boundary
def realism_label(
    spec: Annotated[str, typer.Option(help="The mapping spec whose unmatched turns to label.")],
    limit: Annotated[int, typer.Option(help="Turns to label at most (1-500).")] = 50,
    model: Annotated[str | None, typer.Option(help="Model (default: ITSMREVIEW_MODEL).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Ask the model which log activity each turn no rule matched amounts to (or none). The
    labels wait for an expert on the Turn labels page; only confirmed ones count."""
    from itsmreview.review.assist.labels import propose_turn_labels

    ensure_schema()
    with open_session() as session, progress_bar("labelling") as progress:
        run = propose_turn_labels(
            session=session,
            actor=operator(),
            spec=spec,
            limit=limit,
            model=model,
            progress=progress,
        )
    if as_json:
        echo_json(run.__dict__)
        return
    if run.proposed + run.failed == 0:
        typer.echo(f"no unmatched turn of spec {shown(spec)} waits for a label")
        return
    typer.echo(
        f"{run.proposed} label(s) proposed ({run.no_event} 'no event'), {run.failed} failed; "
        "experts confirm them on the Turn labels page"
    )
    for error in run.errors or []:
        typer.echo(f"  {shown(error)}")


@realism_app.command("labels")
@boundary
def realism_labels(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """The model's labels waiting for an expert, oldest first."""
    from itsmreview.realism.service import labels_to_confirm

    ensure_schema()
    with open_session() as session:
        found = labels_to_confirm(session=session, actor=operator(), limit=500)
    if as_json:
        echo_json(found)
        return
    if not found:
        typer.echo("no label waits for an expert")
        return
    rows = [
        (str(f["id"]), shown(f["task"]), str(f["turn"]), shown(f["label"]), shown(f["text"][:50]))
        for f in found
    ]
    for line in _table(("id", "task", "turn", "label", "turn text"), rows):
        typer.echo(line)
