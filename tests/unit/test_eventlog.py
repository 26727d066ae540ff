"""Reading logs: every bad input gives a message that says what, where and how to fix it."""

import gzip

import pandas as pd
import pyarrow as pa
import pytest
from itsmreview.coverage.eventlog import PRESETS, ColumnMapping, parse_format, read_log

MAPPING = ColumnMapping(case="id", activity="act", timestamp="ts")


def write(tmp_path, text, name="log.csv", encoding="utf-8"):
    path = tmp_path / name
    path.write_bytes(text.encode(encoding))
    return path


def test_missing_column_lists_the_columns_present(tmp_path):
    path = write(tmp_path, "id,activity,ts\n1,a,2024-01-01\n")
    with pytest.raises(ValueError, match=r"'act' not in the file.*'id', 'activity', 'ts'"):
        read_log(path, MAPPING)


def test_wrong_separator_is_hinted(tmp_path):
    path = write(tmp_path, "id;act;ts\n1;a;2024-01-01\n")
    with pytest.raises(ValueError, match="is the separator ',' right"):
        read_log(path, MAPPING)


def test_unparseable_timestamps_give_count_and_rows(tmp_path):
    path = write(tmp_path, "id,act,ts\n1,a,2024-01-01 10:00\n1,b,yesterday\n2,a,soon\n")
    with pytest.raises(ValueError) as err:
        read_log(path, MAPPING)
    message = str(err.value)
    assert "2 timestamp(s)" in message
    assert "row 3: 'yesterday'" in message and "row 4: 'soon'" in message


def test_day_first_needs_an_explicit_format(tmp_path):
    path = write(tmp_path, "id,act,ts\n1,a,13/02/2024 10:00\n1,b,14/02/2024 11:00\n")
    with pytest.raises(ValueError, match="do not match format 'ISO8601'"):
        read_log(path, MAPPING)
    mapping = ColumnMapping(
        case="id", activity="act", timestamp="ts", timestamp_format="%d/%m/%Y %H:%M"
    )
    events, _ = read_log(path, mapping)
    assert events["timestamp"].dt.month.tolist() == [2, 2]
    assert events["timestamp"].dt.day.tolist() == [13, 14]


def test_ambiguous_day_first_dates_are_not_read_month_first(tmp_path):
    path = write(tmp_path, "id,act,ts\n1,a,03/02/2024 10:00\n")
    mapping = ColumnMapping(
        case="id", activity="act", timestamp="ts", timestamp_format="%d/%m/%Y %H:%M"
    )
    events, _ = read_log(path, mapping)
    assert (events["timestamp"].dt.day.iloc[0], events["timestamp"].dt.month.iloc[0]) == (3, 2)


def test_missing_case_ids_are_reported_with_rows(tmp_path):
    path = write(tmp_path, "id,act,ts\n1,a,2024-01-01\n,b,2024-01-01\n")
    with pytest.raises(
        ValueError,
        match=r"1 event\(s\) have no case id \(column 'id'\); "
        r"first at row\(s\) \[3\]",
    ):
        read_log(path, MAPPING)


def test_custom_missing_token_and_latin1(tmp_path):
    text = "id;act;ts;grp\n1;Réouvert;2024-01-01 10:00;?\n1;Clôturé;2024-01-01 11:00;L2\n"
    path = write(tmp_path, text, encoding="latin-1")
    mapping = ColumnMapping(
        case="id",
        activity="act",
        timestamp="ts",
        roles=("grp",),
        sep=";",
        na_values=("?",),
        encoding="latin-1",
    )
    events, _ = read_log(path, mapping)
    assert events["activity"].tolist() == ["Réouvert", "Clôturé"]
    assert events["role:grp"].isna().tolist() == [True, False]
    with pytest.raises(ValueError, match="pass the file's encoding"):
        read_log(
            path,
            ColumnMapping(case="id", activity="act", timestamp="ts", sep=";", encoding="utf-8"),
        )


def test_empty_log_is_an_error(tmp_path):
    path = write(tmp_path, "id,act,ts\n")
    with pytest.raises(ValueError, match="no events"):
        read_log(path, MAPPING)


def test_gzip_and_bom_are_read(tmp_path):
    path = tmp_path / "log.csv.gz"
    with gzip.open(path, "wt", encoding="utf-8-sig") as out:
        out.write("id,act,ts\n1,a,2024-01-01T10:00:00+01:00\n")
    events, _ = read_log(path, MAPPING)
    assert events["timestamp"].iloc[0] == pd.Timestamp("2024-01-01T09:00:00Z")


def test_presets_name_their_timestamp_format():
    for name, preset in PRESETS.items():
        assert preset.timestamp_format, f"preset {name} leaves the format to guessing"


def test_a_repeated_unmapped_column_name_is_harmless(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text(
        "case,activity,time,note,note\n"
        "c1,a,2020-01-01T00:00:00Z,x,y\n"
        "c1,b,2020-01-01T01:00:00Z,x,y\n"
    )
    events, _ = read_log(path, ColumnMapping("case", "activity", "time"))
    assert list(events["activity"]) == ["a", "b"]
    with pytest.raises(ValueError, match="'note' appears 2 times"):
        read_log(path, ColumnMapping("case", "activity", "time", resource="note"))


@pytest.mark.parametrize(
    "first, then", [("naive", "zoned"), ("zoned", "naive"), ("naive", None), ("zoned", None)]
)
def test_iso_timestamps_read_alike_whichever_kind_comes_first(first, then):
    kinds = {"naive": "2024-03-01T10:00:00", "zoned": "2024-03-01T11:30:00Z"}
    values = [kinds[first]] * 100 + ([kinds[then]] if then else [])
    found = parse_format(pa.chunked_array([pa.array(values)]), "ISO8601", "x.csv")
    expected = pd.to_datetime(pd.Series(values), format="ISO8601", utc=True)
    assert found.to_pylist() == expected.dt.as_unit("us").astype("int64").tolist()
