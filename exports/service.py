"""Exporting an approved task set with the evidence that approved it, and verifying one."""

import re
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pandas as pd
from itsmreview import __version__
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog.formats.common import FormatError
from itsmreview.db import second_process_url, utcnow
from itsmreview.errors import Conflict, InvalidInput, NotFound
from itsmreview.exports import harbor, queries, writing
from itsmreview.exports.audit import AUDIT_FILE, verify_audit
from itsmreview.exports.bundle import (
    MANIFEST,
    Staging,
    VerifyReport,
    canonical,
    executables,
    file_digests,
    file_sizes,
    sha256_file,
    verify_folder,
    write_zip,
)
from itsmreview.exports.models import Export
from itsmreview.exports.writing import Plan, Selection
from itsmreview.ledger.service import append_entry
from itsmreview.processes import cycles_collected_after, second_process_context
from itsmreview.realism import service as realism_service
from itsmreview.review.consensus import service as consensus
from itsmreview.review.gate import round_data
from itsmreview.review.gate import service as gate_service
from sqlmodel import Session

FORMATS = ("native", "harbor", "hf", "tau2")
Progress = Callable[[str, float], None]
RATING_BATCH = 1000  # task versions whose ratings are read, written and decided together
TASK_BATCH = 1000  # task versions read and written together (memory: a batch, not the set)
DEFAULT_NAME = "itsmreview-export"
REALISM_FILE = "evidence/realism.json"  # each simulator of the set against its log
NAME_LIMIT = 100  # characters of an export's name
SPDX = re.compile(r"LicenseRef-[A-Za-z0-9.-]{1,64}|[A-Za-z0-9][A-Za-z0-9.+-]{0,63}")
FOLDER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass
class ExportResult:
    path: Path
    tasks: int
    files: int
    manifest_sha256: str
    manifest: dict
    zip_path: Path | None = None
    formats: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "path": str(self.path),
            "zip": str(self.zip_path) if self.zip_path else None,
            "tasks": self.tasks,
            "files": self.files,
            "manifest_sha256": self.manifest_sha256,
            "formats": self.formats,
            "counts": self.manifest["counts"],
            "tentative": self.manifest["tentative"],
        }


def parse_formats(text: str | Sequence[str]) -> list[str]:
    chosen = [f.strip() for f in (text.split(",") if isinstance(text, str) else text) if f]
    unknown = sorted(set(chosen) - set(FORMATS))
    if unknown or not chosen:
        raise InvalidInput(
            f"unknown export format(s) {', '.join(unknown) or '(none)'}; choose from "
            f"{', '.join(FORMATS)}, comma-separated"
        )
    return [f for f in FORMATS if f in chosen]


def select_approved(
    *,
    session: Session,
    round_name: str | None = None,
    log: str | None = None,
    persona: str | None = None,
) -> Selection:
    """The newest approved version of each task, in one round, of one source log and of one
    persona when given. Raises NotFound for an unknown round."""
    review_round = round_data.find_round(session, round_name) if round_name else None
    ids = queries.approved_version_ids(
        round_id=review_round.id if review_round else None, persona=persona
    )
    rounds = [review_round] if review_round else queries.rounds_of(session=session, ids=ids)
    chosen = Selection.of_rows(queries.versions_in(session=session, ids=ids), ids, rounds)
    return chosen.where(lambda i: chosen.logs[i] == log) if log else chosen


def preview(
    *,
    session: Session,
    actor: User,
    round_name: str | None = None,
    log: str | None = None,
    persona: str | None = None,
) -> dict:
    """What an export with these filters would hold: task counts by persona and source log,
    and whether each round's agreement reaches its gate. Leads only."""
    require_role(actor, Role.lead)
    chosen = select_approved(session=session, round_name=round_name, log=log, persona=persona)
    frame = pd.DataFrame(
        {"persona": chosen.personas, "log": [name or "-" for name in chosen.logs]},
        columns=["persona", "log"],
    )
    return {
        "tasks": len(chosen),
        "by_persona": frame["persona"].value_counts().sort_index().to_dict(),
        "by_log": frame["log"].value_counts().sort_index().to_dict(),
        "gate": {r.name: _gate_state(session, r) for r in chosen.rounds},
    }


