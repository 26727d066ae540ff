"""The streaming CSV reader (coverage.streaming) reads what `eventlog.read_log` reads, batch by
batch, and refuses what it refuses with the same message (a bad value after many batches
included); a row the parser refuses is named by its line."""

import gzip

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from itsmreview.coverage.eventlog import DAY_FIRST, ColumnMapping, read_log, standard_mapping
from itsmreview.coverage.filechecks import Limits
from itsmreview.coverage.streaming import _may_hold_nul, stream_csv, stream_xes, streamable
from itsmreview.coverage.synthetic import generate_log, write_xes
from itsmreview.storage import storage_from_url
from pandas.testing import assert_frame_equal

# small blocks: a log of a few thousand rows is read in many batches
LIMITS = Limits(max_row_bytes=2048)
MAPPING = ColumnMapping(
    case="case", activity="act", timestamp="at", resource="who", roles=("team", "level")
)
ROWS = 3000


def _lines(n: int = ROWS) -> list[str]:
    """A log's rows (header first): cases interleaved, some events out of order in a case."""
    lines = ["case,act,at,who,team,level"]
    for i in range(n):
        case, step = f"c{(i * 7) % 401}", i // 401
        minute = (step * 13 + (5 if i % 11 == 0 else 0)) % 60
        lines.append(
            f"{case},act{(i * 3) % 7},2024-03-{1 + step % 27:02d}T10:{minute:02d}:00Z,"
            f"p{i % 5},team {i % 9},L{i % 3}"
        )
    return lines


def _write(tmp_path, lines: list[str], name: str = "log.csv", encoding: str = "utf-8"):
    path = tmp_path / name
    data = ("\n".join(lines) + "\n").encode(encoding)
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


def _streamed(tmp_path, path, mapping=MAPPING) -> pd.DataFrame:
    target = tmp_path / "events.parquet"
    stream_csv(path, mapping, target, work=tmp_path, limits=LIMITS, memory="256MB")
    return pq.read_table(target).to_pandas()


def _as_text(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(
        **{c: frame[c].astype("string") for c in frame.columns if frame[c].dtype == "category"}
    )


def _assert_reads_alike(tmp_path, path, mapping=MAPPING) -> pd.DataFrame:
    """The streamed events file reads as the file an in-memory import writes reads."""
    storage = storage_from_url(str(tmp_path / "memory"))
    storage.write_frame(read_log(path, mapping, limits=LIMITS)[0], "events.parquet")
    expected = storage.read_table("events.parquet").to_pandas()
    found = _streamed(tmp_path, path, mapping)
    assert list(found.dtypes) == list(expected.dtypes)
    assert_frame_equal(_as_text(found), _as_text(expected), check_exact=True)
    return found


@pytest.mark.parametrize("name", ["log.csv", "log.csv.gz"])
def test_a_log_streams_to_the_events_read_log_reads(tmp_path, name):
    lines = _lines()
    lines[10] = lines[10].replace(",act", ",  act", 1)  # white space is trimmed
    lines[12] = lines[12].replace(",team 2,", ", ,")  # blank text is missing
    found = _assert_reads_alike(tmp_path, _write(tmp_path, lines, name))
    assert len(found) == ROWS


def test_day_first_formats_separator_missing_token_and_encoding(tmp_path):
    mapping = ColumnMapping(
        case="case",
        activity="act",
        timestamp="at",
        timestamp_format=DAY_FIRST,
        roles=("team",),
        sep=";",
        na_values=("#N/B",),
        encoding="latin-1",
    )
    lines = ["case;act;at;team"]
    forms = ("%d-%m-%Y %H:%M:%S", "%d/%m/%Y %H:%M:%S", "%d-%m-%Y %H:%M", "%d/%m/%Y %H:%M")
    stamps = pd.date_range("2013-01-05", periods=ROWS, freq="17min")
    for i, stamp in enumerate(stamps):
        team = "#N/B" if i % 50 == 0 else f"Gebäude {i % 4}"
        lines.append(f"c{i % 300};a{i % 4};{stamp.strftime(forms[i % 4])};{team}")
    found = _assert_reads_alike(tmp_path, _write(tmp_path, lines, encoding="latin-1"), mapping)
    assert found["resource"].isna().all()


def _spoiled(row: int, field: int, value: str):
    """Set field `field` of line `row` to `value`."""

    def spoil(lines):
        fields = lines[row].split(",")
        fields[field] = value
        lines[row] = ",".join(fields)
        return lines

    return spoil


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (_spoiled(2900, 2, "2024-03-01 at 10:00"), "do not match format 'ISO8601'"),
        (_spoiled(2901, 2, "   "), "do not match format 'ISO8601'"),
        (_spoiled(2950, 2, "1960-03-01T10:00:00Z"), "lie outside the years"),
        (_spoiled(2960, 2, ""), "have no timestamp"),
        (_spoiled(2990, 2, "2024-03-01T10:00:00"), None),  # naive among aware: UTC
        (_spoiled(2700, 2, "  2024-03-01T10:00:00Z "), None),  # white space around
        (lambda lines: [line.replace(",act1,", ",,") for line in lines], "have no activity"),
        (_spoiled(2500, 0, "  "), "have no case id"),
        (_spoiled(2801, 3, "p\x00"), "NUL character"),
        (_spoiled(2802, 1, "a\x00"), "NUL character"),
        (lambda lines: lines[:1], "the log has no events"),
        (lambda lines: [lines[0].replace("team", "group")] + lines[1:], "'team' not in the file"),
    ],
)
def test_a_bad_value_is_refused_as_read_log_refuses_it(tmp_path, spoil, message):
    path = _write(tmp_path, spoil(_lines()))
    try:
        read_log(path, MAPPING, limits=LIMITS)
    except ValueError as exc:
        expected = str(exc)
    else:
        assert message is None, "read_log read a log this test expects it to refuse"
        _assert_reads_alike(tmp_path, path)
        return
    assert message is not None and message in expected, expected
    with pytest.raises(ValueError) as raised:
        _streamed(tmp_path, path)
    assert str(raised.value) == expected
    assert not (tmp_path / "events.parquet").exists() or message is None


