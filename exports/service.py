"""Exporting an approved task set with the evidence that approved it, and verifying one."""

import re
import shutil
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pandas as pd
from itsmreview import __version__
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog.formats.common import ORIGINAL_FORMAT, FormatError
from itsmreview.catalog.service import version_to_native
from itsmreview.coverage.report import coverage_of
from itsmreview.db import utcnow
from itsmreview.errors import Conflict, InvalidInput, NotFound
from itsmreview.exports import evidence, harbor, hf, native, queries, tau2
from itsmreview.exports.bundle import (
    MANIFEST,
    Staging,
    VerifyReport,
    canonical,
    executables,
    file_digests,
    file_sizes,
    jsonl,
    sha256_file,
    verify_folder,
    write_zip,
)
from itsmreview.exports.models import Export
from itsmreview.ledger.prov import ProvWriter
from itsmreview.ledger.service import append_entry
from itsmreview.review import queries as review_queries
from itsmreview.review import reliability
from itsmreview.review.approval import TaskRatings, decide
from itsmreview.review.rubrics import RubricDefinition
from sqlmodel import Session

FORMATS = ("native", "harbor", "hf", "tau2")
Progress = Callable[[str, float], None]
LEDGER_TYPES = ("task", "rating", "review_round", "event_log")
RATING_BATCH = 1000  # task versions whose ratings are read, written and decided together
TASK_BATCH = 1000  # task versions read and written together (memory: a batch, not the set)
DEFAULT_NAME = "itsmreview-export"
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


@dataclass
class Selection:
    """The approved versions a filter selects, and the subquery that names them."""

    pairs: list  # (Task, TaskVersion), by task id
    ids: object  # subquery of version ids (may hold more than pairs when filtered by log)
    version_ids: set[int]
    rounds: list


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
    review_round = reliability.find_round(session, round_name) if round_name else None
    ids = queries.approved_version_ids(
        round_id=review_round.id if review_round else None, persona=persona
    )
    pairs = queries.versions_in(session=session, ids=ids)
    if log:
        pairs = [(t, v) for t, v in pairs if (v.source or {}).get("log") == log]
    rounds = [review_round] if review_round else queries.rounds_of(session=session, ids=ids)
    return Selection(pairs, ids, {v.id for _, v in pairs}, rounds)


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
        [
            {"persona": t.persona, "log": (v.source or {}).get("log") or "-"}
            for t, v in chosen.pairs
        ],
        columns=["persona", "log"],
    )
    return {
        "tasks": len(chosen.pairs),
        "by_persona": frame["persona"].value_counts().sort_index().to_dict(),
        "by_log": frame["log"].value_counts().sort_index().to_dict(),
        "gate": {r.name: _gate_state(session, r) for r in chosen.rounds},
    }