def _gate_state(session: Session, review_round, counts: dict | None = None) -> dict:
    """Whether the round's agreement reaches its gate: alpha of every gating dimension that
    has values, from per-task counts (no rating is loaded)."""
    config, rubric = gate_service.current_gate(session=session, round_name=review_round.id)
    # a closed Delphi round decided on its panel's final answers: their agreement is its gate
    alphas = consensus.consensus_alphas(session=session, round_id=review_round.id)
    basis = "ratings" if alphas is None else "Delphi final answers"
    if alphas is None:
        alphas = gate_service.gating_alphas(
            session=session, review_round=review_round, rubric=rubric, counts=counts
        )
    # a dimension no rating of the round has a value for (it applies to none of its tasks)
    # holds no task back, so it holds no export back either
    unrated = {item for item in alphas if counts is not None and counts[item].empty}
    weak = [
        f"alpha of {item} is {'undefined' if value is None else f'{value:.3f}'}, "
        f"below {config.alpha_min:.3f}"
        for item, value in alphas.items()
        if item not in unrated and (value is None or value < config.alpha_min)
    ]
    return {
        "reached": not weak,
        "alpha": alphas,
        "alpha_min": config.alpha_min,
        "basis": basis,
        "problems": weak,
    }


def check_name(name: str) -> str:
    """An export's name, stripped: 1 to NAME_LIMIT characters without control characters.
    Raises InvalidInput saying what is wrong."""
    cleaned = (name or "").strip()
    if not cleaned:
        raise InvalidInput("--name is empty; name the export, e.g. --name pilot-2026-12")
    if len(cleaned) > NAME_LIMIT:
        raise InvalidInput(f"--name is {len(cleaned)} characters long; use at most {NAME_LIMIT}")
    bad = next((c for c in cleaned if ord(c) < 32 or ord(c) == 127 or c in "\u2028\u2029"), None)
    if bad is not None:
        raise InvalidInput(
            f"--name {cleaned[:40]!r}: holds the control character {bad!r} (a line break or "
            "tab); write the name on one line"
        )
    return cleaned


def check_license(spdx: str | None, name: str | None) -> dict:
    """The licence an export states: an SPDX identifier (`MIT`, `CC-BY-4.0`), or `other` /
    `LicenseRef-...` with a name. Without one, `other`, named as not specified. Raises
    InvalidInput for a malformed identifier or a missing name."""
    label = (name or "").strip()
    if label and (len(label) > 200 or any(ord(c) < 32 for c in label)):
        raise InvalidInput("--license-name: one line of at most 200 characters")
    if spdx is None or not spdx.strip():
        if label:
            return {"spdx": "other", "name": label}
        return {"spdx": "other", "name": "not specified at export"}
    spdx = spdx.strip()
    if not SPDX.fullmatch(spdx):
        raise InvalidInput(
            f"--license {spdx[:60]!r} is not an SPDX licence identifier (e.g. MIT, "
            "Apache-2.0, CC-BY-4.0), `other` or `LicenseRef-NAME`"
        )
    if (spdx.lower() == "other" or spdx.startswith("LicenseRef-")) and not label:
        raise InvalidInput(f"--license {spdx} needs --license-name TEXT: say which licence")
    return {"spdx": spdx, **({"name": label} if label else {})}


def check_org(org: str | None) -> str:
    """The Harbor org of the exported names (default: the export_org setting)."""
    from itsmreview.settings import get_settings

    chosen = (org if org is not None else get_settings().export_org).strip()
    if not harbor.is_org(chosen):
        raise InvalidInput(
            f"--org {chosen[:60]!r}: a Harbor org is letters, digits, '.', '_' and '-', "
            "starting with a letter or digit, without '..' (set ITSMREVIEW_EXPORT_ORG or pass "
            "--org)"
        )
    return chosen


