"""Realism services: a log's own behaviour profile (the newest version of a log's events,
read through coverage, handed to realism.metrics with the log's vocabulary), and simulated
actors against it: transcripts mapped to events by a spec, compared with the real cases."""

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
from itsmreview.accounts.models import Role
from itsmreview.accounts.service import require_role
from itsmreview.coverage.eventlog import ROLE_PREFIX
from itsmreview.coverage.service import EVENTS_FILE, latest_log, list_logs
from itsmreview.db import utcnow
from itsmreview.errors import Conflict, InvalidInput, ItsmReviewError, NotFound
from itsmreview.ledger.service import append_entry
from itsmreview.realism import conformance, metrics, queries
from itsmreview.realism.mapping import MappingSpec, map_messages, simulator_name
from itsmreview.realism.models import TEXT_TURN, MappedTranscript, TurnLabel
from itsmreview.realism.vocabulary import Vocabulary, vocabulary_for
from itsmreview.storage import get_storage
from sqlmodel import Session

CASES_FILE = "cases.parquet"
# counters some logs keep per case (BPI 2014's `# Reassignments`, UCI's `reassignment_count`
# and `reopen_count`), beside the computed figure
COUNTERS = {"reassignments_per_case": "attr:reassignments", "reopens_per_case": "attr:reopens"}


def _log_events(log, vocab: Vocabulary) -> pd.DataFrame:
    """The log's events as case_id, activity, timestamp and (with a group attribute) group."""
    storage = get_storage()
    if not log.events_path or not storage.exists(log.events_path, EVENTS_FILE):
        raise NotFound(
            f"the stored events of log {log.name!r} are missing ({log.events_path} in the "
            f"storage {storage.location()}): every replica must share the storage; else import "
            "the log again"
        )
    columns = ["case_id", "activity", "timestamp"]
    if vocab.group:
        columns.append(ROLE_PREFIX + vocab.group)
    table = storage.read_table(log.events_path, EVENTS_FILE, columns=columns).to_pandas()
    return table.rename(columns={ROLE_PREFIX + vocab.group: "group"} if vocab.group else {})


MOST_FREQUENT_SHOWN = 8


def parse_role(text: str) -> tuple[str, str]:
    """`ATTRIBUTE=VALUE` as a pair; ValueError saying the form.

    >>> parse_role("ST Level=L2"), parse_role(" assignment_group = Group 5 ")
    (('ST Level', 'L2'), ('assignment_group', 'Group 5'))
    """
    attribute, equals, value = text.partition("=")
    if not equals or not attribute.strip() or not value.strip():
        raise ValueError(f"{text!r} is not ATTRIBUTE=VALUE, e.g. 'ST Level=L2'")
    return attribute.strip(), value.strip()


def role_values(*, session: Session, log: str, actor=None, shown: int = 30) -> dict:
    """Per role attribute of the newest version of log `log`, its `shown` most frequent
    values as (value, cases it takes part in), most cases first: the choices of `role`.
    Raises NotFound for an unknown log. With `actor`, leads only."""
    if actor is not None:
        require_role(actor, Role.lead)
    found = latest_log(session=session, name=log)
    if found is None:
        raise NotFound(f"no log named {log!r}; known logs: {_known_logs(session)}")
    roles = list((found.mapping or {}).get("roles") or [])
    if not roles:
        return {}
    columns = ["case_id", *(ROLE_PREFIX + role for role in roles)]
    frame = get_storage().read_table(found.events_path, EVENTS_FILE, columns=columns).to_pandas()
    out = {}
    for role in roles:
        pairs = frame[["case_id", ROLE_PREFIX + role]].dropna().drop_duplicates()
        counts = pairs[ROLE_PREFIX + role].astype(str).value_counts().head(shown)
        out[role] = [(str(value), int(n)) for value, n in counts.items()]
    return out


