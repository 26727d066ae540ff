"""Harbor task folders and a `dataset.toml` that Harbor itself loads.

Harbor (harbor 0.25, `harbor.models.dataset.manifest.DatasetManifest`) names datasets and
tasks `org/name`, finds a local task by the `[task].name` of its `task.toml`, and pins each
task by the content hash of its folder (`harbor.publisher.packager.Packager`): sha256 over
one line `relative/path\\0sha256(file)\\n` per file, sorted by path. The export writes the
stored task folders with `[task].name` set to the task's Harbor name (kept when it already is
`org/name`, else `ORG/<task id>`), shell scripts executable, and only Harbor's own fields in
`dataset.toml`, in the layout Harbor's `to_toml` writes (so `harbor sync` leaves it as it
is). What only itsmreview needs (task ids, versions, content hashes, the licence) goes to the
sidecar `itsmreview.json`. Each task's audit summary (exports.audit.summary) goes into its
`task.toml` as the table `[metadata.itsmreview_audit]`: Harbor's `TaskConfig.metadata` is a
free table, which Harbor loads and keeps.
"""

import hashlib
import json
import re
import tomllib

from itsmreview.catalog.formats.common import ORIGINAL, ORIGINAL_FORMAT, FormatError
from itsmreview.catalog.formats.harbor import planned_files
from itsmreview.exports.bundle import Staging, canonical

ROOT = "tasks/harbor"
SIDECAR = "itsmreview.json"
AUDIT_TABLE = "itsmreview_audit"  # [metadata.itsmreview_audit] of each task.toml
PART = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]*")  # one side of Harbor's ORG_NAME_PATTERN
EXECUTABLE_DIRS = ("tests/", "solution/", "environment/")


def is_org(text: str) -> bool:
    """Whether `text` is usable as the org (or the name) half of a Harbor `org/name`.

    >>> is_org("itsm"), is_org("-x"), is_org("a..b"), is_org("a/b")
    (True, False, False, False)
    """
    return bool(PART.fullmatch(text)) and ".." not in text and len(text) <= 128


def is_harbor_name(text: str) -> bool:
    """Whether `text` is a Harbor `org/name`.

    >>> is_harbor_name("itsm/reset-password"), is_harbor_name("reset-password")
    (True, False)
    """
    org, slash, name = text.partition("/")
    return bool(slash) and is_org(org) and is_org(name)


def slug(text: str) -> str:
    """A Harbor name part for any text: runs of other characters become one `-`.

    >>> slug("Pilot round #2 (Dec.)")
    'Pilot-round-2-Dec'
    """
    cleaned = re.sub(r"[^a-zA-Z0-9._-]+", "-", text)
    cleaned = re.sub(r"\.{2,}", ".", cleaned).strip("-._")
    return cleaned[:128].strip("-._") or "task"


def content_hash(files: list[tuple[str, str]]) -> str:
    """Harbor's content hash of one task folder: sha256 over `path\\0sha256(bytes)\\n` per
    file, sorted by relative POSIX path (harbor.publisher.packager.Packager).

    >>> content_hash([("task.toml", "")])[:12]
    'a92f9491a6d1'
    """
    outer = hashlib.sha256()
    for name, text in sorted(files):
        outer.update(f"{name}\0{hashlib.sha256(text.encode()).hexdigest()}\n".encode())
    return outer.hexdigest()


def is_executable(name: str, text: str) -> bool:
    """Scripts keep their executable bit: a file under tests/, solution/ or environment/
    that is a shell script or starts with `#!` (the catalog keeps text, not file modes)."""
    return name.startswith(EXECUTABLE_DIRS) and (name.endswith(".sh") or text.startswith("#!"))


def harbor_name(task: dict, org: str) -> str:
    """The task's Harbor name: its stored `[task].name` when that is `org/name`, else
    `org/<task id>`."""
    stored = _task_table(task).get("name")
    if isinstance(stored, str) and is_harbor_name(stored):
        return stored
    return f"{org}/{slug(str(task['id']))}"


