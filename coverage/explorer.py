"""One variant in detail: frequency, durations, roles and the timelines of real cases."""

from dataclasses import dataclass, field

import pandas as pd
from itsmreview.coverage import queries
from itsmreview.coverage import samples as variant_samples
from itsmreview.coverage.eventlog import ROLE_PREFIX
from itsmreview.coverage.friction import friction
from itsmreview.coverage.models import VariantLevel
from itsmreview.coverage.variants import sequence_key
from itsmreview.errors import NotFound
from itsmreview.storage import get_storage
from sqlmodel import Session

EXAMPLE_CASES = 5


@dataclass
class VariantDetail:
    log_name: str
    sequence: list[str]
    found: bool
    rank: int | None
    case_count: int
    share: float
    n_variants: int
    durations_s: dict  # the variant's case throughput (seconds): p10, median, p90
    roles: pd.DataFrame  # attribute, value, events (among up to SAMPLE_CASES cases)
    role_cases: int  # how many cases the role table was computed from
    examples: pd.DataFrame  # events of up to EXAMPLE_CASES real cases
    friction: dict = field(default_factory=dict)  # coverage.friction of the role-table cases

    @classmethod
    def missing(cls, log_name: str, sequence: list[str], n_variants: int = 0) -> "VariantDetail":
        return cls(
            log_name,
            list(sequence),
            False,
            None,
            0,
            0.0,
            n_variants,
            {},
            pd.DataFrame(columns=["attribute", "value", "events"]),
            0,
            pd.DataFrame(),
        )


def _read_events(events_path: str, case_ids: list[str]) -> pd.DataFrame:
    table = get_storage().read_table(
        events_path, "events.parquet", filters=[("case_id", "in", case_ids)]
    )
    return table.to_pandas()


def variant_detail(
    *,
    session: Session,
    log_name: str,
    sequence: list[str],
    level: VariantLevel = VariantLevel.raw,
    with_friction: bool = False,
) -> VariantDetail:
    """The detail of `sequence` in the newest version of `log_name`; `found` is False (with
    empty tables) when no case follows it; `with_friction` adds its waits and team changes
    (coverage.friction). Raises NotFound for an unknown log."""
    log = queries.latest_log(session=session, name=log_name)
    if log is None:
        raise NotFound(f"no log named {log_name!r}")
    key = sequence_key(sequence)
    variant = queries.variant_by_key(session=session, log_id=log.id, sequence_key=key, level=level)
    n_variants = log.n_variants if level == VariantLevel.raw else log.n_collapsed_variants
    if variant is None or not log.events_path:
        return VariantDetail.missing(log_name, sequence, n_variants)
    folder, storage = log.events_path, get_storage()
    if not storage.exists(folder, "cases.parquet"):
        raise NotFound(
            f"the stored cases of log {log_name!r} are missing ({folder} in the storage "
            f"{storage.location()}): every replica must share the storage; else import the "
            "log again"
        )
    column = "variant_key" if level == VariantLevel.raw else "collapsed_variant_key"
    sampled = level == VariantLevel.raw and storage.exists(folder, variant_samples.SAMPLES_FILE)
    cases = storage.read_table(
        folder,
        "cases.parquet",
        columns=[column, "throughput_s"] if sampled else ["case_id", column, "throughput_s"],
        filters=[(column, "==", key)],
    )
    throughput = pd.Series(cases.column("throughput_s").to_numpy(), dtype=float)
    if sampled:  # written at import: the events of the variant's first SAMPLE_CASES cases
        events = (
            storage.read_table(
                folder, variant_samples.SAMPLES_FILE, filters=[("variant_key", "==", key)]
            )
            .drop_columns(["variant_key"])
            .to_pandas()
        )
        role_cases = min(variant.case_count, variant_samples.SAMPLE_CASES)
    else:  # a log imported before samples were written
        sample = cases.column("case_id").slice(0, variant_samples.SAMPLE_CASES).to_pylist()
        events = _read_events(folder, sample) if sample else pd.DataFrame()
        role_cases = len(sample)
    role_rows = []
    for role in [c for c in events.columns if c.startswith(ROLE_PREFIX)]:
        counts = events[role].dropna().astype(str).value_counts()
        role_rows += [(role[len(ROLE_PREFIX) :], value, int(n)) for value, n in counts.items()]
    examples = events[events["case_id"].isin(variant.example_case_ids[:EXAMPLE_CASES])]
    roles = [c for c in events.columns if c.startswith(ROLE_PREFIX)]
    timing = friction(events, roles[0] if roles else None) if with_friction and len(events) else {}
    return VariantDetail(
        log_name=log_name,
        sequence=list(variant.sequence),
        found=True,
        rank=variant.rank,
        case_count=variant.case_count,
        share=variant.share,
        n_variants=n_variants,
        durations_s={
            "p10": float(throughput.quantile(0.1)),
            "median": float(throughput.median()),
            "p90": float(throughput.quantile(0.9)),
        },
        roles=pd.DataFrame(role_rows, columns=["attribute", "value", "events"]),
        role_cases=role_cases,
        examples=examples.reset_index(drop=True),
        friction=timing,
    )


def source_details(
    *, session: Session, log_name: str | None, sequences: list[list[str]]
) -> list[VariantDetail]:
    """The detail of each sequence a task declares; a log that is not imported gives
    details marked as not found."""
    out = []
    for sequence in sequences:
        try:
            out.append(variant_detail(session=session, log_name=log_name or "", sequence=sequence))
        except NotFound:
            out.append(VariantDetail.missing(log_name or "(none)", sequence))
    return out
