"""The steps that write an export's files into its staging folder: tasks, evidence, ledger slice."""

import shutil
import sys
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from types import SimpleNamespace

import numpy as np
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
    """The approved versions a filter selects, by task id, as columns (about 100 bytes a
    version, ids and version numbers in arrays), and the subquery that names them."""

    tasks: list[str]  # task external ids
    version_ids: array  # of the versions, in the same order
    versions: array  # version numbers
    logs: list  # each version's source log (interned: shared), None without one
    personas: list[str]
    ids: object  # subquery of version ids (may hold more than these when filtered by log)
    rounds: list
    _by_id: tuple | None = field(default=None, init=False, repr=False)
    _by_task: array | None = field(default=None, init=False, repr=False)

    @classmethod
    def of_rows(cls, rows, ids, rounds: list) -> "Selection":
        """A selection of (task id, persona, version id, version, log) rows."""
        chosen = cls([], array("q"), array("q"), [], [], ids, rounds)
        for task, persona, version_id, version, log in rows:
            chosen.tasks.append(task)
            chosen.personas.append(sys.intern(persona) if type(persona) is str else persona)
            chosen.version_ids.append(version_id)
            chosen.versions.append(version)
            chosen.logs.append(sys.intern(log) if type(log) is str else log)
        return chosen

    def __len__(self) -> int:
        return len(self.version_ids)

    def where(self, keep: Callable[[int], bool]) -> "Selection":
        """The versions at the positions `keep` accepts."""
        return Selection.of_rows(
            (
                (self.tasks[i], self.personas[i], self.version_ids[i], self.versions[i], log)
                for i, log in enumerate(self.logs)
                if keep(i)
            ),
            self.ids,
            self.rounds,
        )

    def names_of(self, version_ids) -> dict[int, tuple[str, int]]:
        """{version id: (task id, version)} of these chosen versions (a batch).
        Raises KeyError for a version not chosen."""
        if self._by_id is None:
            ids = np.frombuffer(self.version_ids, dtype=np.int64)
            order = np.argsort(ids, kind="stable")
            self._by_id = (ids[order], order)
        ordered, order = self._by_id
        wanted = np.fromiter(version_ids, dtype=np.int64)
        if not len(ordered):
            if len(wanted):
                raise KeyError(int(wanted[0]))
            return {}
        at = np.minimum(np.searchsorted(ordered, wanted), len(ordered) - 1)
        missing = wanted[ordered[at] != wanted]
        if len(missing):
            raise KeyError(int(missing[0]))
        tasks, versions = self.tasks, self.versions
        return {
            int(v): (tasks[i], versions[i])
            for v, i in zip(wanted.tolist(), order[at].tolist(), strict=True)
        }

    def index_of(self, task: str) -> int | None:
        """The position of a task's version, None when the task is not chosen."""
        if self._by_task is None:
            self._by_task = array("q", sorted(range(len(self.tasks)), key=self.tasks.__getitem__))
        order, tasks = self._by_task, self.tasks
        at = bisect_left(order, task, key=tasks.__getitem__)
        return order[at] if at < len(order) and tasks[order[at]] == task else None


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
    """What the rest of the export needs of its audit record (exports.audit, written first:
    each format carries each task's summary of it, read back from evidence/audit.jsonl)."""

    finding_ids: set[str]  # findings whose ledger entries the slice carries
    fixed_from: set[str]  # "task@vN" of the versions fixes start from (their ledger entries)


def write_tasks(
    staging: Staging,
    plan: Plan,
    *,
    session: Session,
    batch: int,
    report: Report,
) -> tuple[dict[str, int], dict[str, int]]:
    """The tasks in each format: native and Hugging Face rows `batch` versions at a time,
    the Harbor and tau2 folders at the end, each task with its summary of the staged
    evidence/audit.jsonl (read a line at a time: its lines are in the tasks' order) in its
    export record. Returns the counts written and the Hugging Face rows per persona."""
    chosen, formats = plan.chosen, plan.formats
    report("writing tasks", 0.12)
    counts = {"tasks": len(chosen)}
    personas: dict[str, int] = {}
    harbor_tasks, tau2_tasks = [], []  # only tasks of those formats: few, kept for the end
    with ExitStack() as files_open:
        lines = files_open.enter_context(
            open(staging.path(audit.AUDIT_FILE), encoding="utf-8", newline="\n")
        )
        audits = audit.summaries_in_order(lines)
        native_out = (
            files_open.enter_context(staging.open(native.PATH)) if "native" in formats else None
        )
        hf_out = (
            files_open.enter_context(staging.open(f"{hf.ROOT}/data/train.jsonl"))
            if "hf" in formats
            else None
        )
        for start in range(0, len(chosen), batch):
            natives, records = _native_tasks(session, chosen.version_ids[start : start + batch])
            for t, r in zip(natives, records, strict=True):
                key, r["audit"] = next(audits)
                if key != (t["id"], r["version"]):
                    raise ValueError(f"{audit.AUDIT_FILE}: {key} where {t['id']} is expected")
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
            report("writing tasks", 0.12 + 0.25 * min(1, (start + batch) / len(chosen)))
    if "harbor" in formats:
        counts["harbor"] = _write_harbor(staging, plan, harbor_tasks)
    if "tau2" in formats:
        counts["tau2"] = len(tau2_tasks)
        rendered = tau2.render([t for t, _ in tau2_tasks], [r for _, r in tau2_tasks])
        for path, text in rendered.items():
            staging.write_text(path, text)
    return counts, personas