@cycles_collected_after()
def export_set(
    out: Path | str,
    *,
    session: Session,
    actor: User,
    formats: Sequence[str] = ("native",),
    name: str | None = None,
    license: str | None = None,
    license_name: str | None = None,
    org: str | None = None,
    round_name: str | None = None,
    log: str | None = None,
    persona: str | None = None,
    allow_tentative: bool = False,
    reason: str = "",
    force: bool = False,
    with_names: bool = False,
    at: datetime | None = None,
    make_zip: bool = False,
    bootstrap: int = 1000,
    progress: Progress | None = None,
) -> ExportResult:
    """Write the approved set the filters choose, with its evidence and manifest, to `out`
    (staged, then renamed into place); record it in `exports` and the ledger. Leads only.

    `name` (default: the round's name, else "itsmreview-export"), the licence and the Harbor
    `org` go into the card, the manifest and `dataset.toml`; nothing written depends on where
    `out` is or what it is called.

    Raises NotFound when no approved task matches (nothing is written), Conflict when `out`
    is a non-empty folder (without `force`) or a round's agreement does not reach its gate
    (without `allow_tentative`, which needs a `reason`), InvalidInput for a bad format, name,
    licence or org.
    """
    require_role(actor, Role.lead)
    report = progress or (lambda _stage, _fraction: None)
    formats = parse_formats(formats)
    name = check_name(name) if name is not None else None
    licence, org, out = check_license(license, license_name), check_org(org), Path(out)
    _check_destination(out, force=force)
    if allow_tentative and not reason.strip():
        raise InvalidInput("--allow-tentative needs --reason: say why the set goes out anyway")
    report("selecting approved versions", 0.02)
    chosen = select_approved(session=session, round_name=round_name, log=log, persona=persona)
    if not chosen:
        raise _nothing_approved(round=round_name, log=log, persona=persona)
    name = name or _default_name(round_name, chosen)
    report("checking the gate", 0.08)
    item_counts, gates, weak = _check_gates(session, chosen, allow_tentative=allow_tentative)
    report("checking simulator realism", 0.1)
    realism = _check_realism(session, chosen)
    plan = Plan(
        chosen, formats, name, licence, org, gates, item_counts, with_names, bootstrap, realism
    )
    staging = Staging(out)
    try:
        counts, rubrics = _write_files(staging, plan, session=session, actor=actor, report=report)
        manifest, manifest_sha = _write_manifest(
            staging,
            plan,
            exported_at=(at or utcnow()).isoformat(),
            filters={"round": round_name, "log": log, "persona": persona},
            tentative={"reason": reason.strip(), "gate": weak} if weak else None,
            counts=counts,
            rubrics=rubrics,
            head=_evidence_head(session),
            report=report,
        )
        _record(session, actor=actor, out=out, manifest=manifest, manifest_sha=manifest_sha)
        staging.commit(replace=True)
    except FormatError as exc:
        staging.discard()
        raise InvalidInput(str(exc)) from None
    except BaseException:
        staging.discard()
        raise
    zip_path = (
        write_zip(out, out.with_name(out.name + ".zip"), prefix=harbor.slug(name))
        if make_zip
        else None
    )
    report("done", 1.0)
    files = len(manifest["files"]) + 1
    return ExportResult(out, len(chosen), files, manifest_sha, manifest, zip_path, formats)


def _check_destination(out: Path, *, force: bool) -> None:
    """Raises Conflict when `out` is not a folder, or a non-empty one without `force`."""
    if out.exists() and not out.is_dir():
        raise Conflict(f"{out} exists and is not a folder; choose another destination")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise Conflict(f"{out} exists and is not empty; choose another folder or pass --force")


def _nothing_approved(**filters: str | None) -> NotFound:
    """The error of an export whose filters select no approved task, naming the filters."""
    named = ", ".join(f"{k} {v!r}" for k, v in filters.items() if v)
    return NotFound(
        "no approved task"
        + (f" matches {named}" if named else "")
        + "; tasks are approved by a review round's gate (`itsmreview round list`)"
    )


def _default_name(round_name: str | None, chosen: Selection) -> str:
    """An export's name when none is given: its round's, else DEFAULT_NAME."""
    single = round_name or (chosen.rounds[0].name if len(chosen.rounds) == 1 else None)
    return check_name(single) if single else DEFAULT_NAME


