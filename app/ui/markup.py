"""Task text written in Markdown (policy prompts, instructions), made safe to render: headings,
lists, emphasis, tables and code stay Markdown; raw HTML, images, links, Streamlit's `:emoji:`,
`:red[...]` colours and `$` maths do not. Pure: no Streamlit.

A task file comes from outside the project, so its Markdown must not fetch anything (an image
from a remote address tells its server who reads the task), run or show HTML, or make a link
that looks like the app's own.
"""

import re

WORD_JOINER = "\u2060"  # invisible; splits an address so that no link is made of it
AUTOLINK_BREAKS = re.compile(r"(?=@)|(?=://)|(?i:(?<=www)(?=\.))")

LONG_WORDS = 250  # a longer text starts collapsed
LONG_LINES = 40

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_IMAGE = re.compile(r"!\[([^\]\n]*)\]\s*(?:\(([^)\n]*)\)|\[[^\]\n]*\])")
_LINK = re.compile(r"\[([^\]\n]+)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"\n]*\")?\s*\)")
_DEFINITION = re.compile(r"^ {0,3}\[[^\]\n]+\]:\s*\S")  # [ref]: http://... makes [x][ref] a link
_TABLE_ROW = re.compile(r"^\s*\|")
_DELIMITER = re.compile(r"^\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")
_ESCAPED = re.compile(r"\\[!-/:-@\[-`{-~]")  # the author's own `\*`: kept as written
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")


def literal(text: object) -> str:
    """Markdown that Streamlit renders as `text`: every ASCII punctuation character escaped (no
    emphasis, links, HTML, `:red[...]` colours, `:smile:` emoji, `:material/...:` icons or `$`
    maths), and addresses (`http://`, `www.`, `a@b`) split so that none becomes a link.

    >>> literal("**Reset** :smile: $x$")
    '\\\\*\\\\*Reset\\\\*\\\\* \\\\:smile\\\\: \\\\$x\\\\$'
    >>> literal("ops@example.org").replace(WORD_JOINER, "|")
    'ops|\\\\@example\\\\.org'
    """
    return _PUNCTUATION.sub(r"\\\1", AUTOLINK_BREAKS.sub(WORD_JOINER, str(text)))


def _prose(text: str) -> str:
    """Markdown outside code: images become their description, links their text and address
    (nothing to click), and HTML, maths, emoji codes, brackets and bare addresses are
    escaped."""
    held: list[str] = []

    def hold(markdown: str) -> str:  # final Markdown, kept out of the escaping below
        held.append(markdown)
        return f"\x00{len(held) - 1}\x00"

    text = _ESCAPED.sub(lambda m: hold(m[0]), text.replace("\x00", ""))
    text = _IMAGE.sub(lambda m: hold(literal(f"[image: {m[1].strip() or 'no description'}]")), text)
    text = _LINK.sub(lambda m: m[1] + (hold(literal(f" ({m[2]})")) if m[2] else ""), text)
    # `:` starts Streamlit's `:smile:` emoji, `:material/icon:` and `:red[...]` colours (the
    # emoji are replaced before the Markdown is read: both colons are escaped)
    text = AUTOLINK_BREAKS.sub(WORD_JOINER, text)
    text = re.sub(r"[<$:\[\]]", lambda m: "\\" + m[0], text)
    return re.sub("\x00(\\d+)\x00", lambda m: held[int(m[1])], text)


def _line(line: str) -> str:
    if _DEFINITION.match(line):
        return literal(line)
    if "|" in line and _DELIMITER.match(line):  # a table's `| :--- |`
        return line
    parts, start = [], 0
    for span in _CODE_SPAN.finditer(line):  # code renders as written: nothing to escape
        parts += [_prose(line[start : span.start()]), span[0]]
        start = span.end()
    return "".join([*parts, _prose(line[start:])])


def _rejoin_tables(lines: list[str]) -> list[str]:
    """Rows of one table written with blank lines between them (as EnterpriseOps-Gym's policy
    prompts are) made one table again: a blank line ends a Markdown table."""
    out: list[str] = []
    for index, line in enumerate(lines):
        if not line.strip() and out and _TABLE_ROW.match(out[-1]):
            rest = [x for x in lines[index + 1 :] if x.strip()][:2]
            continues = rest and _TABLE_ROW.match(rest[0])
            new_table = len(rest) == 2 and "|" in rest[1] and _DELIMITER.match(rest[1])
            if continues and not new_table:
                continue
        out.append(line)
    return out


def safe_markdown(text: object) -> str:
    """`text` as Markdown that Streamlit may render: headings, lists, emphasis, tables, code
    and the line breaks of text written as plain lines kept; raw HTML shown as written; images
    (remote or not) replaced by their description; links shown as their text and address,
    never followed; Streamlit's emoji codes, colours and `$` maths shown as written.

    >>> safe_markdown("**Reset** <b>x</b> $5 :smile:")
    '**Reset** \\\\<b>x\\\\</b> \\\\$5 \\\\:smile\\\\:'
    >>> safe_markdown("![logo](https://tracker.example/p.png)")
    '\\\\[image\\\\: logo\\\\]'
    """
    lines = _rejoin_tables(str(text).splitlines())
    out, fence = [], None
    for index, line in enumerate(lines):
        if fence is not None:
            out.append(line)
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
            continue
        if found := _FENCE.match(line):
            fence = found[1]
            out.append(line)
            continue
        following = lines[index + 1] if index + 1 < len(lines) else ""
        # text written as plain lines keeps its line breaks (two spaces: a hard break)
        out.append(_line(line) + ("  " if line.strip() and following.strip() else ""))
    return "\n".join(out)


def text_length(text: object) -> tuple[int, int]:
    """(words, lines) of `text`.

    >>> text_length("Reset the password.\\nThen tell the user.")
    (7, 2)
    """
    text = str(text)
    return len(text.split()), len(text.splitlines())


def length_label(text: object) -> str:
    """'1,444 words' or, for text of many short lines (a verifier's checks), '1,444 words, 210
    lines'."""
    words, lines = text_length(text)
    shown = f"{words:,} word" + ("" if words == 1 else "s")
    return shown + (f", {lines:,} lines" if lines > 1 else "")


def is_long(text: object) -> bool:
    """Whether `text` starts collapsed on the rating page."""
    words, lines = text_length(text)
    return words > LONG_WORDS or lines > LONG_LINES
