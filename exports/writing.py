"""The steps that write an export's files into its staging folder: tasks, evidence, ledger slice."""

import shutil
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace
from types import SimpleNamespace

import pandas as pd
from itsmreview.accounts.models import User
from itsmreview.catalog import queries as catalog_queries
from itsmreview.catalog.formats.common import ORIGINAL_FORMAT
from itsmreview.catalog.models import TaskVersion
from itsmreview.catalog.service import version_to_native
from itsmreview.coverage.report import coverage_of
from itsmreview.errors import NotFound
from itsmreview.exports import audit, evidence, harbor, hf, native, queries, tau2
from itsmreview.exports.bundle import Staging, jsonl
from itsmreview.ledger.prov import ProvWriter
from itsmreview.review.consensus import service as consensus
from itsmreview.review.consensus import states as consensus_states
from itsmreview.review.gate import item_agreement, round_data
from itsmreview.review.gate import service as gate_service
from itsmreview.review.gate.approval import TaskRatings, decide
from itsmreview.review.gate.queries import reads as gate_queries
from itsmreview.review.ratings import queries as ratings_queries
from itsmreview.review.ratings.findings import TAXONOMY, panel_and_fixes
from itsmreview.review.repair import queries as review_queries
from itsmreview.review.rounds import queries as rounds_queries
from itsmreview.review.rubrics.service import RubricDefinition
from sqlmodel import Session

Report = Callable[[str, float], None]
LEDGER_TYPES = ("task", "rating", "review_round", "event_log", "finding")


@dataclass
class Selection:
    """The approved versions a filter selects, and the subquery that names them."""

    pairs: list  # (Task, TaskVersion), by task id
    ids: object  # subquery of version ids (may hold more than pairs when filtered by log)
    version_ids: set[int]
    rounds: list


@dataclass
class Plan:
    """What one export writes: the chosen versions with their rounds' gate states, the
    formats, and the name, licence and Harbor org its files state."""

    chosen: Selection
    formats: list[str]
    name: str
    licence: dict
    org: str
    gates: dict  # round name -> gate state
    item_counts: dict  # round name -> per-task counts of the gate's items
    with_names: bool
    bootstrap: int
    realism: dict | None = None  # realism.service.release_check and the rounds requiring it


@dataclass
class Raters:
    """Who rated and adjudicated the exported versions, as the export names them, and the
    rubrics they rated with."""

    names: dict[int, str]  # expert id -> name or pseudonym
    leads: dict[int, str]  # lead id -> name or pseudonym
    adjudications: pd.DataFrame
    rubrics: list
    dimensions: list[str]


@dataclass
class RoundEvidence:
    """Per round: its agreement rows, its gate (settings, agreement, decisions to come) and
    what deciding a task needs (config, member versions, adjudications, failed checks)."""

    agreement: dict[str, list[dict]]
    gate: dict[str, dict]
    deciding: dict[str, tuple]


@dataclass
class RatingsWritten:
    """What writing the ratings kept: row count, the task summary's first rows (for the card)
    and its length, and the exported rating ids (for the ledger slice)."""

    rows: int
    summary_head: list[dict]
    summaries: int
    rating_ids: set[int]


@dataclass
class AuditRecord:
    """The export's audit record (exports.audit), computed before the tasks are written so
    that each format carries each task's summary."""

    jsonl: str  # evidence/audit.jsonl
    markdown: str  # AUDIT.md
    summaries: dict[tuple[str, int], dict]  # (task, version) -> exports.audit.summary
    finding_ids: set[str]  # findings whose ledger entries the slice carries
    fixed_from: set[str]  # "task@vN" of the versions fixes start from (their ledger entries)