def _check_gates(
    session: Session, chosen: Selection, *, allow_tentative: bool
) -> tuple[dict, dict, dict]:
    """Each chosen round's per-task counts and gate state, and the problems of the rounds
    whose agreement misses the gate. Raises Conflict for those without `allow_tentative`."""
    counts = {
        r.name: round_data.round_counts(
            session=session,
            round_id=r.id,
            rubric=gate_service.current_gate(session=session, round_name=r.id)[1],
        )
        for r in chosen.rounds
    }
    gates = {r.name: _gate_state(session, r, counts[r.name]) for r in chosen.rounds}
    weak = {name: g["problems"] for name, g in gates.items() if not g["reached"]}
    if weak and not allow_tentative:
        details = "; ".join(f"round {n}: {', '.join(p)}" for n, p in sorted(weak.items()))
        raise Conflict(
            f"agreement does not reach the gate ({details}); export anyway with "
            "--allow-tentative --reason TEXT, which the manifest and the ledger record"
        )
    return counts, gates, weak


def _check_realism(session: Session, chosen: Selection) -> dict | None:
    """Each simulator of the chosen tasks' transcripts against its log (None without any),
    and the rounds whose gate requires realism. Raises Conflict when such a round's set has a
    simulator beyond its noise floor that no lead waived."""
    checks = realism_service.release_check(session=session, version_ids=list(chosen.version_ids))
    required = sorted(
        r.name
        for r in chosen.rounds
        if gate_service.current_gate(session=session, round_name=r.id)[0].realism_required
    )
    held = [check for check in checks if not check["cleared"]]
    if required and held:
        details = "; ".join(
            f"simulator {c['simulator']!r} (spec {c['spec']}): could not be measured: {c['error']}"
            if c.get("error")
            else f"simulator {c['simulator']!r} (spec {c['spec']}) departs from log "
            f"{c['report']['log']!r} beyond the noise floor on {', '.join(c['beyond'])}"
            for c in held
        )
        first = held[0]["simulator"]
        raise Conflict(
            f"round(s) {', '.join(required)} require simulator realism: {details}; see "
            f"`itsmreview realism report --simulator {first!r}`, and release anyway only with "
            f"a lead's waiver: `itsmreview realism waive --simulator {first!r} --reason TEXT`"
        )
    if not checks:
        return None
    return {"required_by": required, "simulators": checks}


def _realism_summary(realism: dict | None) -> dict | None:
    """The manifest's line on simulator realism: per simulator, whether it is cleared (every
    figure inside its floor, or waived) and why; evidence/realism.json holds the reports."""
    if realism is None:
        return None
    return {
        "required_by": realism["required_by"],
        "simulators": [
            {
                "simulator": c["simulator"],
                "spec": c["spec"],
                "spec_sha256": c["report"]["spec"]["sha256"] if c["report"] else None,
                "error": c.get("error"),
                "beyond": c["beyond"],
                "waiver_ledger_seq": c["waiver"]["ledger_seq"] if c["waiver"] else None,
                "cleared": c["cleared"],
            }
            for c in realism["simulators"]
        ],
    }


def _write_manifest(
    staging: Staging,
    plan: Plan,
    *,
    exported_at: str,
    filters: dict,
    tentative: dict | None,
    counts: dict,
    rubrics: list[dict],
    head: dict | None,
    report: Progress,
) -> tuple[dict, str]:
    """Write the manifest of the files staged so far: what the export holds, how it was
    chosen (`filters`: round, log and persona), the gates it passed and each file's digest,
    size and mode. Returns it and its SHA-256."""
    report("writing the manifest", 0.9)
    manifest = {
        "format_version": 1,
        "platform": {"name": "itsmreview", "version": __version__},
        "name": plan.name,
        "license": plan.licence,
        "exported_at": exported_at,
        "filters": {"formats": plan.formats, **filters, "with_names": plan.with_names},
        "tentative": tentative,
        "counts": counts,
        "rounds": sorted(plan.gates),
        "gate": plan.gates,
        "rubrics": rubrics,
        "realism": _realism_summary(plan.realism),
        "ledger_head": head,
        "files": file_digests(staging.root, staging.files()),
        "sizes": file_sizes(staging.root, staging.files()),
        "executables": executables(staging.root, staging.files()),
    }
    if "harbor" in plan.formats:
        manifest["harbor"] = {"org": plan.org, "dataset": f"{plan.org}/{harbor.slug(plan.name)}"}
    staging.write_text(MANIFEST, canonical(manifest, indent=1))
    return manifest, sha256_file(staging.root / MANIFEST)