def tasks_apart(plan: Plan) -> tuple[Plan, array]:
    """What `write_tasks_in_process` needs of a plan, small to send: the plan without its
    selection, and the chosen versions' ids."""
    bare = replace(
        plan,
        chosen=Selection.of_rows((), None, []),
        gates={},
        item_counts={},
        realism=None,
    )
    return bare, plan.chosen.version_ids


def write_tasks_in_process(
    url: str, staging: Staging, plan: Plan, version_ids: array, batch: int
) -> tuple[dict[str, int], dict[str, int]] | None:
    """`write_tasks` in a second process, on a connection of its own to `url` (task
    versions never change, so it reads what the first would). None when a chosen version
    is not there for it (written in a transaction not yet committed): the first then
    writes them."""
    from itsmreview.db import create_db_engine

    chosen = Selection([], array("q", version_ids), array("q"), [], [], None, [])  # ids only
    engine = create_db_engine(url)
    try:
        with Session(engine) as session:
            return write_tasks(
                staging,
                replace(plan, chosen=chosen),
                session=session,
                batch=batch,
                report=lambda _stage, _fraction: None,
            )
    except MissingVersion:
        return None
    finally:
        engine.dispose()


def ledger_apart(chosen: Selection) -> Selection:
    """What `ledger_slice_in_process` needs of the selection, small to send: its columns and
    the rounds' names."""
    return replace(chosen, ids=None, rounds=[SimpleNamespace(name=r.name) for r in chosen.rounds])


def ledger_slice_in_process(url: str, staging: Staging, chosen: Selection, **slice_of) -> int:
    """`write_ledger_slice` in a second process, on a connection of its own to `url` (the
    ledger only grows: it streams the entries the first would)."""
    from itsmreview.db import create_db_engine

    engine = create_db_engine(url)
    try:
        with Session(engine) as session:
            return write_ledger_slice(staging, session=session, chosen=chosen, **slice_of)
    finally:
        engine.dispose()


class MissingVersion(KeyError):
    """A chosen task version this connection cannot read."""


