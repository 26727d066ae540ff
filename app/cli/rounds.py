"""`itsmreview` commands: review rounds."""

from pathlib import Path
from typing import Annotated

import typer
from itsmreview.cli.base import (
    app,
    boundary,
    echo_json,
    ensure_schema,
    open_session,
    operator,
)

round_app = typer.Typer(help="Review rounds.", no_args_is_help=True)
app.add_typer(round_app, name="round")


@round_app.command("create")
@boundary
def round_create(
    name: Annotated[str, typer.Argument(help="Round name.")],
    k: Annotated[int, typer.Option(help="Experts per task.")] = 3,
    rubric: Annotated[
        Path | None,
        typer.Option(help="Rubric YAML or preset: itsm-realism (default), audit-100."),
    ] = None,
    task_ids: Annotated[
        list[str] | None, typer.Option("--id", help="Task id (repeatable; default: every task).")
    ] = None,
    persona: Annotated[
        list[str] | None, typer.Option(help="Only tasks of this persona (repeatable).")
    ] = None,
    track: Annotated[list[str] | None, typer.Option(help="Only this track (repeatable).")] = None,
    status: Annotated[
        list[str] | None,
        typer.Option(help="Only tasks in this status, e.g. draft (repeatable)."),
    ] = None,
    search: Annotated[str, typer.Option(help="Only tasks whose id or title contain this.")] = "",
    expert: Annotated[
        list[str] | None,
        typer.Option(help="Admit only this expert (repeatable; default: every expert)."),
    ] = None,
) -> None:
    """Open a review round over the newest versions of tasks; experts then claim them."""
    from itsmreview.catalog.task_list import task_filters
    from itsmreview.review.rounds.service import open_round
    from itsmreview.review.rubrics.service import DEFAULT_RUBRIC, ensure_rubric, load_rubric

    ensure_schema()
    with open_session() as session:
        definition = load_rubric(rubric or DEFAULT_RUBRIC)
        review_round, size = open_round(
            session=session,
            actor=operator(),
            name=name,
            rubric=definition,
            filters=task_filters(
                personas=persona,
                tracks=track,
                statuses=status,
                text=search,
                external_ids=task_ids,
            ),
            k=k,
            members=expert or [],
        )
        stored = ensure_rubric(definition, session=session)
    typer.echo(
        f"opened round {review_round.name!r}: {size} task(s), k={k}, rubric "
        f"{stored.name} v{stored.version}"
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
    mode: Annotated[
        str | None,
        typer.Option(help="median (rubric medians) or audit-100 (the 100-point audit score)."),
    ] = None,
    threshold: Annotated[
        float | None, typer.Option(help="audit-100: the score (0-100) a task needs.")
    ] = None,
    realism_required: Annotated[
        bool | None,
        typer.Option(
            "--realism-required/--no-realism-required",
            help="An export of the round needs every simulator of its tasks inside the log's "
            "noise floor, or a lead's waiver (`realism waive`).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show a round's approval gate, or change it and re-decide every task of the round."""
    from collections import Counter
    from dataclasses import asdict

    from itsmreview.review.gate.service import current_gate, set_gate

    changes = {
        key: value
        for key, value in {
            "k_min": k_min,
            "dimension_min": dimension_min,
            "alpha_min": alpha_min,
            "disagreement_range": disagreement_range,
            "gating_dimensions": gating,
            "blocking_flags": blocking,
            "mode": mode,
            "threshold": threshold,
            "realism_required": realism_required,
        }.items()
        if value is not None
    }
    ensure_schema()
    with open_session() as session:
        if changes:
            config, decisions = set_gate(
                session=session, actor=operator(), round_name=name, changes=changes
            )
            statuses = dict(Counter(d.status for d in decisions.values()))
        else:
            config, statuses = current_gate(session=session, round_name=name)[0], None
    settings = asdict(config)
    weights = dict(settings.pop("weights"))
    credit = {str(int(v)): c for v, c in settings.pop("credit")}
    blocked = settings.pop("blocked_value")
    audit = {"weights": weights, "credit": credit, "blocked": blocked} if weights else None
    if as_json:
        echo_json({**settings, "audit": audit, "statuses": statuses})
        return
    for key, value in settings.items():
        typer.echo(f"{key:<20} {', '.join(value) if isinstance(value, tuple) else value}")
    if audit and config.mode == "audit-100":
        typer.echo("weights              " + ", ".join(f"{k} {w:g}" for k, w in weights.items()))
    if statuses is not None:
        typer.echo("tasks now: " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())))


@round_app.command("feedback")
@boundary
def round_feedback(
    name: Annotated[str, typer.Argument(help="Round name.")],
    out: Annotated[Path, typer.Argument(help="Output name: OUT.jsonl and OUT.md are written.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Write the feedback for the authors of the round's tasks that need revision."""
    from itsmreview.review.repair.service import feedback, write_feedback

    ensure_schema()
    with open_session() as session:
        items = feedback(session=session, actor=operator(), round_name=name)
    jsonl, markdown = write_feedback(items, out)
    if as_json:
        echo_json({"tasks": len(items), "jsonl": str(jsonl), "markdown": str(markdown)})
        return
    typer.echo(f"{len(items)} task(s) need revision: wrote {jsonl} and {markdown}")


@round_app.command("close")
@boundary
def round_close(name: Annotated[str, typer.Argument(help="Round name.")]) -> None:
    """Close a round: no more claims or ratings; open reservations are released."""
    from itsmreview.review.rounds.assignment import close_round

    ensure_schema()
    with open_session() as session:
        close_round(session=session, actor=operator(), round_name=name)
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
    from itsmreview.accounts.service import find_user
    from itsmreview.review.rounds.assignment import set_round_experts

    ensure_schema()
    with open_session() as session:

        def users(names):
            return [find_user(session=session, username=username) for username in names or []]

        members = set_round_experts(
            session=session,
            actor=operator(),
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
    from itsmreview.accounts.service import find_user
    from itsmreview.review.rounds.assignment import reassign

    ensure_schema()
    with open_session() as session:
        expert = find_user(session=session, username=to)
        moved = reassign(
            session=session, actor=operator(), assignment_id=assignment_id, expert=expert
        )
    typer.echo(f"assignment {assignment_id} moved to {to} as assignment {moved.id}")


@round_app.command("list")
@boundary
def round_list(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List review rounds with their progress."""
    from itsmreview.review.consensus.states import delphi_states
    from itsmreview.review.rounds.assignment import rounds_progress

    ensure_schema()
    with open_session() as session:
        rounds, progress = rounds_progress(session=session)
        delphi = delphi_states(session=session)
    standard = {"mode": "standard", "phase": None, "stage": None}
    rows = [
        {
            "name": r.name,
            "status": r.status,
            "k": r.k,
            "assigned": progress.get(r.name, (0, 0))[0],
            "submitted": progress.get(r.name, (0, 0))[1],
            **delphi.get(r.id, standard),
        }
        for r in rounds
    ]
    if as_json:
        echo_json(rows)
        return
    for row in rows:
        mode = f"  Delphi phase {row['phase']} ({row['stage']})" if row["phase"] else ""
        typer.echo(
            f"{row['name']:<24} {row['status']:<7} k={row['k']}  "
            f"{row['submitted']}/{row['assigned']} rated{mode}"
        )


@round_app.command("apply-queued")
@boundary
def round_apply_queued(
    name: Annotated[
        str | None, typer.Argument(help="Round name (default: every round with queued ratings).")
    ] = None,
    watch: Annotated[
        float | None,
        typer.Option(
            help="Then keep applying every round's queue, looking again every SECONDS, until "
            "stopped (Ctrl+C): the gate worker beside servers that run with "
            "ITSMREVIEW_GATE_APPLY=queue. An error is logged and retried at the next look.",
            min=0.01,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Apply the ratings waiting for the approval gate: move their rounds' agreement counts
    and re-decide their tasks. Submits queue them with ITSMREVIEW_GATE_APPLY=background or
    queue; a worker that stopped half-way leaves them queued, never lost."""
    import time

    from itsmreview.review.gate.round_data import find_round
    from itsmreview.review.gate.work import GateWorker, apply_pending, pending
    from itsmreview.settings import get_settings

    ensure_schema()
    round_id = None
    if name is not None:
        with open_session() as session:
            round_id = find_round(session, name).id
    applied = apply_pending(round_id=round_id)
    if watch is not None:  # every round: a worker is the gate of the whole database
        running = GateWorker(get_settings().resolved_database_url(), watch)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            running.stop()
        applied += running.applied
    with open_session() as session:
        left, _ = pending(session=session, round_id=round_id)
    if as_json:
        echo_json({"applied": applied, "queued": left})
        return
    typer.echo(f"applied {applied} queued rating(s) to the gate; {left} still queued")
    if left:
        typer.echo("another worker is applying them: run again to wait for it")


@round_app.command("delphi")
@boundary
def round_delphi(
    name: Annotated[str, typer.Argument(help="Round name.")],
    iqr_max: Annotated[
        float,
        typer.Option(help="Stop when every task's answers on every item lie within this IQR."),
    ] = 1.0,
    w_min: Annotated[
        float | None, typer.Option(help="... and Kendall's W of every item reaches this.")
    ] = None,
    max_phases: Annotated[int, typer.Option(help="Stop after this phase whatever holds.")] = 3,
) -> None:
    """Run a round as a Delphi consensus: phase 1 is the blind rating; `round phase` then
    reveals the panel's anonymous answers and lets experts revise, until the rule holds."""
    from itsmreview.review.consensus.service import start_delphi

    ensure_schema()
    with open_session() as session:
        start_delphi(
            session=session,
            actor=operator(),
            round_name=name,
            iqr_max=iqr_max,
            w_min=w_min,
            max_phases=max_phases,
        )
    rule = f"IQR <= {iqr_max:g}" + (f", W >= {w_min:g}" if w_min is not None else "")
    typer.echo(f"{name}: a Delphi round (stop at {rule}, or after phase {max_phases})")


@round_app.command("phase")
@boundary
def round_phase(
    name: Annotated[str, typer.Argument(help="Round name.")],
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """End the Delphi round's current phase: check the stop rule, then either close the
    consensus (the tasks that converged are decided on the panel's final answers) or open the
    next phase for revisions."""
    from itsmreview.review.consensus.service import advance_phase

    ensure_schema()
    with open_session() as session:
        result = advance_phase(session=session, actor=operator(), round_name=name)
    if as_json:
        echo_json(result)
        return
    if result["stage"] == "closed":
        settled = result["settled"]
        typer.echo(
            f"{name}: phase {result['ended_phase']} ended; consensus closed: "
            f"{result['stopped_because']}. {settled['decided']} task(s) decided by the "
            f"consensus; left to a lead's adjudication: {settled['not_converged']} not "
            f"converged ({result['not_converged']} task item(s)), "
            f"{settled['held_by_the_gate']} held by the gate (conflicting verdicts, a blocking "
            "flag, or agreement too low)"
        )
    else:
        typer.echo(
            f"{name}: phase {result['ended_phase']} ended ({result['not_converged']} task item(s) "
            f"apart); phase {result['phase']}: experts revise on the Consensus page"
        )