def _record(session: Session, *, actor: User, out: Path, manifest: dict, manifest_sha: str) -> None:
    """The export's row in the `exports` table and its ledger entry, flushed."""
    filters, tasks = manifest["filters"], manifest["counts"]["tasks"]
    session.add(
        Export(
            name=manifest["name"],
            format=",".join(filters["formats"]),
            task_filter=filters,
            task_count=tasks,
            content_hash=manifest_sha,
            path=str(out.resolve()),
            manifest={k: v for k, v in manifest.items() if k != "files"},
            created_by_id=actor.id,
        )
    )
    append_entry(
        session=session,
        artifact_type="export",
        artifact_id=manifest["name"],
        action="export",
        source_kind="expert",
        actor_id=actor.id,
        reference=f"manifest sha256:{manifest_sha}",
        payload={
            "tasks": tasks,
            "formats": filters["formats"],
            "filters": filters,
            "tentative": manifest["tentative"],
            "ledger_head": manifest["ledger_head"],
        },
    )
    session.flush()


def _evidence_head(session: Session) -> dict | None:
    """The newest ledger entry that is not an export record: what the exported evidence
    rests on (an export itself changes none of it, so two exports of one state agree)."""
    head = queries.ledger_head(session=session, excluding=("export",))
    return {"seq": head[0], "hash": head[1]} if head else None


PARALLEL_MIN_TASKS = 5_000  # from here a second process writes the tasks and the ledger slice


def _write_files(
    staging: Staging, plan: Plan, *, session: Session, actor: User, report: Progress
) -> tuple[dict, list[dict]]:
    """Every file but the manifest, step by step (the steps are in exports.writing): the
    audit record (first: each format carries each task's summary of it), tasks in each
    format, ratings with agreement and the gate's decisions, the rest of evidence/, the
    ledger slice and the Hugging Face folder. Returns the counts and the rubrics for
    the manifest.

    From PARALLEL_MIN_TASKS tasks on (a second core, a database not in memory), a second
    process writes the tasks' files and the ledger slice while this one writes the rest of
    the evidence; the files are the same either way."""
    with ExitStack() as apart:
        return _write_all(staging, plan, session=session, actor=actor, report=report, apart=apart)


def _write_all(
    staging: Staging,
    plan: Plan,
    *,
    session: Session,
    actor: User,
    report: Progress,
    apart: ExitStack,
) -> tuple[dict, list[dict]]:
    chosen = plan.chosen
    url = second_process_url(session) if len(chosen) >= PARALLEL_MIN_TASKS else None
    if url is not None:
        pool = apart.enter_context(ProcessPoolExecutor(1, mp_context=second_process_context()))
        pool.submit(int)  # start (fork) it now: it inherits less of this process's memory
    report("reading the audit record", 0.11)
    audit = writing.write_audit(staging, session=session, chosen=chosen, actor=actor)

    def tasks_here() -> tuple[dict, dict]:
        return writing.write_tasks(staging, plan, session=session, batch=TASK_BATCH, report=report)

    batches = writing.rating_batches(chosen, RATING_BATCH)
    raters = writing.read_raters(
        session=session, chosen=chosen, batches=batches, with_names=plan.with_names
    )
    agents = {**raters.names, **raters.leads}
    slice_of = {"agents": agents, "findings": audit.finding_ids, "fixed_from": audit.fixed_from}
    tasks_apart = ledger_apart = expected = None
    if url is None:
        counts, personas = tasks_here()
    else:  # the tasks and the ledger slice in a second process, the rest here meanwhile
        tasks_apart = pool.submit(
            writing.write_tasks_in_process, url, staging, *writing.tasks_apart(plan), TASK_BATCH
        )
        # the slice is chosen by the ratings and logs the evidence will name: read here
        # first, checked against what was written below
        expected = {
            "rating_ids": writing.id_array(
                i
                for b in batches
                for i in queries.current_rating_ids(session=session, version_ids=b)
            ),
            "logs": sorted({log for log in chosen.logs if log}),
        }
        ledger_apart = pool.submit(
            writing.ledger_slice_in_process,
            url,
            staging,
            writing.ledger_apart(chosen),
            **expected,
            **slice_of,
        )
    report("computing agreement", 0.45)
    rounds = writing.round_evidence(plan, session=session, actor=actor)
    report("writing ratings", 0.5)
    rated = writing.write_ratings(
        staging,
        session=session,
        batches=batches,
        chosen=chosen,
        raters=raters,
        rounds=rounds,
        gates=plan.gates,
        formats=plan.formats,
        report=report,
    )
    logs, origins = writing.write_evidence(
        staging, session=session, chosen=chosen, raters=raters, report=report
    )
    if plan.realism is not None:
        staging.write_text(REALISM_FILE, canonical(plan.realism, indent=1))
    report("reading the ledger", 0.75)
    ledger_entries = ledger_apart.result() if ledger_apart is not None else None
    if expected is None or (
        rated.rating_ids != expected["rating_ids"] or logs != expected["logs"]
    ):  # in one process, or a rating changed while the second wrote the slice
        ledger_entries = writing.write_ledger_slice(
            staging,
            session=session,
            chosen=chosen,
            rating_ids=rated.rating_ids,
            logs=logs,
            **slice_of,
        )
    if tasks_apart is not None:
        report("writing tasks", 0.84)
        written = tasks_apart.result()
        counts, personas = written if written is not None else tasks_here()
    if "hf" in plan.formats:
        report("writing the Hugging Face folder", 0.85)
        writing.write_hf_folder(
            staging,
            plan,
            personas=personas,
            origins=origins,
            agreement=rounds.agreement,
            rated=rated,
            dimensions=raters.dimensions,
        )
    counts.update(
        ratings=rated.rows,
        raters=len(raters.names),
        adjudications=len(raters.adjudications),
        ledger_entries=ledger_entries,
        findings=len(audit.finding_ids),
    )
    rubrics = [
        {"name": r.name, "version": r.version, "content_hash": r.content_hash}
        for r in raters.rubrics
    ]
    return counts, rubrics


