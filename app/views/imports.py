"""Page: import event logs and task or transcript files (admins and leads)."""

import tempfile
from pathlib import Path

import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.catalog.importing import FORMAT_CHOICES
from itsmreview.coverage.eventlog import (
    PRESETS,
    ColumnMapping,
    guess_separator,
    log_columns,
    log_format,
)
from itsmreview.coverage.overview import logs_table
from itsmreview.coverage.service import import_log_as
from itsmreview.db import session_scope
from itsmreview.files import UnsafePath, safe_join
from itsmreview.review.repair.service import import_as
from itsmreview.settings import get_settings
from itsmreview.ui.action import FAILED, perform
from itsmreview.ui.auth import require
from itsmreview.ui.notice import announce
from itsmreview.ui.tables import show_table
from itsmreview.ui.text import literal
from itsmreview.worker import in_workers, job_of, queue_log_import, queue_task_import

user = require(Role.lead)
ON_SERVER = user.role == Role.admin  # only admins are trusted with the server's files


def _formats(text: str) -> str | tuple[str, ...] | None:
    """The timestamp format field: empty (ISO 8601), one format, or several split by '|'."""
    formats = tuple(f.strip() for f in text.split("|") if f.strip())
    return formats[0] if len(formats) == 1 else (formats or None)


def _upload_dir() -> Path:
    folder = get_settings().data_dir / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


st.title("Imports")
log_tab, task_tab = st.tabs(["Event logs", "Tasks"])


def _stored_upload(upload) -> Path:
    """The uploaded file on disk, written once per upload (not on every rerun)."""
    stored = st.session_state.setdefault("uploaded-files", {})
    if upload.file_id not in stored:
        folder = Path(tempfile.mkdtemp(dir=_upload_dir()))
        try:  # the browser's file name: kept for its extension, never allowed to leave folder
            target = safe_join(folder, Path(upload.name.replace("\\", "/")).name)
        except UnsafePath:
            target = folder / "upload"
        target.write_bytes(upload.getvalue())
        stored[upload.file_id] = target
    return stored[upload.file_id]


def _chosen_path(upload, server_path: str) -> Path | None:
    """The uploaded file (stored), else the path typed on the server, else None."""
    if upload is not None:
        return _stored_upload(upload)
    return Path(server_path) if server_path else None


SEPARATORS = {",": ",", ";": ";", "tab": "\t", "|": "|"}
CUSTOM = "(my own columns)"


def _guess(columns: list[str], taken: set[int], *words: str) -> int:
    """The first column whose name contains one of `words`, else the first one left."""
    free = [i for i in range(len(columns)) if i not in taken]
    for word in words:
        for index in free:
            if word in columns[index].lower():
                return index
    return free[0]


def _mapping_form(source: Path) -> ColumnMapping | None:
    """Column choices for a CSV or parquet log without a preset; None until they are valid."""
    try:
        kind = log_format(source)
    except ValueError as exc:
        st.error(literal(str(exc)))
        return None
    if kind == "xes":
        st.info("XES logs are read with their standard keys: choose the preset (XES keys).")
        return None
    sep, encoding = ",", "utf-8-sig"
    if kind == "csv":
        left, right = st.columns(2)
        guessed = next(k for k, v in SEPARATORS.items() if v == guess_separator(source))
        # keyed per file: a new file starts from its own guess
        sep = SEPARATORS[
            left.selectbox(
                "Separator",
                list(SEPARATORS),
                index=list(SEPARATORS).index(guessed),
                key=f"map-sep-{source}",
                help="Guessed from the file's header.",
            )
        ]
        encoding = right.selectbox("Encoding", ["utf-8-sig", "latin-1", "cp1252"], key="map-enc")
    try:
        columns = log_columns(source, sep, encoding)
    except ValueError as exc:
        st.error(literal(str(exc)))
        return None
    if len(columns) < 3:
        st.error(
            f"{source.name}: {len(columns)} column(s) found ({', '.join(columns)}); a log needs "
            "a case id, an activity and a timestamp: is the separator right?"
        )
        return None
    guesses: list[int] = []
    for words in (("case", "number", "id"), ("activity", "status", "event"), ("time", "date")):
        guesses.append(_guess(columns, set(guesses), *words))
    first, second, third = st.columns(3)
    case = first.selectbox("Case id", columns, index=guesses[0])
    activity = second.selectbox("Activity", columns, index=guesses[1])
    timestamp = third.selectbox("Timestamp", columns, index=guesses[2])
    first, second = st.columns(2)
    timestamp_format = first.text_input(
        "Timestamp format",
        placeholder="ISO 8601 when empty",
        help="strftime codes, e.g. %d/%m/%Y %H:%M for day-first dates; several, separated by "
        "' | ', when the column mixes forms (each value is read by the first that fits). A value "
        "that no format reads stops the import and names the rows.",
    )
    resource = second.selectbox("Resource (optional)", ["(none)", *columns])
    roles = st.multiselect("Role attributes (optional)", columns)
    missing = st.text_input("Missing-value tokens (optional, comma-separated)", placeholder="?")
    if len({case, activity, timestamp}) < 3:
        st.error("Case id, activity and timestamp must be three different columns.")
        return None
    return ColumnMapping(
        case=case,
        activity=activity,
        timestamp=timestamp,
        timestamp_format=_formats(timestamp_format),
        resource=None if resource == "(none)" else resource,
        roles=tuple(roles),
        sep=sep,
        na_values=tuple(t.strip() for t in missing.split(",") if t.strip()),
        encoding=encoding,
    )


