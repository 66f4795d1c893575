"""The model activity's transcript cache: bounded by bytes, least recently used goes first."""

from activities.model import TranscriptCache
from ratchet.contracts import Message


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