def verify_export(out: Path | str) -> VerifyReport:
    """Check every file of an export folder against its manifest, and each finding of its
    audit record against the ledger entry it cites (no database needed)."""
    report = verify_folder(Path(out))
    if report.ok:
        try:
            problems = verify_audit(Path(out))
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            problems = [f"{AUDIT_FILE}: unreadable ({exc!r})"]
        if problems:
            report.problem = "; ".join(problems[:10])
    return report


def export_choices(*, session: Session, actor: User) -> dict[str, list[str]]:
    """The rounds, logs and personas the Exports page offers as filters. Leads only."""
    require_role(actor, Role.lead)
    return queries.filter_choices(session=session)


def export_folder(name: str) -> Path:
    """Where the Exports page writes an export named `name`: one folder name (letters,
    digits, '.', '_', '-', at most NAME_LIMIT characters) under the data folder's exports/.
    Raises InvalidInput for any other name, saying what is wrong."""
    from itsmreview.settings import get_settings

    cleaned = (name or "").strip()
    if not cleaned:
        raise InvalidInput("export name is empty; use one folder name, e.g. pilot-2026-12")
    if len(cleaned) > NAME_LIMIT:
        raise InvalidInput(
            f"export name is {len(cleaned)} characters long; use at most {NAME_LIMIT}"
        )
    if "/" in cleaned or "\\" in cleaned or ".." in cleaned:
        raise InvalidInput(
            f"export name {cleaned[:40]!r} leaves its folder (a '/', '\\' or '..'); use one "
            "folder name, e.g. pilot-2026-12"
        )
    if not FOLDER_NAME.fullmatch(cleaned) or ".." in cleaned:
        bad = sorted({c for c in cleaned if not (c.isascii() and (c.isalnum() or c in "._-"))})
        shown = ", ".join(repr(c) for c in bad[:5]) or "a leading '.', '_' or '-', or '..'"
        raise InvalidInput(
            f"export name {cleaned[:40]!r}: not a plain folder name ({shown}); use letters, "
            "digits, '.', '_' and '-', e.g. pilot-2026-12"
        )
    return get_settings().data_dir / "exports" / cleaned


def export_named(name: str, *, session: Session, actor: User, **options) -> ExportResult:
    """`export_set` into the data folder's exports/NAME under the name NAME (the Exports
    page)."""
    folder = export_folder(name)
    return export_set(folder, session=session, actor=actor, name=folder.name, **options)


def list_exports(*, session: Session, actor: User) -> pd.DataFrame:
    """Exports made so far, newest first. Leads only."""
    require_role(actor, Role.lead)
    return queries.exports_frame(session=session)
