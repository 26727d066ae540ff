"""`ledger verify`: the chain, and the database against it in both directions.

1. Every entry that commits to an object names one that exists and whose content is what the
   entry commits to (read while the chain streams, in batches of objects keyed by the
   entries: a few queries per batch, memory flat however long the ledger).
2. Every object of a covered table has an entry that commits to it: while direction 1 reads
   an entry's object it marks the object's id as covered (one bit per id), then each table's
   ids are streamed once and the unmarked ones are the objects without an entry (tables
   named by text, few rows, by one anti-join each); a rating still queued for the gate is
   what its queued entry commits to.
3. Statuses are verified: a task version's status is the decision its newest status entry
   recorded (draft or in review when none), a task's status is its newest version's (the
   newest decision per version is kept from the stream, a byte and a number per version).

Sits above catalog, review, coverage and ledger; none of them imports it.
"""

from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from itsmreview.catalog.native import NativeTask
from itsmreview.catalog.service import version_to_native
from itsmreview.db import second_process_url
from itsmreview.errors import InvalidInput
from itsmreview.ledger import chain
from itsmreview.ledger.evidence import queries
from itsmreview.ledger.evidence.findings import (
    HELD,
    MISMATCH,
    MISSING,
    STATUS,
    UNCOVERED,
    AuditReport,
    Finding,
)
from itsmreview.ledger.evidence.marks import Decisions, IdSet
from itsmreview.ledger.service import WHOLE, ChainReport, parse_head, verify_chain
from itsmreview.processes import cycles_collected_after, second_process_context
from itsmreview.review.commitments import adjudication_content, check_content, rating_digest
from itsmreview.review.models import Adjudication, MachineCheck, ResolutionProposal
from itsmreview.review.scorevector import pack
from sqlmodel import Session

BATCH = 2_000  # committing entries of one kind whose objects are read in one go

RATING_ACTIONS = ("submit", "revise", "model-rate", "commit")
BY_ID = ("rating", "adjudication", "machine_check", "resolution_proposal")  # rows named by id


def verify_ledger(
    *,
    session: Session,
    expect_head: str | None = None,
    progress: Callable[[str, int], None] | None = None,
    parallel: bool = False,
) -> AuditReport:
    """Recompute the hash chain, check an expected head (`SEQ:HASH`, kept outside the
    database), and check the database against the ledger both ways: each committing entry's
    object exists and matches (ratings human and model, task versions, adjudications, gates,
    machine checks, proposals' decisions, team mappings, event logs, exports), each object of
    those tables has its entry, queued ratings match their queued entries, and the statuses
    of task versions and tasks are the ones the ledger's decisions give.

    Streams the ledger and reads objects in batches (memory does not grow with the ledger).
    `parallel`: a second process, on its own connection, checks a middle range of the
    entries, their hashes and their objects (for a session with nothing uncommitted: the
    CLI's, the Ledger page's), when the ledger is long enough to pay for it, the machine has a
    second core and the database is not in memory; this one checks the entries before and
    after it and what needs them all. The report is the same either way. Raises InvalidInput
    for a malformed expected head.
    """
    if expect_head:
        try:
            parse_head(expect_head)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
    split = _split(session) if parallel else None
    with cycles_collected_after():
        if split is None:
            return _verify(session, expect_head, progress, WHOLE)
        url, middle = split
        with ProcessPoolExecutor(1, mp_context=second_process_context()) as pool:
            theirs = pool.submit(_verify_range, url, expect_head, middle)
            mine = ((0, middle[0]), (middle[1], None))
            return _verify(session, expect_head, progress, mine, theirs=theirs)


PARALLEL_MIN_ENTRIES = 50_000  # below this a second process costs more than it saves
# the share of the entries the first process checks besides the work that needs them all
# (the objects no entry names, the statuses); the second checks the rest. Measured at 100,000
# tasks: 0.45 and 0.55 slower on SQLite, 0.45 slower on PostgreSQL
FIRST_SHARE = 0.5


def _split(session: Session) -> tuple[str, tuple[int, int]] | None:
    """The URL a second process opens the database by and the range of entries (after, up
    to) it checks, where one can share the check: None when it would not help (one core, a
    short ledger) or cannot (a database in memory)."""
    url = second_process_url(session)
    newest = queries.head(session=session) if url is not None else None
    if newest is None or newest[0] < PARALLEL_MIN_ENTRIES:
        return None
    up_to = newest[0]
    return url, (int(up_to * FIRST_SHARE), up_to)


