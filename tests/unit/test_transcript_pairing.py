"""Tool results are shown under the call they answer even when a transcript reuses call ids
(tau-bench v1 results do, in a quarter of their trajectories)."""

from itsmreview.ui.transcript import pair_tool_results


def test_reused_ids_pair_each_result_with_the_nearest_unanswered_call():
    messages = [
        {"role": "agent", "tool_calls": [{"id": "0", "name": "find_user"}]},
        {"role": "tool", "tool_call_id": "0", "content": "user 7"},
        {"role": "agent", "tool_calls": [{"id": "0", "name": "get_order"}, {"id": "1"}]},
        {"role": "tool", "tool_call_id": "1", "content": "refund ok"},
        {"role": "tool", "tool_call_id": "0", "content": "order 9"},
        {"role": "tool", "tool_call_id": "5", "content": "stray"},
    ]
    pairs, answered = pair_tool_results(messages)
    shown = {call: result["content"] for call, (_, result) in pairs.items()}
    assert shown == {(1, 0): "user 7", (3, 0): "order 9", (3, 1): "refund ok"}
    assert answered == {2: 1, 4: 3, 5: 3}
    assert 6 not in answered  # answers no call: shown on its own, marked
    # every stored result is shown exactly once
    results = [t for t, m in enumerate(messages, 1) if m["role"] == "tool"]
    assert sorted([*answered, *(t for t in results if t not in answered)]) == results