def _native_tasks(session: Session, version_ids) -> tuple[list[dict], list[dict]]:
    """A batch of versions as native task dicts, and the export record of each."""
    pairs, transcripts = queries.tasks_of(session=session, version_ids=version_ids)
    natives, records = [], []
    for version_id in version_ids:
        if version_id not in pairs:
            raise MissingVersion(version_id)
        task, version = pairs[version_id]
        natives.append(version_to_native(task, version, transcripts.get(version_id, [])))
        records.append(
            {
                "version": version.version,
                "content_hash": version.content_hash,
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


def rating_batches(chosen: Selection, size: int) -> list[array]:
    """The chosen version ids by task id and version, in batches of `size`."""
    tasks, versions, ids = chosen.tasks, chosen.versions, chosen.version_ids
    ordered = sorted(range(len(chosen)), key=lambda i: (tasks[i], versions[i]))
    return [
        array("q", (ids[i] for i in ordered[start : start + size]))
        for start in range(0, len(ordered), size)
    ]


def read_raters(
    *, session: Session, chosen: Selection, batches: list[array], with_names: bool
) -> Raters:
    """The experts and rubrics of the chosen versions' ratings, and their adjudications,
    named by user name (`with_names`) or by stable pseudonyms."""
    experts, rubric_ids = set(), {int(r.rubric_id) for r in chosen.rounds}
    for batch in batches:
        rated_by, rated_with = queries.raters_and_rubrics(session=session, version_ids=batch)
        experts |= rated_by
        rubric_ids |= rated_with
    adjudications = queries.adjudications_in(session=session, ids=chosen.ids)
    adjudications = adjudications[
        adjudications["task_version_id"].isin(np.asarray(chosen.version_ids))
    ]
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
            id_array(rounds_queries.round_task_ids(session=session, round_id=review_round.id)),
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
    batches: list[array],
    chosen: Selection,
    raters: Raters,
    rounds: RoundEvidence,
    gates: dict,
    formats: list[str],
    report: Report,
) -> RatingsWritten:
    """The ratings, the per-task summary (in agreement.json and the Hugging Face config
    task_summary) and the gate's decisions (spooled per round, joined into gate.json at the
    end), written as the batches go: memory holds a batch, the summary's first rows for the
    card and the exported rating ids (for the ledger slice, 8 bytes each)."""
    dimensions = raters.dimensions
    summary_head, summaries, rating_ids = [], 0, array("q")
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
                versions = chosen.names_of(batch)
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
                rating_ids.extend(ratings["rating_id"].astype(int).tolist())
                _add_decisions(decisions, rounds, gates, versions, ratings, scores, batch)
                report("writing ratings", 0.5 + 0.15 * done / len(batches))
        finally:
            ratings_out.close()
        with staging.open("evidence/gate.json") as handle:
            evidence.write_gate(handle, rounds.gate, decisions)
    return RatingsWritten(ratings_out.rows, summary_head, summaries, id_array(rating_ids))


def id_array(ids: Iterable[int]) -> array:
    """Ids sorted, each once, in an array (8 bytes an id: a set takes about 60)."""
    return array("q", np.unique(np.fromiter(ids, dtype=np.int64)).tobytes())


def has_id(ids: array, wanted: int) -> bool:
    """Whether `id_array` `ids` holds `wanted`."""
    at = bisect_left(ids, wanted)
    return at < len(ids) and ids[at] == wanted


def _add_decisions(
    decisions: dict[str, evidence.JsonArraySpool],
    rounds: RoundEvidence,
    gates: dict,
    versions: dict[int, tuple[str, int]],
    ratings: pd.DataFrame,
    scores: pd.DataFrame,
    batch: array,
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
            if has_id(members, v)
        )


def write_evidence(
    staging: Staging,
    *,
    session: Session,
    chosen: Selection,
    raters: Raters,
    report: Report,
    batch: int = 1000,
) -> tuple[list[str], list[dict]]:
    """The rest of evidence/: adjudications, machine checks (`batch` versions at a time),
    coverage of the source logs and rubrics. Returns the exported versions' source logs and
    each log's origin."""
    adjudicated = raters.adjudications["task_version_id"].astype(int).tolist()
    files = evidence.adjudications_file(
        raters.adjudications, versions=chosen.names_of(adjudicated), names=raters.leads
    )
    with staging.open(evidence.MACHINE_CHECKS) as handle:
        ordered = sorted(chosen.version_ids)
        for start in range(0, len(ordered), batch):
            ids = ordered[start : start + batch]
            checks = review_queries.checks_of_versions(session=session, task_version_ids=ids)
            handle.write(evidence.machine_check_lines(checks, versions=chosen.names_of(ids)))
    report("computing coverage", 0.65)
    logs = sorted({log for log in chosen.logs if log})
    origins = [_log_origin(session, log_name) for log_name in logs]
    coverage = {}
    for log_name in logs:
        try:
            result, unresolved = coverage_of(
                session=session, log_name=log_name, rows=_sources_of_log(session, chosen, log_name)
            )
        except NotFound:
            coverage[log_name] = {"error": f"log {log_name!r} is not imported"}
            continue
        coverage[log_name] = {**result.as_dict(), "unresolved_case_ids": unresolved}
    files.update(evidence.coverage_file(coverage))
    files.update(evidence.rubrics_file(raters.rubrics))
    for path, text in files.items():
        staging.write_text(path, text)
    return logs, origins


def _sources_of_log(
    session: Session, chosen: Selection, log_name: str, batch: int = 1000
) -> list[tuple[str, dict]]:
    """(task id, source) of the chosen versions of one source log, in the selection's order."""
    at = [i for i, log in enumerate(chosen.logs) if log == log_name]
    rows = []
    for start in range(0, len(at), batch):
        part = at[start : start + batch]
        sources = queries.sources_of(
            session=session, version_ids=[chosen.version_ids[i] for i in part]
        )
        rows += [(chosen.tasks[i], sources[chosen.version_ids[i]]) for i in part]
    return rows


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
            count=len(plan.chosen),
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


def write_audit(
    staging: Staging, *, session: Session, chosen: Selection, actor: User, batch: int = 1000
) -> AuditRecord:
    """evidence/audit.jsonl and AUDIT.md, the audit record of the chosen versions
    (exports.audit): findings, the fix of each task with findings on earlier versions (its
    field diff since the newest such version), machine checks and Delphi trails, written
    `batch` versions at a time."""
    found = ratings_queries.findings_of_tasks(session=session, version_ids=chosen.version_ids)
    exported = {t: chosen.versions[chosen.index_of(t)] for t in {t for _, t, _ in found}}
    found = [(f, t, v) for f, t, v in found if v <= exported[t]]  # not findings on later ones
    finders = evidence.pseudonyms({f.author_id for f, _, _ in found}, "finder")
    panel = panel_and_fixes(session=session, findings=[f for f, _, _ in found])
    by_task: dict[str, list[dict]] = {}
    for f, t, v in found:
        record = audit.finding_record(f, t, v, finders[f.author_id], **panel[f.id])
        by_task.setdefault(t, []).append(record)
    rated: dict[str, int] = {}  # task -> the newest earlier version with findings
    for _, t, v in found:
        if v < exported[t]:
            rated[t] = max(v, rated.get(t, 0))
    previous = {}
    for task in sorted(rated, key=chosen.index_of):
        after = session.get(TaskVersion, chosen.version_ids[chosen.index_of(task)])
        before = catalog_queries.version_of(
            session=session, task_id=after.task_id, version=rated[task]
        )
        previous[task] = {
            "since": before.version,
            "from_content_hash": before.content_hash,
            "to_content_hash": after.content_hash,
            "changes": audit.field_diff(before, after),
        }
    trails = _delphi_trails(session, chosen, actor)
    tally = audit.AuditTally()
    with staging.open(audit.AUDIT_FILE) as lines:
        for start in range(0, len(chosen), batch):
            ids = chosen.version_ids[start : start + batch]
            names = chosen.names_of(ids)
            checks: dict[tuple[str, int], list[dict]] = {}
            for check in review_queries.checks_of_versions(session=session, task_version_ids=ids):
                checks.setdefault(names[check.task_version_id], []).append(
                    {"check": check.check, "status": str(check.status), "summary": check.summary}
                )
            exported_here = [names[i] for i in ids]
            findings = [f for t, _ in exported_here for f in by_task.get(t, ())]
            for record in audit.audit_records(exported_here, findings, previous, checks, trails):
                lines.write(audit.record_line(record))
                tally.add(record)
    staging.write_text(audit.AUDIT_MD, tally.markdown(TAXONOMY))
    return AuditRecord(
        {str(f.id) for f, _, _ in found},
        {f"{task}@v{fix['since']}" for task, fix in previous.items()},
    )


def _delphi_trails(session: Session, chosen: Selection, actor: User) -> dict[str, list[dict]]:
    """The consensus trail of each chosen task of a Delphi round."""
    delphi = consensus_states.delphi_states(session=session)
    trails: dict[str, list[dict]] = {}
    for review_round in chosen.rounds:
        if review_round.id in delphi:
            for row in consensus.revision_trail(
                session=session, actor=actor, round_name=review_round.name
            ):
                if chosen.index_of(row["task"]) is not None:
                    trails.setdefault(row["task"], []).append(row | {"round": review_round.name})
    return trails


def write_ledger_slice(
    staging: Staging,
    *,
    session: Session,
    chosen: Selection,
    rating_ids: array,
    logs: list[str],
    agents: dict[int | None, str],
    findings: set[str] = frozenset(),
    fixed_from: set[str] = frozenset(),
) -> int:
    """evidence/ledger.jsonl and evidence/ledger.prov.json: the entries of the exported task
    versions (and of `fixed_from`, the versions the audit's fixes start from), their ratings
    (`rating_ids`, an `id_array`), rounds and source logs, and the `findings`, streamed from
    the ledger."""
    versions = dict(zip(chosen.tasks, chosen.versions, strict=True))  # keys shared: ~60 B a task
    wanted = {"review_round": {r.name for r in chosen.rounds}, "finding": findings}
    log_prefixes = tuple(f"{name}@" for name in logs) or ("\0",)

    def exported(entry) -> bool:
        kind, artifact = entry.artifact_type, entry.artifact_id
        if kind == "rating":
            return artifact.isdigit() and has_id(rating_ids, int(artifact))
        if kind == "task":
            if artifact in versions or artifact in fixed_from:
                return True
            task, at, number = artifact.rpartition("@v")
            return bool(at) and task in versions and number == str(versions[task])
        if kind == "event_log":
            return artifact.startswith(log_prefixes)
        return artifact in wanted.get(kind, ())

    written = 0
    with ProvWriter(agents) as prov, staging.open("evidence/ledger.jsonl") as lines:
        for entry in queries.ledger_entries_of(session=session, artifact_types=LEDGER_TYPES):
            if exported(entry):
                lines.write(evidence.ledger_line(entry, agents))
                prov.add_entry(entry)
                written += 1
        for task, version, log in zip(chosen.tasks, chosen.versions, chosen.logs, strict=True):
            if log:
                prov.add_derivation(f"task/{task}@v{version}", f"event_log/{log}")
        with staging.open("evidence/ledger.prov.json") as handle:
            prov.write(handle)
    return written


def _agreement_row(item: dict) -> dict:
    """An item's agreement without per-rater figures (they would name raters of the round
    who rated no exported task)."""
    return {k: v for k, v in item.items() if k not in ("leave_one_rater_out", "rater_bias")}
