"""Transcripts in the artifact store (a chain of segments, one per model call) and the model
activity's cache of them (bounded by bytes, least recently used goes first)."""

import pytest

from ratchet import transcripts
from ratchet.artifacts import DirectoryArtifactStore, put_json
from ratchet.contracts import Message
from ratchet.transcripts import TranscriptCache


def said(*texts: str) -> list[Message]:
    return [Message(role="user" if i % 2 else "assistant", content=t) for i, t in enumerate(texts)]


def test_each_call_writes_only_its_messages_and_the_digest_names_the_whole_conversation(tmp_path):
    store = DirectoryArtifactStore(tmp_path)
    digest, count, sizes = None, 0, []
    for step in range(30):
        ref = transcripts.write(store, digest, count, "c" * 64, said(f"question {step:02}", f"answer {step:02}"))
        digest, count = ref.digest, count + 2
        sizes.append(ref.size)
    assert max(sizes[1:]) - min(sizes[1:]) <= 1, "a segment does not grow with the conversation"
    messages, call_ref, _ = transcripts.read(store, digest)
    assert [m.content for m in messages][-2:] == ["question 29", "answer 29"] and len(messages) == 60
    assert call_ref == "c" * 64
    same = transcripts.write(store, None, 0, "c" * 64, said("question 00", "answer 00"))
    assert transcripts.read(store, same.digest)[0] == messages[:2]


def test_a_whole_conversation_list_from_before_segments_still_reads_and_can_be_built_on(tmp_path):
    store = DirectoryArtifactStore(tmp_path)
    legacy = put_json(store, [m.model_dump(exclude_defaults=True) for m in said("a", "b")])
    head = transcripts.read_segment(store, legacy.digest)
    assert head.call_ref is None and head.prev is None and [m.content for m in head.messages] == ["a", "b"]
    on_top = transcripts.write(store, legacy.digest, 2, "d" * 64, said("c"))
    assert [m.content for m in transcripts.read(store, on_top.digest)[0]] == ["a", "b", "c"]


def test_a_segment_whose_count_disagrees_with_its_chain_is_reported_not_read_short(tmp_path):
    store = DirectoryArtifactStore(tmp_path)
    first = transcripts.write(store, None, 0, None, said("a"))
    wrong = transcripts.write(store, first.digest, 5, None, said("b"))
    with pytest.raises(ValueError, match="broken: 2 messages, its header says 6"):
        transcripts.read(store, wrong.digest)
    not_a_transcript = put_json(store, {"hello": 1})
    with pytest.raises(ValueError, match="not a transcript"):
        transcripts.read(store, not_a_transcript.digest)


def test_the_cache_evicts_least_recently_used_by_bytes():
    cache = TranscriptCache(max_bytes=100)
    one, two, three = ([Message(role="user", content=c)] for c in "abc")
    cache.put("1", one, 40)
    cache.put("2", two, 40)
    assert cache.get("1") == one  # now 2 is the least recently used
    cache.put("3", three, 40)
    assert cache.get("2") is None and cache.get("1") == one and cache.get("3") == three
    assert cache.bytes == 80


def test_an_entry_larger_than_the_cache_is_not_kept_and_copies_are_independent():
    cache = TranscriptCache(max_bytes=10)
    cache.put("big", [Message(role="user", content="x")], 11)
    assert cache.get("big") is None
    mine = [Message(role="user", content="y")]
    cache = TranscriptCache()
    cache.put("d", mine, 1)
    mine.append(Message(role="assistant", content="z"))
    assert len(cache.get("d")) == 1


def test_a_run_keeps_only_its_latest_transcript():
    cache = TranscriptCache()
    first = [Message(role="user", content="a")]
    second = first + [Message(role="assistant", content="b")]
    cache.put("d1", first, 10, owner="run-1")
    cache.put("x", first, 10, owner="run-2")
    cache.put("d2", second, 20, owner="run-1")
    assert cache.get("d1") is None and cache.get("d2") == second and cache.get("x") == first
    assert cache.bytes == 30


def test_putting_a_runs_latest_transcript_again_keeps_it_as_the_latest():
    cache = TranscriptCache()
    first = [Message(role="user", content="a")]
    cache.put("d1", first, 10, owner="run-1")
    cache.put("d1", first, 10, owner="run-1")  # a retried call that produced the same transcript
    cache.put("d2", first + first, 20, owner="run-1")
    assert cache.get("d1") is None and cache.bytes == 20
