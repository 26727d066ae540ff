"""Detecting a file's format and dispatching to its reader and writer."""

import json
from pathlib import Path

import yaml
from itsmreview.catalog.formats import eogym, harbor, tau2, trajectories
from itsmreview.catalog.formats.common import ORIGINAL, ORIGINAL_FORMAT, FormatError, load_json

FORMATS = ("native", "harbor", "tau2", "eogym")
TRANSCRIPT_FORMATS = ("tau2-sim", "taubench", "atif")


def detect_format(path: Path) -> str:
    """The format of `path`, from its layout or content. Raises FormatError if unknown."""
    if path.is_dir():
        if harbor.is_task_dir(path) or any(harbor.is_task_dir(p) for p in path.iterdir()):
            return "harbor"
        raise FormatError(f"{path}: a folder must be a Harbor task (task.toml) or hold some")
    if not path.is_file():
        raise FormatError(f"{path}: no such file or folder")
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml", ".jsonl"):
        return "native"
    if path.name in ("task.toml", "dataset.toml"):
        return "harbor"
    if suffix != ".json":
        raise FormatError(
            f"{path}: unknown format; give --format (one of "
            f"{', '.join(FORMATS + TRANSCRIPT_FORMATS)})"
        )
    data = load_json(path)
    if harbor.registry_looks_like(data):
        return "harbor"
    if tau2.looks_like(data):
        return "tau2"
    if eogym.looks_like(data):
        return "eogym"
    if trajectories.tau2_looks_like(data):
        return "tau2-sim"
    if trajectories.atif_looks_like(data):
        return "atif"
    if trajectories.taubench_looks_like(data):
        return "taubench"
    return "native"


def read_tasks(
    path: Path, fmt: str, *, persona: str = "L1 service desk agent", log: str | None = None
) -> list[dict]:
    """Native task dicts (not yet validated) read from `path` in task format `fmt`."""
    if fmt == "harbor":
        return harbor.read(
            path.parent if path.name in ("task.toml", "dataset.toml") else path,
            persona=persona,
            log=log,
        )
    if fmt == "tau2":
        return tau2.read(path, persona=persona, log=log)
    if fmt == "eogym":
        return eogym.read(path, persona=persona, log=log)
    if fmt == "native":
        raise FormatError("native bundles are read with catalog.native.load_bundle")
    raise FormatError(f"unknown task format {fmt!r}; one of {', '.join(FORMATS)}")


def read_transcripts(path: Path, fmt: str, *, task: str | None = None) -> dict[str, list[dict]]:
    """Task id -> transcripts read from `path`; `task` overrides the ids in the file."""
    if fmt == "tau2-sim":
        found = trajectories.read_tau2(path)
    elif fmt == "taubench":
        found = trajectories.read_taubench(path)
    elif fmt == "atif":
        found = trajectories.read_atif(path, task)
    else:
        raise FormatError(
            f"unknown transcript format {fmt!r}; one of {', '.join(TRANSCRIPT_FORMATS)}"
        )
    if task:
        return {task: [t for items in found.values() for t in items]}
    return found


def export_tasks(tasks: list[dict], fmt: str, path: Path) -> None:
    """Write native task dicts in `fmt`. Foreign formats write back the documents the tasks
    were imported from, so import followed by export reproduces the input."""
    if fmt == "native":
        clean = [
            {k: v for k, v in t.items() if k not in (ORIGINAL, ORIGINAL_FORMAT)} for t in tasks
        ]
        if path.suffix.lower() in (".yaml", ".yml"):
            path.write_text(yaml.safe_dump({"tasks": clean}, sort_keys=False, allow_unicode=True))
        elif path.suffix.lower() == ".jsonl":
            path.write_text("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in clean))
        else:
            path.write_text(json.dumps({"tasks": clean}, indent=2, ensure_ascii=False))
        return
    wrong = [t["id"] for t in tasks if t.get(ORIGINAL_FORMAT) != fmt]
    if wrong:
        raise FormatError(
            f"tasks {', '.join(wrong[:5])} were not imported as {fmt}; export them as native"
        )
    writer = {"harbor": harbor.write, "tau2": tau2.write, "eogym": eogym.write}.get(fmt)
    if writer is None:
        raise FormatError(f"unknown export format {fmt!r}; one of {', '.join(FORMATS)}")
    writer(tasks, path)
