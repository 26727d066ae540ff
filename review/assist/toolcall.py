"""A request that offers the model one tool and forces it, and the tool call read back from
the answer: what the model rater and the gap hints share."""

from itsmreview.review.assist.models import RequestOutcome


class UnusableAnswer(Exception):
    """The answer holds nothing that can be stored; `outcome` says why in one word."""

    def __init__(self, outcome: RequestOutcome, reason: str):
        super().__init__(reason)
        self.outcome = outcome
        self.reason = reason


def forced_tool_request(
    *, model: str, system: str, tool: dict, material: str, max_tokens: int
) -> dict:
    """The keyword arguments of `messages.create`: `tool` the only one offered, forced."""
    return {
        "model": model,
        "max_tokens": max_tokens,
        "system": system,
        "tools": [tool],
        "tool_choice": {"type": "tool", "name": tool["name"]},
        "messages": [{"role": "user", "content": material}],
    }


def text_of(message) -> str:
    return " ".join(
        getattr(b, "text", "") for b in message.content if getattr(b, "type", "") == "text"
    ).strip()


def tool_input(message, tool_name: str, doing: str) -> dict:
    """The input of the answer's first call of `tool_name`. Raises UnusableAnswer for a
    refusal (`the model declined to <doing>`), an answer cut off at max_tokens, or no call."""
    if message.stop_reason == "refusal":
        said = text_of(message)
        raise UnusableAnswer(
            RequestOutcome.refused, f"the model declined to {doing}" + (f": {said}" if said else "")
        )
    if message.stop_reason == "max_tokens":
        raise UnusableAnswer(
            RequestOutcome.cut_off,
            f"the answer was cut off at max_tokens ({message.usage.output_tokens} tokens); "
            "raise ITSMREVIEW_MODEL_MAX_TOKENS",
        )
    calls = [
        b
        for b in message.content
        if getattr(b, "type", "") == "tool_use" and getattr(b, "name", "") == tool_name
    ]
    if not calls:
        said = text_of(message)[:200]
        raise UnusableAnswer(
            RequestOutcome.malformed,
            f"no {tool_name} call in the answer (stop reason {message.stop_reason})"
            + (f"; it said: {said}" if said else ""),
        )
    if not isinstance(calls[0].input, dict):
        raise UnusableAnswer(RequestOutcome.malformed, f"{tool_name} input is not an object")
    return calls[0].input
