"""Each variant's sample: the events of its first SAMPLE_CASES cases (in case order), written
at import beside the events as `samples.parquet`, sorted by variant key. The variant
explorer reads one variant's roles and example cases from it in a row group or two, whatever
the log's size; reading them from the events file meant scanning it (100 million events:
4-25 s a variant).

>>> import pandas as pd
>>> events = pd.DataFrame({"case_id": ["a", "a", "b", "c", "c"], "activity": list("xyxxy")})
>>> cases = pd.DataFrame({"case_id": ["a", "b", "c"], "variant_key": ["k2", "k1", "k2"]})
>>> sample_frame(events, cases, per_variant=1)[["case_id", "variant_key"]].values.tolist()
[['b', 'k1'], ['a', 'k2'], ['a', 'k2']]
"""

from pathlib import Path

import pandas as pd

SAMPLE_CASES = 2000  # a variant's cases whose events the explorer's role table counts
SAMPLES_FILE = "samples.parquet"
ROW_GROUP_ROWS = 16_384  # small groups: a key filter reads little beyond its variant


def first_cases(cases: pd.DataFrame, per_variant: int | None = None) -> pd.DataFrame:
    """The first `per_variant` (default SAMPLE_CASES) cases of each raw variant (case_id,
    variant_key as text and the case's place `ord`), from a materialised cases frame in case
    order."""
    per_variant = per_variant or SAMPLE_CASES
    keys = cases["variant_key"]
    kept = (keys.groupby(keys, observed=True, sort=False).cumcount() < per_variant).to_numpy()
    return pd.DataFrame(
        {
            "case_id": cases["case_id"].to_numpy()[kept],
            "variant_key": keys[kept].astype(str).to_numpy(),
            "ord": kept.nonzero()[0],
        }
    )


def sample_frame(
    events: pd.DataFrame, cases: pd.DataFrame, per_variant: int | None = None
) -> pd.DataFrame:
    """The sample of an ordered canonical event table (events of a case together, cases in
    the order of `cases`): its rows of each variant's first cases, with their
    `variant_key`, by variant key, then case order, then event order."""
    first = first_cases(cases, per_variant)
    keyed = pd.Series(first["variant_key"].to_numpy(), index=first["case_id"].to_numpy())
    picked = events[events["case_id"].isin(keyed.index)]
    out = picked.assign(variant_key=keyed.reindex(picked["case_id"].to_numpy()).to_numpy())
    return out.sort_values("variant_key", kind="stable").reset_index(drop=True)


def write_sample_file(
    events_file: Path,
    cases: pd.DataFrame,
    target: Path,
    *,
    memory: str | None = None,
    spill_dir: Path | None = None,
    threads: int | None = None,
) -> int:
    """`sample_frame` of a canonical events parquet file, by DuckDB within
    ITSMREVIEW_LOG_MEMORY (the events are joined, never loaded), to `target`. Returns its
    rows. Raises ValueError naming the setting when the limit is too small."""
    import pyarrow as pa
    from itsmreview.coverage.engine import log_connection

    first = pa.Table.from_pandas(first_cases(cases), preserve_index=False)
    doing = "sampling each variant's cases"
    try:
        with log_connection(
            events_file, doing, memory=memory, spill_dir=spill_dir, threads=threads
        ) as connection:
            connection.register("first_cases", first)
            connection.sql(
                "SELECT e.* EXCLUDE (file_row_number), f.variant_key "
                "FROM read_parquet(?, file_row_number = true) e "
                "JOIN first_cases f ON e.case_id = f.case_id "
                "ORDER BY f.variant_key, f.ord, e.file_row_number",
                params=[str(events_file)],
            ).write_parquet(str(target), row_group_size=ROW_GROUP_ROWS)
            return connection.execute(
                "SELECT count(*) FROM read_parquet(?)", [str(target)]
            ).fetchone()[0]
    except ValueError:
        target.unlink(missing_ok=True)  # nothing half-written
        raise