def write_tasks(
    staging: Staging,
    plan: Plan,
    *,
    session: Session,
    batch: int,
    report: Report,
    audits: dict[tuple[str, int], dict] | None = None,
) -> tuple[dict[str, int], dict[str, int]]:
    """The tasks in each format: native and Hugging Face rows `batch` versions at a time,
    the Harbor and tau2 folders at the end, each task with its summary from `audits` in its
    export record. Returns the counts written and the Hugging Face rows per persona."""
    chosen, formats = plan.chosen, plan.formats
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
        for start in range(0, len(chosen.pairs), batch):
            natives, records = _native_tasks(session, chosen.pairs[start : start + batch])
            if audits is not None:
                for t, r in zip(natives, records, strict=True):
                    r["audit"] = audits[(t["id"], r["version"])]
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
                    tau2_tasks.append((t, r))
            report("writing tasks", 0.12 + 0.25 * min(1, (start + batch) / len(chosen.pairs)))
    if "harbor" in formats:
        counts["harbor"] = _write_harbor(staging, plan, harbor_tasks)
    if "tau2" in formats:
        counts["tau2"] = len(tau2_tasks)
        rendered = tau2.render([t for t, _ in tau2_tasks], [r for _, r in tau2_tasks])
        for path, text in rendered.items():
            staging.write_text(path, text)
    return counts, personas


def tasks_apart(plan: Plan) -> tuple[Plan, list[tuple[int, int, str]]]:
    """What `write_tasks_in_process` needs of a plan, small to send: the plan without its
    selection, and each chosen version's id, number and content hash."""
    versions = [(v.id, v.version, v.content_hash) for _, v in plan.chosen.pairs]
    bare = replace(
        plan, chosen=Selection([], None, set(), []), gates={}, item_counts={}, realism=None
    )
    return bare, versions


def write_tasks_in_process(
    url: str, staging: Staging, plan: Plan, versions: list[tuple[int, int, str]], batch: int
) -> tuple[dict[str, int], dict[str, int]] | None:
    """`write_tasks` in a second process, on a connection of its own to `url` (task
    versions never change, so it reads what the first would), each task's audit summary
    read back from the staged evidence/audit.jsonl (sending them would cost the first
    process 50 MB at 50,000 tasks). None when a chosen version is not there for it (written
    in a transaction not yet committed): the first then writes them."""
    from itsmreview.db import create_db_engine

    chosen = [(None, SimpleNamespace(id=i, version=n, content_hash=h)) for i, n, h in versions]
    plan = replace(plan, chosen=Selection(chosen, None, set(), []))
    with open(staging.path(audit.AUDIT_FILE), encoding="utf-8", newline="\n") as lines:
        audits = audit.summaries_of_lines(lines)
    engine = create_db_engine(url)
    try:
        with Session(engine) as session:
            return write_tasks(
                staging,
                plan,
                session=session,
                batch=batch,
                report=lambda _stage, _fraction: None,
                audits=audits,
            )
    except MissingVersion:
        return None
    finally:
        engine.dispose()


def ledger_apart(chosen: Selection) -> tuple[list[tuple[str, int, dict]], list[str]]:
    """What `ledger_slice_in_process` needs of the selection, small to send: each chosen
    version's task id, number and source, and the rounds' names."""
    return (
        [(t.external_id, v.version, v.source or {}) for t, v in chosen.pairs],
        [r.name for r in chosen.rounds],
    )


def ledger_slice_in_process(
    url: str,
    staging: Staging,
    versions: list[tuple[str, int, dict]],
    rounds: list[str],
    **slice_of,
) -> int:
    """`write_ledger_slice` in a second process, on a connection of its own to `url` (the
    ledger only grows: it streams the entries the first would)."""
    from itsmreview.db import create_db_engine

    chosen = Selection(
        [
            (SimpleNamespace(external_id=t), SimpleNamespace(version=n, source=source))
            for t, n, source in versions
        ],
        None,
        set(),
        [SimpleNamespace(name=name) for name in rounds],
    )
    engine = create_db_engine(url)
    try:
        with Session(engine) as session:
            return write_ledger_slice(staging, session=session, chosen=chosen, **slice_of)
    finally:
        engine.dispose()


class MissingVersion(KeyError):
    """A chosen task version this connection cannot read."""


