"""A stand-in for the Messages API behind the real SDK, for tests and benchmarks: an httpx
transport that answers `POST /v1/messages` with the API's own response and error shapes and
logs every request it saw. Never used unless a caller puts it in `client.http_client_factory`."""

import json
import re
import threading
import time
import uuid
from collections.abc import Callable

try:  # the HTTP client the installed SDK is built on: httpx2 from anthropic 2.x, else httpx
    import httpx2 as httpx
except ImportError:  # pragma: no cover - older SDKs
    import httpx

TASK_HEADING = re.compile(r"^# Task (\S+) \(version (\d+)\)", re.MULTILINE)


def task_of(request_body: dict) -> str | None:
    """The task id a rating request is about (from its material), or None."""
    for message in request_body.get("messages", []):
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        found = TASK_HEADING.search(text)
        if found:
            return found.group(1)
    return None


def message(
    content: list[dict],
    *,
    stop_reason: str = "tool_use",
    model: str = "claude-sonnet-4-5",
    input_tokens: int = 2000,
    output_tokens: int = 200,
) -> dict:
    """A Messages API response body."""
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def tool_use(name: str, arguments: dict) -> dict:
    return {
        "type": "tool_use",
        "id": f"toolu_{uuid.uuid4().hex[:24]}",
        "name": name,
        "input": arguments,
    }


def error(status: int, kind: str, text: str, *, retry_after_ms: int | None = None):
    """An API error response: (status, body, headers)."""
    headers = {"request-id": f"req_{uuid.uuid4().hex[:24]}"}
    if retry_after_ms is not None:
        headers["retry-after-ms"] = str(retry_after_ms)
    return status, {"type": "error", "error": {"type": kind, "message": text}}, headers


Answer = dict | tuple[int, dict, dict]
Responder = Callable[[dict], Answer]


class ReplayAPI:
    """The transport: `responder(request body)` gives a response body (200) or an error as
    `error()` returns it. `latency_s` is slept before each answer, as a real API takes time."""

    def __init__(self, responder: Responder, *, latency_s: float = 0.0):
        self.responder = responder
        self.latency_s = latency_s
        self.requests: list[dict] = []
        self._lock = threading.Lock()

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.method != "POST" or not request.url.path.endswith("/v1/messages"):
            _, payload, headers = error(404, "not_found_error", f"no route {request.url.path}")
            return httpx.Response(404, json=payload, headers=headers)
        body = json.loads(request.content)
        with self._lock:
            self.requests.append({"body": body, "headers": dict(request.headers)})
        answer = self.responder(body)  # first: a responder that logs sees requests in flight
        if self.latency_s:
            time.sleep(self.latency_s)
        if isinstance(answer, tuple):
            status, payload, headers = answer
            return httpx.Response(status, json=payload, headers=headers)
        return httpx.Response(
            200, json=answer, headers={"request-id": f"req_{uuid.uuid4().hex[:24]}"}
        )

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def client(self) -> httpx.Client:
        return httpx.Client(transport=self.transport())

    def tasks_asked(self) -> list[str | None]:
        with self._lock:
            return [task_of(r["body"]) for r in self.requests]
