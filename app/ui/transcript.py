"""Transcript rendering: one bubble per turn, tool calls collapsed with their results;
text is always rendered as text (never as HTML)."""

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


def _results_by_call(messages: list[dict]) -> dict[str, tuple[int, dict]]:
    return {
        str(m["tool_call_id"]): (turn, m)
        for turn, m in enumerate(messages, start=1)
        if m.get("role") == "tool" and m.get("tool_call_id")
    }


def render_transcript(messages: list[dict], *, page_size: int = 60, key: str = "t") -> None:
    """Render `messages` with turn numbers, actors and simulated times. Tool results are
    shown inside the call they answer; long transcripts are paged."""
    results = _results_by_call(messages)
    call_turn = {
        str(call.get("id")): turn
        for turn, m in enumerate(messages, start=1)
        for call in m.get("tool_calls") or []
    }
    total = len(messages)
    start = 0
    if total > page_size:
        pages = (total + page_size - 1) // page_size
        page = st.number_input(
            f"Turns page (1-{pages}, {total} turns)", 1, pages, 1, key=f"{key}-page"
        )
        start = (page - 1) * page_size
    for turn, message in enumerate(messages[start : start + page_size], start=start + 1):
        role = message.get("role", "agent")
        answered_on = call_turn.get(str(message.get("tool_call_id")))
        if role == "tool" and answered_on is not None and start < answered_on <= start + page_size:
            continue  # shown inside the call it answers
        with st.chat_message(
            "user" if role == "user" else "assistant", avatar=AVATARS.get(role, ":material/chat:")
        ):
            header = f"**{turn}. {escape_markdown(message.get('actor') or role)}**"
            if message.get("time"):
                header += f" · {escape_markdown(str(message['time']))}"
            if role == "tool" and message.get("tool_call_id"):
                header += f" · result of {escape_markdown(str(message['tool_call_id']))}"
            st.markdown(header)
            if message.get("content"):
                if role == "tool":
                    st.code(message["content"], language=None)
                else:
                    st.markdown(escape_markdown(message["content"]))
            for call in message.get("tool_calls") or []:
                result = results.get(str(call.get("id")))
                by = f" (requested by {call['requested_by']})" if call.get("requested_by") else ""
                with st.expander(f"tool call: {call.get('name')}{by}"):
                    st.code(
                        json.dumps(call.get("arguments", {}), indent=2, ensure_ascii=False),
                        language="json",
                    )
                    if result is not None:
                        st.caption(f"result (turn {result[0]})")
                        st.code(result[1].get("content") or "", language=None)