def _task_table(task: dict) -> dict:
    try:
        config = tomllib.loads(task[ORIGINAL]["task.toml"])
    except tomllib.TOMLDecodeError:
        return {}
    table = config.get("task")
    return table if isinstance(table, dict) else {}


def named_toml(text: str, name: str, *, where: str) -> str:
    """`text` (a task.toml) with `[task].name` set to `name`, everything else as written.
    Raises FormatError when the file defines its `task` table in a way this cannot edit
    (an inline table, dotted keys) or the edit would change anything else.

    >>> named_toml('version = "1.0"\\n', "itsm/x", where="t")
    'version = "1.0"\\n\\n[task]\\nname = "itsm/x"\\n'
    """
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(f"{where}: its task.toml is invalid TOML ({exc})") from None
    value = _toml(name)
    lines = text.splitlines(keepends=True)
    header = next(
        (i for i, line in enumerate(lines) if re.match(r"\s*\[task\]\s*(#.*)?$", line)), None
    )
    if header is None:
        edited = text + ("" if text.endswith("\n") or not text else "\n")
        edited += ("\n" if edited else "") + f"[task]\nname = {value}\n"
    else:
        end = next(
            (i for i in range(header + 1, len(lines)) if re.match(r"\s*\[", lines[i])), len(lines)
        )
        named = next(
            (i for i in range(header + 1, end) if re.match(r"\s*name\s*=", lines[i])), None
        )
        if named is None:
            lines.insert(header + 1, f"name = {value}\n")
        else:
            lines[named] = f"name = {value}\n"
        edited = "".join(lines)
    expected = dict(before, task=dict(before.get("task") or {}, name=name))
    try:
        after = tomllib.loads(edited)
    except tomllib.TOMLDecodeError:
        after = None
    if after != expected:
        raise FormatError(
            f"{where}: cannot set [task].name in its task.toml (the task table is written "
            "inline or with dotted keys); write it as a [task] table with name = "
            f"{value} and re-import the task"
        )
    return edited


def _toml_value(value) -> str:
    """A TOML value of a summary: an integer, a string or a list of strings (JSON's forms
    are TOML's for these)."""
    if isinstance(value, bool) or not isinstance(value, int | str | list):
        raise TypeError(f"no TOML form for {value!r} here")
    return str(value) if isinstance(value, int) else json.dumps(value, ensure_ascii=False)


def audited_toml(text: str, audit: dict, *, where: str) -> str:
    r"""`text` (a task.toml) with the table `[metadata.itsmreview_audit]` set to `audit` (its
    null values left out: TOML has none), replacing one written before, everything else as
    written. Raises FormatError when the file defines `metadata` in a way this cannot extend
    (an inline table, dotted keys).

    >>> print(audited_toml('[task]\nname = "itsm/x"\n', {"findings": 1, "fixed_since": None,
    ...     "failed_checks": ["structure"]}, where="t"), end="")
    [task]
    name = "itsm/x"
    <BLANKLINE>
    [metadata.itsmreview_audit]
    failed_checks = ["structure"]
    findings = 1
    """
    table = {k: v for k, v in audit.items() if v is not None}
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(f"{where}: its task.toml is invalid TOML ({exc})") from None
    lines = text.splitlines(keepends=True)
    header = re.compile(rf"\s*\[\s*metadata\s*\.\s*{AUDIT_TABLE}\s*\]\s*(#.*)?$")
    start = next((i for i, line in enumerate(lines) if header.match(line)), None)
    if start is not None:  # an export imported again: its old summary goes
        end = next(
            (i for i in range(start + 1, len(lines)) if re.match(r"\s*\[", lines[i])), len(lines)
        )
        del lines[start:end]
    kept = "".join(lines).rstrip("\n")
    body = "".join(f"{key} = {_toml_value(table[key])}\n" for key in sorted(table))
    edited = (kept + "\n\n" if kept else "") + f"[metadata.{AUDIT_TABLE}]\n" + body
    metadata = before.get("metadata", {})
    expected = (
        dict(before, metadata=dict(metadata, **{AUDIT_TABLE: table}))
        if isinstance(metadata, dict)
        else None
    )
    try:
        after = tomllib.loads(edited)
    except tomllib.TOMLDecodeError:
        after = None
    if after is None or after != expected:
        raise FormatError(
            f"{where}: cannot add the table [metadata.{AUDIT_TABLE}] to its task.toml (its "
            "metadata is written inline or with dotted keys); write it as a [metadata] table "
            "and re-import the task"
        )
    return edited