def _cases_with_role(log, events: pd.DataFrame, role: tuple[str, str]) -> pd.DataFrame:
    """The events of the cases in which role attribute `role[0]` takes the value `role[1]` on
    some event (a team, a level that takes part). Raises InvalidInput for an attribute the
    log does not have, or a value fewer than two cases have (naming its frequent values)."""
    attribute, value = role
    roles = list((log.mapping or {}).get("roles") or [])
    if attribute not in roles:
        shown = ", ".join(roles) or "none"
        raise InvalidInput(
            f"--role: {attribute!r} is not a role attribute of log {log.name!r} (it has: {shown})"
        )
    column = ROLE_PREFIX + attribute
    table = get_storage().read_table(log.events_path, EVENTS_FILE, columns=["case_id", column])
    frame = table.to_pandas()
    values = frame[column].astype("string")
    chosen = set(frame.loc[values == value, "case_id"].astype(str))
    if len(chosen) < 2:
        per_value = frame.assign(value=values).drop_duplicates(["case_id", "value"])
        frequent = per_value["value"].value_counts().head(MOST_FREQUENT_SHOWN)
        shown = ", ".join(f"{name} ({n:,} cases)" for name, n in frequent.items())
        raise InvalidInput(
            f"--role: {len(chosen)} case(s) of log {log.name!r} have {attribute} = {value!r}, "
            f"fewer than two; its most frequent values: {shown}"
        )
    return events[events["case_id"].astype(str).isin(chosen)]


def _role_dict(role: tuple[str, str] | None) -> dict | None:
    return None if role is None else {"attribute": role[0], "value": role[1]}


def _counter_checks(log, events: pd.DataFrame, vocab: Vocabulary) -> dict:
    """Each counter the log keeps per case (COUNTERS), its mean beside the computed one, and
    the share of cases where the two agree; {} for a log without counters. Reassignments need
    the log's group attribute, reopenings its reopen activity or status."""
    storage = get_storage()
    if not storage.exists(log.events_path, CASES_FILE):
        return {}
    names = storage.read_schema(log.events_path, CASES_FILE).names
    frame = None
    out = {}
    for metric, column in COUNTERS.items():
        if column not in names:
            continue
        if metric == "reassignments_per_case" and "group" not in events:
            continue
        if metric == "reopens_per_case" and not (vocab.reopen or vocab.reopen_from):
            continue
        stored = storage.read_table(log.events_path, CASES_FILE, columns=["case_id", column])
        kept = stored.to_pandas().set_index("case_id")[column].dropna().astype(float)
        kept.index = kept.index.astype(str)
        frame = metrics.ordered(events) if frame is None else frame
        kept = kept[kept.index.isin(set(frame["case_id"].astype(str)))]
        cases = pd.Index(kept.index)
        if metric == "reassignments_per_case":
            computed = metrics.reassignments(frame, cases)
        else:
            computed = metrics.reopenings(
                frame, cases, vocab.reopen, vocab.reopen_from, vocab.close
            )
        computed = computed.astype(float)
        out[metric] = {
            "attribute": column.removeprefix("attr:"),
            "cases": len(kept),
            "log_mean": round(float(kept.mean()), metrics.DIGITS),
            "computed_mean": round(float(computed.mean()), metrics.DIGITS),
            "equal_share": round(float((computed == kept).mean()), metrics.DIGITS),
        }
    return out


