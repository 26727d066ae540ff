"""`itsmreview` commands: coverage and agreement reports."""

from pathlib import Path
from typing import Annotated

import typer
from itsmreview.cli.base import app, boundary, echo_json, ensure_schema, open_session, operator


@app.command("coverage")
@boundary
def coverage_command(
    log: Annotated[str, typer.Argument(help="Log name (its newest version).")],
    tasks: Annotated[str, typer.Option(help="Which tasks count: approved, rated or all.")] = "all",
    sla_hours: Annotated[
        str | None,
        typer.Option(
            help="Resolution targets per priority for the SLA outcome, e.g. '1=4,2=8,3=24'."
        ),
    ] = None,
    persona: Annotated[str | None, typer.Option(help="Only the tasks of this persona.")] = None,
    track: Annotated[str | None, typer.Option(help="Only the tasks of this track.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Frequency-weighted coverage of a log's variants, DF pairs, activities and roles, and of
    its case outcomes when its cases carry attributes (BPI 2014's four tables)."""
    from itsmreview.coverage.outcomes import parse_sla_hours
    from itsmreview.coverage.report import coverage_report

    targets = parse_sla_hours(sla_hours) if sla_hours else None
    ensure_schema()
    with open_session() as session:
        report, unresolved = coverage_report(
            session=session,
            log_name=log,
            task_filter=tasks,
            sla_hours=targets,
            persona=persona,
            track=track,
        )
    result = report.as_dict() | {"unresolved_case_ids": unresolved}
    if as_json:
        echo_json(result)
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
    for attribute, found in report.outcomes.items():
        gaps = ", ".join(f"{g['value']} {g['weight']:.0%}" for g in found["gaps"][:3])
        typer.echo(
            f"  outcome {attribute:<20} {found['coverage']:.1%} "
            f"({len(found['covered_values'])} of {found['values']} values)"
            + (f"; largest gaps: {gaps}" if gaps else "")
        )
    for absent in report.absent_sequences:
        typer.echo(
            f"  not in the log: {' > '.join(absent.sequence)} (tasks {', '.join(absent.task_ids)})"
        )


@app.command("benchmark-coverage")
@boundary
def benchmark_coverage_command(
    logs: Annotated[
        str | None, typer.Option(help="Comma-separated log names (default: every log).")
    ] = None,
    weight: Annotated[
        str, typer.Option(help="How logs weigh in the total: events or equal.")
    ] = "events",
    tasks: Annotated[str, typer.Option(help="Which tasks count: approved, rated or all.")] = "all",
    track: Annotated[str | None, typer.Option(help="Only the tasks of this track.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Coverage of the whole benchmark over several logs (each weighted by its events or
    equally), and per persona on each log: which persona is thin on which log."""
    from itsmreview.coverage.across_logs import benchmark_coverage

    ensure_schema()
    chosen = [n.strip() for n in logs.split(",") if n.strip()] if logs else None
    with open_session() as session:
        result = benchmark_coverage(
            session=session,
            actor=operator(),
            logs=chosen,
            weight=weight,
            task_filter=tasks,
            track=track,
        )
    if as_json:
        echo_json(result)
        return
    names = list(result["logs"])
    typer.echo(f"variant coverage, logs weighted by {weight}")
    typer.echo(f"  {'':<28}" + "".join(f"{n[:14]:>16}" for n in names) + f"{'benchmark':>16}")
    rows = {"all tasks": {"logs": result["logs"], "total": result["total"]}}
    rows.update(result["personas"])
    for label, found in rows.items():
        cells = "".join(
            f"{found['logs'][n]['variant_coverage']:>10.1%} ({found['logs'][n]['tasks']:>3})"
            for n in names
        )
        typer.echo(f"  {label[:28]:<28}{cells}{found['total']['variant_coverage']:>16.1%}")


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
    """Krippendorff's alpha per rubric item of a round, with bootstrap CI and Gwet's AC; for
    a Delphi round, per phase: alpha, IQR, Kendall's W and the share of answers changed."""
    from itsmreview.review.consensus.service import delphi_report
    from itsmreview.review.consensus.states import delphi_states
    from itsmreview.review.gate.item_agreement import round_agreement
    from itsmreview.review.gate.round_data import find_round

    ensure_schema()
    with open_session() as session:
        chosen = find_round(session, round_name)
        if chosen.id in delphi_states(session=session):
            report = delphi_report(session=session, actor=operator(), round_name=chosen.name)
            _echo_delphi(report, as_json)
            return
        review_round, items = round_agreement(
            session=session, actor=operator(), round_name=round_name, bootstrap=bootstrap, seed=seed
        )
    if as_json:
        echo_json({"round": review_round.name, "items": [i.as_dict() for i in items]})
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
        for line in _model_lines(item.models):
            typer.echo(f"  {'':<36} {line}")


def _echo_delphi(report: dict, as_json: bool) -> None:
    if as_json:
        echo_json(report)
        return
    rule = report["rule"]
    typer.echo(
        f"round {report['round']!r}: Delphi, phase {report['phase']} ({report['stage']}); stop "
        f"at IQR <= {rule['iqr_max']:g}"
        + (f", W >= {rule['w_min']:g}" if rule["w_min"] is not None else "")
        + f", or after phase {rule['max_phases']}"
    )
    for phase in report["phases"]:
        changed = phase.get("changed_share")
        typer.echo(
            f"phase {phase['phase']}: {phase['answers']} answers"
            + ("" if changed is None else f", {changed:.1%} changed")
            + f", {len(phase['not_converged'])} task item(s) beyond the IQR limit"
        )
        rows = [*phase["items"].items(), ("overall", phase["overall"])]
        for item, f in rows if phase["items"] else ():
            w = "-" if f["kendalls_w"] is None else f"{f['kendalls_w']:.3f}"
            typer.echo(
                f"  {item:<28} alpha {_figure(f):>24}  median IQR {f['median_iqr']:.2f}  "
                f"within {f['within_iqr']:.0%}  W {w}"
            )


def _figure(found: dict | None) -> str:
    found = found or {}
    if found.get("alpha") is None:
        return "undefined"
    ci = (
        f" [{found['ci_low']:.3f}, {found['ci_high']:.3f}]"
        if found.get("ci_low") is not None
        else ""
    )
    return f"{found['alpha']:.3f}{ci}"


def _model_lines(models: dict) -> list[str]:
    """How each model rater of the item compares with the humans, one line each."""
    if not models:
        return []
    lines = [f"humans and models {_figure(models.get('humans_and_models'))}"]
    for model in (models.get("models") or {}).values():
        lines.append(
            f"{model['rater']} vs human consensus {_figure(model.get('vs_consensus'))} "
            f"on {model.get('tasks_with_consensus', 0)} tasks"
        )
    return lines


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
    from itsmreview.review.gate.agreement import alpha
    from itsmreview.review.gate.reliability_csv import read_reliability_csv

    data = read_reliability_csv(path, level, header=header)
    result = alpha(data, level, bootstrap=bootstrap, seed=seed)
    if as_json:
        echo_json(result.as_dict())
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