def _verify(session, expect_head, progress, ranges, theirs=None) -> AuditReport:
    report = AuditReport()
    audit = _Audit(session, report)
    checked = verify_chain(
        session=session,
        expect_head=expect_head,
        on_entry=audit.note,
        progress=progress,
        ranges=ranges,
    )
    if theirs is not None:
        audit.flush()
        checked = audit.merge(checked, theirs.result())
        if progress:  # the count so far was this process's ranges'
            progress("chain", checked.entries)
    report.entries = checked.entries
    report.head = checked.head
    report.broken_at = checked.broken_at
    report.chain_problem = checked.problem
    report.expected_head_problem = checked.expected_head_problem
    audit.finish(progress)
    report.findings = _ordered(report.findings)
    return report


@dataclass
class _Part:
    """What the second process found in its range, for the first to merge."""

    chain: ChainReport
    findings: list[Finding]
    objects_checked: int
    covered: dict[str, IdSet]
    imported: IdSet
    decided: Decisions
    gates: dict[str, tuple[int, str]]
    exports: dict[str, list[tuple[int, str]]]
    last_seq: int


def _verify_range(url: str, expect_head: str | None, middle: tuple[int, int]) -> _Part:
    """The second process's part: the entries in the range (after, up to), hashed and their
    objects checked, on a connection of its own; what needs every entry (objects that no
    entry names, statuses, gates, exports) is left to the first, with what it needs of
    this range."""
    from itsmreview.db import create_db_engine

    engine = create_db_engine(url)
    try:
        with Session(engine) as session, cycles_collected_after():
            report = AuditReport()
            audit = _Audit(session, report)
            checked = verify_chain(
                session=session, expect_head=expect_head, on_entry=audit.note, ranges=(middle,)
            )
            audit.flush()
            return _Part(
                checked,
                report.findings,
                report.objects_checked,
                audit.covered,
                audit.imported,
                audit.decided,
                audit.gates,
                audit.exports,
                max(audit.last_seq, middle[1]),
            )
    finally:
        engine.dispose()


def _ordered(findings: list[Finding]) -> list[Finding]:
    """Findings at an entry in the ledger's order, then those at no entry kind by kind, each
    kind's in the order found: the same order however the work was shared."""
    return sorted(findings, key=lambda f: (f.seq is None, f.seq or 0, _KIND_ORDER.get(f.kind, 0)))


_KIND_ORDER = {
    kind: rank
    for rank, kind in enumerate(
        (
            "review_round",
            "export",
            "rating",
            "adjudication",
            "machine_check",
            "resolution_proposal",
            "team_mapping",
            "event_log",
            "task",
        )
    )
}