def log_profile(
    *,
    session: Session,
    name: str,
    group: str | None = None,
    wait_user: tuple[str, ...] | None = None,
    cancel: tuple[str, ...] | None = None,
    reopen: tuple[str, ...] | None = None,
    close: tuple[str, ...] | None = None,
    role: tuple[str, str] | None = None,
    seed: int = metrics.SEED,
    splits: int = metrics.SPLITS,
    resamples: int = metrics.RESAMPLES,
) -> dict:
    """The behaviour profile of the newest version of log `name` (realism.metrics.profile)
    with the log's name, version and vocabulary, and its own counters checked where it keeps
    them. `group`, `wait_user`, `cancel` and `reopen` replace the names its preset gives.
    With `role` (attribute, value), only the cases in which that role takes part.
    Raises NotFound for an unknown log (naming the known ones), ValueError for a group the log
    does not have or a log of fewer than two cases."""
    log = latest_log(session=session, name=name)
    if log is None:
        known = sorted({found.name for found in list_logs(session=session)})
        shown = ", ".join(known) if known else "none imported yet (`itsmreview log import`)"
        raise NotFound(f"no log named {name!r}; known logs: {shown}")
    roles = list((log.mapping or {}).get("roles") or [])
    vocab = vocabulary_for(
        log.preset,
        roles,
        group=group,
        wait_user=wait_user,
        cancel=cancel,
        reopen=reopen,
        close=close,
    )
    events = _log_events(log, vocab)
    if role is not None:
        events = _cases_with_role(log, events, role)
    found = metrics.profile(
        events,
        wait_user=vocab.wait_user,
        cancel=vocab.cancel,
        reopen=vocab.reopen,
        close=vocab.close,
        reopen_from=vocab.reopen_from,
        seed=seed,
        splits=splits,
        resamples=resamples,
    )
    present = set(found["activity_distribution"]["events"])
    named = vocab.wait_user + vocab.cancel + vocab.reopen + vocab.close
    return {
        "log": log.name,
        "version": log.version,
        "role": _role_dict(role),
        "vocabulary": vocab.as_dict() | {"absent": sorted(set(named) - present)},
        **found,
        "counter_checks": _counter_checks(log, events, vocab),
    }


# Simulated actors against the log ---------------------------------------------------------


@dataclass(frozen=True)
class MapResult:
    spec: str
    version: int
    sha256: str
    transcripts: int
    events: int
    units: int
    unmapped: int
    simulators: dict[str, int]


def transcript_format(transcript) -> str:
    """The format a transcript was imported from (native when it was written natively)."""
    return str((transcript.extra or {}).get("original_format") or "native")


def _known_logs(session: Session) -> str:
    known = sorted({found.name for found in list_logs(session=session)})
    return ", ".join(known) if known else "none imported yet (`itsmreview log import`)"


def map_transcripts(
    *,
    session: Session,
    actor,
    spec: MappingSpec,
    simulator: str | None = None,
    external_ids: list[str] | None = None,
    report: Callable[[str, float], None] | None = None,
) -> MapResult:
    """Map the transcripts of the newest version of every task (of those named) with `spec`
    and store the events, replacing earlier mappings under the same spec (of every
    transcript, or of the named tasks' transcripts); one ledger entry
    records the spec itself and what it made. `simulator` names the simulator of transcripts
    that name none. Leads only. Raises NotFound for a spec's log that is not imported or when
    there is no transcript to map."""
    require_role(actor, Role.lead)
    if latest_log(session=session, name=spec.log) is None:
        raise NotFound(
            f"mapping spec {spec.spec!r} names log {spec.log!r}, which is not imported; "
            f"known logs: {_known_logs(session)}"
        )
    found = queries.transcripts_of_latest(session=session, external_ids=external_ids)
    found = [(t, task) for t, task in found if spec.maps(transcript_format(t))]
    if not found:
        which = "the named tasks have" if external_ids else "the catalog has"
        kinds = f" of format {', '.join(spec.formats)}" if spec.formats else ""
        raise NotFound(f"no transcript{kinds} to map: {which} none (import tasks with transcripts)")
    digest, rows, counts = spec.digest(), [], Counter()
    for index, (transcript, _) in enumerate(found):
        mapped = map_messages(transcript.messages, spec)
        name = simulator_name(transcript.simulator, fallback=simulator or "unnamed")
        counts[name] += 1
        rows.append(
            MappedTranscript(
                transcript_id=transcript.id,
                spec=spec.spec,
                spec_version=spec.version,
                spec_sha256=digest,
                log=spec.log,
                simulator=name,
                events=mapped.events,
                units=mapped.units,
                unmapped=mapped.unmapped,
            )
        )
        if report and index % 200 == 0:
            report(f"mapping transcript {index + 1:,} of {len(found):,}", index / len(found))
    confirmed = [
        label
        for label in queries.labels_of(
            session=session, spec=spec.spec, transcript_ids=[row.transcript_id for row in rows]
        )
        if label.state == "confirmed"
    ]
    by_transcript = {row.transcript_id: row for row in rows}
    for label in sorted(confirmed, key=lambda found: (found.turn, found.call)):
        _with_label(by_transcript[label.transcript_id], label, spec.start_group)
    queries.replace_mapped(session=session, spec=spec.spec, rows=rows, everything=not external_ids)
    result = MapResult(
        spec=spec.spec,
        version=spec.version,
        sha256=digest,
        transcripts=len(rows),
        events=sum(len(row.events) for row in rows),
        units=sum(row.units for row in rows),
        unmapped=sum(len(row.unmapped) for row in rows),
        simulators=dict(sorted(counts.items())),
    )
    append_entry(
        session=session,
        artifact_type="realism_mapping",
        artifact_id=spec.spec,
        action="map",
        source_kind="expert",
        reference=f"mapping spec {spec.spec} v{spec.version} sha256:{digest}",
        actor_id=actor.id,
        payload={
            "spec": spec.model_dump(mode="json"),
            "spec_sha256": digest,
            "transcripts": result.transcripts,
            "events": result.events,
            "units": result.units,
            "unmapped_units": result.unmapped,
            "simulators": result.simulators,
        },
    )
    if report:
        report("done", 1.0)
    return result


