"""Transcripts in the artifact store (a chain of segments, one per model call), the window a model
call sends, and the model activity's cache (bounded by bytes, least recently used goes first)."""

import pytest

from ratchet.contracts import Message, ToolCallRequest
from ratchet.stores import transcripts
from ratchet.stores.artifacts import DirectoryArtifactStore, put_json
from ratchet.stores.transcripts import Conversation, TranscriptCache


def said(*texts: str) -> list[Message]:
    return [Message(role="user" if i % 2 else "assistant", content=t) for i, t in enumerate(texts)]


def step_messages(i: int) -> list[Message]:
    """One agent step as a model call adds it: the previous tool result, then the next tool call."""
    return [
        Message(role="tool", tool_call_id=f"c{i - 1}", content=f"result {i - 1}"),
        Message(role="assistant", tool_calls=[ToolCallRequest(id=f"c{i}", name="t", arguments="{}")]),
    ]


def run_of(store, steps: int, keep: int | None = None) -> tuple[str, Conversation, list[int]]:
    """A conversation of `steps` model calls written as the model activity writes it."""
    base, digest, sizes = Conversation(), None, []
    for i in range(steps):
        added = [Message(role="system", content="sys"), Message(role="user", content="goal")] if i == 0 else []
        added += step_messages(i)[1:] if i == 0 else step_messages(i)
        ref = transcripts.write(store, base, added, prev=digest)
        base, digest = base.extended(added, ref.digest, ref.size or 0, keep), ref.digest
        sizes.append(ref.size)
    return digest, base, sizes


def test_each_call_writes_only_its_messages_and_the_digest_names_the_whole_conversation(tmp_path):
    store = DirectoryArtifactStore(tmp_path)
    digest, base, sizes = run_of(store, 30)
    assert max(sizes[2:]) - min(sizes[2:]) <= 8, "a segment does not grow with the conversation"
    conversation = transcripts.read(store, digest)
    assert conversation.count == base.count == 2 + 1 + 29 * 2 and conversation.complete
    assert conversation.turns == base.turns == 30
    assert transcripts.read_all(store, digest) == base.head + base.tail


def test_a_window_sends_the_start_and_the_latest_messages_and_reads_only_those(tmp_path):
    store = DirectoryArtifactStore(tmp_path)
    digest, base, _ = run_of(store, 40, keep=4)
    assert len(base.tail) <= 8, "a windowed conversation in the cache stays bounded"
    sent = base.window(4)  # the latest 4: result 37, call 38, result 38, call 39
    assert [m.content for m in sent[:2]] == ["sys", "goal"]
    assert sent[2].role == "assistant", "the window does not start with a result whose call it cut"
    assert len(sent) == 2 + 3 and sent[-1].tool_calls[0].id == "c39"
    assert len(base.window(5)) == 2 + 5 and not base.has_window(None), "all of it: read from the store"
    read = transcripts.read(store, digest, keep=4)
    assert read.window(4) == sent and not read.complete and read.count == base.count and read.turns == 40
    assert read.size < transcripts.read(store, digest).size / 4, "the read stopped after a few segments"


def test_a_pinned_message_stays_in_the_window_after_the_window_moved_past_it(tmp_path):
    """A fork's objective comes after the checkpoint's messages; the model must keep seeing it."""
    store = DirectoryArtifactStore(tmp_path)
    base, digest = Conversation(), None
    for i in range(30):
        added = [Message(role="system", content="sys"), Message(role="user", content="goal")] if i == 0 else step_messages(i)
        if i == 0:
            added.append(step_messages(0)[1])
        if i == 10:
            added.append(Message(role="user", content="the fork's goal", pinned=True))
        ref = transcripts.write(store, base, added, prev=digest)
        base, digest = base.extended(added, ref.digest, ref.size or 0, 4), ref.digest
    sent = base.window(4)
    assert [m.content for m in sent[:3]] == ["sys", "goal", "the fork's goal"] and len(sent) == 3 + 3
    read = transcripts.read(store, digest, keep=4)
    assert read.window(4) == sent and not read.complete
    assert [m.content for m in transcripts.read(store, digest).window(None)].count("the fork's goal") == 1


def test_a_segment_whose_count_disagrees_with_its_chain_is_reported_not_read_short(tmp_path):
    store = DirectoryArtifactStore(tmp_path)
    first = transcripts.write(store, Conversation(), said("a"), prev=None)
    wrong = transcripts.write(store, Conversation(count=5), said("b"), prev=first.digest)
    with pytest.raises(ValueError, match="broken: 2 messages, its header says 6"):
        transcripts.read(store, wrong.digest)
    not_a_transcript = put_json(store, {"hello": 1})
    with pytest.raises(ValueError, match="not a transcript"):
        transcripts.read(store, not_a_transcript.digest)


def conversation(*texts: str, size: int) -> Conversation:
    messages = [Message(role="user", content=t) for t in texts]
    return Conversation(head=messages, count=len(messages), size=size)


def test_the_cache_evicts_least_recently_used_by_bytes():
    cache = TranscriptCache(max_bytes=100)
    one, two, three = (conversation(c, size=40) for c in "abc")
    cache.put("1", one)
    cache.put("2", two)
    assert cache.get("1") is one  # now 2 is the least recently used
    cache.put("3", three)
    assert cache.get("2") is None and cache.get("1") is one and cache.get("3") is three
    assert cache.bytes == 80


def test_an_entry_larger_than_the_cache_is_not_kept():
    cache = TranscriptCache(max_bytes=10)
    cache.put("big", conversation("x", size=11))
    assert cache.get("big") is None and cache.bytes == 0


def test_a_run_keeps_only_its_latest_transcript():
    cache = TranscriptCache()
    first, other, second = conversation("a", size=10), conversation("a", size=10), conversation("a", "b", size=20)
    cache.put("d1", first, owner="run-1")
    cache.put("x", other, owner="run-2")
    cache.put("d2", second, owner="run-1")
    assert cache.get("d1") is None and cache.get("d2") is second and cache.get("x") is other
    assert cache.bytes == 30


def test_putting_a_runs_latest_transcript_again_keeps_it_as_the_latest():
    cache = TranscriptCache()
    first = conversation("a", size=10)
    cache.put("d1", first, owner="run-1")
    cache.put("d1", first, owner="run-1")  # a retried call that produced the same transcript
    cache.put("d2", conversation("a", "a", size=20), owner="run-1")
    assert cache.get("d1") is None and cache.bytes == 20


def test_runs_with_alike_conversations_share_an_entry_until_the_last_moves_on():
    """Two runs whose transcripts are alike (same digest): one moving on keeps the other's."""
    cache = TranscriptCache()
    shared, next_1, next_2 = conversation("a", size=10), conversation("a", "b", size=20), conversation("a", "c", size=20)
    cache.put("same", shared, owner="run-1")
    cache.put("same", shared, owner="run-2")
    cache.put("d1", next_1, owner="run-1")
    assert cache.get("same") is shared, "run-2 still continues from it"
    cache.put("d2", next_2, owner="run-2")
    assert cache.get("same") is None and cache.bytes == 40


def test_an_evicted_entry_lets_go_of_its_runs():
    cache = TranscriptCache(max_bytes=30)
    cache.put("d1", conversation("a", size=20), owner="run-1")
    cache.put("d2", conversation("b", size=20), owner="run-2")  # evicts d1
    assert cache.get("d1") is None and cache.latest == {"run-2": "d2"} and cache.holders == {"d2": {"run-2"}}
