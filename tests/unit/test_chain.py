from itsmreview.ledger.chain import GENESIS_HASH, canonical_json, find_break, link


def _chain(contents):
    out, prev = [], GENESIS_HASH
    for content in contents:
        digest = link(content, prev)
        out.append((content, prev, digest))
        prev = digest
    return out


def test_intact_chain_verifies():
    entries = _chain([{"seq": i, "payload": {"n": i}} for i in range(1, 6)])
    assert find_break(entries) is None


def test_changed_content_is_found_at_its_entry():
    entries = _chain([{"seq": i, "payload": {"n": i}} for i in range(1, 6)])
    content, prev, digest = entries[2]
    entries[2] = ({**content, "payload": {"n": 99}}, prev, digest)
    assert find_break(entries) == (3, "entry_hash does not match its content")


def test_removed_entry_breaks_the_next_link():
    entries = _chain([{"seq": i} for i in range(1, 6)])
    del entries[1]
    assert find_break(entries) == (3, "prev_hash does not match the entry before it")


def test_canonical_json_ignores_key_order():
    assert canonical_json({"b": 1, "a": [1, {"y": 2, "x": 1}]}) == canonical_json(
        {"a": [1, {"x": 1, "y": 2}], "b": 1}
    )
    assert link({"a": 1, "b": 2}, GENESIS_HASH) == link({"b": 2, "a": 1}, GENESIS_HASH)