def write(
    tasks: list[dict],
    records: list[dict],
    staging: Staging,
    *,
    dataset: str,
    org: str,
    description: str,
    license: dict,
) -> int:
    """Write the Harbor tasks' folders under tasks/harbor/ (each record's `audit` summary,
    when it has one, in its task.toml's [metadata.itsmreview_audit]), their dataset.toml and
    the sidecar itsmreview.json; returns how many. Names stored in a task that would leave the
    folder, and two tasks with one Harbor name, are refused (FormatError)."""
    chosen = [
        (t, r) for t, r in zip(tasks, records, strict=True) if t.get(ORIGINAL_FORMAT) == "harbor"
    ]
    if not chosen:
        return 0
    root = staging.path(f"{ROOT}/dataset.toml").parent
    names: dict[str, str] = {}
    renamed = []
    for task, record in chosen:
        name = harbor_name(task, org)
        if name in names:
            raise FormatError(
                f"tasks {names[name]!r} and {task['id']!r} both become Harbor task {name!r}; "
                "rename one of them (or give one a [task].name of its own) and export again"
            )
        names[name] = task["id"]
        where = f"task {task['id']!r}"
        original = dict(task[ORIGINAL])
        toml = named_toml(original["task.toml"], name, where=where)
        if record.get("audit") is not None:
            toml = audited_toml(toml, record["audit"], where=where)
        original["task.toml"] = toml
        renamed.append((dict(task, **{ORIGINAL: original}), name))
    per_folder: dict[str, list[tuple[str, str]]] = {}
    for target, text in planned_files([t for t, _ in renamed], root):
        relative = target.relative_to(root).as_posix()
        folder, _, name = relative.partition("/")
        per_folder.setdefault(folder, []).append((name, text))
        staging.write_text(f"{ROOT}/{relative}", text, executable=is_executable(name, text))
    entries = []
    for (task, name), (_, record) in zip(renamed, chosen, strict=True):
        folder = task[ORIGINAL]["folder"]
        entries.append(
            {
                "name": name,
                "digest": f"sha256:{content_hash(per_folder[folder])}",
                "folder": folder,
                "id": task["id"],
                "version": record["version"],
                "content_hash": record["content_hash"],
            }
        )
    entries.sort(key=lambda e: e["name"])
    staging.write_text(f"{ROOT}/dataset.toml", dataset_toml(dataset, description, entries))
    staging.write_text(
        f"{ROOT}/{SIDECAR}",
        canonical(
            {
                "dataset": dataset,
                "license": license,
                "note": "itsmreview's record of this Harbor dataset; Harbor ignores this file",
                "tasks": entries,
            },
            indent=1,
        ),
    )
    return len(chosen)


def dataset_toml(dataset: str, description: str, entries: list[dict]) -> str:
    """Harbor's own fields only, laid out as `DatasetManifest.to_toml` lays them out."""
    lines = [
        "[dataset]",
        f"name = {_toml(dataset)}",
        f"description = {_toml(description)}",
        "authors = []",
        'keywords = [ "itsm", "itsmreview",]',
        "",
    ]
    for entry in entries:
        lines += [
            "[[tasks]]",
            f"name = {_toml(entry['name'])}",
            f"digest = {_toml(entry['digest'])}",
            "",
        ]
    return "\n".join(lines) + "\n"


def _toml(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's, minus `\\/`, which JSON never writes)."""
    return json.dumps(text, ensure_ascii=False)
