"""The DuckDB log engine (coverage.engine) against `variants.materialise` and pm4py, on the
real logs in ../shared/data and the synthetic ones: every frame equal, exactly."""

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from itsmreview.coverage.engine import materialise_file, memory_limit
from itsmreview.coverage.eventlog import PRESETS, normalise, read_log
from itsmreview.coverage.linked import BPI2014
from itsmreview.coverage.linked import read_linked as read_linked_tables
from itsmreview.coverage.synthetic import generate_log, write_xes
from itsmreview.coverage.synthetic_bpi2014 import generate_bpi2014, write_bpi2014
from itsmreview.coverage.variants import materialise
from itsmreview.storage import storage_from_url
from pandas.testing import assert_frame_equal

FRAMES = ("variants", "df_pairs", "activities", "role_values", "cases")


def _events_file(events: pd.DataFrame, folder) -> str:
    """The events written as an import writes them (Storage.write_frame)."""
    storage = storage_from_url(str(folder))
    storage.write_frame(events, "events.parquet")
    return storage.path("events.parquet")


def _assert_same(engine, expected) -> None:
    for name in FRAMES:
        assert_frame_equal(getattr(engine, name), getattr(expected, name), check_exact=True)
    assert engine.summary == expected.summary


def _helpdesk(real_file, _tmp):
    return read_log(real_file("logs", "helpdesk.xes.gz"), PRESETS["helpdesk"])[0]


def _bpi2013(real_file, _tmp):
    return read_log(real_file("logs", "bpi2013_incidents.csv.gz"), PRESETS["bpi2013"])[0]


def _synthetic_csv(_real_file, _tmp):
    return normalise(generate_log(400, seed=21), PRESETS["bpi2013"])


def _synthetic_xes(_real_file, tmp):
    path = write_xes(generate_log(150, seed=4), tmp / "synthetic.xes.gz")
    return read_log(path)[0]


def _synthetic_bpi2014(_real_file, tmp):
    files = write_bpi2014(generate_bpi2014(incidents=300, seed=9), tmp / "bpi2014")
    return read_linked_tables(files, BPI2014).events


LOGS = {
    "helpdesk": pytest.param(_helpdesk, marks=pytest.mark.realdata),
    "bpi2013": pytest.param(_bpi2013, marks=pytest.mark.realdata),
    "synthetic-csv": _synthetic_csv,
    "synthetic-xes": _synthetic_xes,
    "synthetic-bpi2014": _synthetic_bpi2014,
}


@pytest.fixture(params=list(LOGS.values()), ids=list(LOGS))
def events(request, real_file, tmp_path):
    return request.param(real_file, tmp_path)


def test_engine_equals_materialise(events, tmp_path):
    _assert_same(materialise_file(_events_file(events, tmp_path)), materialise(events))


def test_engine_counts_equal_pm4py(events, tmp_path):
    import pm4py

    found = materialise_file(_events_file(events, tmp_path))
    frame = pm4py.format_dataframe(
        pd.DataFrame(
            {
                "case": events["case_id"].astype(str),
                "activity": events["activity"].astype(str),
                "time": events["timestamp"],
            }
        ),
        case_id="case",
        activity_key="activity",
        timestamp_key="time",
    )
    raw = found.variants[found.variants.level == "raw"]
    ours = {tuple(s): int(c) for s, c in zip(raw.sequence, raw.case_count, strict=True)}
    theirs = {tuple(k): int(v) for k, v in pm4py.get_variants(frame).items()}
    assert ours == theirs
    dfg, _starts, _ends = pm4py.discover_dfg(frame)
    pairs = {(r.source, r.target): int(r.count) for r in found.df_pairs.itertuples()}
    assert pairs == {k: int(v) for k, v in dfg.items()}


def test_ties_in_time_keep_file_order(tmp_path):
    same = pd.Timestamp("2024-01-01 10:00", tz="UTC")
    events = pd.DataFrame(
        {
            "case_id": ["c2", "c2", "c2", "c1", "c1", "c3", "c3"],
            "activity": ["open", "close", "open", "open", "work", "open", "close"],
            "timestamp": [same, same, same + pd.Timedelta(1, "s"), same, same, same, same],
        }
    ).astype({"case_id": "category", "activity": "category"})
    found = materialise_file(_events_file(events, tmp_path))
    _assert_same(found, materialise(events))
    assert found.cases["case_id"].tolist() == ["c2", "c1", "c3"]
    raw = found.variants[found.variants.level == "raw"]
    assert raw["sequence"].tolist()[0] == ["open", "close", "open"]
    assert raw["example_case_ids"].tolist()[0] == ["c2"]