class _Audit:
    def __init__(self, session: Session, report: AuditReport) -> None:
        self.session = session
        self.report = report
        self.last_seq = 0
        self.buffers: dict[str, list] = {kind: [] for kind in _CHECKS}
        self.gates: dict[str, tuple[int, str]] = {}  # round name -> newest gate commitment
        self.covered = {kind: IdSet() for kind in BY_ID}  # ids a committing entry names
        self.imported = IdSet()  # task version ids with an import (or commit) commitment
        self.decided = Decisions()
        self.exports: dict[str, list[tuple[int, str]]] = {}  # name -> its entries' digests
        self._rubric_keys: dict[int, list[str]] | None = None

    def merge(self, mine: ChainReport, part: _Part) -> ChainReport:
        """This process's chain report and audit with the second process's part (a middle
        range of the entries): the chain as one, the objects its entries named, the newest
        decisions and gates of both."""
        theirs = part.chain
        chain_report = ChainReport(
            entries=mine.entries + theirs.entries,
            head=mine.head,
            expected_head_problem=(
                theirs.expected_head_problem if theirs.expected_seen else mine.expected_head_problem
            ),
            expected_seen=mine.expected_seen or theirs.expected_seen,
        )
        breaks = [r for r in (mine, theirs) if r.broken_at is not None]
        if breaks:
            first = min(breaks, key=lambda r: r.broken_at)
            chain_report.broken_at, chain_report.problem = first.broken_at, first.problem
        self.report.findings += part.findings
        self.report.objects_checked += part.objects_checked
        for kind, ids in part.covered.items():
            self.covered[kind].update(ids)
        self.imported.update(part.imported)
        self.decided.update(part.decided)
        for name, (seq, digest) in part.gates.items():
            if name not in self.gates or self.gates[name][0] < seq:
                self.gates[name] = (seq, digest)
        for name, entries in part.exports.items():
            self.exports.setdefault(name, []).extend(entries)
        self.last_seq = max(self.last_seq, part.last_seq)
        return chain_report

    # -- direction 1: entries -> objects, while the chain streams ------------------------

    def note(self, entry) -> None:
        self.last_seq = entry.seq
        kind, action, payload = entry.artifact_type, entry.action, entry.payload or {}
        if kind == "rating":
            if action not in RATING_ACTIONS:
                return
            item = payload.get("content_sha256")
        elif kind == "task":
            if action in ("import", "commit"):
                item = payload.get("content_hash")
            elif action.startswith("status:"):
                # the version must exist; its newest status is checked against it at the end
                item = (action.split(":", 1)[1],)
            else:
                return
        elif kind in ("adjudication", "team_mapping"):
            item = payload.get("content_sha256")
        elif kind == "machine_check":
            if not action.startswith("check:"):
                return
            item = payload.get("content_sha256")
        elif kind == "resolution_proposal":
            if action not in ("accepted", "dismissed"):
                return
            item = (payload.get("content_sha256"), action, payload.get("reason", ""))
        elif kind == "event_log":
            if action != "import":
                return
            item = payload
        elif kind == "review_round":
            if action in ("gate", "commit"):
                # gate entries written before content commitments carry the setting itself
                digest = payload.get("content_sha256")
                self.gates[entry.artifact_id] = (
                    entry.seq,
                    digest or chain.content_digest(payload.get("to") or {}),
                )
            return
        elif kind == "export":
            if entry.reference.startswith("manifest sha256:"):
                digest = entry.reference.split(":", 1)[1]
                self.exports.setdefault(entry.artifact_id, []).append((entry.seq, digest))
            return
        else:
            return
        buffer = self.buffers[kind]
        buffer.append((entry.seq, entry.artifact_id, item))
        if len(buffer) >= BATCH:
            self._flush(kind)

    def _flush(self, kind: str) -> None:
        items, self.buffers[kind] = self.buffers[kind], []
        if items:
            _CHECKS[kind](self, items)

    def add(self, kind, ident, problem, seq, detail, label="") -> None:
        self.report.findings.append(Finding(kind, str(ident), problem, seq, detail, label))

    def missing(self, kind: str, ident: str, seq: int, label: str = "") -> None:
        self.add(
            kind,
            ident,
            MISSING,
            seq,
            f"ledger entry {seq} commits to it, but it does not exist (deleted, or the entry "
            "names an object that never was)",
            label or f"{kind.replace('_', ' ')} {ident}",
        )

    def mismatch(self, kind: str, ident: str, seq: int, label: str, what: str = "") -> None:
        self.add(
            kind,
            ident,
            MISMATCH,
            seq,
            f"{what or 'content'} differs from what ledger entry {seq} commits to",
            label,
        )

    @property
    def rubric_keys(self) -> dict[int, list[str]]:
        if self._rubric_keys is None:
            self._rubric_keys = queries.rubric_dimension_keys(session=self.session)
        return self._rubric_keys

    def _packed_differs(self, rating, scores: dict) -> bool:
        keys = self.rubric_keys.get(rating.rubric_id, [])
        return rating.score_vector is not None and bytes(rating.score_vector) != pack(keys, scores)

    def check_ratings(self, items: list) -> None:
        ids = _int_ids(self, "rating", items)
        valid = set(ids.values())
        ratings, scores = queries.ratings_by_ids(session=self.session, ids=list(ids))
        for seq, ident, digest in items:
            if ident not in valid:
                continue
            rating = ratings.get(int(ident))
            if rating is None or rating.status != "submitted":
                self.missing("rating", ident, seq)
                continue
            if digest:
                self.covered["rating"].add(rating.id)
            self.report.objects_checked += 1
            label = f"rating {rating.id} (task version {rating.task_version_id})"
            values = scores.get(rating.id, {})
            if self._packed_differs(rating, values):
                self.add(
                    "rating",
                    ident,
                    MISMATCH,
                    seq,
                    "its packed scores differ from its score rows",
                    label,
                )
            if digest and rating_digest(rating, values) != digest:
                self.mismatch("rating", ident, seq, label)
        self.session.expunge_all()

    def check_versions(self, items: list) -> None:
        names: dict[str, tuple[str, int]] = {}
        for seq, ident, _ in items:
            external_id, _, number = ident.rpartition("@v")
            if external_id and number.isdigit():
                names[ident] = (external_id, int(number))
            else:
                self.missing("task", ident, seq, f"task version {ident}")
        pairs, transcripts = queries.versions_by_names(
            session=self.session,
            names=list(set(names.values())),
            content={names[i] for _, i, d in items if i in names and isinstance(d, str)},
        )
        for seq, ident, digest in items:
            if ident not in names:
                continue
            found = pairs.get(names[ident])
            label = f"task version {ident}"
            if found is None:
                self.missing("task", ident, seq, label)
                continue
            task, version = found
            if isinstance(digest, tuple):  # a status entry: its decision is checked at the end
                self.decided.record(version.id, digest[0], seq)
                continue
            if digest is None:  # an import from before content commitments names it only
                continue
            self.imported.add(version.id)
            self.report.objects_checked += 1
            native = version_to_native(task, version, transcripts.get(version.id, []))
            # stored as imported, the task hashes as its validated form does; only a version
            # that does not is validated (whose normal form may still hash the same)
            actual = chain.content_digest(native)
            if actual != digest:
                try:
                    actual = NativeTask.model_validate(native).content_hash()
                except ValueError:
                    actual = "invalid"
            if actual != digest or version.content_hash != digest:
                self.mismatch("task", ident, seq, label)
        self.session.expunge_all()

    def _check_by_id(self, kind: str, model, items: list, content, label) -> dict:
        ids = _int_ids(self, kind, items)
        valid = set(ids.values())
        rows = queries.rows_by_ids(session=self.session, model=model, ids=list(ids))
        for seq, ident, digest in items:
            if ident not in valid:
                continue
            row = rows.get(int(ident))
            if row is None:
                self.missing(kind, ident, seq)
                continue
            self.report.objects_checked += 1
            expected = digest[0] if isinstance(digest, tuple) else digest
            if expected is not None:
                self.covered[kind].add(row.id)
            # an entry from before content commitments (a `commit` entry followed it) names
            # the object only
            if expected is not None and chain.content_digest(content(row)) != expected:
                self.mismatch(kind, ident, seq, label(row))
        return rows

    def check_adjudications(self, items: list) -> None:
        self._check_by_id(
            "adjudication",
            Adjudication,
            items,
            adjudication_content,
            lambda a: f"adjudication {a.id} (task version {a.task_version_id})",
        )
        self.session.expunge_all()

    def check_machine_checks(self, items: list) -> None:
        self._check_by_id(
            "machine_check",
            MachineCheck,
            items,
            check_content,
            lambda c: f"machine check {c.id} ({c.check} of task version {c.task_version_id})",
        )
        self.session.expunge_all()

    def check_proposals(self, items: list) -> None:
        def label(p) -> str:
            return f"resolution proposal {p.id} (task version {p.task_version_id})"

        rows = self._check_by_id(
            "resolution_proposal",
            ResolutionProposal,
            items,
            lambda p: {"description": p.description, "changes": p.changes},
            label,
        )
        for seq, ident, (_, action, reason) in items:
            row = rows.get(int(ident)) if ident.isdigit() else None
            if row is None:
                continue
            if str(row.status) != action:
                self.add(
                    "resolution_proposal",
                    ident,
                    STATUS,
                    seq,
                    f"its decision is {row.status}, but ledger entry {seq} recorded {action}",
                    label(row),
                )
            elif (row.reason or "") != (reason or ""):
                self.mismatch("resolution_proposal", ident, seq, label(row), "its reason")
        self.session.expunge_all()

    def check_team_mappings(self, items: list) -> None:
        versions = {
            int(i.rpartition("@v")[2]) for _, i, _ in items if i.rpartition("@v")[2].isdigit()
        }
        rows = {
            f"{m.log_name}:{m.attribute}@v{m.version}": m
            for m in queries.team_mappings_of_versions(
                session=self.session, versions=list(versions)
            )
        }
        for seq, ident, digest in items:
            mapping = rows.get(ident)
            if mapping is None:
                self.missing("team_mapping", ident, seq)
                continue
            self.report.objects_checked += 1
            actual = chain.content_digest(
                {"attribute": mapping.attribute, "teams": mapping.teams, "levels": mapping.levels}
            )
            if digest is not None and (actual != digest or mapping.content_sha256 != digest):
                self.mismatch("team_mapping", ident, seq, f"team mapping {ident}", "its teams")
        self.session.expunge_all()

    def check_event_logs(self, items: list) -> None:
        names = {i.rpartition("@")[0] for _, i, _ in items}
        rows = {
            f"{log.name}@{log.version}": log
            for log in queries.event_logs_named(session=self.session, names=sorted(names))
        }
        for seq, ident, payload in items:
            log = rows.get(ident)
            if log is None:
                self.missing("event_log", ident, seq, f"event log {ident}")
                continue
            self.report.objects_checked += 1
            recorded = (payload.get("cases"), payload.get("events"), payload.get("mapping"))
            stored = (log.n_cases, log.n_events, log.mapping)
            if chain.canonical_json(recorded) != chain.canonical_json(stored):
                self.mismatch(
                    "event_log", ident, seq, f"event log {ident}", "its cases, events or mapping"
                )
        self.session.expunge_all()

    # -- direction 2 and the rest, once the chain is read ---------------------------------

    def flush(self) -> None:
        for kind in self.buffers:
            self._flush(kind)

    def finish(self, progress) -> None:
        self.flush()
        if progress:
            progress("objects named by entries", self.report.objects_checked)
        self.check_gates()
        self.check_exports()
        self.check_uncovered_ratings()
        for kind, what in (
            ("adjudication", "adjudication"),
            ("machine_check", "machine check"),
            ("resolution_proposal", "decided resolution proposal"),
            ("team_mapping", "team mapping"),
            ("event_log", "event log"),
            ("export", "export"),
        ):
            for _, ident in self.uncovered(kind):
                self.add(
                    kind, ident, UNCOVERED, None, "no ledger entry commits to it", f"{what} {ident}"
                )
        self.check_statuses()
        if progress:
            progress("objects", self.report.objects_checked)

    def uncovered(self, kind: str):
        """(id, artifact id) of the objects of a kind that no committing entry read named."""
        if kind not in BY_ID:  # named by text, a few rows: one anti-join
            yield from queries.without_entry(session=self.session, kind=kind, up_to=self.last_seq)
            return
        covered = self.covered[kind]
        for batch in queries.object_ids(session=self.session, kind=kind):
            yield from ((i, str(i)) for i in batch if i not in covered)

    def check_uncovered_ratings(self) -> None:
        """Ratings no entry read named: queued for the gate (checked against their queued
        entry), chained while the audit read (checked against that entry), or uncovered."""
        found = list(self.uncovered("rating"))
        for start in range(0, len(found), BATCH):
            ids = [i for i, _ in found[start : start + BATCH]]
            queued = queries.queued_entries(session=self.session, rating_ids=ids)
            chained = queries.rating_commitments_after(
                session=self.session, rating_ids=ids, after=self.last_seq
            )
            ratings, scores = queries.ratings_by_ids(session=self.session, ids=ids)
            for rating_id in ids:
                rating = ratings.get(rating_id)
                if rating is None:  # deleted since the anti-join read it
                    continue
                label = f"rating {rating_id} (task version {rating.task_version_id})"
                values = scores.get(rating_id, {})
                digest = rating_digest(rating, values)
                if rating_id in queued:
                    entry, held = queued[rating_id]
                    committed = (entry.get("payload") or {}).get("content_sha256")
                    if held or committed != digest or self._packed_differs(rating, values):
                        self.add(
                            "rating",
                            rating_id,
                            HELD,
                            None,
                            "queued for the gate, but changed since its submit committed to "
                            "it"
                            + (f" (the gate holds it: {held})" if held else "")
                            + "; it is not applied",
                            label,
                        )
                    else:
                        self.report.queued += 1
                    continue
                later = chained.get(rating_id)
                if later is None:
                    self.add(
                        "rating", rating_id, UNCOVERED, None, "no ledger entry commits to it", label
                    )
                elif later[1] != digest:
                    self.mismatch("rating", str(rating_id), later[0], label)
            self.session.expunge_all()

    def check_gates(self) -> None:
        rounds = {r.name: r for r in queries.rounds(session=self.session)}
        for name, (seq, _) in self.gates.items():
            if name not in rounds:
                self.missing("review_round", name, seq, f"round {name}")
        for review_round in rounds.values():
            self.report.objects_checked += 1
            committed = self.gates.get(review_round.name)
            approval = review_round.approval or {}
            label = f"gate of round {review_round.name}"
            if committed is None:
                if approval:
                    self.add(
                        "review_round",
                        review_round.name,
                        UNCOVERED,
                        None,
                        "its gate was set with no ledger entry",
                        label,
                    )
            elif chain.content_digest(approval) != committed[1]:
                self.mismatch("review_round", review_round.name, committed[0], label)
        self.session.expunge_all()

    def check_exports(self) -> None:
        stored: dict[str, set[str]] = {}
        for export in queries.exports(session=self.session):
            stored.setdefault(export.name, set()).add(export.content_hash)
        for name, entries in self.exports.items():
            for seq, digest in entries:
                if name not in stored:
                    self.missing("export", name, seq)
                elif digest not in stored[name]:
                    self.mismatch("export", name, seq, f"export {name}", "its manifest sha256")
        for name, hashes in stored.items():
            self.report.objects_checked += len(hashes)
            committed = {digest for _, digest in self.exports.get(name, [])}
            for digest in sorted(hashes - committed) if committed else ():
                self.add(
                    "export",
                    name,
                    MISMATCH,
                    None,
                    f"its manifest sha256 {digest[:12]}... is not one any ledger entry recorded",
                    f"export {name}",
                )
        self.session.expunge_all()

    def check_statuses(self) -> None:
        """Every task version has its import entry and the status its newest decision gave
        it; every task the status of its newest version (derived, so verified, not
        trusted)."""
        for batch in queries.version_states(session=self.session):
            for version_id, external_id, number, status, task_status, newest in batch:
                self.report.objects_checked += 1
                name = f"{external_id}@v{number}"
                label = f"task version {name}"
                if version_id not in self.imported:
                    self.add("task", name, UNCOVERED, None, "no ledger entry commits to it", label)
                recorded = self.decided.get(version_id)
                if recorded is not None and recorded[1] != status:
                    self.add(
                        "task",
                        name,
                        STATUS,
                        recorded[0],
                        f"status is {status}, but ledger entry {recorded[0]} recorded "
                        f"{recorded[1]}",
                        label,
                    )
                elif recorded is None and status not in ("draft", "in_review"):
                    self.add(
                        "task",
                        name,
                        STATUS,
                        None,
                        f"status {status} was never recorded in the ledger",
                        label,
                    )
                if newest and task_status != status:
                    seq = recorded[0] if recorded else None
                    self.add(
                        "task",
                        external_id,
                        STATUS,
                        seq,
                        f"status is {task_status}, but its newest version v{number} is {status} "
                        "(a task's status is its newest version's)",
                        f"task {external_id}",
                    )


def _int_ids(audit: _Audit, kind: str, items: list) -> dict[int, str]:
    """{id: artifact id} of the entries naming a row id; an entry naming anything else
    names an object that cannot exist."""
    ids = {}
    for seq, ident, _ in items:
        if ident.isdigit():
            ids[int(ident)] = ident
        else:
            audit.missing(kind, ident, seq)
    return ids


_CHECKS: dict[str, Callable[[_Audit, list], None]] = {  # committing entries, by artifact type
    "rating": _Audit.check_ratings,
    "task": _Audit.check_versions,
    "adjudication": _Audit.check_adjudications,
    "machine_check": _Audit.check_machine_checks,
    "resolution_proposal": _Audit.check_proposals,
    "team_mapping": _Audit.check_team_mappings,
    "event_log": _Audit.check_event_logs,
}
