"""Harbor task folders (as imported) and a `dataset.toml` with each folder's sha256 digest."""

import hashlib

from itsmreview.catalog.formats.common import ORIGINAL_FORMAT
from itsmreview.catalog.formats.harbor import planned_files
from itsmreview.exports.bundle import Staging

ROOT = "tasks/harbor"


def folder_digest(files: list[tuple[str, str]]) -> str:
    """sha256 over the sorted (relative path, sha256 of content) lines of one task folder."""
    lines = sorted(f"{name}\0{hashlib.sha256(text.encode()).hexdigest()}" for name, text in files)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def write(tasks: list[dict], staging: Staging, *, dataset: str) -> int:
    """Write the Harbor tasks' folders under tasks/harbor/ and their dataset.toml; returns how
    many. Names stored in a task that would leave the folder are refused (FormatError)."""
    chosen = [t for t in tasks if t.get(ORIGINAL_FORMAT) == "harbor"]
    if not chosen:
        return 0
    root = staging.path(f"{ROOT}/dataset.toml").parent
    per_folder: dict[str, list[tuple[str, str]]] = {}
    for target, text in planned_files(chosen, root):
        relative = target.relative_to(root).as_posix()
        folder, _, name = relative.partition("/")
        per_folder.setdefault(folder, []).append((name, text))
        staging.write_text(f"{ROOT}/{relative}", text)
    lines = ["[dataset]", f"name = {_toml(dataset)}", ""]
    for folder in sorted(per_folder):
        lines += [
            "[[tasks]]",
            f"name = {_toml(folder)}",
            f"path = {_toml(folder)}",
            f'digest = "sha256:{folder_digest(per_folder[folder])}"',
            "",
        ]
    staging.write_text(f"{ROOT}/dataset.toml", "\n".join(lines))
    return len(chosen)


def _toml(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
