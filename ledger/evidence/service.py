"""The provenance ledger as evidence: verifying the chain and what its entries commit to,
recording sources of any artifact, and summarising where each task field came from.

Sits above catalog, review and ledger (it reads all three), so none of them imports it.
"""

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog import queries as catalog_queries
from itsmreview.coverage import queries as coverage_queries
from itsmreview.errors import InvalidInput, NotFound
from itsmreview.ledger.evidence import queries
from itsmreview.ledger.evidence.audit import AuditReport, verify_ledger
from itsmreview.ledger.prov import prov_document
from itsmreview.ledger.service import append_entry, entry_record
from itsmreview.review.rubrics import queries as review_queries
from itsmreview.summaries.service import lead_figures
from sqlmodel import Session

KINDS = ("logs", "external", "expert")
ARTIFACT_KINDS = ("task", "log", "rubric", "world", "simulator", "verifier", "org")
TASK_FIELDS = ("instruction", "environment", "ground_truth", "verifier", "transcripts")
DOI = re.compile(r"^10\.\d{4,9}/\S+$")


def ledger_head(*, session: Session) -> dict | None:
    """The newest entry's sequence number and hash: what to keep outside the database."""
    head = queries.head(session=session)
    return (
        None if head is None else {"seq": head[0], "hash": head[1], "text": f"{head[0]}:{head[1]}"}
    )


@dataclass(frozen=True)
class Reference:
    """A structured source: what it is called, and where to find it."""

    title: str
    url: str | None = None
    doi: str | None = None
    version: str | None = None

    def check(self) -> "Reference":
        if not self.title.strip() or len(self.title) > 1000 or "\x00" in self.title:
            raise InvalidInput("the reference needs a title of 1 to 1,000 characters")
        if self.url and not re.match(r"^https?://[^\s]+$", self.url):
            raise InvalidInput(f"URL {self.url!r} is not an http(s) address")
        if self.doi and not DOI.match(self.doi):
            raise InvalidInput(f"DOI {self.doi!r} is not a DOI (10.NNNN/...)")
        return self

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v}


TASKS_LISTED = 200  # a catalogue of 100,000 tasks is searched, never listed whole


def artifact_names(
    *, session: Session, actor: User, kind: str, search: str = ""
) -> dict[str, str] | None:
    """What a source of an artifact of `kind` can be recorded about, name -> label: the
    tasks whose id or title holds `search` (id and title, the first TASKS_LISTED by id), each
    imported log, each stored rubric; None for the kinds named freely (world, simulator,
    verifier, org). Leads only."""
    require_role(actor, Role.lead)
    if kind == "task":
        found = catalog_queries.task_names(
            session=session, search=search.strip()[:200], limit=TASKS_LISTED
        )
        return {external_id: f"{external_id} · {title}" for external_id, title in found}
    if kind == "log":
        logs = coverage_queries.list_logs(session=session)
        return {name: name for name in sorted({log.name for log in logs})}
    if kind == "rubric":
        return {name: name for name in review_queries.rubric_names(session=session)}
    return None


def _artifact(session: Session, about: str) -> tuple[str, str]:
    """(ledger artifact type, id) of `kind:name[@version]`, checked to exist for tasks, logs
    and rubrics. Raises InvalidInput or NotFound."""
    kind, _, name = about.partition(":")
    name = name.strip()
    if kind not in ARTIFACT_KINDS or not name:
        raise InvalidInput(
            f"artifact {about!r}: expected KIND:NAME with KIND one of {', '.join(ARTIFACT_KINDS)} "
            "(task:ID or task:ID@VERSION, log:NAME, rubric:NAME, world:NAME, ...)"
        )
    if len(name) > 200 or "\x00" in name:
        raise InvalidInput(f"artifact {about!r}: the name is too long or holds a NUL")
    if kind == "task":
        external_id, _, version = name.partition("@")
        task = catalog_queries.task_by_external_id(session=session, external_id=external_id)
        if task is None:
            raise NotFound(f"no task {external_id!r}; `itsmreview tasks list` shows the ids")
        if version:
            number = version.lstrip("v")
            if (
                not number.isdigit()
                or catalog_queries.version_number(
                    session=session, task_id=task.id, number=int(number)
                )
                is None
            ):
                raise NotFound(f"task {external_id!r} has no version {version!r}")
            return "task", f"{external_id}@v{int(number)}"
        return "task", external_id
    if kind == "log":
        log = coverage_queries.latest_log(session=session, name=name)
        if log is None:
            raise NotFound(f"no log named {name!r}; `itsmreview log list` shows the names")
        return "event_log", f"{log.name}@{log.version}"
    if kind == "rubric" and not review_queries.rubric_named(session=session, name=name):
        raise NotFound(f"no rubric named {name!r}")
    return kind, name