def _native_tasks(session: Session, chunk: list) -> tuple[list[dict], list[dict]]:
    """A batch of (Task, TaskVersion) as native task dicts, and the export record of each."""
    pairs, transcripts = queries.tasks_of(session=session, version_ids=[v.id for _, v in chunk])
    natives, records = [], []
    for _, chosen_version in chunk:
        if chosen_version.id not in pairs:
            raise MissingVersion(chosen_version.id)
        task, version = pairs[chosen_version.id]
        natives.append(version_to_native(task, version, transcripts.get(chosen_version.id, [])))
        records.append(
            {
                "version": chosen_version.version,
                "content_hash": chosen_version.content_hash,
                "decision": "approved",
            }
        )
    return natives, records


def _write_harbor(staging: Staging, plan: Plan, tasks: list[tuple[dict, dict]]) -> int:
    """The Harbor folder of the tasks imported from Harbor; returns how many it holds."""
    export_name, licence, org = plan.name, plan.licence, plan.org
    return harbor.write(
        [t for t, _ in tasks],
        [r for _, r in tasks],
        staging,
        dataset=f"{org}/{harbor.slug(export_name)}",
        org=org,
        description=f"{export_name}: ITSM tasks approved in an itsmreview review round. "
        f"Licence: {licence['spdx']}" + (f" ({licence['name']})" if licence.get("name") else ""),
        license=licence,
    )


def rating_batches(chosen: Selection, size: int) -> list[list[int]]:
    """The chosen version ids by task id and version, in batches of `size`."""
    ordered = sorted(chosen.pairs, key=lambda pair: (pair[0].external_id, pair[1].version))
    return [
        [v.id for _, v in ordered[start : start + size]] for start in range(0, len(ordered), size)
    ]


def read_raters(
    *, session: Session, chosen: Selection, batches: list[list[int]], with_names: bool
) -> Raters:
    """The experts and rubrics of the chosen versions' ratings, and their adjudications,
    named by user name (`with_names`) or by stable pseudonyms."""
    experts, rubric_ids = set(), {int(r.rubric_id) for r in chosen.rounds}
    for batch in batches:
        rated_by, rated_with = queries.raters_and_rubrics(session=session, version_ids=batch)
        experts |= rated_by
        rubric_ids |= rated_with
    adjudications = queries.adjudications_in(session=session, ids=chosen.ids)
    adjudications = adjudications[adjudications["task_version_id"].isin(chosen.version_ids)]
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
    return Raters(names, leads, adjudications, rubrics, dimensions)


def round_evidence(plan: Plan, *, session: Session, actor: User) -> RoundEvidence:
    """Each chosen round's agreement (with the plan's bootstrap), its gate's settings and
    what deciding its tasks needs."""
    per_round, gate_per_round, deciding = {}, {}, {}
    for review_round in plan.chosen.rounds:
        _, items = item_agreement.round_agreement(
            session=session,
            actor=actor,
            round_name=review_round.id,
            bootstrap=plan.bootstrap,
            seed=0,
            detail=False,
            counts=plan.item_counts[review_round.name],
        )
        per_round[review_round.name] = [_agreement_row(i.as_dict()) for i in items]
        config, _ = gate_service.current_gate(session=session, round_name=review_round.id)
        deciding[review_round.name] = (
            config,
            set(rounds_queries.round_task_ids(session=session, round_id=review_round.id)),
            gate_queries.adjudications_of_round(session=session, round_id=review_round.id),
            gate_queries.failed_checks(session=session, round_id=review_round.id),
        )
        gate_per_round[review_round.name] = {
            "settings": _gate_settings(config),
            "agreement": plan.gates[review_round.name],
            "decisions": [],
        }
    return RoundEvidence(per_round, gate_per_round, deciding)


def _gate_settings(config) -> dict:
    """A gate's settings as gate.json states them."""
    return {
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
    }