def test_a_ragged_row_is_named_by_its_line(tmp_path):
    lines = _lines()
    lines[2600] += ",extra"
    with pytest.raises(
        ValueError,
        match=r"log.csv: a CSV row has 7 fields where the header has 6 "
        r"\(line 2,601: the row starts 'c",
    ):
        _streamed(tmp_path, _write(tmp_path, lines))


def test_a_truncated_gzip_is_refused(tmp_path):
    path = _write(tmp_path, _lines(), "log.csv.gz")
    path.write_bytes(path.read_bytes()[:-200])
    with pytest.raises(ValueError, match="log.csv.gz: the compressed file is truncated or corrupt"):
        _streamed(tmp_path, path)


def test_undecodable_text_is_refused_naming_the_encoding(tmp_path):
    lines = _lines()
    path = _write(tmp_path, lines)
    path.write_bytes(path.read_bytes().replace(b"team 4", b"t\xe9am 4"))
    with pytest.raises(ValueError, match="log.csv: not readable as utf-8-sig"):
        _streamed(tmp_path, path)


def test_only_plain_or_gzipped_csv_without_counters_streams(tmp_path):
    assert streamable(tmp_path / "a.csv", MAPPING)
    assert streamable(tmp_path / "a.CSV.GZ", MAPPING)
    assert not streamable(tmp_path / "a.csv.zip", MAPPING)
    assert streamable(tmp_path / "a.xes.gz", MAPPING)
    assert not streamable(tmp_path / "a.parquet", MAPPING)
    counted = ColumnMapping(case="c", activity="a", timestamp="t", counters=(("moves", "m"),))
    assert not streamable(tmp_path / "a.csv", counted)


def test_a_row_longer_than_a_block_but_within_the_bound_is_read(tmp_path, monkeypatch):
    from itsmreview.coverage import streaming

    monkeypatch.setattr(streaming, "BLOCK_BYTES", 512)
    blocks = []
    in_blocks = streaming._stage_in_blocks
    monkeypatch.setattr(
        streaming, "_stage_in_blocks", lambda *a: blocks.append(a[-1]) or in_blocks(*a)
    )
    lines = _lines()
    lines[1500] = lines[1500].replace(",team ", ",team " + "x" * 1500, 1)
    found = _assert_reads_alike(tmp_path, _write(tmp_path, lines))
    assert found["role:team"].astype(str).str.len().max() > 1500
    assert blocks == [512, LIMITS.max_row_bytes]  # read again in larger blocks


@pytest.mark.parametrize(("block", "length"), [(2048, 5000), (512, 3000)])
def test_a_row_longer_than_the_bound_is_named_by_its_line(tmp_path, monkeypatch, block, length):
    from itsmreview.coverage import streaming

    # 3000 bytes fit in two blocks of the bound: the reader would take the row
    monkeypatch.setattr(streaming, "BLOCK_BYTES", block)
    lines = _lines()
    lines[1500] = lines[1500].replace(",team ", ",team " + "x" * length, 1)
    with pytest.raises(ValueError, match=r"log.csv: a row is longer than 2,048 bytes \(line 1,501"):
        _streamed(tmp_path, _write(tmp_path, lines))


# XES -----------------------------------------------------------------------------------------
ONE = ("a", "2024-01-01T10:00:00Z")
XES_HEAD = '<?xml version="1.0" encoding="utf-8" ?>\n<log xmlns="http://www.xes-standard.org/">\n'


def _xes_trace(case: str | None, events: list[tuple[str, str]], extra: str = "") -> str:
    name = "" if case is None else f'<string key="concept:name" value="{case}"/>'
    body = "".join(
        f'<event><string key="concept:name" value="{activity}"/>'
        f'<date key="time:timestamp" value="{stamp}"/>{extra}</event>'
        for activity, stamp in events
    )
    return f"<trace>{name}<string key='channel' value='mail'/>{body}</trace>\n"