def record_source(
    *,
    session: Session,
    actor: User,
    about: str,
    field_name: str,
    kind: str,
    reference: Reference,
    note: str = "",
):
    """Record where one field of an artifact came from (logs, external practice or experts),
    with a structured reference. Leads only. Raises InvalidInput or NotFound."""
    require_role(actor, Role.lead)
    if kind not in KINDS:
        raise InvalidInput(f"source kind {kind!r} is not one of {', '.join(KINDS)}")
    if not re.fullmatch(r"[A-Za-z0-9_.:/ -]{1,128}", field_name or ""):
        raise InvalidInput(
            f"field {field_name!r}: name the field in 1-128 letters, digits, spaces and "
            "'_', '.', ':', '/', '-'"
        )
    artifact_type, artifact_id = _artifact(session, about)
    reference = reference.check()
    return append_entry(
        session=session,
        artifact_type=artifact_type,
        artifact_id=artifact_id,
        field=field_name,
        action="add-source",
        source_kind=kind,
        reference=reference.title,
        actor_id=actor.id,
        payload={"reference": reference.as_dict(), "note": note.strip()[:2000]},
    )


def provenance_card(*, session: Session, actor: User, external_id: str) -> pd.DataFrame:
    """Each field of a task with its source kind, reference and when it was recorded: what
    the import declared and every source recorded since, newest last. Experts and leads."""
    require_role(actor, Role.expert, Role.lead)
    rows = []
    names = queries.user_names(session=session)
    for entry in queries.task_entries(session=session, external_id=external_id):
        if not entry.field:
            continue
        detail = (entry.payload or {}).get("reference") or {}
        rows.append(
            {
                "field": entry.field,
                "source": entry.source_kind,
                "reference": entry.reference,
                "url": detail.get("url"),
                "doi": detail.get("doi"),
                "about": entry.artifact_id,
                "recorded": entry.created_at,
                "by": names.get(entry.actor_id, "-"),
            }
        )
    columns = ["field", "source", "reference", "url", "doi", "about", "recorded", "by"]
    return pd.DataFrame(rows, columns=columns)


def provenance_summary(*, session: Session) -> dict:
    """Field x source kind over the current version of every task, each field counted once
    (its newest declared source; `undeclared` when none), overall and per source log, with
    shares; plus the review activity, reported apart from provenance."""
    added: dict[tuple[str, str], str] = {}
    for entry in queries.added_sources(session=session):
        if entry.artifact_type == "task":
            added[(entry.artifact_id, entry.field)] = entry.source_kind
    counts: dict[str, dict[str, dict[str, int]]] = {}
    with_talk = queries.versions_with_transcripts(session=session)
    for task, version in queries.current_versions(session=session):
        declared = {p.get("field"): p.get("source") for p in version.provenance or []}
        fields = list(dict.fromkeys([*TASK_FIELDS, *declared]))
        log = (version.source or {}).get("log") or "(no log)"
        for name in fields:
            if name == "transcripts" and name not in declared and version.id not in with_talk:
                continue
            kind = (
                added.get((f"{task.external_id}@v{version.version}", name))
                or added.get((task.external_id, name))
                or declared.get(name)
                or "undeclared"
            )
            for scope in ("all", log):
                cell = counts.setdefault(scope, {}).setdefault(
                    name, dict.fromkeys((*KINDS, "undeclared"), 0)
                )
                cell[kind if kind in cell else "undeclared"] += 1

    def matrix(scope: dict) -> list[dict]:
        out = []
        for name, cell in scope.items():
            total = sum(cell.values())
            out.append(
                {
                    "field": name,
                    **cell,
                    "total": total,
                    "shares": {k: (v / total if total else None) for k, v in cell.items()},
                }
            )
        return out

    overall = counts.get("all", {})
    totals = dict.fromkeys((*KINDS, "undeclared"), 0)
    for cell in overall.values():
        for key, value in cell.items():
            totals[key] += value
    grand = sum(totals.values())
    activity = queries.activity_counts(session=session)
    return {
        "fields": matrix(overall),
        "totals": {
            **totals,
            "shares": {k: (v / grand if grand else None) for k, v in totals.items()},
        },
        "per_log": {log: matrix(scope) for log, scope in sorted(counts.items()) if log != "all"},
        "activity": {
            "ratings": sum(v for k, v in activity.items() if k.startswith("rating:")),
            "adjudications": activity.get("adjudication:adjudicate", 0),
            "gate_changes": activity.get("review_round:gate", 0),
            "status_changes": sum(v for k, v in activity.items() if k.startswith("task:status:")),
            "exports": activity.get("export:export", 0),
            "sources_added": sum(v for k, v in activity.items() if k.endswith(":add-source")),
        },
    }


