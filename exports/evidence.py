"""The evidence beside an exported task set: ratings, agreement, the gate and its decisions,
adjudications, coverage, rubrics and the ledger slice. Each function returns
{relative path: text}; nothing here reads the clock."""

import csv
import json
import math
import re
import shutil
import tempfile
from collections.abc import Iterable

import pandas as pd
from itsmreview.exports.bundle import canonical, jsonl
from itsmreview.ledger.service import entry_record

TOP_GAPS = 20


def pseudonyms(ids: Iterable[int], prefix: str) -> dict[int, str]:
    """Stable pseudonyms by id order: the same people get the same names in every export.

    >>> pseudonyms([7, 3], "rater")
    {3: 'rater-01', 7: 'rater-02'}
    """
    ordered = sorted(set(ids))
    width = max(2, len(str(len(ordered))))
    return {user: f"{prefix}-{i:0{width}d}" for i, user in enumerate(ordered, start=1)}


def _clean(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, pd.Timestamp):
        return value.isoformat()
    return value


def ratings_table(
    ratings: pd.DataFrame,
    scores: pd.DataFrame,
    *,
    versions: dict[int, tuple[str, int]],
    names: dict[int, str],
    dimensions: list[str],
) -> list[dict]:
    """One row per current submitted rating: task, version, round, rater, verdict, flags,
    comment, one value per rubric dimension (None where not scored) and the dimensions the
    rater marked not applicable with their reasons ({dimension: reason}, None when none:
    their values are None). Vectorised: a
    150,000-rating export builds this in about a second."""
    if ratings.empty:
        return []
    wide = (
        scores.pivot_table(index="rating_id", columns="dimension", values="value", aggfunc="first")
        if len(scores)
        else pd.DataFrame(index=pd.Index([], name="rating_id"))
    )
    wide = wide.reindex(columns=dimensions)
    frame = ratings.merge(wide, left_on="rating_id", right_index=True, how="left")
    version_ids = frame["task_version_id"].astype(int)
    submitted = pd.to_datetime(frame["submitted_at"], utc=True)
    table = pd.DataFrame(
        {
            "task": version_ids.map(lambda v: versions[v][0]),
            "version": version_ids.map(lambda v: versions[v][1]),
            "round": frame["round"],
            "rater": frame["expert_id"].astype(int).map(names),
            "rater_kind": frame["rater_kind"],
            "revision": frame["revision"].astype(int),
            "verdict": frame["verdict"],
            "flags": frame["flags"].map(lambda f: sorted(f or [])),
            "confidence": frame["confidence"].astype("Int64"),
            "comment": frame["comment"].fillna(""),
            "submitted_at": submitted.map(lambda t: None if pd.isna(t) else t.isoformat()),
        }
    )
    for dimension in dimensions:
        table[dimension] = frame[dimension].astype(float)
    table["not_applicable"] = frame["not_applicable"].map(
        lambda marks: dict(sorted(marks.items())) if isinstance(marks, dict) and marks else None
    )
    table = table.sort_values(["task", "version", "round", "rater"], kind="stable")
    table = table.astype(object).where(table.notna(), None)
    return table.to_dict("records")


def rating_columns(dimensions: list[str]) -> list[str]:
    return [
        "task",
        "version",
        "round",
        "rater",
        "rater_kind",
        "revision",
        "verdict",
        "flags",
        "confidence",
        *dimensions,
        "not_applicable",
        "comment",
        "submitted_at",
    ]


class RatingsFiles:
    """evidence/ratings.csv and evidence/ratings.jsonl, written a batch of rows at a time."""

    def __init__(self, staging, dimensions: list[str]):
        self.columns = rating_columns(dimensions)
        self.rows = 0
        self._csv = staging.open("evidence/ratings.csv")
        self._jsonl = staging.open("evidence/ratings.jsonl")
        self._writer = csv.writer(self._csv, lineterminator="\n")
        self._writer.writerow(self.columns)

    def add(self, rows: list[dict]) -> None:
        columns = self.columns
        self._writer.writerows(
            [row.get(k) for k in columns]
            for row in ({**r, "flags": ";".join(r["flags"]), **_marks_cell(r)} for r in rows)
        )
        self._jsonl.write(jsonl(rows))
        self.rows += len(rows)

    def close(self) -> None:
        self._csv.close()
        self._jsonl.close()


def _marks_cell(row: dict) -> dict:
    """A rating's marks of dimensions that do not apply as one CSV cell: a JSON object
    (reasons may hold any character), empty when there are none."""
    marks = row.get("not_applicable")
    return {"not_applicable": json.dumps(marks, ensure_ascii=False) if marks else ""}


