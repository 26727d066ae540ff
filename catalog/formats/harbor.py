"""Harbor task directories: task.toml, instruction.md, environment/, tests/, solution/."""

import json
import tomllib
from pathlib import Path

from itsmreview.catalog.formats.common import ORIGINAL, ORIGINAL_FORMAT, FormatError, text_block
from itsmreview.files import UnsafePath, is_within, read_text_bounded, safe_join, walk_files

TEXT_LIMIT = 200_000  # characters of one file kept in the task (binary files are listed only)
MAX_FILES = 2_000  # files in one task folder
SIDECAR = "itsmreview.json"  # written beside dataset.toml by an itsmreview export


def is_task_dir(path: Path) -> bool:
    return path.is_dir() and (path / "task.toml").is_file()


def _files(folder: Path) -> dict[str, str | None]:
    """Relative name -> text of every file below `folder` (None: binary or too large to keep).
    Links are never followed out of the folder; sizes are checked before reading."""
    out = {}
    if folder.is_symlink() or not folder.is_dir():
        if folder.is_symlink():
            raise FormatError(
                f"{folder} is a link to {folder.resolve()}; links to folders are not followed: "
                "copy the files into the task folder"
            )
        return out
    try:
        files = list(walk_files(folder, max_files=MAX_FILES))
    except ValueError as exc:
        raise FormatError(str(exc)) from None
    for file in files:
        name = file.relative_to(folder).as_posix()
        if file.stat().st_size > 4 * TEXT_LIMIT:  # 4 bytes per character at the most
            out[name] = None
            continue
        try:
            text = file.read_text(encoding="utf-8")
            out[name] = text if len(text) <= TEXT_LIMIT else None
        except UnicodeDecodeError:
            out[name] = None
    return out


def _read_small(path: Path) -> str:
    if path.is_symlink() and not is_within(path.parent, path):
        raise FormatError(f"{path} is a link to {path.resolve()}, outside the task folder")
    try:  # a regular file only (a FIFO would block), its size checked before reading
        return read_text_bounded(path, 4 * TEXT_LIMIT, what="Harbor task file")
    except ValueError as exc:
        raise FormatError(str(exc)) from None


def read_task(folder: Path, *, persona: str, log: str | None) -> dict:
    toml_path = folder / "task.toml"
    toml_text = _read_small(toml_path)
    try:
        config = tomllib.loads(toml_text)
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(f"{toml_path}: invalid TOML: {exc}") from None
    instruction_path = folder / "instruction.md"
    if not instruction_path.exists():
        raise FormatError(f"{folder}: instruction.md is missing (every Harbor task has one)")
    instruction = _read_small(instruction_path)
    task_table = config.get("task") if isinstance(config.get("task"), dict) else {}
    metadata = config.get("metadata") if isinstance(config.get("metadata"), dict) else {}
    for table in ("task", "metadata", "verifier", "agent", "environment"):
        if table in config and not isinstance(config[table], dict):
            raise FormatError(f"{toml_path}: [{table}] must be a table")
    name = task_table.get("name") or folder.name
    tests, solution = _files(folder / "tests"), _files(folder / "solution")
    environment = _files(folder / "environment")
    tags = [str(t) for t in metadata.get("tags") or task_table.get("keywords") or []]
    native = {
        "id": str(name),
        "title": str(
            task_table.get("description") or instruction.strip().splitlines()[0]
            if instruction.strip()
            else name
        )[:512],
        "persona": str(metadata.get("persona") or persona),
        "track": str(metadata.get("track") or "single-agent"),
        "instruction": instruction if instruction.strip() else str(name),  # as written
        "environment": text_block(
            *[(f"environment/{k}", v or "(binary or large file)") for k, v in environment.items()]
        ),
        "ground_truth": text_block(
            *[(f"solution/{k}", v or "(binary or large file)") for k, v in solution.items()]
        ),
        "verifier": text_block(
            *[(f"tests/{k}", v or "(binary or large file)") for k, v in tests.items()]
        ),
        "tags": ["harbor", *tags],
        "provenance": [
            {"field": "instruction", "source": "external", "reference": f"Harbor task {name}"}
        ],
        ORIGINAL_FORMAT: "harbor",
        ORIGINAL: {
            "folder": folder.name,
            "task.toml": toml_text,
            "instruction.md": instruction,
            "files": {
                **{f"environment/{k}": v for k, v in environment.items()},
                **{f"tests/{k}": v for k, v in tests.items()},
                **{f"solution/{k}": v for k, v in solution.items()},
            },
        },
    }
    if log or metadata.get("source_log"):
        native["source"] = {"log": log or metadata.get("source_log")}
    return native


