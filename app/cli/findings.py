"""`itsmreview findings`: what experts found wrong with tasks, with anchors to the evidence."""

import json
from typing import Annotated

import typer
from itsmreview.cli.base import app, boundary, echo_json, ensure_schema, open_session, operator

findings_app = typer.Typer(
    help="Findings on tasks: category, severity, evidence anchors.", no_args_is_help=True
)
app.add_typer(findings_app, name="findings")


@findings_app.command("add")
@boundary
def findings_add(
    task: Annotated[str, typer.Argument(help="Task id (its newest version unless --version).")],
    by: Annotated[str, typer.Option(help="Username of the expert or lead who found it.")],
    category: Annotated[
        str, typer.Option(help="A category of the taxonomy (`findings categories`).")
    ],
    severity: Annotated[str, typer.Option(help="major or minor.")],
    text: Annotated[str, typer.Option(help="What is wrong, in a sentence or two.")],
    anchor: Annotated[
        list[str],
        typer.Option(
            help="turn:TRANSCRIPT:N, step:N, case:ID, field:NAME or state:ENTITY[:KEY] "
            "(repeatable)."
        ),
    ],
    version: Annotated[int | None, typer.Option(help="Task version (default: the newest).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Record a finding on a task, in the name of an expert or a lead."""
    from itsmreview.accounts.service import find_user
    from itsmreview.review.ratings.findings import add_finding, parse_anchor

    anchors = [parse_anchor(a) for a in anchor]
    ensure_schema()
    with open_session() as session:
        author = find_user(session=session, username=by)
        finding = add_finding(
            session=session,
            actor=author,
            category=category,
            severity=severity,
            description=text,
            anchors=anchors,
            external_id=task,
            version=version,
        )
        found = {"id": finding.id, "task": task, "category": category, "anchors": finding.anchors}
    if as_json:
        echo_json(found)
        return
    typer.echo(
        f"finding {found['id']} on {task}: {category} ({severity}), {len(anchors)} anchor(s)"
    )


@findings_app.command("list")
@boundary
def findings_list(
    task: Annotated[str | None, typer.Option(help="Only this task's findings.")] = None,
    state: Annotated[str | None, typer.Option(help="open, confirmed or rejected.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Findings, oldest first, with their anchors and the panel's decision."""
    from itsmreview.review.ratings.findings import anchor_text, list_findings
    from itsmreview.ui.words import words

    ensure_schema()
    with open_session() as session:
        found = list_findings(session=session, actor=operator(), external_id=task, state=state)
    if as_json:
        typer.echo(json.dumps(found, indent=2, ensure_ascii=False))
        return
    if not found:
        typer.echo("no findings")
    for f in found:
        where = "; ".join(anchor_text(a) for a in f["anchors"])
        votes = f["votes"]
        panel = (
            f"; votes {votes['for']} for, {votes['against']} against" if any(votes.values()) else ""
        )
        fixed = f"; fixed in v{f['fixed_in']}" if f["fixed_in"] else ""
        typer.echo(
            f"{f['id']:>5} {f['state']:<9} {f['task']}@v{f['version']} {words(f['category'])} "
            f"({f['severity']}) by {f['author']}: {f['description']} [{where}]{panel}{fixed}"
        )


@findings_app.command("vote")
@boundary
def findings_vote(
    finding: Annotated[int, typer.Argument(help="Finding id.")],
    by: Annotated[str, typer.Option(help="Username of the expert who votes.")],
    stands: Annotated[
        bool, typer.Option("--stands/--does-not-stand", help="The finding stands, or it does not.")
    ],
    reason: Annotated[str, typer.Option(help="Why (needed against).")] = "",
) -> None:
    """An expert's vote on another's finding; three or more votes of which three quarters
    agree settle it (confirmed or rejected by the panel); a lead decides a split panel."""
    from itsmreview.accounts.service import find_user
    from itsmreview.review.ratings.findings import vote_on_finding

    ensure_schema()
    with open_session() as session:
        voter = find_user(session=session, username=by)
        found = vote_on_finding(
            session=session, actor=voter, finding_id=finding, stands=stands, reason=reason
        )
    votes = found["votes"]
    settled = "" if found["state"] == "open" else f": the panel {found['state']} it"
    typer.echo(f"finding {finding}: {votes['for']} for, {votes['against']} against{settled}")


@findings_app.command("fix")
@boundary
def findings_fix(
    finding: Annotated[int, typer.Argument(help="Finding id.")],
    version: Annotated[int, typer.Option(help="The later version of the task that fixes it.")],
) -> None:
    """Link a finding to the version of its task that fixes it (the fix trail in exports)."""
    from itsmreview.review.ratings.findings import link_fix

    ensure_schema()
    with open_session() as session:
        fixed = link_fix(session=session, actor=operator(), finding_id=finding, version=version)
        state = fixed.state
    typer.echo(f"finding {finding} ({state}) is fixed in v{version}")


@findings_app.command("decide")
@boundary
def findings_decide(
    finding: Annotated[int, typer.Argument(help="Finding id.")],
    confirm: Annotated[bool, typer.Option("--confirm/--reject", help="It stands, or it does not.")],
    reason: Annotated[str, typer.Option(help="Why (needed to reject).")] = "",
) -> None:
    """The panel's decision on a finding, recorded by a lead."""
    from itsmreview.review.ratings.findings import decide_finding

    ensure_schema()
    with open_session() as session:
        decided = decide_finding(
            session=session, actor=operator(), finding_id=finding, confirm=confirm, reason=reason
        )
        state = decided.state
    typer.echo(f"finding {finding} {state}")


@findings_app.command("categories")
@boundary
def findings_categories(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """The taxonomy of findings: each category, its label and where it comes from."""
    from itsmreview.review.ratings.findings import TAXONOMY

    if as_json:
        echo_json(
            {k: {"label": label, "source": source} for k, (label, source) in TAXONOMY.items()}
        )
        return
    for key, (label, source) in TAXONOMY.items():
        typer.echo(f"{key:<28} {label} ({source})")