def task_summary(rows: list[dict], dimensions: list[str]) -> list[dict]:
    """Per exported task: human rating count, median of each dimension, verdict counts."""
    frame = pd.DataFrame(rows)
    if frame.empty:
        return []
    humans = frame[frame["rater_kind"] == "human"]
    keys = ["task", "version"]
    tasks = frame[keys].drop_duplicates().sort_values(keys).reset_index(drop=True)
    present = [d for d in dimensions if d in humans]
    medians = humans.groupby(keys)[present].median().reset_index()
    counts = humans.groupby(keys).size().rename("ratings").reset_index()
    voted = humans.dropna(subset=["verdict"])
    crosstab = pd.crosstab([voted["task"], voted["version"]], voted["verdict"])
    names = [str(c) for c in crosstab.columns]
    verdicts = pd.DataFrame(
        {
            "task": crosstab.index.get_level_values(0),
            "version": crosstab.index.get_level_values(1),
            "verdicts": [
                {n: int(c) for n, c in zip(names, row, strict=True) if c}
                for row in crosstab.to_numpy().tolist()
            ],
        }
    )
    table = tasks.merge(counts, on=keys, how="left").merge(verdicts, on=keys, how="left")
    table = table.merge(medians, on=keys, how="left")
    out = []
    for row in table.to_dict("records"):
        out.append(
            {
                "task": row["task"],
                "version": int(row["version"]),
                "ratings": 0 if pd.isna(row["ratings"]) else int(row["ratings"]),
                "median": {d: _clean(float(row[d])) if d in row else None for d in dimensions},
                "verdicts": {str(k): int(v) for k, v in (row["verdicts"] or {}).items()}
                if isinstance(row["verdicts"], dict)
                else {},
            }
        )
    return out


def agreement_file(per_round: dict[str, list[dict]], summary: list[dict]) -> dict[str, str]:
    return {"evidence/agreement.json": canonical({"rounds": per_round, "tasks": summary})}


def gate_file(per_round: dict[str, dict]) -> dict[str, str]:
    return {"evidence/gate.json": canonical(per_round)}


def _compact(value) -> str:
    """`canonical(value)` without its closing newline: a part of a canonical document."""
    return canonical(value)[:-1]


class JsonArraySpool:
    """The items of a JSON array in canonical form, spooled to a temporary file a batch at a
    time and copied into place at the end (memory holds none of them)."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n")  # noqa: SIM115 (closed by __exit__)
        self.count = 0

    def add(self, items: Iterable) -> None:
        for item in items:
            self._file.write(("," if self.count else "") + _compact(item))
            self.count += 1

    def copy_to(self, handle) -> None:
        self._file.flush()
        self._file.seek(0)
        shutil.copyfileobj(self._file, handle, 1 << 20)

    def __enter__(self) -> "JsonArraySpool":
        return self

    def __exit__(self, *_) -> None:
        self._file.close()


class AgreementFile:
    """evidence/agreement.json, the bytes `agreement_file` writes, with the per-task summary
    added a batch at a time."""

    def __init__(self, staging, per_round: dict[str, list[dict]]):
        self._handle = staging.open("evidence/agreement.json")
        self._handle.write('{"rounds":' + _compact(per_round) + ',"tasks":[')
        self._first = True

    def add(self, summary: list[dict]) -> None:
        for row in summary:
            self._handle.write(("" if self._first else ",") + _compact(row))
            self._first = False

    def __enter__(self) -> "AgreementFile":
        return self

    def __exit__(self, kind, *_) -> None:
        if kind is None:
            self._handle.write("]}\n")
        self._handle.close()


def write_gate(handle, per_round: dict[str, dict], decisions: dict[str, JsonArraySpool]) -> None:
    """The bytes `gate_file` writes, each round's "decisions" taken from its spool."""
    handle.write("{")
    for i, name in enumerate(sorted(per_round)):
        handle.write(("," if i else "") + _compact(name) + ":{")
        for j, key in enumerate(sorted(per_round[name])):
            handle.write(("," if j else "") + _compact(key) + ":")
            if key == "decisions":
                handle.write("[")
                decisions[name].copy_to(handle)
                handle.write("]")
            else:
                handle.write(_compact(per_round[name][key]))
        handle.write("}")
    handle.write("}\n")


def adjudications_file(
    adjudications: pd.DataFrame, *, versions: dict[int, tuple[str, int]], names: dict[int, str]
) -> dict[str, str]:
    rows = [
        {
            "task": versions[int(a.task_version_id)][0],
            "version": versions[int(a.task_version_id)][1],
            "round": a.round,
            "lead": names[int(a.lead_id)],
            "decision": a.decision,
            "reason": a.reason,
            "created_at": _clean(pd.Timestamp(a.created_at)),
        }
        for a in adjudications.itertuples(index=False)
    ]
    return {"evidence/adjudications.jsonl": jsonl(rows)}


