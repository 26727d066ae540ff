"""Coverage of the whole benchmark: several logs at once, each weighted as the lead chooses
(by its events, or equally), and per persona, so that a lead sees which persona is thin on
which log."""

from itsmreview.accounts.models import Role, User
from itsmreview.accounts.service import require_role
from itsmreview.catalog.queries import personas_and_tracks
from itsmreview.coverage import queries
from itsmreview.coverage.report import TaskFilter, coverage_by_persona
from itsmreview.errors import InvalidInput, NotFound
from itsmreview.summaries.service import lead_figures
from sqlmodel import Session

WEIGHTS = ("events", "equal")
METRICS = ("variant_coverage", "variant_coverage_collapsed", "df_coverage", "activity_coverage")


def log_weights(events: dict[str, int], weight: str) -> dict[str, float]:
    """Each log's weight: its share of all events, or an equal share.

    >>> log_weights({"a": 300, "b": 100}, "events")
    {'a': 0.75, 'b': 0.25}
    >>> log_weights({"a": 300, "b": 100}, "equal")
    {'a': 0.5, 'b': 0.5}
    """
    if weight not in WEIGHTS:
        raise InvalidInput(f"weight {weight!r} is not one of {', '.join(WEIGHTS)}")
    if weight == "equal":
        return {name: 1 / len(events) for name in events}
    total = sum(events.values())
    return {name: (n / total if total else 1 / len(events)) for name, n in events.items()}


def weighted_over(values: dict[str, float | None], weights: dict[str, float]) -> float | None:
    """The weighted mean over the logs that have the figure, their weights renormalised;
    None when none has it.

    >>> weighted_over({"a": 0.5, "b": None, "c": 1.0}, {"a": 0.2, "b": 0.5, "c": 0.3})
    0.8
    """
    present = {n: v for n, v in values.items() if v is not None}
    if not present:
        return None
    weight = sum(weights[n] for n in present)
    return round(sum(weights[n] * v for n, v in present.items()) / weight, 12)


@lead_figures
def benchmark_coverage(
    *,
    session: Session,
    actor: User,
    logs: list[str] | None = None,
    weight: str = "events",
    task_filter: TaskFilter | str = TaskFilter.all,
    track: str | None = None,
) -> dict:
    """Per log and for the benchmark (the weighted mean over the logs): variant, collapsed
    variant, DF and activity coverage; team coverage and each outcome's coverage over the
    logs that have them (weights renormalised); the same per persona, with the persona's
    tasks on each log. Leads only."""
    require_role(actor, Role.lead)
    names = logs or sorted({log.name for log in queries.list_logs(session=session)})
    if not names:
        raise NotFound("no event log imported yet")
    found = {name: queries.latest_log(session=session, name=name) for name in names}
    missing = [name for name, log in found.items() if log is None]
    if missing:
        raise NotFound(f"no log named {', '.join(map(repr, missing))}")
    weights = log_weights({name: log.n_events for name, log in found.items()}, weight)

    personas, _ = personas_and_tracks(session=session)
    reports = {  # per log, every persona's report from one reading of the log
        name: coverage_by_persona(
            session=session,
            log_name=name,
            personas=[None, *personas],
            task_filter=task_filter,
            track=track,
        )
        for name in names
    }

    def figures(persona: str | None) -> dict:
        per_log = {}
        for name in names:
            report = reports[name][persona]
            per_log[name] = {
                "tasks": report.tasks,
                **{m: getattr(report, m) for m in METRICS},
                "team_coverage": report.role_coverage.get("team"),
                "outcomes": {o: f["coverage"] for o, f in report.outcomes.items()},
            }
        total = {m: sum(weights[n] * per_log[n][m] for n in names) for m in METRICS}
        total["tasks"] = sum(per_log[n]["tasks"] for n in names)
        total["team_coverage"] = weighted_over(
            {n: per_log[n]["team_coverage"] for n in names}, weights
        )
        outcomes = sorted({o for n in names for o in per_log[n]["outcomes"]})
        total["outcomes"] = {
            o: weighted_over({n: per_log[n]["outcomes"].get(o) for n in names}, weights)
            for o in outcomes
        }
        return {"logs": per_log, "total": total}

    overall = figures(None)
    return {
        "weight": weight,
        "weights": weights,
        "task_filter": str(TaskFilter(task_filter)),
        "track": track,
        "logs": {
            name: {"events": log.n_events, "cases": log.n_cases, **overall["logs"][name]}
            for name, log in found.items()
        },
        "total": overall["total"],
        "personas": {persona: figures(persona) for persona in personas},
    }