def simulators(*, session: Session, actor=None) -> list[dict]:
    """Each simulator with mapped transcripts, per spec: its log and how many transcripts.
    With `actor`, leads only."""
    if actor is not None:
        require_role(actor, Role.lead)
    return [
        {"simulator": name, "spec": spec, "spec_version": version, "log": log, "transcripts": n}
        for name, spec, version, log, n in queries.simulator_summary(session=session)
    ]


def _chosen_spec(session: Session, simulator: str, spec: str | None) -> dict:
    known = simulators(session=session)
    mine = [row for row in known if row["simulator"] == simulator]
    if not mine:
        shown = ", ".join(sorted({row["simulator"] for row in known})) or (
            "none yet (`itsmreview realism map --spec FILE`)"
        )
        raise NotFound(f"no mapped transcripts of simulator {simulator!r}; mapped: {shown}")
    if spec is None and len(mine) > 1:
        names = ", ".join(row["spec"] for row in mine)
        raise InvalidInput(f"simulator {simulator!r} is mapped by specs {names}: choose one")
    chosen = [row for row in mine if spec is None or row["spec"] == spec]
    if not chosen:
        names = ", ".join(row["spec"] for row in mine)
        raise NotFound(f"simulator {simulator!r} is not mapped by spec {spec!r}; by: {names}")
    return chosen[0]


def _simulated_events(mapped: list[tuple]) -> tuple[pd.DataFrame, int]:
    """The mapped events as a log's frame (one case per transcript, events one second apart
    in their order) and the number of transcripts that gave no event."""
    base, rows, empty = pd.Timestamp("2000-01-01", tz="UTC"), [], 0
    for row, external_id, _, task, *_ in mapped:
        if not row.events:
            empty += 1
        case = f"{task}/{external_id}#{row.transcript_id}"
        for position, event in enumerate(row.events):
            rows.append(
                (case, event["activity"], base + pd.Timedelta(seconds=position), event["group"])
            )
    frame = pd.DataFrame(rows, columns=["case_id", "activity", "timestamp", "group"])
    if frame["group"].isna().all():
        frame = frame.drop(columns="group")
    return frame, empty


def _real_scope(log, events: pd.DataFrame, keys: list[str]) -> tuple[pd.DataFrame, dict]:
    """The real cases to compare with: those of the variants the tasks declare (when two or
    more cases have them), else the whole log."""
    whole = {"kind": "whole log", "declared_variants": len(keys)}
    storage = get_storage()
    if not keys or not storage.exists(log.events_path, CASES_FILE):
        return events, whole | {"reason": "the tasks declare no variant of this log"}
    cases = storage.read_table(log.events_path, CASES_FILE, columns=["case_id", "variant_key"])
    cases = cases.to_pandas()
    chosen = cases.loc[cases["variant_key"].astype(str).isin(keys), "case_id"].astype(str)
    if chosen.nunique() < 2:
        reason = "fewer than two cases of the log follow the variants the tasks declare"
        return events, whole | {"reason": reason}
    kept = events[events["case_id"].astype(str).isin(set(chosen))]
    matched = cases["variant_key"].astype(str)
    matched = int(matched[matched.isin(keys)].nunique())
    scope = {"kind": "declared variants", "declared_variants": len(keys)}
    return kept, scope | {"matched_variants": matched, "cases": int(chosen.nunique())}