def registry_looks_like(data) -> bool:
    return (
        isinstance(data, list)
        and bool(data)
        and isinstance(data[0], dict)
        and isinstance(data[0].get("tasks"), list)
        and all(isinstance(t, dict) and "path" in t for t in data[0]["tasks"])
    )


def registry_folders(path: Path, data: list) -> list[Path]:
    """The local task folders a Harbor registry.json lists (paths relative to the file)."""
    folders = []
    for d, dataset in enumerate(data):
        for t, task in enumerate(dataset.get("tasks") or []):
            where = f"{path}: $[{d}].tasks[{t}]"
            try:
                folder = safe_join(path.parent, str(task["path"])).resolve()
            except UnsafePath as exc:
                raise FormatError(f"{where}.path: {exc}") from None
            if not is_task_dir(folder):
                if task.get("git_url"):
                    raise FormatError(
                        f"{where}: task {task.get('name')!r} lives in {task['git_url']} "
                        f"(commit {task.get('git_commit_id')}); clone it next to the registry "
                        "so that its path exists, then import again"
                    )
                raise FormatError(f"{where}.path: {folder} is not a Harbor task folder")
            folders.append(folder)
    return folders


def read(
    path: Path, *, persona: str = "L1 service desk agent", log: str | None = None
) -> list[dict]:
    """One task folder, a dataset folder of task folders (with or without dataset.toml), or
    a registry.json listing local task folders."""
    if path.is_file() and path.suffix == ".json":
        from itsmreview.catalog.formats.common import load_json

        data = load_json(path)
        if not registry_looks_like(data):
            raise FormatError(f"{path}: a Harbor registry is a list of datasets with 'tasks'")
        return [
            read_task(folder, persona=persona, log=log) for folder in registry_folders(path, data)
        ]
    if is_task_dir(path):
        return [read_task(path, persona=persona, log=log)]
    folders = sorted(p for p in path.iterdir() if is_task_dir(p)) if path.is_dir() else []
    outside = [p for p in folders if not is_within(path, p)]
    if outside:
        raise FormatError(
            f"{outside[0]} is a link to {outside[0].resolve()}, outside {path}; links are not "
            "followed out of an imported folder: copy the task folder in instead"
        )
    if not folders:
        raise FormatError(f"{path}: no Harbor task folder (a folder with task.toml) found")
    tasks = [read_task(folder, persona=persona, log=log) for folder in folders]
    return _exported_ids(path, tasks)


def _exported_ids(path: Path, tasks: list[dict]) -> list[dict]:
    """Tasks of a folder that an itsmreview export wrote get back the ids they had: the
    export names Harbor tasks `org/name`, and its sidecar records each one's task id. Only a
    sidecar entry whose folder and Harbor name still match the task is taken."""
    sidecar = path / SIDECAR
    if not sidecar.is_file():
        return tasks
    try:
        data = json.loads(read_text_bounded(sidecar, 64 * 2**20, what="export sidecar"))
    except (ValueError, json.JSONDecodeError) as exc:
        raise FormatError(
            f"{sidecar}: not the sidecar an itsmreview export writes: {exc}"
        ) from None
    entries = data.get("tasks") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise FormatError(f"{sidecar}: 'tasks' must be a list (as an itsmreview export writes it)")
    known = {
        (str(e.get("folder")), str(e.get("name"))): e.get("id")
        for e in entries
        if isinstance(e, dict) and isinstance(e.get("id"), str) and e["id"].strip()
    }
    for task in tasks:
        exported_id = known.get((task[ORIGINAL]["folder"], task["id"]))
        if exported_id:
            task["id"] = exported_id
    return tasks


def planned_files(tasks: list[dict], path: Path) -> list[tuple[Path, str]]:
    """Every (target, text) the export writes, each joined safely under `path`; a stored
    folder or file name that would leave it is an error before anything is written."""
    planned = []
    for task in tasks:
        original = task[ORIGINAL]
        where = f"task {task.get('id')!r}"
        try:
            folder = safe_join(path, str(original["folder"]))
            if folder.parent != path:
                raise UnsafePath(f"{original['folder']!r} is not a single folder name")
            planned.append((folder / "task.toml", original["task.toml"]))
            planned.append((folder / "instruction.md", original["instruction.md"]))
            for name, text in original["files"].items():
                if text is not None:
                    planned.append((safe_join(folder, str(name)), text))
        except UnsafePath as exc:
            raise FormatError(
                f"{where}: stored Harbor file name {exc}; fix the task (re-import it) and "
                "export again"
            ) from None
    return planned


def write(tasks: list[dict], path: Path) -> None:
    """Recreate each task folder under `path` from the original files."""
    for target, text in planned_files(tasks, path):
        target.parent.mkdir(parents=True, exist_ok=True)
        if not is_within(path, target.parent):
            raise FormatError(f"{target.parent} resolves outside {path} through a link")
        target.write_text(text, encoding="utf-8")
