"""A CSV or XES log imported in bounded batches through the log engine (`coverage.streaming`, above
ITSMREVIEW_LOG_STREAM_BYTES) publishes what the in-memory import publishes: every
materialised table, the log's summary, events.parquet and cases.parquet; a bad row leaves
nothing behind and the previous logs as they were."""

import gzip

import pandas as pd
import pytest
from itsmreview import settings as settings_module
from itsmreview.coverage import samples as samples_module
from itsmreview.coverage import service as service_module
from itsmreview.coverage.models import (
    EventLog,
    LogActivity,
    LogDirectlyFollows,
    LogRoleValue,
    LogVariant,
)
from itsmreview.coverage.service import import_log
from itsmreview.coverage.synthetic import generate_log, write_csv, write_xes
from itsmreview.errors import InvalidInput
from itsmreview.storage import get_storage
from pandas.testing import assert_frame_equal
from sqlmodel import func, select

SUMMARY = (
    "n_cases",
    "n_events",
    "n_activities",
    "n_variants",
    "n_collapsed_variants",
    "n_df_pairs",
    "n_singleton_variants",
    "first_timestamp",
    "last_timestamp",
    "mapping",
)
TABLES = (LogVariant, LogDirectlyFollows, LogActivity, LogRoleValue)


@pytest.fixture
def stream_from(monkeypatch):
    """stream_from(bytes): CSV logs of that size or more are streamed."""

    def set_threshold(size: int) -> None:
        monkeypatch.setenv("ITSMREVIEW_LOG_STREAM_BYTES", str(size))
        settings_module.get_settings.cache_clear()

    yield set_threshold
    settings_module.get_settings.cache_clear()


def _rows(session, model, log_id: int) -> pd.DataFrame:
    """A materialised table's rows of one log, without ids, in a fixed order."""
    found = session.exec(select(model).where(model.log_id == log_id)).all()
    columns = [c.name for c in model.__table__.columns if c.name not in ("id", "log_id")]
    frame = pd.DataFrame([{c: getattr(row, c) for c in columns} for row in found])
    frame = frame.map(lambda v: repr(v) if isinstance(v, list | dict) else v)
    return frame.sort_values(list(frame.columns), ignore_index=True)


def _as_text(frame: pd.DataFrame) -> pd.DataFrame:
    """Categorical columns as text: the category order is not read by any reader."""
    return frame.assign(
        **{c: frame[c].astype("string") for c in frame.columns if frame[c].dtype == "category"}
    )


def _published(session, log: EventLog) -> dict:
    storage = get_storage()
    return {
        "summary": {c: getattr(log, c) for c in SUMMARY},
        "tables": {m.__tablename__: _rows(session, m, log.id) for m in TABLES},
        "events": storage.read_table(log.events_path, "events.parquet").to_pandas(),
        "cases": storage.read_table(log.events_path, "cases.parquet").to_pandas(),
        "samples": storage.read_table(log.events_path, "samples.parquet").to_pandas(),
    }


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Text as text and times in nanoseconds: the in-memory import writes pandas'
    categoricals, the streamed one DuckDB's strings and microseconds (readers take either)."""
    out = {}
    for column in frame.columns:
        values = frame[column]
        if values.dtype in ("category", object) or isinstance(values.dtype, pd.StringDtype):
            values = values.astype(object).where(values.notna(), None).astype("string")
        elif isinstance(values.dtype, pd.DatetimeTZDtype):
            values = values.astype("datetime64[ns, UTC]")
        out[column] = values
    return pd.DataFrame(out)


def _import_both_ways(session, path, stream_from, monkeypatch, **options):
    """What an in-memory import and a streamed import of `path` publish (the first one rolled
    back, so the second is not taken for a re-import)."""
    streamed_calls = []
    real = service_module._read_streamed
    monkeypatch.setattr(
        service_module,
        "_read_streamed",
        lambda *a: streamed_calls.append(a) or real(*a),
    )
    found = []
    for threshold in (2**40, 0):
        stream_from(threshold)
        log = import_log(path, session=session, **options).log
        found.append(_published(session, log))
        session.rollback()
    assert len(streamed_calls) == 1  # the second import, and only it, streamed
    return found


