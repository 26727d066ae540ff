"""Transcript rendering: one chat bubble per turn, tool calls collapsed; text stays text."""

import json

import streamlit as st

AVATARS = {
    "system": ":material/settings:",
    "user": ":material/person:",
    "agent": ":material/smart_toy:",
    "colleague": ":material/support_agent:",
    "tool": ":material/build:",
}
MARKDOWN_SPECIAL = "\\`*_{}[]()#+-.!|<>~"


def escape_markdown(text: str) -> str:
    return "".join("\\" + c if c in MARKDOWN_SPECIAL else c for c in text)


def render_transcript(messages: list[dict], *, page_size: int = 60, key: str = "t") -> None:
    """Render `messages` with turn numbers and simulated times; long ones are paged."""
    total = len(messages)
    start = 0
    if total > page_size:
        pages = (total + page_size - 1) // page_size
        page = st.number_input(f"Turns page (1-{pages})", 1, pages, 1, key=f"{key}-page")
        start = (page - 1) * page_size
    for turn, message in enumerate(messages[start : start + page_size], start=start + 1):
        role = message.get("role", "agent")
        with st.chat_message(
            role if role in ("user",) else "assistant", avatar=AVATARS.get(role, ":material/chat:")
        ):
            header = f"**{turn}. {escape_markdown(message.get('actor') or role)}**"
            if message.get("time"):
                header += f" · {escape_markdown(str(message['time']))}"
            st.markdown(header)
            if message.get("content"):
                st.markdown(escape_markdown(message["content"]))
            for call in message.get("tool_calls") or []:
                with st.expander(f"tool call: {call.get('name')}"):
                    st.code(json.dumps(call.get("arguments", {}), indent=2), language="json")