def write_ratings(
    staging: Staging,
    *,
    session: Session,
    batches: list[list[int]],
    versions: dict[int, tuple[str, int]],
    raters: Raters,
    rounds: RoundEvidence,
    gates: dict,
    formats: list[str],
    report: Report,
) -> RatingsWritten:
    """The ratings, the per-task summary (in agreement.json and the Hugging Face config
    task_summary) and the gate's decisions (spooled per round, joined into gate.json at the
    end), written as the batches go: memory holds a batch, the summary's first rows for the
    card and the exported rating ids (for the ledger slice)."""
    dimensions = raters.dimensions
    summary_head, summaries, rating_ids = [], 0, set()
    ratings_out = evidence.RatingsFiles(staging, dimensions)
    with ExitStack() as files_open:
        agreement_out = files_open.enter_context(evidence.AgreementFile(staging, rounds.agreement))
        summary_out = (
            files_open.enter_context(staging.open(f"{hf.ROOT}/data/task_summary.jsonl"))
            if "hf" in formats
            else None
        )
        decisions = {
            name: files_open.enter_context(evidence.JsonArraySpool()) for name in rounds.deciding
        }
        try:
            for done, batch in enumerate(batches, start=1):
                ratings = queries.ratings_of(session=session, version_ids=batch)
                scores = queries.scores_of(session=session, version_ids=batch)
                rows = evidence.ratings_table(
                    ratings, scores, versions=versions, names=raters.names, dimensions=dimensions
                )
                ratings_out.add(rows)
                summary = evidence.task_summary(rows, dimensions)
                agreement_out.add(summary)
                if summary_out is not None:
                    summary_out.write(jsonl(hf.summary_rows(summary, dimensions)))
                summaries += len(summary)
                summary_head.extend(summary[: max(0, hf.MARKDOWN_LIMIT - len(summary_head))])
                rating_ids.update(ratings["rating_id"].astype(int).tolist())
                _add_decisions(decisions, rounds, gates, versions, ratings, scores, batch)
                report("writing ratings", 0.5 + 0.15 * done / len(batches))
        finally:
            ratings_out.close()
        with staging.open("evidence/gate.json") as handle:
            evidence.write_gate(handle, rounds.gate, decisions)
    return RatingsWritten(ratings_out.rows, summary_head, summaries, rating_ids)


def _add_decisions(
    decisions: dict[str, evidence.JsonArraySpool],
    rounds: RoundEvidence,
    gates: dict,
    versions: dict[int, tuple[str, int]],
    ratings: pd.DataFrame,
    scores: pd.DataFrame,
    batch: list[int],
) -> None:
    """The gate's decision on each version of the batch, in each round that holds it."""
    for round_name, (config, members, adjudicated, failed) in rounds.deciding.items():
        in_round = round_data.task_ratings(ratings[ratings["round"] == round_name], scores)
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


def write_evidence(
    staging: Staging,
    *,
    session: Session,
    chosen: Selection,
    versions: dict[int, tuple[str, int]],
    raters: Raters,
    report: Report,
) -> tuple[dict[str, list[tuple[str, dict]]], list[dict]]:
    """The rest of evidence/: adjudications, machine checks, coverage of the source logs and
    rubrics. Returns the exported (task id, source) pairs by source log, and each log's
    origin."""
    files = {}
    files.update(
        evidence.adjudications_file(raters.adjudications, versions=versions, names=raters.leads)
    )
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
    origins = [_log_origin(session, log_name) for log_name in sorted(by_log)]
    coverage = {}
    for log_name, pairs in sorted(by_log.items()):
        try:
            result, unresolved = coverage_of(session=session, log_name=log_name, rows=pairs)
        except NotFound:
            coverage[log_name] = {"error": f"log {log_name!r} is not imported"}
            continue
        coverage[log_name] = {**result.as_dict(), "unresolved_case_ids": unresolved}
    files.update(evidence.coverage_file(coverage))
    files.update(evidence.rubrics_file(raters.rubrics))
    for path, text in files.items():
        staging.write_text(path, text)
    return by_log, origins


def write_hf_folder(
    staging: Staging,
    plan: Plan,
    *,
    personas: dict[str, int],
    origins: list[dict],
    agreement: dict[str, list[dict]],
    rated: RatingsWritten,
    dimensions: list[str],
) -> None:
    """The Hugging Face folder's card, and a copy of evidence/ beside its data."""
    staging.write_text(
        f"{hf.ROOT}/README.md",
        hf.card(
            name=plan.name,
            count=len(plan.chosen.pairs),
            personas=personas,
            license=plan.licence,
            logs=origins,
            agreement=agreement,
            summary=rated.summary_head,
            dimensions=dimensions,
            summary_total=rated.summaries,
        ),
    )
    for path in [p for p in staging.files() if p.startswith("evidence/")]:
        shutil.copyfile(staging.root / path, staging.path(f"{hf.ROOT}/{path}"))


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


