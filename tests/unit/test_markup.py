"""Task Markdown made safe to render: HTML escaped, images and links inert, Markdown kept."""

import re

import pytest
from itsmreview.ui.markup import WORD_JOINER, is_long, length_label, safe_markdown
from markdown_it import MarkdownIt

# CommonMark with tables and HTML on: what a renderer that allowed HTML would make of it
RENDER = MarkdownIt("commonmark", {"html": True, "linkify": False}).enable("table")


def html(text: str) -> str:
    return RENDER.render(safe_markdown(text))


@pytest.mark.parametrize(
    "text",
    [
        "<b>bold</b> <script>alert(1)</script>",
        '<img src="http://tracker.example/p.png">',
        "<div>\nblock\n</div>",
        "<!-- hidden -->",
        "\\<b>escaped by the author</b>",
        "\\\\<i>a backslash, then a tag</i>",
        "| a | <b>in a table</b> |\n| --- | --- |\n| <i>x</i> | y |",
    ],
)
def test_html_is_shown_as_written_never_as_tags(text):
    rendered = html(text)
    assert not re.search(r"<(b|i|script|img|div|!--)[\s>]", rendered), rendered
    assert "&lt;" in rendered


@pytest.mark.parametrize(
    "text, shown",
    [
        ("![chart](https://tracker.example/p.png?who=me)", "[image: chart]"),
        ("![](http://tracker.example/p.png)", "[image: no description]"),
        ("![logo][ref]\n\n[ref]: https://tracker.example/l.png", "[image: logo]"),
        ("see ![a](//cdn.example/x.gif) here", "see [image: a] here"),
    ],
)
def test_images_are_replaced_by_their_description(text, shown):
    rendered = html(text)
    assert "<img" not in rendered and "tracker.example/p.png" not in rendered
    assert shown in rendered.replace(WORD_JOINER, "")


def test_links_show_their_text_and_address_and_lead_nowhere():
    rendered = html(
        "Read [the policy](https://evil.example/policy) or https://evil.example or "
        "<https://evil.example> or ops@evil.example, [x][r]\n\n[r]: https://evil.example"
    )
    assert "<a " not in rendered, rendered
    assert "the policy (https://evil.example/policy)" in rendered.replace(WORD_JOINER, "")


def test_streamlit_emoji_colours_and_maths_are_shown_as_written():
    source = safe_markdown("Costs $5 to $10 :smile: :red[alert] :material/home: at 10:30")
    assert "\\$5" in source and "\\$10" in source
    assert "\\:smile\\:" in source and "\\:red\\[alert\\]" in source
    assert "\\:material/home\\:" in source and "10\\:30" in source


def test_markdown_is_kept_headings_emphasis_lists_tables_and_code():
    text = (
        "# **ITSM Assistant Policy**\n\n* **Policy Violation:** halt.\n\n"
        "| Role | Scope |\n| :--- | :--- |\n| **Agent** (`agent`) | Full CRUD |\n\n"
        "Use `<ticket-id>` and\n\n```sql\nSELECT '<b>' FROM t;\n```"
    )
    rendered = html(text)
    assert "<h1><strong>ITSM Assistant Policy</strong></h1>" in rendered
    assert "<li><strong>Policy Violation:</strong> halt.</li>" in rendered
    assert "<table>" in rendered and "<strong>Agent</strong> (<code>agent</code>)</td>" in rendered
    assert "<code>&lt;ticket-id&gt;</code>" in rendered  # code as written, no backslash
    assert "SELECT '&lt;b&gt;' FROM t;" in rendered


def test_table_rows_written_with_blank_lines_between_make_one_table():
    """EnterpriseOps-Gym's policy prompts put a blank line after every table row."""
    text = "| Role | Scope |\n\n| :--- | :--- |\n\n| a | b |\n\n| c | d |\n\n---\n\nAfter"
    rendered = html(text)
    assert rendered.count("<table>") == 1 and rendered.count("<tr>") == 3
    assert "<hr />" in rendered and "<p>After</p>" in rendered
    two = html("| a |\n| --- |\n| 1 |\n\n| b |\n| --- |\n| 2 |")
    assert two.count("<table>") == 2  # a new header and delimiter start a new table


def test_the_length_of_a_section_and_when_it_starts_collapsed():
    assert length_label("one") == "1 word"
    assert length_label("Reset the password.\nTell the user.") == "6 words, 2 lines"
    assert not is_long("short instruction")
    assert is_long("word " * 1_000) and is_long("x\n" * 100)


def test_text_written_as_plain_lines_keeps_its_line_breaks():
    rendered = html("Ticket: printer offline\nCaller: Marcus\n\nNext paragraph")
    assert "printer offline<br />" in rendered and "Caller" in rendered
    assert rendered.count("<p>") == 2
