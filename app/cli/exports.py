"""`itsmreview` commands: approved task sets with their evidence, and checking one."""

from datetime import datetime
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
from typer.core import TyperGroup


class ExportGroup(TyperGroup):
    """`itsmreview export OUT ...` runs `export create OUT ...`; `export verify OUT` checks."""

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ("--help", "-h"):
            args = ["create", *args]
        return super().parse_args(ctx, args)


export_app = typer.Typer(
    cls=ExportGroup,
    help="Approved task sets with the evidence that approved them: `export OUT` writes one, "
    "`export verify OUT` checks one.",
    no_args_is_help=True,
)
app.add_typer(export_app, name="export")


# The options of `export create`, one alias each: the command's signature stays one line per option.
OutArg = Annotated[Path, typer.Argument(help="Folder to write (must not exist or be empty).")]
FormatOpt = Annotated[
    str, typer.Option("--format", help="Comma-separated: native, harbor, hf, tau2.")
]
NameOpt = Annotated[
    str | None,
    typer.Option(
        help="The export's name in the card, manifest and dataset.toml (default: the "
        "round's name, else itsmreview-export); OUT's name is never used."
    ),
]
LicenseOpt = Annotated[
    str | None,
    typer.Option(
        "--license",
        help="SPDX identifier of the set's licence (MIT, CC-BY-4.0, ...), or other / "
        "LicenseRef-NAME with --license-name.",
    ),
]
LicenseNameOpt = Annotated[
    str | None, typer.Option("--license-name", help="The licence's name, for --license other.")
]
OrgOpt = Annotated[
    str | None,
    typer.Option(
        help="Harbor org of task and dataset names (org/name); default: ITSMREVIEW_EXPORT_ORG."
    ),
]
RoundOpt = Annotated[str | None, typer.Option("--round", help="Only tasks approved in this round.")]
LogOpt = Annotated[str | None, typer.Option(help="Only tasks derived from this log.")]
PersonaOpt = Annotated[str | None, typer.Option(help="Only tasks of this persona.")]
TentativeOpt = Annotated[
    bool,
    typer.Option("--allow-tentative", help="Export even if agreement does not reach the gate."),
]
ReasonOpt = Annotated[
    str, typer.Option(help="Why a tentative export goes out (manifest and ledger).")
]
ForceOpt = Annotated[
    bool, typer.Option("--force", help="Replace OUT if it exists and is not empty.")
]
WithNamesOpt = Annotated[
    bool, typer.Option("--with-names", help="Raters by name instead of rater-01, ...")
]
AtOpt = Annotated[
    datetime | None,
    typer.Option(help="Export time written into the manifest (ISO 8601), for reproducibility."),
]
ZipOpt = Annotated[bool, typer.Option("--zip", help="Also write OUT.zip.")]
BootstrapOpt = Annotated[int, typer.Option(help="Bootstrap samples for the agreement intervals.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


@export_app.command("create")
@boundary
def export_create(
    out: OutArg,
    format: FormatOpt = "native",
    name: NameOpt = None,
    license: LicenseOpt = None,
    license_name: LicenseNameOpt = None,
    org: OrgOpt = None,
    round_name: RoundOpt = None,
    log: LogOpt = None,
    persona: PersonaOpt = None,
    allow_tentative: TentativeOpt = False,
    reason: ReasonOpt = "",
    force: ForceOpt = False,
    with_names: WithNamesOpt = False,
    at: AtOpt = None,
    make_zip: ZipOpt = False,
    bootstrap: BootstrapOpt = 1000,
    as_json: JsonOpt = False,
) -> None:
    """Export the approved versions of the chosen tasks with their ratings, agreement, gate
    decisions, adjudications, coverage, rubrics, ledger slice and a manifest of sha256 digests."""
    from itsmreview.exports.service import export_set
    from itsmreview.review.gate.work import apply_pending

    ensure_schema()
    apply_pending()  # ratings still queued for the gate decide what is approved, too
    with progress_bar("exporting") as progress, open_session() as session:
        result = export_set(
            out,
            session=session,
            actor=operator(),
            formats=format,
            name=name,
            license=license,
            license_name=license_name,
            org=org,
            round_name=round_name,
            log=log,
            persona=persona,
            allow_tentative=allow_tentative,
            reason=reason,
            force=force,
            with_names=with_names,
            at=at,
            make_zip=make_zip,
            bootstrap=bootstrap,
            progress=progress,
        )
    if as_json:
        echo_json(result.as_dict())
    else:
        _echo_export(result)


def _echo_export(result) -> None:
    """What an export wrote, for a reader: tasks and formats, the forms some tasks lack,
    the manifest's digest, the zip and a tentative export's reason."""
    counts = result.manifest["counts"]
    typer.echo(
        f"exported {result.tasks} approved task(s) ({', '.join(result.formats)}) with "
        f"{counts['ratings']} rating(s) to {result.path}"
    )
    for kind, source in (("harbor", "Harbor task folders"), ("tau2", "tau2-bench files")):
        if kind in result.formats and counts.get(kind, 0) < result.tasks:
            typer.echo(
                f"{kind}: {counts.get(kind, 0)} of {result.tasks} task(s); only tasks imported "
                f"from {source} have a {kind} form, the others are in the native and hf files"
            )
    typer.echo(f"manifest sha256: {result.manifest_sha256}")
    if result.zip_path:
        typer.echo(f"zip: {result.zip_path}")
    if result.manifest["tentative"]:
        typer.echo(f"tentative: {result.manifest['tentative']['reason']}")


@export_app.command("verify")
@boundary
def export_verify(
    out: Annotated[Path, typer.Argument(help="An export folder.")],
    as_json: JsonOpt = False,
) -> None:
    """Check every file of an export against its manifest; exit 1 naming each missing,
    changed or extra file."""
    from itsmreview.exports.service import verify_export

    report = verify_export(out)
    if as_json:
        echo_json(report.as_dict())
    else:
        for label, names in (
            ("missing", report.missing),
            ("changed", report.changed),
            ("extra", report.extra),
        ):
            for name in names:
                typer.echo(f"{label}: {name}")
    if report.problem:
        fail(report.problem)
    if not report.ok:
        fail(
            f"{out}: {len(report.missing)} missing, {len(report.changed)} changed, "
            f"{len(report.extra)} extra file(s)"
        )
    if not as_json:
        typer.echo(
            f"{out}: all {report.files} files match the manifest "
            f"(manifest sha256 {report.manifest_sha256})"
        )
