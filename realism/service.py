"""A log's own behaviour profile (service layer): reads the newest version of a log's events
through coverage and hands them to realism.metrics, with the log's vocabulary."""

import pandas as pd
from itsmreview.coverage.eventlog import ROLE_PREFIX
from itsmreview.coverage.service import EVENTS_FILE, latest_log, list_logs
from itsmreview.errors import NotFound
from itsmreview.realism import metrics
from itsmreview.realism.vocabulary import Vocabulary, vocabulary_for
from itsmreview.storage import get_storage
from sqlmodel import Session

CASES_FILE = "cases.parquet"
# counters some logs keep per case (BPI 2014's `# Reassignments`), beside the computed figure
COUNTERS = {"reassignments_per_case": "attr:reassignments"}


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


def _counter_checks(log, events: pd.DataFrame) -> dict:
    """Each counter the log keeps per case (COUNTERS), its mean beside the computed one, and
    the share of cases where the two agree; {} for a log without counters or groups."""
    storage = get_storage()
    if "group" not in events or not storage.exists(log.events_path, CASES_FILE):
        return {}
    names = storage.read_schema(log.events_path, CASES_FILE).names
    out = {}
    for metric, column in COUNTERS.items():
        if column not in names:
            continue
        stored = storage.read_table(log.events_path, CASES_FILE, columns=["case_id", column])
        kept = stored.to_pandas().set_index("case_id")[column].dropna().astype(float)
        kept.index = kept.index.astype(str)
        frame = metrics.ordered(events)
        computed = metrics.reassignments(frame, pd.Index(kept.index)).astype(float)
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
    seed: int = metrics.SEED,
    splits: int = metrics.SPLITS,
    resamples: int = metrics.RESAMPLES,
) -> dict:
    """The behaviour profile of the newest version of log `name` (realism.metrics.profile)
    with the log's name, version and vocabulary, and its own counters checked where it keeps
    them. `group`, `wait_user`, `cancel` and `reopen` replace the names its preset gives.
    Raises NotFound for an unknown log (naming the known ones), ValueError for a group the log
    does not have or a log of fewer than two cases."""
    log = latest_log(session=session, name=name)
    if log is None:
        known = sorted({found.name for found in list_logs(session=session)})
        shown = ", ".join(known) if known else "none imported yet (`itsmreview log import`)"
        raise NotFound(f"no log named {name!r}; known logs: {shown}")
    roles = list((log.mapping or {}).get("roles") or [])
    vocab = vocabulary_for(
        log.preset, roles, group=group, wait_user=wait_user, cancel=cancel, reopen=reopen
    )
    events = _log_events(log, vocab)
    found = metrics.profile(
        events,
        wait_user=vocab.wait_user,
        cancel=vocab.cancel,
        reopen=vocab.reopen,
        seed=seed,
        splits=splits,
        resamples=resamples,
    )
    present = set(found["activity_distribution"]["events"])
    named = vocab.wait_user + vocab.cancel + vocab.reopen
    return {
        "log": log.name,
        "version": log.version,
        "vocabulary": vocab.as_dict() | {"absent": sorted(set(named) - present)},
        **found,
        "counter_checks": _counter_checks(log, events),
    }