def export_ledger(
    out: Path | str, *, session: Session, fmt: str = "jsonl", external_id: str | None = None
) -> int:
    """Write the ledger (or a task's entries) as JSON lines, streamed, or W3C PROV-JSON,
    built and checked through the `prov` package (which holds the document in memory).
    Written beside OUT, then renamed into place. Returns the entry count."""
    if fmt not in ("jsonl", "prov-json"):
        raise InvalidInput(f"--format {fmt!r} is not one of jsonl, prov-json")
    if external_id is not None:
        if catalog_queries.task_by_external_id(session=session, external_id=external_id) is None:
            raise NotFound(f"no task {external_id!r}; `itsmreview tasks list` shows the ids")
        rows = queries.task_entries(session=session, external_id=external_id)
    else:
        rows = queries.entries(session=session)
    names = queries.user_names(session=session)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    try:
        count = 0
        with open(partial, "w", encoding="utf-8") as handle:
            if fmt == "jsonl":
                for e in rows:
                    count += 1
                    record = entry_record(e, names.get(e.actor_id))
                    handle.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")
            else:
                from prov.model import ProvDocument

                rows = list(rows)
                count = len(rows)
                document = prov_document(rows, agent_names=names)
                checked = ProvDocument.deserialize(content=json.dumps(document), format="json")
                handle.write(checked.serialize(format="json", indent=1) + "\n")
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    partial.replace(out)
    return count


@dataclass
class LedgerPage:
    entries: pd.DataFrame
    total: int


@dataclass
class LedgerFilters:
    head: dict | None
    artifact_types: list[str]
    actors: dict[str, int]


def ledger_filters(*, session: Session, actor: User) -> LedgerFilters:
    """The head and the choices for the entries' filters. Leads only."""
    require_role(actor, Role.lead)
    names = queries.user_names(session=session)
    return LedgerFilters(
        ledger_head(session=session),
        queries.artifact_types(session=session),
        {name: user_id for user_id, name in names.items()},
    )


def ledger_page(
    *,
    session: Session,
    actor: User,
    source_kind: str | None = None,
    artifact_type: str | None = None,
    actor_name: str | None = None,
    since=None,
    until=None,
    page: int = 1,
    page_size: int = 200,
) -> LedgerPage:
    """One page of entries (newest first) matching the filters, with actor names, and how
    many match. Leads only."""
    require_role(actor, Role.lead)
    actor_id = None
    if actor_name:
        actor_id = queries.user_id_named(session=session, username=actor_name)
        if actor_id is None:
            raise NotFound(f"no user {actor_name!r}")
    frame, total = queries.entries_page(
        session=session,
        source_kind=source_kind,
        artifact_type=artifact_type,
        actor_id=actor_id,
        since=since,
        until=until,
        offset=(max(page, 1) - 1) * page_size,
        limit=page_size,
    )
    return LedgerPage(frame, total)


@lead_figures
def summary_for(*, session: Session, actor: User) -> dict:
    """`provenance_summary` for a lead (the Ledger page)."""
    require_role(actor, Role.lead)
    return provenance_summary(session=session)


def audit_for(*, session: Session, actor: User, expect_head: str | None = None) -> AuditReport:
    """`verify_ledger` for a lead (the Ledger page's Verify button)."""
    require_role(actor, Role.lead)
    return verify_ledger(session=session, expect_head=expect_head or None, parallel=True)


FRESH_FIELDS = ("instruction", "environment", "verifier")  # what a task asks, starts from, checks
TOP_VARIANTS = 10  # variants ranked 1-10 by case count are "frequent"