def read_audit(*, session: Session, chosen: Selection, versions: dict, actor: User) -> AuditRecord:
    """The audit record of the chosen versions (exports.audit): findings, the fix of each
    task with findings on earlier versions (its field diff since the newest such version),
    machine checks and Delphi trails; with AUDIT.md and each task's summary."""
    found = ratings_queries.findings_of_tasks(
        session=session, version_ids=[version.id for _, version in chosen.pairs]
    )
    exported = {task.external_id: version.version for task, version in chosen.pairs}
    found = [(f, t, v) for f, t, v in found if v <= exported[t]]  # not findings on later ones
    finders = evidence.pseudonyms({f.author_id for f, _, _ in found}, "finder")
    panel = panel_and_fixes(session=session, findings=[f for f, _, _ in found])
    records = [
        audit.finding_record(f, t, v, finders[f.author_id], **panel[f.id]) for f, t, v in found
    ]
    rated: dict[str, int] = {}  # task -> the newest earlier version with findings
    for _, t, v in found:
        if v < exported[t]:
            rated[t] = max(v, rated.get(t, 0))
    previous = {}
    for task, version in chosen.pairs:
        if task.external_id in rated:
            after = session.get(TaskVersion, version.id)
            before = catalog_queries.version_of(
                session=session, task_id=after.task_id, version=rated[task.external_id]
            )
            previous[task.external_id] = {
                "since": before.version,
                "from_content_hash": before.content_hash,
                "to_content_hash": after.content_hash,
                "changes": audit.field_diff(before, after),
            }
    checks: dict[tuple[str, int], list[dict]] = {}
    for check in review_queries.checks_of_versions(
        session=session, task_version_ids=list(versions)
    ):
        key = versions[check.task_version_id]
        checks.setdefault(key, []).append(
            {"check": check.check, "status": str(check.status), "summary": check.summary}
        )
    exported_ids = {t.external_id for t, _ in chosen.pairs}
    delphi = consensus_states.delphi_states(session=session)
    trails: dict[str, list[dict]] = {}
    for review_round in chosen.rounds:
        if review_round.id in delphi:
            for row in consensus.revision_trail(
                session=session, actor=actor, round_name=review_round.name
            ):
                if row["task"] in exported_ids:
                    trails.setdefault(row["task"], []).append(row | {"round": review_round.name})
    rows = audit.audit_records(
        [(t.external_id, v.version) for t, v in chosen.pairs], records, previous, checks, trails
    )
    text, summaries = audit.summaries(rows)
    return AuditRecord(
        text,
        audit.audit_markdown(rows, TAXONOMY),
        summaries,
        {str(f.id) for f, _, _ in found},
        {f"{task}@v{fix['since']}" for task, fix in previous.items()},
    )


def write_audit(staging: Staging, record: AuditRecord) -> None:
    """evidence/audit.jsonl and AUDIT.md."""
    staging.write_text(audit.AUDIT_FILE, record.jsonl)
    staging.write_text(audit.AUDIT_MD, record.markdown)


def write_ledger_slice(
    staging: Staging,
    *,
    session: Session,
    chosen: Selection,
    rating_ids: set[int],
    logs: dict,
    agents: dict[int | None, str],
    findings: set[str] = frozenset(),
    fixed_from: set[str] = frozenset(),
) -> int:
    """evidence/ledger.jsonl and evidence/ledger.prov.json: the entries of the exported task
    versions (and of `fixed_from`, the versions the audit's fixes start from), their ratings,
    rounds and source logs, and the `findings`, streamed from the ledger."""
    wanted = {
        "task": {f"{t.external_id}@v{v.version}" for t, v in chosen.pairs}
        | {t.external_id for t, _ in chosen.pairs}
        | set(fixed_from),
        "review_round": {r.name for r in chosen.rounds},
        "finding": findings,
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