def _assert_same(memory: dict, streamed: dict) -> None:
    assert streamed["summary"] == memory["summary"]
    for name, table in memory["tables"].items():
        assert_frame_equal(streamed["tables"][name], table, check_exact=True, obj=name)
    # same columns, types and rows in the same order (pages read events in file order)
    assert list(streamed["events"].dtypes) == list(memory["events"].dtypes)
    assert_frame_equal(_as_text(streamed["events"]), _as_text(memory["events"]), check_exact=True)
    assert_frame_equal(_as_text(streamed["cases"]), _as_text(memory["cases"]), check_exact=True)
    # each variant's sample: the events of its first cases, by variant key, case, event
    assert_frame_equal(_plain(streamed["samples"]), _plain(memory["samples"]), check_exact=True)
    _assert_sampled(memory)


def _assert_sampled(published: dict) -> None:
    """The sample is, variant by variant, the events of the variant's first SAMPLE_CASES
    cases in the events file's order: computed here from events.parquet and cases.parquet."""
    cases, events = published["cases"], _plain(published["events"])
    first = cases.groupby("variant_key", observed=True).head(samples_module.SAMPLE_CASES)
    keys = dict(zip(first["case_id"], first["variant_key"].astype(str), strict=True))
    expected = events[events["case_id"].isin(list(keys))].copy()
    expected["variant_key"] = expected["case_id"].map(keys).astype("string")
    expected = expected.sort_values("variant_key", kind="stable", ignore_index=True)
    assert_frame_equal(_plain(published["samples"]), expected, check_exact=True)
    assert published["samples"]["variant_key"].is_monotonic_increasing


@pytest.mark.realdata
def test_bpi2013_streamed_publishes_what_the_in_memory_import_does(
    session, real_file, stream_from, monkeypatch
):
    monkeypatch.setattr(samples_module, "SAMPLE_CASES", 3)  # big variants are cut
    path = real_file("logs", "bpi2013_incidents.csv.gz")
    memory, streamed = _import_both_ways(session, path, stream_from, monkeypatch, preset="bpi2013")
    assert memory["summary"]["n_events"] == 65533
    _assert_same(memory, streamed)


def test_a_synthetic_log_streamed_publishes_what_the_in_memory_import_does(
    session, tmp_path, stream_from, monkeypatch
):
    frame = generate_log(3000, seed=11)
    # white space to trim, an empty role value and a case whose events are out of order
    frame.loc[5, "Activity"] = "  " + frame.loc[5, "Activity"] + " "
    frame.loc[7, "Involved ST"] = " "
    frame.loc[[20, 21], "Change Date+Time"] = frame.loc[[21, 20], "Change Date+Time"].values
    path = write_csv(frame, tmp_path / "synthetic.csv")
    memory, streamed = _import_both_ways(session, path, stream_from, monkeypatch, preset="bpi2013")
    assert memory["summary"]["n_cases"] == 3000
    _assert_same(memory, streamed)


@pytest.mark.realdata
def test_helpdesk_xes_streamed_publishes_what_the_in_memory_import_does(
    session, real_file, stream_from, monkeypatch
):
    path = real_file("logs", "helpdesk.xes.gz")
    memory, streamed = _import_both_ways(session, path, stream_from, monkeypatch, preset="helpdesk")
    assert memory["summary"]["n_events"] == 21348
    _assert_same(memory, streamed)


def test_a_synthetic_xes_streamed_publishes_what_the_in_memory_import_does(
    session, tmp_path, stream_from, monkeypatch
):
    frame = generate_log(1500, seed=12)
    frame = pd.concat([frame.iloc[:50], frame.iloc[[70]], frame.iloc[50:70], frame.iloc[71:]])
    path = write_xes(frame, tmp_path / "synthetic.xes.gz")
    memory, streamed = _import_both_ways(session, path, stream_from, monkeypatch)
    assert memory["summary"]["n_cases"] == 1500
    _assert_same(memory, streamed)


