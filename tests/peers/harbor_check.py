"""Load an itsmreview export's Harbor folder with Harbor itself (run by Harbor's Python).

    python harbor_check.py EXPORT/tasks/harbor

Prints one JSON object: the dataset's name, each task's name, Harbor's content hash of its
folder beside the digest in dataset.toml, the task's instruction and `metadata` (as Harbor's
TaskConfig reads it), the modes of its scripts, whether `DatasetManifest.to_toml()`
reproduces dataset.toml byte for byte, and what
`harbor sync` (`sync_dataset`, on a copy) changes. Exits 1 with the error when Harbor refuses
anything. Written against harbor 0.25 (tests/db/test_export_peers.py runs it).
"""

import json
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

from harbor.cli.sync import sync_dataset
from harbor.models.dataset.manifest import DatasetManifest
from harbor.models.task.config import TaskConfig
from harbor.models.task.task import Task
from harbor.publisher.packager import Packager


def check(root: Path) -> dict:
    text = (root / "dataset.toml").read_text()
    manifest = DatasetManifest.from_toml(text)
    folders = {}
    for child in sorted(root.iterdir()):
        if (child / "task.toml").is_file():
            config = TaskConfig.model_validate_toml((child / "task.toml").read_text())
            folders[config.task.name] = child
    tasks = []
    for ref in manifest.tasks:
        folder = folders[ref.name]
        task = Task(folder)
        content_hash, files = Packager.compute_content_hash(folder)
        tasks.append(
            {
                "name": ref.name,
                "task_name": task.name,
                "folder": folder.name,
                "digest": ref.digest,
                "harbor_digest": f"sha256:{content_hash}",
                "instruction": task.instruction,
                "metadata": task.config.metadata,
                "files": [f.relative_to(folder.resolve()).as_posix() for f in files],
                "modes": {
                    p.relative_to(folder).as_posix(): oct(p.stat().st_mode & 0o777)
                    for p in sorted(folder.rglob("*.sh"))
                },
            }
        )
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "dataset"
        shutil.copytree(root, copy)
        changes = sync_dataset(copy)
        synced = (copy / "dataset.toml").read_text()
    return {
        "dataset": manifest.dataset.name,
        "description": manifest.dataset.description,
        "tasks": tasks,
        "to_toml_identical": manifest.to_toml() == text,
        "sync": sorted({c.source for c in changes}),
        "sync_unchanged": synced == text,
    }


if __name__ == "__main__":
    try:
        print(json.dumps(check(Path(sys.argv[1]))))
    except Exception:  # noqa: BLE001 - the test shows Harbor's refusal as it is
        print(traceback.format_exc(), file=sys.stderr)
        sys.exit(1)