def measure_simulated(
    real: pd.DataFrame,
    simulated: pd.DataFrame,
    *,
    vocab: Vocabulary,
    log_activities=None,
    seed: int = metrics.SEED,
    splits: int = metrics.SPLITS,
    resamples: int = metrics.RESAMPLES,
) -> dict:
    """realism.metrics.compare of simulated cases against real ones, fitness included: a
    model discovered from the real cases, a seeded sample of them and every simulated case
    replayed on it (realism.conformance)."""
    model = conformance.discover(real)
    real_sample = conformance.sample_cases(conformance.sequences(real), seed=seed)
    fitness = (
        conformance.trace_fitness(model, real_sample),
        conformance.trace_fitness(model, conformance.sequences(simulated)),
    )
    return metrics.compare(
        real,
        simulated,
        wait_user=vocab.wait_user,
        cancel=vocab.cancel,
        reopen=vocab.reopen,
        close=vocab.close,
        reopen_from=vocab.reopen_from,
        seed=seed,
        splits=splits,
        resamples=resamples,
        log_activities=log_activities,
        fitness=fitness,
    )


def simulator_report(
    *,
    session: Session,
    simulator: str,
    actor=None,
    spec: str | None = None,
    log: str | None = None,
    persona: str | None = None,
    role: tuple[str, str] | None = None,
    seed: int = metrics.SEED,
    splits: int = metrics.SPLITS,
    resamples: int = metrics.RESAMPLES,
) -> dict:
    """A simulator's mapped transcripts against the real cases of its log (the spec's, or
    `log`): realism.metrics.compare, with what was compared. Real cases are those of the
    variants the mapped tasks declare, else the whole log. Raises NotFound for an unknown
    simulator, spec or log; InvalidInput when a simulator has several specs and none is named.
    With `persona`, only the transcripts of that persona's tasks (and the variants those
    declare); `personas` lists them all. With `role` (attribute, value), only the real cases
    in which that role of the log takes part (an L2 persona beside the log's L2 cases). With
    `actor`, leads only."""
    if actor is not None:
        require_role(actor, Role.lead)
    chosen = _chosen_spec(session, simulator, spec)
    name = log or chosen["log"]
    found_log = latest_log(session=session, name=name)
    if found_log is None:
        raise NotFound(f"no log named {name!r}; known logs: {_known_logs(session)}")
    roles = list((found_log.mapping or {}).get("roles") or [])
    vocab = vocabulary_for(found_log.preset, roles)
    mapped = queries.mapped_of(session=session, simulator=simulator, spec=chosen["spec"])
    personas = sorted({row[4] for row in mapped})
    if persona is not None:
        mapped = [row for row in mapped if row[4] == persona]
        if not mapped:
            shown = ", ".join(personas)
            raise NotFound(
                f"no mapped transcript of {simulator!r} belongs to a task of persona "
                f"{persona!r}; its personas: {shown}"
            )
    simulated, empty = _simulated_events(mapped)
    if simulated.empty:
        raise InvalidInput(
            f"the {len(mapped)} mapped transcript(s) of {simulator!r} gave no event: "
            f"the rules of spec {chosen['spec']!r} match none of their turns"
        )
    versions = sorted({row[2] for row in mapped})
    keys = queries.declared_sequence_keys(session=session, version_ids=versions)
    events = _log_events(found_log, vocab)
    recorded = set(events["activity"].astype(str).unique())
    if role is not None:
        events = _cases_with_role(found_log, events, role)
    real, scope = _real_scope(found_log, events, keys)
    if role is not None:
        scope = scope | {"role_cases": int(events["case_id"].nunique())}
    compared = measure_simulated(
        real,
        simulated,
        vocab=vocab,
        log_activities=recorded,
        seed=seed,
        splits=splits,
        resamples=resamples,
    )
    first = mapped[0][0]
    units = sum(row.units for row, *_ in mapped)
    unmapped = sum(len(row.unmapped) for row, *_ in mapped)
    return {
        "simulator": simulator,
        "persona": persona,
        "personas": personas,
        "role": _role_dict(role),
        "spec": {"name": first.spec, "version": first.spec_version, "sha256": first.spec_sha256},
        "log": found_log.name,
        "log_version": found_log.version,
        "vocabulary": vocab.as_dict(),
        "real_scope": scope,
        "transcripts": len(mapped),
        "empty_transcripts": empty,
        "units": units,
        "unmapped_units": unmapped,
        "mapped_share": round(1 - unmapped / units, metrics.DIGITS) if units else 0.0,
        **compared,
    }


