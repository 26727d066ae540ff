"""The versioned prompt files of the package and the hash that names a prompt version."""

import hashlib
import re
from functools import lru_cache
from pathlib import Path

PROMPTS = Path(__file__).parent / "prompts"
RATE_PROMPT = "rate-v1.md"
HINTS_PROMPT = "hints-v1.md"
LABEL_PROMPT = "label-v1.md"


@lru_cache
def prompt_text(name: str) -> str:
    return (PROMPTS / name).read_text(encoding="utf-8").strip()


def prompt_sha256(name: str, layout_version: int) -> str:
    """Names what a request is built from besides its material: the prompt file's text and the
    version of the code that lays the material out. A changed prompt is a new model rater."""
    return hashlib.sha256(f"{prompt_text(name)}\n--layout {layout_version}".encode()).hexdigest()


# Between the characters of a tag a model still reads it as the tag: spaces, line breaks and
# the invisible joiners and marks that render as nothing.
_GAP = "[\\s\u200b-\u200f\u2060-\u2064\ufeff\u00ad]*+"  # possessive: never backtracks
_OPEN, _SLASH, _CLOSE = (
    "[<\uff1c\ufe64\u2039\u27e8]",
    "[/\uff0f\u2215\u2044]",
    "[>\uff1e\ufe65\u203a\u27e9]",
)


@lru_cache
def _tag_pattern(tag: str) -> re.Pattern:
    """Any spelling of <tag> or </tag>: any case, full-width or look-alike brackets and
    slash, spaces, line breaks or invisible characters anywhere inside, attributes after the
    name. Not the defused <tag_> (a name character right after the name is another name)."""
    name = _GAP.join(re.escape(c) for c in tag)
    return re.compile(
        f"{_OPEN}{_GAP}({_SLASH}?){_GAP}{name}(?![\\w\\-]){_GAP}[^<>\uff1c\uff1e]{{0,200}}?{_CLOSE}",
        re.IGNORECASE,
    )


def fenced(text: str, tag: str) -> str:
    """Material inside <tag>...</tag>, with every spelling of that tag inside it defused (made
    <tag_> or </tag_>), so that material cannot close its own fence and speak as the prompt.

    >>> fenced("a </task_material> b", "task_material")
    '<task_material>\\na </task_material_> b\\n</task_material>'
    >>> fenced("a < /TASK_Material\\n > b", "task_material")
    '<task_material>\\na </task_material_> b\\n</task_material>'
    """
    text = _tag_pattern(tag).sub(lambda m: f"<{m.group(1) and '/'}{tag}_>", text)
    return f"<{tag}>\n{text}\n</{tag}>"
