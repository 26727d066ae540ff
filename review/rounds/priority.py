"""Which tasks experts should rate first: those whose source variants carry the most log
weight that approved tasks do not cover yet."""

import json

from itsmreview.coverage import queries as coverage_queries
from itsmreview.coverage.report import coverage_report
from itsmreview.coverage.variants import sequence_key
from itsmreview.review.rounds import queries
from sqlmodel import Session


class UncoveredWeight:
    """Per source: the summed share of cases of its declared variants that no approved task
    covers (0 with no log or no declared variant). Each log is read once."""

    def __init__(self, session: Session):
        self.session = session
        self.logs: dict[str, tuple[dict[str, float], set[str]]] = {}

    def _log(self, name: str) -> tuple[dict[str, float], set[str]]:
        if name not in self.logs:
            log = coverage_queries.latest_log(session=self.session, name=name)
            if log is None:
                self.logs[name] = ({}, set())
            else:
                frame = coverage_queries.variants_frame(session=self.session, log_id=log.id)
                report, _ = coverage_report(
                    session=self.session, log_name=name, task_filter="approved"
                )
                self.logs[name] = (
                    dict(zip(frame["sequence_key"], frame["share"], strict=True)),
                    report.declared_keys,
                )
        return self.logs[name]

    def __call__(self, source: dict | None) -> float:
        source = source or {}
        name = source.get("log")
        if not name or not source.get("variants"):
            return 0.0
        shares, approved = self._log(name)
        keys = {sequence_key(v) for v in source["variants"]}
        return float(sum(shares.get(k, 0.0) for k in keys if k not in approved))


def set_priorities(*, session: Session, round_id: int) -> int:
    """Give every task of the round its uncovered weight as priority, reading the tasks'
    sources in batches; returns how many tasks got a non-zero priority."""
    weight = UncoveredWeight(session)
    by_source: dict[str | None, float] = {}
    priorities = []
    for round_task_id, source in queries.round_task_sources(session=session, round_id=round_id):
        if source not in by_source:
            by_source[source] = weight(json.loads(source) if source else None)
        if by_source[source]:
            priorities.append((round_task_id, by_source[source]))
    queries.set_round_task_priorities(session=session, priorities=priorities)
    return len(priorities)