def _gate_state(session: Session, review_round, counts: dict | None = None) -> dict:
    """Whether the round's agreement reaches its gate: alpha of every gating dimension,
    from per-task counts (no rating is loaded)."""
    config, rubric = reliability.current_gate(session=session, round_name=review_round.id)
    alphas = reliability.gating_alphas(
        session=session, review_round=review_round, rubric=rubric, counts=counts
    )
    weak = [
        f"alpha of {item} is {'undefined' if value is None else f'{value:.3f}'}, "
        f"below {config.alpha_min:.3f}"
        for item, value in alphas.items()
        if value is None or value < config.alpha_min
    ]
    return {
        "reached": not weak,
        "alpha": alphas,
        "alpha_min": config.alpha_min,
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
    """Write the approved task set chosen by the filters, with its evidence and manifest, to
    the folder `out` (staged, then renamed into place), and record the export in the
    `exports` table and the ledger. Leads only.

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
    if name is not None:
        name = check_name(name)
    licence = check_license(license, license_name)
    org = check_org(org)
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise Conflict(f"{out} exists and is not a folder; choose another destination")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise Conflict(f"{out} exists and is not empty; choose another folder or pass --force")
    if allow_tentative and not reason.strip():
        raise InvalidInput("--allow-tentative needs --reason: say why the set goes out anyway")
    report("selecting approved versions", 0.02)
    chosen = select_approved(session=session, round_name=round_name, log=log, persona=persona)
    if not chosen.pairs:
        filters = ", ".join(
            f"{k} {v!r}"
            for k, v in (("round", round_name), ("log", log), ("persona", persona))
            if v
        )
        raise NotFound(
            "no approved task"
            + (f" matches {filters}" if filters else "")
            + "; tasks are approved by a review round's gate (`itsmreview round list`)"
        )
    if name is None:
        single = round_name or (chosen.rounds[0].name if len(chosen.rounds) == 1 else None)
        name = check_name(single) if single else DEFAULT_NAME
    report("checking the gate", 0.08)
    counts = {
        r.name: reliability.round_counts(
            session=session,
            round_id=r.id,
            rubric=reliability.current_gate(session=session, round_name=r.id)[1],
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
    staging = Staging(out)
    try:
        files = _write_files(
            staging,
            session=session,
            actor=actor,
            chosen=chosen,
            formats=formats,
            gates=gates,
            item_counts=counts,
            with_names=with_names,
            bootstrap=bootstrap,
            report=report,
            export_name=name,
            licence=licence,
            org=org,
        )
        report("writing the manifest", 0.9)
        head = _evidence_head(session)
        manifest = {
            "format_version": 1,
            "platform": {"name": "itsmreview", "version": __version__},
            "name": name,
            "license": licence,
            "exported_at": (at or utcnow()).isoformat(),
            "filters": {
                "formats": formats,
                "round": round_name,
                "log": log,
                "persona": persona,
                "with_names": with_names,
            },
            "tentative": {"reason": reason.strip(), "gate": weak} if weak else None,
            "counts": files.pop("_counts"),
            "rounds": sorted(gates),
            "gate": gates,
            "rubrics": files.pop("_rubrics"),
            "ledger_head": head,
            "files": file_digests(staging.root, staging.files()),
            "sizes": file_sizes(staging.root, staging.files()),
            "executables": executables(staging.root, staging.files()),
        }
        if "harbor" in formats:
            manifest["harbor"] = {"org": org, "dataset": f"{org}/{harbor.slug(name)}"}
        staging.write_text(MANIFEST, canonical(manifest, indent=1))
        manifest_sha = sha256_file(staging.root / MANIFEST)
        session.add(
            Export(
                name=name,
                format=",".join(formats),
                task_filter=manifest["filters"],
                task_count=len(chosen.pairs),
                content_hash=manifest_sha,
                path=str(out.resolve()),
                manifest={k: v for k, v in manifest.items() if k != "files"},
                created_by_id=actor.id,
            )
        )
        append_entry(
            session=session,
            artifact_type="export",
            artifact_id=name,
            action="export",
            source_kind="expert",
            actor_id=actor.id,
            reference=f"manifest sha256:{manifest_sha}",
            payload={
                "tasks": len(chosen.pairs),
                "formats": formats,
                "filters": manifest["filters"],
                "tentative": manifest["tentative"],
                "ledger_head": head,
            },
        )
        session.flush()
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
    return ExportResult(
        out,
        len(chosen.pairs),
        len(manifest["files"]) + 1,
        manifest_sha,
        manifest,
        zip_path,
        formats,
    )


def _evidence_head(session: Session) -> dict | None:
    """The newest ledger entry that is not an export record: what the exported evidence
    rests on (an export itself changes none of it, so two exports of one state agree)."""
    head = queries.ledger_head(session=session, excluding=("export",))
    return {"seq": head[0], "hash": head[1]} if head else None


def _write_files(
    staging: Staging,
    *,
    session: Session,
    actor: User,
    chosen: Selection,
    formats: list[str],
    gates: dict,
    item_counts: dict,
    with_names: bool,
    bootstrap: int,
    report: Callable[[str, float], None],
    export_name: str,
    licence: dict,
    org: str,
) -> dict:
    version_ids = chosen.version_ids
    versions = {v.id: (t.external_id, v.version) for t, v in chosen.pairs}
    report("writing tasks", 0.12)
    counts = {"tasks": len(chosen.pairs)}
    personas: dict[str, int] = {}
    harbor_tasks, tau2_tasks = [], []  # only tasks of those formats: few, kept for the end
    with ExitStack() as files_open:
        native_out = (
            files_open.enter_context(staging.open(native.PATH)) if "native" in formats else None
        )
        hf_out = (
            files_open.enter_context(staging.open(f"{hf.ROOT}/data/train.jsonl"))
            if "hf" in formats
            else None
        )
        for start in range(0, len(chosen.pairs), TASK_BATCH):
            chunk = chosen.pairs[start : start + TASK_BATCH]
            pairs, transcripts = queries.tasks_of(
                session=session, version_ids=[v.id for _, v in chunk]
            )
            natives, records = [], []
            for _, chosen_version in chunk:
                task, version = pairs[chosen_version.id]
                natives.append(
                    version_to_native(task, version, transcripts.get(chosen_version.id, []))
                )
                records.append(
                    {
                        "version": chosen_version.version,
                        "content_hash": chosen_version.content_hash,
                        "decision": "approved",
                    }
                )
            if native_out is not None:
                native_out.write(
                    jsonl(
                        dict(t, **{native.EXPORT_KEY: r})
                        for t, r in zip(natives, records, strict=True)
                    )
                )
            if hf_out is not None:
                rows = [hf.row(t, r) for t, r in zip(natives, records, strict=True)]
                for row in rows:
                    personas[row["persona"]] = personas.get(row["persona"], 0) + 1
                hf_out.write(jsonl(rows))
            for t, r in zip(natives, records, strict=True):
                kind = t.get(ORIGINAL_FORMAT)
                if kind == "harbor" and "harbor" in formats:
                    harbor_tasks.append((t, r))
                elif kind == "tau2" and "tau2" in formats:
                    tau2_tasks.append(t)
            report("writing tasks", 0.12 + 0.25 * min(1, (start + TASK_BATCH) / len(chosen.pairs)))
    if "harbor" in formats:
        counts["harbor"] = harbor.write(
            [t for t, _ in harbor_tasks],
            [r for _, r in harbor_tasks],
            staging,
            dataset=f"{org}/{harbor.slug(export_name)}",
            org=org,
            description=f"{export_name}: ITSM tasks approved in an itsmreview review round. "
            f"Licence: {licence['spdx']}"
            + (f" ({licence['name']})" if licence.get("name") else ""),
            license=licence,
        )
    if "tau2" in formats:
        written = tau2.render(tau2_tasks)
        counts["tau2"] = len(tau2_tasks)
        for path, text in written.items():
            staging.write_text(path, text)
    report("reading ratings", 0.4)
    ordered = sorted(chosen.pairs, key=lambda pair: (pair[0].external_id, pair[1].version))
    batches = [
        [v.id for _, v in ordered[start : start + RATING_BATCH]]
        for start in range(0, len(ordered), RATING_BATCH)
    ]
    experts, rubric_ids = set(), {int(r.rubric_id) for r in chosen.rounds}
    for batch in batches:
        rated_by, rated_with = queries.raters_and_rubrics(session=session, version_ids=batch)
        experts |= rated_by
        rubric_ids |= rated_with
    adjudications = queries.adjudications_in(session=session, ids=chosen.ids)
    adjudications = adjudications[adjudications["task_version_id"].isin(version_ids)]
    if with_names:
        names = queries.usernames(session=session, ids=sorted(experts))
        leads = {int(i): f"user-{int(i)}" for i in adjudications["lead_id"]}
    else:
        names = evidence.pseudonyms(experts, "rater")
        leads = evidence.pseudonyms(map(int, adjudications["lead_id"]), "lead")
    rubrics = queries.rubrics_by_id(session=session, rubric_ids=sorted(rubric_ids))
    dimensions = sorted(
        {d.key for r in rubrics for d in RubricDefinition.model_validate(r.definition).dimensions}
    )
    report("computing agreement", 0.45)
    per_round, gate_per_round, deciding = {}, {}, {}
    for review_round in chosen.rounds:
        _, items = reliability.round_agreement(
            session=session,
            actor=actor,
            round_name=review_round.id,
            bootstrap=bootstrap,
            seed=0,
            detail=False,
            counts=item_counts[review_round.name],
        )
        per_round[review_round.name] = [_agreement_row(i.as_dict()) for i in items]
        config, _ = reliability.current_gate(session=session, round_name=review_round.id)
        deciding[review_round.name] = (
            config,
            set(review_queries.round_task_ids(session=session, round_id=review_round.id)),
            review_queries.adjudications_of_round(session=session, round_id=review_round.id),
            review_queries.failed_checks(session=session, round_id=review_round.id),
        )
        gate_per_round[review_round.name] = {
            "settings": {
                "k_min": config.k_min,
                "dimension_min": config.dimension_min,
                "gating_dimensions": list(config.gating_dimensions),
                "alpha_min": config.alpha_min,
                "disagreement_range": config.disagreement_range,
                "blocking_flags": list(config.blocking_flags),
                "mode": config.mode,
                **(
                    {"threshold": config.threshold, "weights": dict(config.weights)}
                    if config.mode == "audit-100"
                    else {}
                ),
            },
            "agreement": gates[review_round.name],
            "decisions": [],
        }
    report("writing ratings", 0.5)
    # written as the batches go: the ratings, the per-task summary (in agreement.json and the
    # Hugging Face config task_summary) and the gate's decisions (spooled per round, joined
    # into gate.json at the end); memory holds a batch, the summary's first rows for the
    # card and the exported rating ids (for the ledger slice)
    summary_head, summaries, rating_ids = [], 0, set()
    ratings_out = evidence.RatingsFiles(staging, dimensions)
    with ExitStack() as files_open:
        agreement_out = files_open.enter_context(evidence.AgreementFile(staging, per_round))
        summary_out = (
            files_open.enter_context(staging.open(f"{hf.ROOT}/data/task_summary.jsonl"))
            if "hf" in formats
            else None
        )
        decisions = {name: files_open.enter_context(evidence.JsonArraySpool()) for name in deciding}
        try:
            for done, batch in enumerate(batches, start=1):
                ratings = queries.ratings_of(session=session, version_ids=batch)
                scores = queries.scores_of(session=session, version_ids=batch)
                rows = evidence.ratings_table(
                    ratings, scores, versions=versions, names=names, dimensions=dimensions
                )
                ratings_out.add(rows)
                summary = evidence.task_summary(rows, dimensions)
                agreement_out.add(summary)
                if summary_out is not None:
                    summary_out.write(jsonl(hf.summary_rows(summary, dimensions)))
                summaries += len(summary)
                summary_head.extend(summary[: max(0, hf.MARKDOWN_LIMIT - len(summary_head))])
                rating_ids.update(ratings["rating_id"].astype(int).tolist())
                for round_name, (config, members, adjudicated, failed) in deciding.items():
                    in_round = reliability.task_ratings(
                        ratings[ratings["round"] == round_name], scores
                    )
                    decisions[round_name].add(
                        _decision_row(
                            versions[v],
                            decide(
                                in_round.get(v, TaskRatings({}, [], [])),
                                config,
                                gates[round_name]["alpha"],
                                adjudicated.get(v),
                                failed.get(v, ()),
                            ),
                        )
                        for v in batch
                        if v in members
                    )
                report("writing ratings", 0.5 + 0.15 * done / len(batches))
        finally:
            ratings_out.close()
        with staging.open("evidence/gate.json") as handle:
            evidence.write_gate(handle, gate_per_round, decisions)
    files = {}
    files.update(evidence.adjudications_file(adjudications, versions=versions, names=leads))
    files.update(
        evidence.machine_checks_file(
            review_queries.checks_of_versions(session=session, task_version_ids=list(versions)),
            versions=versions,
        )
    )
    report("computing coverage", 0.65)
    by_log: dict[str, list[tuple[str, dict]]] = {}
    for task, version in chosen.pairs:
        name = (version.source or {}).get("log")
        if name:
            by_log.setdefault(name, []).append((task.external_id, version.source))
    coverage, origins = {}, []
    for log_name in sorted(by_log):
        origins.append(_log_origin(session, log_name))
    for log_name, pairs in sorted(by_log.items()):
        try:
            result, unresolved = coverage_of(session=session, log_name=log_name, rows=pairs)
        except NotFound:
            coverage[log_name] = {"error": f"log {log_name!r} is not imported"}
            continue
        coverage[log_name] = {**result.as_dict(), "unresolved_case_ids": unresolved}
    files.update(evidence.coverage_file(coverage))
    files.update(evidence.rubrics_file(rubrics))
    for path, text in files.items():
        staging.write_text(path, text)
    report("reading the ledger", 0.75)
    agents: dict[int | None, str] = {**names, **leads}
    ledger_entries = _write_ledger_slice(
        staging, session=session, chosen=chosen, rating_ids=rating_ids, logs=by_log, agents=agents
    )
    if "hf" in formats:
        report("writing the Hugging Face folder", 0.85)
        staging.write_text(
            f"{hf.ROOT}/README.md",
            hf.card(
                name=export_name,
                count=len(chosen.pairs),
                personas=personas,
                license=licence,
                logs=origins,
                agreement=per_round,
                summary=summary_head,
                dimensions=dimensions,
                summary_total=summaries,
            ),
        )
        for path in [p for p in staging.files() if p.startswith("evidence/")]:
            shutil.copyfile(staging.root / path, staging.path(f"{hf.ROOT}/{path}"))
    counts.update(
        {
            "ratings": ratings_out.rows,
            "raters": len(names),
            "adjudications": len(adjudications),
            "ledger_entries": ledger_entries,
        }
    )
    return {
        "_counts": counts,
        "_rubrics": [
            {"name": r.name, "version": r.version, "content_hash": r.content_hash} for r in rubrics
        ],
    }


def _log_origin(session: Session, log_name: str) -> dict:
    """What the ledger says about where a source log came from (real, synthetic or not
    recorded), with its size and the file it was imported from."""
    from itsmreview.coverage import queries as coverage_queries

    log = coverage_queries.latest_log(session=session, name=log_name)
    if log is None:
        return {"name": log_name, "origin": "not recorded", "statement": "not imported"}
    entries = queries.log_entries(session=session, artifact_id=f"{log.name}@{log.version}")
    return {
        "name": log.name,
        "version": log.version,
        "cases": log.n_cases,
        "events": log.n_events,
        **evidence.log_origin(entries),
    }


def _decision_row(version: tuple[str, int], decision) -> dict:
    return {
        "task": version[0],
        "version": version[1],
        "status": decision.status,
        "reasons": decision.reasons,
    }


def _write_ledger_slice(
    staging: Staging,
    *,
    session: Session,
    chosen: Selection,
    rating_ids: set[int],
    logs: dict,
    agents: dict[int | None, str],
) -> int:
    """evidence/ledger.jsonl and evidence/ledger.prov.json: the entries of the exported task
    versions, their ratings, rounds and source logs, streamed from the ledger."""
    wanted = {
        "task": {f"{t.external_id}@v{v.version}" for t, v in chosen.pairs}
        | {t.external_id for t, _ in chosen.pairs},
        "review_round": {r.name for r in chosen.rounds},
    }
    log_prefixes = tuple(f"{name}@" for name in logs) or ("\0",)

    def exported(entry) -> bool:
        if entry.artifact_type == "rating":
            return entry.artifact_id.isdigit() and int(entry.artifact_id) in rating_ids
        if entry.artifact_type == "event_log":
            return entry.artifact_id.startswith(log_prefixes)
        return entry.artifact_id in wanted.get(entry.artifact_type, ())

    written = 0
    with ProvWriter(agents) as prov, staging.open("evidence/ledger.jsonl") as lines:
        for entry in queries.ledger_entries_of(session=session, artifact_types=LEDGER_TYPES):
            if exported(entry):
                lines.write(evidence.ledger_line(entry, agents))
                prov.add_entry(entry)
                written += 1
        for task, version in chosen.pairs:
            if (version.source or {}).get("log"):
                prov.add_derivation(
                    f"task/{task.external_id}@v{version.version}",
                    f"event_log/{version.source['log']}",
                )
        with staging.open("evidence/ledger.prov.json") as handle:
            prov.write(handle)
    return written


def _agreement_row(item: dict) -> dict:
    """An item's agreement without per-rater figures (they would name raters of the round
    who rated no exported task)."""
    return {k: v for k, v in item.items() if k not in ("leave_one_rater_out", "rater_bias")}


def verify_export(out: Path | str) -> VerifyReport:
    """Check every file of an export folder against its manifest (no database needed)."""
    return verify_folder(Path(out))


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
