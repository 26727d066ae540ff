"""The streamed XES reader: the same events, columns and typed values as pm4py's reader, in
batches of bounded size."""

import pandas as pd
import pyarrow as pa
import pytest
from itsmreview.coverage.xes_stream import xes_batches, xes_schema


def _ours(path, batch_events=1_000) -> pd.DataFrame:
    schema = xes_schema(path)
    batches = list(xes_batches(path, schema=schema, batch_events=batch_events))
    assert all(b.num_rows <= batch_events for b in batches)
    return pa.Table.from_batches(batches, schema=schema).to_pandas()


def _pm4py(path) -> pd.DataFrame:
    import pm4py

    return pm4py.read_xes(str(path), return_legacy_log_object=False, show_progress_bar=False)


def _assert_equal_to_pm4py(path):
    ours, theirs = _ours(path), _pm4py(path)
    assert sorted(ours.columns) == sorted(theirs.columns)
    theirs = theirs[list(ours.columns)].reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, theirs, check_dtype=False)
    assert ours["time:timestamp"].dtype == theirs["time:timestamp"].dtype  # UTC, microseconds


def test_helpdesk_reads_as_pm4py_reads_it(real_file):
    path = real_file("logs", "helpdesk.xes.gz")
    _assert_equal_to_pm4py(path)
    assert len(_ours(path)) == 21348


def test_a_synthetic_log_reads_as_pm4py_reads_it(tmp_path):
    from itsmreview.coverage.synthetic import generate_log, write_xes

    path = write_xes(generate_log(cases=300, seed=4), tmp_path / "synthetic.xes.gz")
    _assert_equal_to_pm4py(path)


ODD = """<?xml version="1.0" encoding="utf-8"?>
<log>
  <string key="origin" value="log level: not an event's"/>
  <trace>
    <event>
      <string key="concept:name" value="open"/>
      <date key="time:timestamp" value="2024-03-01T10:00:00.250+01:00"/>
      <int key="level" value="2"/>
      <float key="cost" value="1.5"/>
      <boolean key="urgent" value="true"/>
      <string key="note" value="nested below">
        <string key="inner" value="left out"/>
      </string>
    </event>
    <event>
      <string key="concept:name" value="close"/>
      <date key="time:timestamp" value="2024-03-01T12:00:00"/>
      <string key="level" value="two"/>
      <boolean key="urgent" value="false"/>
    </event>
    <string key="concept:name" value="late trace attribute"/>
  </trace>
  <trace>
    <string key="concept:name" value="c2"/>
    <event><string key="concept:name" value="open"/></event>
  </trace>
</log>
"""


def test_types_trace_attributes_and_nesting(tmp_path):
    path = tmp_path / "odd.xes"
    path.write_text(ODD)
    schema = xes_schema(path)
    assert schema.field("level").type == pa.string()  # an int here, a string there
    assert schema.field("cost").type == pa.float64()
    assert schema.field("urgent").type == pa.bool_()
    assert "inner" not in schema.names and "origin" not in schema.names
    rows = [r for b in xes_batches(path, schema=schema, batch_events=2) for r in b.to_pylist()]
    assert [r["concept:name"] for r in rows] == ["open", "close", "open"]
    assert [r["case:concept:name"] for r in rows] == [
        "late trace attribute",
        "late trace attribute",
        "c2",
    ]
    assert rows[0]["time:timestamp"].isoformat() == "2024-03-01T09:00:00.250000+00:00"
    assert rows[1]["time:timestamp"].isoformat() == "2024-03-01T12:00:00+00:00"  # naive: UTC
    assert (rows[0]["level"], rows[1]["level"], rows[2]["level"]) == ("2", "two", None)
    assert (rows[0]["cost"], rows[0]["urgent"], rows[1]["urgent"]) == (1.5, True, False)
    assert rows[0]["note"] == "nested below"


def test_a_value_its_type_cannot_read_names_the_line(tmp_path):
    path = tmp_path / "bad.xes"
    path.write_text(
        '<log><trace><event>\n<string key="concept:name" value="a"/>\n'
        '<int key="n" value="many"/></event></trace></log>'
    )
    with pytest.raises(ValueError, match=r"bad\.xes, line 3: attribute 'n' has the int value"):
        list(xes_batches(path))


def test_a_file_that_declares_entities_is_refused_before_any_is_expanded(tmp_path):
    path = tmp_path / "entity.xes"
    path.write_text(
        '<?xml version="1.0"?><!DOCTYPE log [<!ENTITY x "expanded">]>'
        '<log><trace><event><string key="concept:name" value="&x;"/></event></trace></log>'
    )
    with pytest.raises(ValueError, match=r"entity\.xes: declares a DTD or entities"):
        xes_schema(path)
    with pytest.raises(ValueError, match="declares a DTD"):
        list(xes_batches(path, schema=pa.schema([("concept:name", pa.string())])))