@st.fragment(run_every=1.0)
def _import_job(state_key: str, job_id: int, done_text) -> None:
    """An import a worker runs: its progress from the database until it ends, then
    `done_text(result)` announced and the page run again (its tables list what came in)."""
    job = job_of(job_id)
    if job.status in ("queued", "running"):
        waiting = "waiting for a worker" if job.status == "queued" else (job.message or "running")
        st.progress(job.progress, text=literal(f"importing: {waiting}"))
        return
    st.session_state.pop(state_key, None)
    if job.status == "failed":
        st.error(literal(f"The import failed: {job.error}"))
        return
    announce(literal(done_text(job.result or {})))
    st.rerun()


def _log_done(done: dict) -> str:
    return (
        f"{done.get('log')} v{done.get('version')}: {done.get('cases', 0):,} cases, "
        f"{done.get('events', 0):,} events" + ("" if done.get("created") else " (already imported)")
    )


def _tasks_done(created: int, new_versions: int, requeued: int) -> str:
    return f"Imported {created} new task(s), {new_versions} new version(s)." + (
        f" Back in review after revision: {requeued}." if requeued else ""
    )


def _default_preset(source: Path | None, presets: list[str]) -> int:
    """XES keys for an XES file, the column form for a CSV or parquet one (no preset fits
    every table; a known one is a pick away)."""
    try:
        kind = log_format(source) if source is not None else "xes"
    except ValueError:
        kind = "xes"
    return 0 if kind == "xes" else presets.index(CUSTOM)


with log_tab:
    with session_scope() as session:
        show_table(logs_table(session=session))
    upload = st.file_uploader("Event log (CSV, CSV.gz, XES, XES.gz, parquet)", key="log-upload")
    server_log = st.text_input("... or a path on the server", key="log-path") if ON_SERVER else ""
    source = _chosen_path(upload, server_log)
    if source is not None and not source.is_file():
        st.error(literal(f"{source}: no such file on the server"))
        source = None
    presets = ["(XES keys)", *sorted(PRESETS), CUSTOM]
    preset = st.selectbox("Preset", presets, index=_default_preset(source, presets))
    mapping = None
    if source is not None and preset == CUSTOM:
        mapping = _mapping_form(source)
    # no key: the proposed name follows the chosen file
    name = st.text_input("Log name", value=source.name.split(".")[0] if source else "")
    ready = source is not None and (preset != CUSTOM or mapping is not None)
    clicked = ready and st.button("Import log", type="primary")
    if clicked and in_workers():
        job = perform(
            queue_log_import,
            source=source,
            actor=user,
            name=name or None,
            preset=preset if preset in PRESETS else None,
            mapping=mapping,
        )
        if job is not FAILED:
            st.session_state["log-import-job"] = job.id
    if st.session_state.get("log-import-job"):
        _import_job("log-import-job", st.session_state["log-import-job"], _log_done)
    elif clicked:
        bar = st.progress(0.0, text="starting")
        result = perform(
            import_log_as,
            path=source,
            actor=user,
            name=name or None,
            preset=preset if preset in PRESETS else None,
            mapping=mapping,
            progress=lambda stage, f: bar.progress(f, text=stage),
        )
        if result is not FAILED:
            log = result.log
            announce(
                literal(
                    f"{log.name} v{log.version}: {log.n_cases:,} cases, {log.n_events:,} "
                    f"events" + ("" if result.created else " (already imported)")
                )
            )
            st.rerun()  # the table above lists the new log at once
with task_tab:
    st.caption(
        "Native bundles, tau2 task sets, EnterpriseOps-Gym tasks, Harbor task folders "
        "(an admin gives their path on the server) and transcripts (tau2 runs, tau-bench, "
        "ATIF)."
    )
    upload = st.file_uploader("Task or transcript file", key="task-upload")
    server_path = (
        st.text_input("... or a path on the server (file or Harbor folder)") if ON_SERVER else ""
    )
    options = st.columns(3)
    fmt = options[0].selectbox("Format", list(FORMAT_CHOICES))
    log_name = options[1].text_input("Derived from log (optional)") or None
    attach_to = options[2].text_input("Attach transcripts to task (optional)") or None
    target = _chosen_path(upload, server_path)
    options = {"fmt": fmt, "log": log_name, "task": attach_to}
    if target is not None:
        preview = perform(import_as, path=target, actor=user, dry_run=True, **options)
        if preview is not FAILED:
            report = preview.report
            st.write(
                f"**{preview.format}**: would create **{len(report.created)}**, add new "
                f"versions to **{len(report.new_versions)}**, leave "
                f"**{len(report.unchanged)}** unchanged."
            )
            if preview.unresolved:
                st.warning("Declared sources the log does not contain:")
                st.json(preview.unresolved, expanded=False)
            confirmed = st.button("Confirm import", type="primary")
            if confirmed and in_workers():
                job = perform(queue_task_import, source=target, actor=user, **options)
                if job is not FAILED:
                    st.session_state["task-import-job"] = job.id
            elif confirmed:
                done = perform(import_as, path=target, actor=user, **options)
                if done is not FAILED:
                    st.success(
                        _tasks_done(
                            len(done.report.created),
                            len(done.report.new_versions),
                            len(done.requeued),
                        )
                    )
    if st.session_state.get("task-import-job"):
        _import_job(
            "task-import-job",
            st.session_state["task-import-job"],
            lambda done: _tasks_done(done["created"], done["new_versions"], done["requeued"]),
        )
