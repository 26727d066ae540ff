import tempfile
from pathlib import Path

import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.catalog.importing import FORMAT_CHOICES, import_as
from itsmreview.coverage.eventlog import PRESETS
from itsmreview.coverage.overview import logs_table
from itsmreview.coverage.service import import_log
from itsmreview.db import session_scope
from itsmreview.errors import ItsmReviewError
from itsmreview.settings import get_settings
from itsmreview.ui.auth import require

user = require(Role.admin)


def _upload_dir() -> Path:
    folder = get_settings().data_dir / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


st.title("Imports")
log_tab, task_tab = st.tabs(["Event logs", "Tasks"])
with log_tab:
    with session_scope() as session:
        st.dataframe(logs_table(session=session), hide_index=True)
    upload = st.file_uploader("Event log (CSV, CSV.gz, XES, XES.gz, parquet)", key="log-upload")
    preset = st.selectbox("Preset", ["(XES keys)"] + sorted(PRESETS))
    name = st.text_input("Log name", value=Path(upload.name).name.split(".")[0] if upload else "")
    if upload and st.button("Import log", type="primary"):
        target = Path(tempfile.mkdtemp(dir=_upload_dir())) / Path(upload.name).name
        target.write_bytes(upload.getvalue())
        bar = st.progress(0.0, text="starting")
        try:
            with session_scope() as session:
                result = import_log(
                    target,
                    session=session,
                    name=name or None,
                    preset=None if preset.startswith("(") else preset,
                    actor_id=user.id,
                    progress=lambda stage, f: bar.progress(f, text=stage),
                )
        except ItsmReviewError as exc:
            st.error(str(exc))
        else:
            log = result.log
            st.success(
                f"{log.name} v{log.version}: {log.n_cases:,} cases, {log.n_events:,} "
                f"events" + ("" if result.created else " (already imported)")
            )
with task_tab:
    st.caption(
        "Native bundles, tau2 task sets, EnterpriseOps-Gym tasks, Harbor task folders "
        "(give their path on the server) and transcripts (tau2 runs, tau-bench, ATIF)."
    )
    upload = st.file_uploader("Task or transcript file", key="task-upload")
    server_path = st.text_input("... or a path on the server (file or Harbor folder)")
    options = st.columns(3)
    fmt = options[0].selectbox("Format", list(FORMAT_CHOICES))
    log_name = options[1].text_input("Derived from log (optional)") or None
    attach_to = options[2].text_input("Attach transcripts to task (optional)") or None
    target = None
    if upload is not None:
        folder = Path(tempfile.mkdtemp(dir=_upload_dir()))
        target = folder / Path(upload.name).name
        target.write_bytes(upload.getvalue())
    elif server_path:
        target = Path(server_path)
    if target is not None:
        try:
            with session_scope() as session:
                preview = import_as(
                    target,
                    session=session,
                    actor=user,
                    dry_run=True,
                    fmt=fmt,
                    log=log_name,
                    task=attach_to,
                )
        except ItsmReviewError as exc:
            st.error(str(exc))
        else:
            report = preview.report
            st.write(
                f"**{preview.format}**: would create **{len(report.created)}**, add new "
                f"versions to **{len(report.new_versions)}**, leave "
                f"**{len(report.unchanged)}** unchanged."
            )
            if preview.unresolved:
                st.warning("Declared sources the log does not contain:")
                st.json(preview.unresolved, expanded=False)
            if st.button("Confirm import", type="primary"):
                with session_scope() as session:
                    done = import_as(
                        target, session=session, actor=user, fmt=fmt, log=log_name, task=attach_to
                    )
                st.success(
                    f"Imported {len(done.report.created)} new task(s), "
                    f"{len(done.report.new_versions)} new version(s)."
                )