def _xes_log(traces: list[str]) -> str:
    return XES_HEAD + "".join(traces) + "</log>\n"


def _xes_streamed(tmp_path, path, mapping):
    target = tmp_path / "events.parquet"
    found = stream_xes(path, mapping, target, work=tmp_path, limits=LIMITS, memory="256MB")
    return found, pq.read_table(target).to_pandas()


def _assert_xes_reads_alike(tmp_path, path, mapping):
    events, used = read_log(path, mapping, limits=LIMITS)
    storage = storage_from_url(str(tmp_path / "memory"))
    storage.write_frame(events, "events.parquet")
    expected = storage.read_table("events.parquet").to_pandas()
    (n_events, fitted), found = _xes_streamed(tmp_path, path, mapping)
    assert (n_events, fitted) == (len(expected), used)
    assert list(found.dtypes) == list(expected.dtypes)
    assert_frame_equal(_as_text(found), _as_text(expected), check_exact=True)
    return found, fitted


@pytest.mark.parametrize("name", ["log.xes", "log.xes.gz"])
def test_an_xes_log_streams_to_the_events_read_log_reads(tmp_path, name):
    frame = generate_log(400, seed=9)
    # a case split over two traces, and events out of order within a trace
    frame = pd.concat([frame.iloc[:30], frame.iloc[[40]], frame.iloc[30:40], frame.iloc[41:]])
    frame.iloc[[5, 6], 1] = frame.iloc[[6, 5], 1].to_numpy()
    path = write_xes(frame, tmp_path / name)
    mapping = standard_mapping(roles=("st_level", "involved_st"))
    found, fitted = _assert_xes_reads_alike(tmp_path, path, mapping)
    assert len(found) == len(frame) and fitted.resource == "org:resource"


def test_xes_without_org_resource_with_trace_and_typed_attributes(tmp_path):
    closed = ("close", "2024-02-01T10:00:00.5+01:00")
    typed = (
        '<int key="priority" value="3"/><boolean key="vip" value="true"/>'
        '<float key="cost" value="3.0"/>'
    )
    traces = [
        _xes_trace(f"c{i}", [("open", f"2024-01-0{1 + i % 9}T10:00:00Z"), closed], typed)
        for i in range(300)
    ]
    path = tmp_path / "log.xes"
    path.write_text(_xes_log(traces), encoding="utf-8")
    mapping = standard_mapping(roles=("case:channel", "priority", "vip", "cost"))
    found, fitted = _assert_xes_reads_alike(tmp_path, path, mapping)
    assert fitted.resource is None and found["resource"].isna().all()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (_xes_log([_xes_trace("c1", [("a", "2024-01-01T10:00:00Z")])])[:-20], "not a well-formed"),
        (
            '<?xml version="1.0"?><!DOCTYPE log [<!ENTITY x "y">]>'
            + _xes_log([_xes_trace("c1", [("a", "2024-01-01T10:00:00Z")])]).split("?>", 1)[1],
            "declares a DTD",
        ),
        (_xes_log([]), "the XES file holds no events"),
        (
            _xes_log(
                [
                    _xes_trace("c1", [("a", "2024-01-01T10:00:00Z")] * 40),
                    _xes_trace(None, [("a", "2024-01-01T10:00:00Z")]),
                ]
            ),
            "have no case id",
        ),
    ],
)
def test_a_bad_xes_is_refused_as_read_log_refuses_it(tmp_path, text, message):
    path = tmp_path / "log.xes"
    path.write_text(text, encoding="utf-8")
    mapping = standard_mapping()
    with pytest.raises(ValueError, match=message):
        read_log(path, mapping, limits=LIMITS)
    with pytest.raises(ValueError, match=message) as raised:
        _xes_streamed(tmp_path, path, mapping)
    assert str(path) in str(raised.value)


def test_an_xes_without_a_mapped_key_names_the_keys_it_has(tmp_path):
    path = tmp_path / "log.xes"
    path.write_text(_xes_log([_xes_trace("c1", [("a", "2024-01-01T10:00:00Z")])]))
    with pytest.raises(ValueError, match=r"mapped column\(s\) 'team' not in the file") as raised:
        _xes_streamed(tmp_path, path, standard_mapping(roles=("team",)))
    assert "'concept:name'" in str(raised.value) and "'case:channel'" in str(raised.value)


def test_a_truncated_gzipped_xes_is_refused(tmp_path):
    path = write_xes(generate_log(200, seed=2), tmp_path / "log.xes.gz")
    path.write_bytes(path.read_bytes()[:-300])
    with pytest.raises(ValueError, match="log.xes.gz: the compressed file is truncated"):
        _xes_streamed(tmp_path, path, standard_mapping())


def test_the_nul_search_reads_only_a_slice_s_own_bytes():
    values = pa.array(["a\x00", "b", "c", "d\x00"])
    assert _may_hold_nul(values) and _may_hold_nul(values.slice(3))
    assert not _may_hold_nul(values.slice(1, 2))