def mapped_sequences(
    *, session: Session, actor, simulator: str, spec: str, limit: int = 200
) -> list[dict]:
    """The first `limit` mapped transcripts of a simulator under a spec: the task, the
    transcript, its events (with the rule that made each) and its turns no rule matched."""
    require_role(actor, Role.lead)
    rows = queries.mapped_of(session=session, simulator=simulator, spec=spec, limit=limit)
    return [
        {
            "task": task_id,
            "transcript": external_id,
            "transcript_id": row.transcript_id,
            "events": row.events,
            "units": row.units,
            "unmapped": row.unmapped,
        }
        for row, external_id, _, task_id, _ in rows
    ]


def transcript_messages(*, session: Session, actor, transcript_id: int) -> list[dict]:
    """A transcript's messages, shown beside its mapped events. Leads only."""
    require_role(actor, Role.lead)
    found = queries.transcript_messages(session=session, transcript_id=transcript_id)
    if found is None:
        raise NotFound(f"no transcript {transcript_id}")
    return found


# The release gate: every figure inside its floor, or a lead's waiver -------------------


def departures(report: dict) -> list[str]:
    """The figures of a simulator report beyond their noise floor."""
    found = [
        name
        for name, item in report["metrics"].items()
        if item.get("available") and item["verdict"] == "beyond"
    ]
    found += [
        name
        for name in ("activity_distribution", "directly_follows")
        if report[name]["verdict"] == "beyond"
    ]
    return found


def _waiver(session: Session, simulator: str, spec: dict) -> dict | None:
    """The newest waiver of `simulator` given for this very mapping (spec and digest)."""
    for waiver in reversed(queries.waivers_of(session=session, simulator=simulator)):
        payload = waiver["payload"]
        if payload.get("spec") == spec["name"] and payload.get("spec_sha256") == spec["sha256"]:
            return {"ledger_seq": waiver["seq"], **payload}
    return None


def waive(*, session: Session, actor, simulator: str, reason: str, spec: str | None = None) -> dict:
    """A lead's waiver: `simulator`'s departures from its log (under its current mapping)
    do not hold back a release that requires realism. Recorded in the ledger with the reason
    and the figures waived; a new mapping (another spec digest) needs a new waiver. Raises
    InvalidInput for an empty reason or a simulator with nothing beyond its floor."""
    require_role(actor, Role.lead)
    reason = (reason or "").strip()
    if not reason:
        raise InvalidInput("a waiver needs a reason (--reason TEXT): the ledger keeps it")
    if len(reason) > 4000:
        raise InvalidInput("a waiver's reason is at most 4,000 characters")
    report = simulator_report(session=session, simulator=simulator, spec=spec)
    beyond = departures(report)
    if not beyond:
        raise InvalidInput(
            f"simulator {simulator!r} has no figure beyond its floor: nothing to waive"
        )
    payload = {
        "spec": report["spec"]["name"],
        "spec_sha256": report["spec"]["sha256"],
        "log": report["log"],
        "log_version": report["log_version"],
        "beyond": beyond,
        "reason": reason,
    }
    append_entry(
        session=session,
        artifact_type=queries.WAIVER,
        artifact_id=simulator,
        action="waive",
        source_kind="expert",
        reference=f"waiver of {len(beyond)} figure(s) beyond the noise floor",
        actor_id=actor.id,
        payload=payload,
    )
    return payload


