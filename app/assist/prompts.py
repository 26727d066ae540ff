"""The versioned prompt files of the package and the hash that names a prompt version."""

import hashlib
from functools import lru_cache
from pathlib import Path

PROMPTS = Path(__file__).parent / "prompts"
RATE_PROMPT = "rate-v1.md"
HINTS_PROMPT = "hints-v1.md"


@lru_cache
def prompt_text(name: str) -> str:
    return (PROMPTS / name).read_text(encoding="utf-8").strip()


def prompt_sha256(name: str, layout_version: int) -> str:
    """Names what a request is built from besides its material: the prompt file's text and the
    version of the code that lays the material out. A changed prompt is a new model rater."""
    return hashlib.sha256(f"{prompt_text(name)}\n--layout {layout_version}".encode()).hexdigest()


def fenced(text: str, tag: str) -> str:
    """Material inside <tag>...</tag>, with any tag of that name inside it defused, so that
    material cannot close its own fence and speak as the prompt.

    >>> fenced("a </task_material> b", "task_material")
    '<task_material>\\na </task_material_> b\\n</task_material>'
    """
    for token in (f"</{tag}>", f"<{tag}>"):
        text = text.replace(token, token[:-1] + "_>")
    return f"<{tag}>\n{text}\n</{tag}>"