MACHINE_CHECKS = "evidence/machine_checks.jsonl"


def machine_check_lines(checks: list, *, versions: dict[int, tuple[str, int]]) -> str:
    """The lines of MACHINE_CHECKS of these results (the newest of each machine check of a
    batch of exported versions)."""
    rows = [
        {
            "task": versions[c.task_version_id][0],
            "version": versions[c.task_version_id][1],
            "check": c.check,
            "status": str(c.status),
            "summary": c.summary,
            "details": c.details,
            "tool": c.tool,
            "ran_at": None if c.ran_at is None else _clean(pd.Timestamp(c.ran_at)),
        }
        for c in checks
    ]
    return jsonl(rows)


def coverage_file(reports: dict[str, dict]) -> dict[str, str]:
    trimmed = {}
    for log, report in sorted(reports.items()):
        gaps = report.get("gaps", {})
        trimmed[log] = {
            **report,
            "gaps": {
                key: (value[:TOP_GAPS] if isinstance(value, list) else value)
                for key, value in gaps.items()
            },
        }
    return {"evidence/coverage.json": canonical(trimmed)}


def rubrics_file(rubrics: list) -> dict[str, str]:
    return {
        "evidence/rubrics.json": canonical(
            [
                {
                    "name": r.name,
                    "version": r.version,
                    "content_hash": r.content_hash,
                    "definition": r.definition,
                }
                for r in rubrics
            ]
        )
    }


_TEXT = json.encoder.encode_basestring  # a str as JSON text, as jsonl's encoder writes it
_PAYLOAD = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str).encode


def ledger_line(entry, names: dict[int | None, str]) -> str:
    """`jsonl([entry_record(entry, actor)])`, written field by field in the order its sorted
    keys give (no record dict, no key sorting): the export's slice has a line per entry. An
    entry whose columns are not the stored types goes the general way."""
    actor = names.get(entry.actor_id)
    field = entry.field
    if not (
        type(entry.seq) is int
        and (actor is None or type(actor) is str)
        and (field is None or type(field) is str)
        and type(entry.action) is str
        and type(entry.artifact_id) is str
        and type(entry.artifact_type) is str
        and type(entry.reference) is str
        and type(entry.source_kind) is str
        and type(entry.prev_hash) is str
        and type(entry.entry_hash) is str
    ):
        return jsonl([entry_record(entry, actor)])
    return (
        f'{{"action": {_TEXT(entry.action)}, "actor": {"null" if actor is None else _TEXT(actor)}, '
        f'"artifact_id": {_TEXT(entry.artifact_id)}, '
        f'"artifact_type": {_TEXT(entry.artifact_type)}, '
        f'"created_at": {_TEXT(entry.created_at.isoformat())}, '
        f'"entry_hash": {_TEXT(entry.entry_hash)}, '
        f'"field": {"null" if field is None else _TEXT(field)}, '
        f'"payload": {_PAYLOAD(entry.payload)}, "prev_hash": {_TEXT(entry.prev_hash)}, '
        f'"reference": {_TEXT(entry.reference)}, "seq": {entry.seq}, '
        f'"source_kind": {_TEXT(entry.source_kind)}}}\n'
    )


SYNTHETIC = re.compile(r"\bsynthetic\b|\bgenerated\b|\bsimulated\b", re.IGNORECASE)


def log_origin(entries: Iterable) -> dict:
    """Where a source log came from, by its ledger entries (import first): `synthetic` when a
    source recorded for it (`itsmreview ledger add --about log:NAME`) calls it synthetic,
    generated or simulated, `real` when one of kind `logs` does not, else `not recorded`.
    Returns origin, the newest recorded statement and the file it was imported from.

    >>> from types import SimpleNamespace as E
    >>> log_origin([E(action="import", source_kind="logs", reference="a.csv sha256:1",
    ...               payload={}, field=None)])["origin"]
    'not recorded'
    >>> log_origin([E(action="add-source", source_kind="external", field="origin",
    ...               reference="Synthetic log (seed 3)", payload={})])["origin"]
    'synthetic'
    """
    imported, statements = None, []
    for entry in entries:
        if entry.action == "import":
            imported = entry.reference
        elif entry.action == "add-source":
            note = str((entry.payload or {}).get("note") or "").strip()
            text = entry.reference + (f" ({note})" if note else "")
            statements.append((entry.source_kind, text))
    if any(SYNTHETIC.search(text) for _, text in statements):
        origin = "synthetic"
    elif any(kind == "logs" for kind, _ in statements):
        origin = "real"
    else:
        origin = "not recorded"
    out = {"origin": origin, "imported_from": imported}
    if statements:
        out["statement"] = statements[-1][1]
    return out
