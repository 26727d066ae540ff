"""Harbor task directories: task.toml, instruction.md, environment/, tests/, solution/."""

import tomllib
from pathlib import Path

from itsmreview.catalog.formats.common import ORIGINAL, ORIGINAL_FORMAT, FormatError, text_block

TEXT_LIMIT = 200_000  # characters of one file kept in the task (binary files are listed only)


def is_task_dir(path: Path) -> bool:
    return path.is_dir() and (path / "task.toml").is_file()


def _files(folder: Path) -> dict[str, str | None]:
    out = {}
    if not folder.is_dir():
        return out
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        name = file.relative_to(folder).as_posix()
        try:
            text = file.read_text(encoding="utf-8")
            out[name] = text if len(text) <= TEXT_LIMIT else None
        except UnicodeDecodeError:
            out[name] = None
    return out


def read_task(folder: Path, *, persona: str, log: str | None) -> dict:
    toml_path = folder / "task.toml"
    try:
        config = tomllib.loads(toml_path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise FormatError(f"{toml_path}: invalid TOML: {exc}") from None
    instruction_path = folder / "instruction.md"
    if not instruction_path.is_file():
        raise FormatError(f"{folder}: instruction.md is missing (every Harbor task has one)")
    instruction = instruction_path.read_text(encoding="utf-8")
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
        "instruction": instruction.strip() or str(name),
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
            "task.toml": toml_path.read_text(encoding="utf-8"),
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
            folder = (path.parent / str(task["path"])).resolve()
            if not is_task_dir(folder):
                where = f"{path}: $[{d}].tasks[{t}]"
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
    if not folders:
        raise FormatError(f"{path}: no Harbor task folder (a folder with task.toml) found")
    return [read_task(folder, persona=persona, log=log) for folder in folders]


def write(tasks: list[dict], path: Path) -> None:
    """Recreate each task folder under `path` from the original files."""
    for task in tasks:
        original = task[ORIGINAL]
        folder = path / original["folder"]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "task.toml").write_text(original["task.toml"], encoding="utf-8")
        (folder / "instruction.md").write_text(original["instruction.md"], encoding="utf-8")
        for name, text in original["files"].items():
            if text is None:
                continue
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
