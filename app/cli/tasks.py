"""`itsmreview` commands: the task catalog."""

import json
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
)

tasks_app = typer.Typer(help="The task catalog.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")


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
    """Import tasks, or transcripts of existing tasks; all or nothing, unchanged tasks skipped.
    A new version of a task that needs revision in an open round goes back into its queue."""
    from itsmreview.review.repair.service import import_path

    ensure_schema()
    with open_session() as session:
        result = import_path(
            path, session=session, fmt=fmt, log=log, task=task, persona=persona, dry_run=dry_run
        )
    if as_json:
        echo_json(result.as_dict())
        return
    report = result.report
    prefix = "would import" if dry_run else "imported"
    typer.echo(
        f"{prefix} ({result.format}): {len(report.created)} new, "
        f"{len(report.new_versions)} new versions, {len(report.unchanged)} unchanged"
    )
    for task_id, missing in result.unresolved.items():
        typer.echo(f"  {task_id}: not in the log: {json.dumps(missing, ensure_ascii=False)}")
    for requeued in result.requeued:
        typer.echo(f"  back in review: {requeued}")


@tasks_app.command("show")
@boundary
def tasks_show(
    task_id: Annotated[str, typer.Argument(help="Task id.")],
    version: Annotated[int | None, typer.Option(help="Version number (default: newest).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show one task version with its transcripts."""
    from itsmreview.catalog.importing import show_task

    ensure_schema()
    with open_session() as session:
        shown = show_task(session=session, external_id=task_id, version=version)
    if as_json:
        echo_json(shown)
        return
    task = shown["task"]
    typer.echo(f"{task['id']} v{shown['version']} ({shown['status']}): {task['title']}")
    typer.echo(f"{task['persona']} · {task['track']}")
    for label in ("instruction", "environment", "ground_truth", "verifier"):
        if task.get(label):
            typer.echo(f"\n[{label}]\n{task[label]}")
    if task.get("state"):
        from itsmreview.catalog.state import diff_rows, preserve_rows, state_summary

        typer.echo(f"\n[expected end state] {state_summary(task['state'])}")
        for row in diff_rows(task["state"]):
            keep = "  (must not change)" if row["must_not_change"] else ""
            typer.echo(
                f"  {row['change']:<8} {row['entity']} {row['key']} {row['field']}: "
                f"{json.dumps(row['before'])} -> {json.dumps(row['after'])}{keep}"
            )
        for row in preserve_rows(task["state"]):
            typer.echo(f"  unchanged {row['entity']} {row['key']}: {row['fields']}")
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

    ensure_schema()
    with open_session() as session:
        count = export_catalog(dest, session=session, fmt=fmt, external_ids=task_ids)
    typer.echo(f"exported {count} task(s) as {fmt} to {dest}")


@tasks_app.command("list")
@boundary
def tasks_list(
    difficulty: Annotated[
        list[str] | None, typer.Option(help="easy, medium or hard (L1-L3; repeatable).")
    ] = None,
    user_type: Annotated[
        list[str] | None, typer.Option(help="Simulated user type (repeatable).")
    ] = None,
    backbone: Annotated[
        list[str] | None, typer.Option(help="Simulator backbone (repeatable).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List tasks with persona, track, status, newest version, difficulty, simulated user
    type, simulator backbone and repair iterations."""
    from itsmreview.catalog.service import tasks_frame
    from itsmreview.catalog.state import normalise_difficulty, normalise_user_type
    from itsmreview.review.repair.service import repair_iterations

    try:
        difficulties = [normalise_difficulty(d) for d in difficulty or []]
        user_types = [normalise_user_type(u) for u in user_type or []]
    except ValueError as exc:
        fail(str(exc))
    ensure_schema()
    with open_session() as session:
        frame = tasks_frame(session=session)
        repairs = repair_iterations(
            session=session, actor=operator(), task_ids=frame["id"].tolist()
        )
    frame = frame.assign(repairs=[repairs.get(int(i), 0) for i in frame["id"]])
    for column, chosen in (
        ("difficulty", difficulties),
        ("user_type", user_types),
        ("simulator_backbone", backbone or []),
    ):
        if chosen:
            frame = frame[frame[column].isin(chosen)]
    if as_json:
        echo_json(frame.drop(columns=["id"]).to_dict("records"))
        return
    from itsmreview.ui.words import cell, is_missing

    for row in frame.itertuples(index=False):
        extra = ", ".join(
            f"{label} {cell(value)}"
            for label, value in (
                ("difficulty", row.difficulty),
                ("user", row.user_type),
                ("simulator", row.simulator_backbone),
                ("repairs", row.repairs or None),
            )
            if not is_missing(value)  # nothing declared, nothing shown
        )
        typer.echo(
            f"{row.external_id:<40} v{row.version:<3} {cell(row.status):<14} {row.persona}"
            + (f"  {extra}" if extra else "")
        )
