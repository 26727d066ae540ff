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
    import tempfile

    import duckdb
    import pyarrow as pa
    from itsmreview.coverage.engine import memory_limit

    first = pa.Table.from_pandas(first_cases(cases), preserve_index=False)
    limit = memory_limit(memory)
    with tempfile.TemporaryDirectory(prefix="itsmreview-sample-", dir=spill_dir) as spill:
        connection = duckdb.connect(
            config={"memory_limit": limit, "temp_directory": spill}
            | ({"threads": threads} if threads else {})
        )
        try:
            connection.register("first_cases", first)
            connection.execute(
                "COPY (SELECT e.* EXCLUDE (file_row_number), f.variant_key "
                f"FROM read_parquet('{_quoted(events_file)}', file_row_number = true) e "
                "JOIN first_cases f ON e.case_id = f.case_id "
                "ORDER BY f.variant_key, f.ord, e.file_row_number) "
                f"TO '{_quoted(target)}' (FORMAT parquet, ROW_GROUP_SIZE {ROW_GROUP_ROWS})"
            )
            return connection.execute(
                "SELECT count(*) FROM read_parquet(?)", [str(target)]
            ).fetchone()[0]
        except duckdb.OutOfMemoryException as exc:
            target.unlink(missing_ok=True)
            raise ValueError(
                f"{events_file}: sampling each variant's cases ran out of memory within "
                f"memory_limit={limit} ({str(exc).splitlines()[0]}); raise ITSMREVIEW_LOG_MEMORY"
            ) from None
        finally:
            connection.close()


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")