def release_check(*, session: Session, version_ids: list[int]) -> list[dict]:
    """For each simulator (and spec) that wrote transcripts of the given task versions: its
    report (as `realism report --simulator` gives it, over all its mapped transcripts), the
    figures beyond the floor, and the waiver that covers them, if any."""
    out = []
    for simulator, spec in queries.simulators_of_versions(session=session, version_ids=version_ids):
        try:
            report = simulator_report(session=session, simulator=simulator, spec=spec)
        except (ItsmReviewError, ValueError) as exc:  # the log's files gone, too few cases...
            found = {"simulator": simulator, "spec": spec, "beyond": [], "waiver": None}
            out.append(found | {"cleared": False, "report": None, "error": str(exc)})
            continue
        beyond = departures(report)
        waiver = _waiver(session, simulator, report["spec"]) if beyond else None
        out.append(
            {
                "simulator": simulator,
                "spec": spec,
                "beyond": beyond,
                "waiver": waiver,
                "cleared": not beyond or waiver is not None,
                "report": report,
            }
        )
    return out


# Model labels for turns no rule matched, confirmed by experts ------------------------------

LABEL_ARTIFACT = "turn_label"
NO_EVENT = "no event"
CONTEXT_TURNS = 4  # messages before the turn shown to the model and to the expert


def _unit_of(messages: list[dict], turn: int, call: int | None) -> dict:
    message = messages[turn] if 0 <= turn < len(messages) else {}
    shown = {
        "role": message.get("role", ""),
        "actor": message.get("actor", ""),
        "text": str(message.get("content") or "")[:2000],
    }
    if call is not None:
        calls = message.get("tool_calls") or []
        found = calls[call] if 0 <= call < len(calls) else {}
        shown["tool"] = {"name": found.get("name"), "arguments": found.get("arguments") or {}}
    context = []
    for earlier in messages[max(0, turn - CONTEXT_TURNS) : max(0, turn)]:
        if earlier.get("role") in ("user", "agent", "colleague"):
            context.append(
                {"role": earlier.get("role"), "text": str(earlier.get("content") or "")[:600]}
            )
    return shown | {"context": context}


def units_to_label(*, session: Session, actor, spec: str, limit: int = 50) -> list[dict]:
    """Up to `limit` turns no rule of `spec` matched and no label covers yet, each with what
    the model is shown: the turn (role, actor, text, the call) and the messages before it.
    Leads only."""
    require_role(actor, Role.lead)
    found = []
    pending = queries.with_unmapped(session=session, spec=spec)
    labelled = {  # one read for every transcript, not one each
        (label.transcript_id, label.turn, label.call)
        for label in queries.labels_of(
            session=session, spec=spec, transcript_ids=[row.transcript_id for row, _ in pending]
        )
    }
    for row, messages in pending:
        for turn, call in row.unmapped:
            key = (row.transcript_id, turn, TEXT_TURN if call is None else call)
            if key in labelled:
                continue
            found.append(
                {
                    "transcript_id": row.transcript_id,
                    "turn": turn,
                    "call": call,
                    "log": row.log,
                    **_unit_of(messages, turn, call),
                }
            )
            if len(found) >= limit:
                return found
    return found


def log_activities(*, session: Session, name: str) -> list[str]:
    """The activities of the newest version of log `name`, most frequent first."""
    log = latest_log(session=session, name=name)
    if log is None:
        raise NotFound(f"no log named {name!r}; known logs: {_known_logs(session)}")
    return queries.activity_names(session=session, log_id=log.id)


