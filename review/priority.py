"""Which tasks experts should rate first: those whose source variants carry the most log
weight that approved tasks do not cover yet."""

from itsmreview.catalog.models import TaskVersion
from itsmreview.coverage import queries as coverage_queries
from itsmreview.coverage.report import coverage_report
from itsmreview.coverage.variants import sequence_key
from sqlmodel import Session


def uncovered_weight(*, session: Session, task_version_ids: list[int]) -> dict[int, float]:
    """Per task version: the summed share of cases of its declared variants that no approved
    task covers (0 for tasks with no log or no declared variant)."""
    cache: dict[str, tuple[dict[str, float], set[str]]] = {}
    out = {}
    for version_id in task_version_ids:
        version = session.get(TaskVersion, version_id)
        source = version.source or {}
        name = source.get("log")
        if not name or not source.get("variants"):
            out[version_id] = 0.0
            continue
        if name not in cache:
            log = coverage_queries.latest_log(session=session, name=name)
            if log is None:
                cache[name] = ({}, set())
            else:
                frame = coverage_queries.variants_frame(session=session, log_id=log.id)
                report, _ = coverage_report(session=session, log_name=name, task_filter="approved")
                cache[name] = (
                    dict(zip(frame["sequence_key"], frame["share"], strict=True)),
                    report.declared_keys,
                )
        shares, approved = cache[name]
        keys = {sequence_key(v) for v in source["variants"]}
        out[version_id] = float(sum(shares.get(k, 0.0) for k in keys if k not in approved))
    return out