def test_a_memory_limit_smaller_than_the_log_gives_the_same_figures(tmp_path):
    events = normalise(generate_log(events=600_000, seed=5), PRESETS["bpi2013"])
    path = _events_file(events, tmp_path)
    table = pq.read_table(path)
    decoded = sum(
        column.cast(column.type.value_type).nbytes
        if pa.types.is_dictionary(column.type)
        else column.nbytes
        for column in table.columns
    )
    limit = 32 * 2**20
    assert decoded > 2 * limit  # the events alone, as DuckDB reads them, would not fit
    found = materialise_file(path, memory="32MiB", threads=1, spill_dir=tmp_path)
    _assert_same(found, materialise(events))


def test_too_little_memory_is_an_error_naming_the_setting(tmp_path):
    events = normalise(generate_log(2000, seed=5), PRESETS["bpi2013"])
    with pytest.raises(ValueError, match="ITSMREVIEW_LOG_MEMORY"):
        materialise_file(_events_file(events, tmp_path), memory="1MiB", threads=1)


def test_memory_limit_reads_sizes_fractions_and_the_setting(monkeypatch):
    from itsmreview.settings import get_settings

    assert memory_limit("4GB") == "4GB"
    whole = int(memory_limit("1").removesuffix("MiB"))
    assert int(memory_limit("0.25").removesuffix("MiB")) == pytest.approx(whole / 4, abs=1)
    monkeypatch.setenv("ITSMREVIEW_LOG_MEMORY", "300MB")
    get_settings.cache_clear()
    try:
        assert memory_limit() == "300MB"
    finally:
        get_settings.cache_clear()
    for bad in ("lots", "0", "1.5", "-2GB"):
        with pytest.raises(ValueError, match="ITSMREVIEW_LOG_MEMORY"):
            memory_limit(bad)


def test_a_container_limit_below_the_physical_memory_is_the_machine_memory(tmp_path):
    from itsmreview.coverage.engine import machine_memory

    physical = machine_memory(())
    unlimited, limited = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    unlimited.write_text("max\n")
    limited.write_text(f"{physical // 4}\n")
    assert machine_memory((str(unlimited), str(tmp_path / "missing"))) == physical
    assert machine_memory((str(unlimited), str(limited))) == physical // 4


def test_a_file_without_the_event_columns_is_refused(tmp_path):
    frame = pd.DataFrame({"case_id": ["c1"], "when": [pd.Timestamp("2024-01-01", tz="UTC")]})
    with pytest.raises(ValueError, match="no column 'activity', 'timestamp'"):
        materialise_file(_events_file(frame, tmp_path))


def test_sequences_that_share_their_hashes_are_caught(tmp_path, monkeypatch):
    from itsmreview.coverage import engine

    # every sequence of one length hashes alike: the check must notice the mixed groups
    monkeypatch.setattr(
        engine, "_sequence_hashes", lambda _position, first, second: f"0 AS {first}, 0 AS {second}"
    )
    events = normalise(generate_log(50, seed=5), PRESETS["bpi2013"])
    with pytest.raises(ValueError, match="two different raw sequences share a hash"):
        materialise_file(_events_file(events, tmp_path))


def test_role_names_with_quotes_and_semicolons_are_read(tmp_path):
    events = normalise(generate_log(60, seed=8), PRESETS["bpi2013"])
    events = events.rename(columns={"role:ST Level": 'role:level; "tier"'})
    found = materialise_file(_events_file(events, tmp_path))
    _assert_same(found, materialise(events))
    assert 'level; "tier"' in set(found.role_values["attribute"])


def test_duckdb_samples_each_variant_as_pandas_does(tmp_path):
    """The streamed import's sample (DuckDB, joined within the memory limit) equals the
    in-memory import's (pandas), with big variants cut to the first cases."""
    from itsmreview.coverage.samples import sample_frame, write_sample_file

    events = normalise(generate_log(1500, seed=8), PRESETS["bpi2013"])
    cases = materialise(events).cases
    path = _events_file(events, tmp_path)
    target = tmp_path / "samples.parquet"
    rows = write_sample_file(Path(path), cases, target, memory="64MiB", threads=1)
    expected = sample_frame(events, cases)
    assert rows == len(expected) == len(events)  # no variant of 1,500 cases reaches 2,000
    found = pd.read_parquet(target)
    assert list(found.columns) == list(expected.columns)
    for column in expected.columns:
        assert found[column].astype(str).tolist() == expected[column].astype(str).tolist()
    few = sample_frame(events, cases, per_variant=2)
    assert few.groupby("variant_key")["case_id"].nunique().max() == 2 < len(few)


def test_too_little_memory_for_the_sample_is_an_error_naming_the_setting(tmp_path):
    from itsmreview.coverage.samples import write_sample_file

    events = normalise(generate_log(2000, seed=5), PRESETS["bpi2013"])
    cases = materialise(events).cases
    target = tmp_path / "samples.parquet"
    with pytest.raises(ValueError, match="sampling .* raise ITSMREVIEW_LOG_MEMORY"):
        write_sample_file(
            Path(_events_file(events, tmp_path)), cases, target, memory="1MiB", threads=1
        )
    assert not target.exists()