@lead_figures
def realism_by_provenance(
    *, session: Session, actor: User, round_name: str | int | None = None
) -> pd.DataFrame:
    """Per rubric dimension, the mean human rating and alpha of the round's tasks split two
    ways: whose instruction, environment and verifier came mostly from the logs against the
    rest ("provenance"), and tasks on frequent variants (the log's ten most frequent) against
    rare ones ("coverage"). The comparison that would overturn the claim that log-derived
    tasks are realistic. Columns: comparison, group, dimension, tasks, ratings, mean, alpha.
    Leads only."""
    from itsmreview.review.gate.round_data import load_round

    require_role(actor, Role.lead)
    data = load_round(session=session, round_name=round_name).humans()
    columns = ["comparison", "group", "dimension", "tasks", "ratings", "mean", "alpha"]
    if data.ratings.empty:
        return pd.DataFrame(columns=columns)
    added: dict[tuple[str, str], str] = {
        (e.artifact_id, e.field): e.source_kind
        for e in queries.added_sources(session=session)
        if e.artifact_type == "task"
    }
    ranks: dict[str, dict[str, int]] = {}
    groups: dict[int, dict[str, str]] = {}
    version_ids = set(map(int, data.ratings["task_version_id"]))
    for task, version in queries.versions_by_ids(session=session, round_id=data.review_round.id):
        if version.id in version_ids:
            groups[version.id] = {
                "provenance": _fresh_origin(task, version, added),
                "coverage": _variant_frequency(session, version.source or {}, ranks),
            }
    rows = []
    for comparison in ("provenance", "coverage"):
        for label in sorted({g[comparison] for g in groups.values()}):
            chosen = {v for v, g in groups.items() if g[comparison] == label}
            rows += [
                {"comparison": comparison, "group": label, **row}
                for row in _group_realism(data, chosen)
            ]
    return pd.DataFrame(rows, columns=columns)


def _fresh_origin(task, version, added: dict[tuple[str, str], str]) -> str:
    """Whether most of a version's FRESH_FIELDS came from the logs: the source recorded
    later for the version or the task, else the one it declares."""
    declared = {p.get("field"): p.get("source") for p in version.provenance or []}
    kinds = [
        added.get((f"{task.external_id}@v{version.version}", f))
        or added.get((task.external_id, f))
        or declared.get(f)
        for f in FRESH_FIELDS
    ]
    return "mostly from the logs" if kinds.count("logs") * 2 > len(kinds) else "elsewhere"


def _variant_frequency(session: Session, source: dict, ranks: dict[str, dict[str, int]]) -> str:
    """Whether a task's best-ranked source variant is among its log's TOP_VARIANTS; `ranks`
    caches each log's variant ranks by sequence key."""
    from itsmreview.coverage.variants import sequence_key

    log = source.get("log")
    if not (log and source.get("variants")):
        return "no source variant"
    if log not in ranks:
        found = coverage_queries.latest_log(session=session, name=log)
        frame = (
            coverage_queries.variants_frame(session=session, log_id=found.id)
            if found
            else pd.DataFrame(columns=["sequence_key", "rank"])
        )
        ranks[log] = dict(zip(frame["sequence_key"], frame["rank"], strict=True))
    best = min(
        (ranks[log].get(sequence_key(v), 10**9) for v in source["variants"]),
        default=10**9,
    )
    return f"frequent (top {TOP_VARIANTS})" if best <= TOP_VARIANTS else "rare"


def _group_realism(data, chosen: set[int]) -> list[dict]:
    """Per rubric dimension, the human ratings of the `chosen` versions: how many tasks and
    ratings, their mean and alpha."""
    from itsmreview.review.gate import agreement
    from itsmreview.review.gate.round_data import RoundData, reliability_matrix

    ratings = data.ratings[data.ratings["task_version_id"].isin(chosen)]
    subset = RoundData(
        data.review_round,
        data.rubric,
        ratings,
        data.scores[data.scores["rating_id"].isin(set(ratings["rating_id"]))],
    )
    rows = []
    for dimension in data.rubric.dimensions:
        values = subset.scores[subset.scores["dimension"] == dimension.key]["value"]
        matrix, _, _ = reliability_matrix(subset, dimension.key)
        alpha = agreement.alpha(matrix, dimension.level).value if matrix.size else None
        rows.append(
            {
                "dimension": dimension.label,
                "tasks": len(chosen),
                "ratings": int(values.notna().sum()),
                "mean": float(values.mean()) if values.notna().any() else None,
                "alpha": alpha,
            }
        )
    return rows