def _logs(session) -> int:
    return session.exec(select(func.count()).select_from(EventLog)).one()


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        # a timestamp that stops parsing half way
        (
            lambda lines: lines[:30000] + [lines[30000].replace("T", " at ", 1)] + lines[30001:],
            r"synthetic.csv.gz: 1 timestamp\(s\) in column 'Change Date\+Time' do not match "
            r"format 'ISO8601' \(row 30001: '",
        ),
        # a ragged row deep in the file
        (
            lambda lines: lines[:30000] + [lines[30000] + ",extra"] + lines[30001:],
            r"synthetic.csv.gz: a CSV row has 15 fields where the header has 14 \(line 30,001: ",
        ),
    ],
)
def test_a_bad_row_in_a_streamed_log_publishes_nothing_and_keeps_the_previous_log(
    session, tmp_path, stream_from, spoil, message
):
    stream_from(0)
    frame = generate_log(events=40000, seed=3)
    good = write_csv(frame, tmp_path / "good.csv")
    before = import_log(good, session=session, name="synthetic", preset="bpi2013").log
    session.commit()
    kept = sorted(p.relative_to(tmp_path) for p in (tmp_path / "data").rglob("*.parquet"))
    lines = good.read_text(encoding="utf-8-sig").splitlines()
    bad = tmp_path / "synthetic.csv.gz"
    bad.write_bytes(gzip.compress("\n".join(spoil(lines)).encode()))
    with pytest.raises(InvalidInput, match=message):
        import_log(bad, session=session, name="synthetic", preset="bpi2013")
    session.rollback()
    assert _logs(session) == 1
    assert service_module.latest_log(session=session, name="synthetic").id == before.id
    assert sorted(p.relative_to(tmp_path) for p in (tmp_path / "data").rglob("*.parquet")) == kept


def test_a_truncated_gzip_publishes_nothing(session, tmp_path, stream_from):
    stream_from(0)
    whole = gzip.compress(generate_log(2000, seed=4).to_csv(index=False).encode())
    path = tmp_path / "cut.csv.gz"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(InvalidInput, match="cut.csv.gz: the compressed file is truncated"):
        import_log(path, session=session, preset="bpi2013")
    session.rollback()
    assert _logs(session) == 0
    assert not any((tmp_path / "data").rglob("*.parquet"))


def test_a_streamed_import_reports_the_rows_it_has_read(session, tmp_path, stream_from):
    stream_from(0)
    path = write_csv(generate_log(events=30000, seed=6), tmp_path / "log.csv")
    seen = []
    import_log(path, session=session, preset="bpi2013", progress=lambda *step: seen.append(step))
    reading = [stage for stage, _ in seen if stage.startswith("reading: ")]
    assert len(reading) > 1 and reading[-1].startswith("reading: 30,000 rows, ")
    assert reading[-1].endswith(" events/s")
    fractions = [fraction for _, fraction in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0


@pytest.mark.realdata
@pytest.mark.parametrize("threshold", [2**40, 0], ids=["in-memory", "streamed"])
def test_the_explorer_reads_a_variant_from_its_sample_as_from_the_events(
    session, real_file, stream_from, monkeypatch, threshold
):
    """Every figure of the variant explorer read from samples.parquet equals what it read
    before samples were written (the events file, filtered by the variant's cases), for the
    most frequent variants (cut to SAMPLE_CASES) and rarer ones."""
    from itsmreview.coverage.explorer import variant_detail
    from itsmreview.coverage.queries import variants_frame

    monkeypatch.setattr(samples_module, "SAMPLE_CASES", 25)
    stream_from(threshold)
    log = import_log(
        real_file("logs", "bpi2013_incidents.csv.gz"), session=session, preset="bpi2013"
    ).log
    sequences = list(variants_frame(session=session, log_id=log.id)["sequence"])
    picked = [list(s) for s in sequences[:3] + sequences[40:42] + sequences[-2:]]

    def details() -> list:
        return [variant_detail(session=session, log_name=log.name, sequence=s) for s in picked]

    sampled = details()
    storage = get_storage()
    storage.fs.rm(storage.path(log.events_path, "samples.parquet"))
    from_events = details()
    assert sampled[0].case_count > 25 and sampled[0].role_cases == 25
    assert sampled[-1].role_cases == sampled[-1].case_count
    for got, expected in zip(sampled, from_events, strict=True):
        assert got.durations_s == expected.durations_s
        assert got.role_cases == expected.role_cases
        assert_frame_equal(got.roles, expected.roles, check_exact=True)
        assert_frame_equal(
            _plain(got.examples).reset_index(drop=True),
            _plain(expected.examples).reset_index(drop=True),
            check_exact=True,
        )
        assert len(got.examples) > 0