def propose_label(
    *,
    session: Session,
    actor,
    spec: str,
    unit: dict,
    label: str | None,
    reason: str,
    model: str,
    prompt_sha256: str,
) -> TurnLabel:
    """Store a model's label for a unit (from units_to_label), proposed until an expert
    decides; the ledger records it as generated. Leads only (they start the labelling)."""
    require_role(actor, Role.lead)
    row = TurnLabel(
        transcript_id=unit["transcript_id"],
        spec=spec,
        turn=unit["turn"],
        call=TEXT_TURN if unit["call"] is None else unit["call"],
        label=label,
        reason=reason[:2000],
        model=model[:128],
        prompt_sha256=prompt_sha256,
    )
    session.add(row)
    session.flush()
    append_entry(
        session=session,
        artifact_type=LABEL_ARTIFACT,
        artifact_id=str(row.id),
        action="propose",
        source_kind="system",
        actor_id=actor.id,
        payload={
            "spec": spec,
            "transcript_id": row.transcript_id,
            "turn": row.turn,
            "call": row.call,
            "label": label,
            "generated_by": {"model": row.model, "prompt_sha256": prompt_sha256},
        },
    )
    return row


def _with_label(mapped: MappedTranscript, label: TurnLabel, start_group) -> None:
    """Put a confirmed label into a mapping: the unit leaves `unmapped`; a label that names
    an activity becomes an event in turn order, in the group the case is in at that turn."""
    call = None if label.call == TEXT_TURN else label.call
    if [label.turn, call] not in mapped.unmapped:
        return  # a rule covers the turn now (the spec changed): the rule decides
    mapped.unmapped = [u for u in mapped.unmapped if u != [label.turn, call]]
    if label.label is None:
        return
    events = list(mapped.events)
    at = sum(
        1
        for e in events
        if (e["turn"], e["call"] if e["call"] is not None else -1) < (label.turn, label.call)
    )
    group = events[at - 1]["group"] if at else start_group
    events.insert(
        at,
        {
            "turn": label.turn,
            "call": call,
            "activity": label.label,
            "group": group,
            "rule": f"model label #{label.id}, confirmed",
        },
    )
    mapped.events = events


def decide_label(*, session: Session, actor, label_id: int, accept: bool) -> TurnLabel:
    """An expert's (or lead's) decision on a proposed label. Confirmed, it counts: the turn
    leaves the unmatched ones and, naming an activity, joins the mapped events. Raises
    NotFound for an unknown label, Conflict for one decided already."""
    user = require_role(actor, Role.expert, Role.lead)
    label = session.get(TurnLabel, label_id)
    if label is None:
        raise NotFound(f"no turn label {label_id}")
    state = "confirmed" if accept else "rejected"
    if label.state != "proposed" or not queries.settle_label(
        session=session, label_id=label.id, state=state, user_id=user.id, at=utcnow()
    ):
        session.refresh(label)
        raise Conflict(f"turn label {label_id} was {label.state} already")
    session.refresh(label)
    if accept:
        mapped = queries.mapped_row(
            session=session, transcript_id=label.transcript_id, spec=label.spec
        )
        if mapped is not None:
            start = mapped.events[0]["group"] if mapped.events else None
            _with_label(mapped, label, start)
            session.add(mapped)
    session.flush()
    append_entry(
        session=session,
        artifact_type=LABEL_ARTIFACT,
        artifact_id=str(label.id),
        action="confirm" if accept else "reject",
        source_kind="expert",
        actor_id=user.id,
        payload={"spec": label.spec, "label": label.label, "turn": label.turn},
    )
    return label


def labels_to_confirm(*, session: Session, actor, limit: int = 50) -> list[dict]:
    """Proposed labels, oldest first, with the turn and its context as the model saw them."""
    require_role(actor, Role.expert, Role.lead)
    out = []
    for label, transcript, task, messages in queries.labels_with_context(
        session=session, state="proposed", limit=limit
    ):
        call = None if label.call == TEXT_TURN else label.call
        out.append(
            {
                "id": label.id,
                "task": task,
                "transcript": transcript,
                "spec": label.spec,
                "turn": label.turn,
                "label": label.label or NO_EVENT,
                "reason": label.reason,
                "model": label.model,
                **_unit_of(messages, label.turn, call),
            }
        )
    return out
