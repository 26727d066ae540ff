"""An XES file read as Arrow record batches, streamed with `lxml.etree.iterparse`: memory
holds one batch of events and one trace, whatever the file's size (pm4py's reader holds the
whole log).

The columns are pm4py's: each event attribute under its key, each trace attribute as
`case:<key>`; values typed by their element (`string` and `id` text, `date` a UTC timestamp,
`int`, `float`, `boolean`); nested attributes and lists are left out. A first pass reads the
attributes' keys and types (the schema every batch has), a second the events.

>>> import gzip, tempfile, pathlib
>>> xes = b'''<log xmlns="http://www.xes-standard.org/"><trace>
... <string key="concept:name" value="c1"/>
... <event><string key="concept:name" value="open"/>
... <date key="time:timestamp" value="2024-01-01T10:00:00+02:00"/><int key="n" value="3"/></event>
... <event><string key="concept:name" value="close"/>
... <date key="time:timestamp" value="2024-01-01T11:00:00Z"/></event></trace></log>'''
>>> path = pathlib.Path(tempfile.mkdtemp()) / "tiny.xes.gz"
>>> _ = path.write_bytes(gzip.compress(xes))
>>> [b.to_pylist() for b in xes_batches(path)][0][0]["time:timestamp"].isoformat()
'2024-01-01T08:00:00+00:00'
>>> xes_schema(path).names
['concept:name', 'time:timestamp', 'n', 'case:concept:name']
"""

import gzip
import lzma
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
from lxml import etree

BATCH_EVENTS = 50_000
TYPES = {
    "string": pa.string(),
    "id": pa.string(),
    "date": pa.timestamp("us", tz="UTC"),
    "int": pa.int64(),
    "float": pa.float64(),
    "boolean": pa.bool_(),
}
CASE_PREFIX = "case:"


def _local(tag) -> str:
    """An element's name without its namespace (XES files come with and without one)."""
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


def _open(path: Path):
    name = path.name.lower()
    if name.endswith(".gz"):
        return gzip.open(path, "rb")
    if name.endswith(".xz"):
        return lzma.open(path, "rb")
    return open(path, "rb")


def _elements(path: Path) -> Iterator[tuple[str, object]]:
    """(event, element) of the file's elements: no entities resolved, no DTD loaded, nothing
    from the network, libxml2's limits on (a document that declares a DTD is refused at its
    first element: XES never needs one, and its entities can expand or read other files)."""
    with _open(path) as handle:
        context = etree.iterparse(
            handle,
            events=("end",),
            resolve_entities=False,
            no_network=True,
            load_dtd=False,
        )
        events = iter(context)
        for event, element in events:  # the first element: the prolog is read by then
            if element.getroottree().docinfo.doctype:
                raise ValueError(
                    f"{path}: declares a DTD or entities (<!DOCTYPE/<!ENTITY>), which XES "
                    "never needs and which can expand or read other files; remove the "
                    "declaration"
                )
            yield event, element
            break
        yield from events


def _scopes(path: Path) -> Iterator[tuple[str, str, str, str | None, int]]:
    """(scope, kind, key, value, line) of each attribute directly inside a trace or an event,
    and ('end', 'trace' or 'event', '', None, line) when one ends; nested attributes are
    skipped."""
    for _, element in _elements(path):
        name = _local(element.tag)
        if name in ("trace", "event"):
            yield "end", name, "", None, element.sourceline
            element.clear(keep_tail=False)
            parent = element.getparent()
            if parent is not None:  # drop what was read: memory stays one trace
                while element.getprevious() is not None:
                    del parent[0]
        elif name in TYPES:
            scope = _local(element.getparent().tag)
            if scope in ("trace", "event"):
                yield scope, name, element.get("key"), element.get("value"), element.sourceline


def xes_schema(path: Path | str) -> pa.Schema:
    """The columns the file's events have (event attributes, then `case:` trace attributes,
    in order of first appearance) with their types; a key seen with two types is text."""
    found: dict[str, pa.DataType] = {}
    for scope, kind, key, _, _ in _scopes(Path(path)):
        if scope == "end" or key is None:
            continue
        column = key if scope == "event" else CASE_PREFIX + key
        typed = TYPES[kind]
        if found.get(column, typed) != typed:
            typed = pa.string()
        found[column] = typed
    events = [(k, t) for k, t in found.items() if not k.startswith(CASE_PREFIX)]
    cases = [(k, t) for k, t in found.items() if k.startswith(CASE_PREFIX)]
    return pa.schema(events + cases)


def _date(value: str) -> datetime:
    parsed = datetime.fromisoformat(value)
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


_CONVERT = {
    "string": str,
    "id": str,
    "date": _date,
    "int": int,
    "float": float,
    "boolean": lambda v: v.strip().lower() == "true",
}


def xes_batches(
    path: Path | str, *, schema: pa.Schema | None = None, batch_events: int = BATCH_EVENTS
) -> Iterator[pa.RecordBatch]:
    """The file's events in batches of `batch_events`, in file order, each with `schema`
    (`xes_schema(path)` when not given). A trace's attributes are added to each of its events
    once the trace ends (XES does not say they come first).

    Raises ValueError naming the file, the attribute and its line for a value its type
    cannot read."""
    path = Path(path)
    schema = schema if schema is not None else xes_schema(path)
    text = {f.name for f in schema if f.type == pa.string()}
    columns: dict[str, list] = {name: [] for name in schema.names}
    trace: dict[str, object] = {}
    events: list[dict] = []
    event: dict[str, object] = {}
    rows = 0
    for scope, kind, key, value, line in _scopes(path):
        if scope == "end":
            if kind == "event":
                events.append(event)
                event = {}
                continue
            for row in events:  # the trace ended: its events, with its attributes
                row.update(trace)
                for name, values in columns.items():
                    values.append(row.get(name))
                rows += 1
                if rows >= batch_events:
                    yield pa.RecordBatch.from_pydict(columns, schema=schema)
                    columns = {name: [] for name in schema.names}
                    rows = 0
            trace, events = {}, []
            continue
        if key is None or value is None:
            continue
        column = key if scope == "event" else CASE_PREFIX + key
        if column not in columns:
            continue
        try:
            converted = value if column in text else _CONVERT[kind](value)
        except ValueError:
            raise ValueError(
                f"{path}, line {line}: attribute {key!r} has the {kind} value {value!r}, "
                f"which is not one; correct the value or its type"
            ) from None
        (event if scope == "event" else trace)[column] = converted
    if rows:
        yield pa.RecordBatch.from_pydict(columns, schema=schema)
