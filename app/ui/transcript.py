"""Transcript rendering: one bubble per turn, tool calls collapsed with their results;
text is always rendered as text (never as HTML)."""

import json

import streamlit as st
from itsmreview.ui.text import literal, show

AVATARS = {
    "system": ":material/settings:",
    "user": ":material/person:",
    "agent": ":material/smart_toy:",
    "colleague": ":material/support_agent:",
    "tool": ":material/build:",
}


def pair_tool_results(
    messages: list[dict],
) -> tuple[dict[tuple[int, int], tuple[int, dict]], dict[int, int]]:
    """Each tool result paired with the call it answers: the nearest preceding call with its
    id that no result has answered yet (ids are reused in some transcripts, so pairing by id
    alone showed a call with a later call's result and hid the earlier result).

    Returns {(turn of the call, index among its calls): (turn of the result, message)} and
    {turn of a paired result: turn of its call}; a result missing from the latter answers no
    earlier call.

    >>> call, result = {"role": "agent", "tool_calls": [{"id": "c"}]}, {"role": "tool",
    ...                                                                 "tool_call_id": "c"}
    >>> msgs = [call, result, call, result]
    >>> pairs, answered = pair_tool_results(msgs)
    >>> {call: result[0] for call, result in pairs.items()}, answered
    ({(1, 0): 2, (3, 0): 4}, {2: 1, 4: 3})
    """
    waiting: dict[str, list[tuple[int, int]]] = {}
    pairs: dict[tuple[int, int], tuple[int, dict]] = {}
    answered: dict[int, int] = {}
    for turn, message in enumerate(messages, start=1):
        for index, call in enumerate(message.get("tool_calls") or []):
            waiting.setdefault(str(call.get("id")), []).append((turn, index))
        if message.get("role") == "tool" and message.get("tool_call_id"):
            calls = waiting.get(str(message["tool_call_id"]))
            if calls:
                call = calls.pop()
                pairs[call] = (turn, message)
                answered[turn] = call[0]
    return pairs, answered


def render_transcript(messages: list[dict], *, page_size: int = 60, key: str = "t") -> None:
    """Render `messages` with turn numbers, actors and simulated times. Tool results are
    shown inside the call they answer; long transcripts are paged."""
    results, answered = pair_tool_results(messages)
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
        answered_on = answered.get(turn)
        if role == "tool" and answered_on is not None and start < answered_on <= start + page_size:
            continue  # shown inside the call it answers
        with st.chat_message(
            "user" if role == "user" else "assistant", avatar=AVATARS.get(role, ":material/chat:")
        ):
            header = f"**{turn}. {literal(message.get('actor') or role)}**"
            if message.get("time"):
                header += f" · {literal(str(message['time']))}"
            if role == "tool" and message.get("tool_call_id"):
                header += f" · result of {literal(str(message['tool_call_id']))}"
                if answered_on is None:
                    header += " (answers no earlier call)"
            st.markdown(header)
            if message.get("content"):
                if role == "tool":
                    st.code(message["content"], language=None)
                else:
                    show(message["content"])
            for index, call in enumerate(message.get("tool_calls") or []):
                result = results.get((turn, index))
                by = f" (requested by {call['requested_by']})" if call.get("requested_by") else ""
                # a tool's name is an identifier: shown as code, as its arguments are
                name = " ".join(str(call.get("name")).replace("`", "'").split())[:200]
                with st.expander(f"tool call: `{name}`{literal(by)}"):
                    st.code(
                        json.dumps(call.get("arguments", {}), indent=2, ensure_ascii=False),
                        language="json",
                    )
                    if result is not None:
                        st.caption(f"result (turn {result[0]})")
                        st.code(result[1].get("content") or "", language=None)
