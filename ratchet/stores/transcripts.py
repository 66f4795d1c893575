"""Transcripts: the conversation a run's model calls saw, kept in the artifact store.

Each model call writes one *segment*: the messages it added (what the workflow sent as new, then
the model's reply) and the digest of the segment before it. A step writes only its own messages,
not the whole conversation, and a segment's digest still names the whole conversation up to it
(a hash chain), so a request carries one digest however long the run is.

A segment also names the chain's first segment (`root`), which starts with the system prompt and
the objective: a model call that sends only the latest messages (`ModelSettings.context_messages`)
reads the start and the end of the chain, not all of it. Pinned messages (a fork's objective) are
always sent; each segment names the earlier segments that hold one (`pins`).

A *summary* segment (a session's compaction, activity `model.compact`) holds one message, the
summary of everything before it: from there on the model sees the head, the summary and what came
after it, so a model call reads the chain back only to the latest summary. The transcript itself
keeps every message (`read_all` walks past summaries).

Segment, as JSON: {"ratchet_transcript": 1, "prev": digest, "root": digest (both absent in the
first segment), "count": messages before this segment, "turns": assistant messages before it,
"pins": [digests], "summary": true (a summary segment only), "messages": [...]}.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field

from ratchet.stores.artifacts import ArtifactStore, put_json
from ratchet.contracts import ArtifactRef, Message

FORMAT = 1
HEAD = 2
"""Messages every model call sees whatever its window: the system prompt and the objective."""


@dataclass
class Segment:
    messages: list[Message]
    prev: str | None = None
    root: str | None = None
    count: int = 0
    """Messages in the conversation before this segment's."""
    turns: int = 0
    """Assistant messages in the conversation before this segment's."""
    pins: list[str] = field(default_factory=list)
    """Earlier segments holding pinned messages (beyond the first two)."""
    size: int = 0
    """Bytes of this segment in the store."""
    summary: bool = False
    """Its one message summarises the conversation before it (a compaction)."""


@dataclass
class Conversation:
    """What a model call builds on: the start of the conversation (`head`), its latest messages
    (`tail`: all the rest, or at least the window's worth), and counts over the whole of it."""

    head: list[Message] = field(default_factory=list)
    tail: list[Message] = field(default_factory=list)
    count: int = 0
    turns: int = 0
    root: str | None = None
    """The first segment of the chain; None before the first model call."""
    pinned: list[tuple[int, Message]] = field(default_factory=list)
    """Pinned messages after the head, with their place in the conversation."""
    pin_segments: list[str] = field(default_factory=list)
    """The segments that hold them."""
    size: int = 0
    """Bytes this holds, roughly (what the cache counts)."""
    summary: Message | None = None
    """The latest compaction's summary: the model sees it instead of what came before it."""
    hidden: int = 0
    """Messages between the head and the summary, summarised (the model no longer sees them)."""

    @property
    def complete(self) -> bool:
        """Whether this holds the whole of what the model sees (after the latest summary)."""
        return len(self.head) + self.hidden + (self.summary is not None) + len(self.tail) == self.count

    def has_window(self, keep: int | None) -> bool:
        """Whether this holds what a call with window `keep` sends."""
        return self.complete or (keep is not None and len(self.tail) >= keep)

    def window(self, keep: int | None) -> list[Message]:
        """The head, the pinned messages that fell before the window, and the last `keep` messages
        (all with None). The window never starts with a tool result whose call fell out of it
        (providers reject those)."""
        start = 0 if keep is None else max(0, len(self.tail) - keep)
        summary = [self.summary] if self.summary is not None else []
        if start == 0 and self.complete:
            return self.head + summary + self.tail
        while start < len(self.tail) and self.tail[start].role == "tool":
            start += 1
        first = self.count - len(self.tail) + start  # the window's first message, counted from the start
        return self.head + summary + [m for at, m in self.pinned if at < first] + self.tail[start:]

    def extended(self, messages: list[Message], digest: str, size: int, keep: int | None) -> Conversation:
        """This conversation with `messages` (one segment, named `digest`) added; a windowed one
        keeps between `keep` and 2 x `keep` of its latest messages."""
        head, tail = list(self.head), self.tail + messages
        while len(head) < HEAD and tail:
            head.append(tail.pop(0))
        if keep is not None and len(tail) > 2 * keep:
            tail = tail[-keep:]
        pinned = self.pinned + [
            (self.count + j, m) for j, m in enumerate(messages) if m.pinned and self.count + j >= HEAD
        ]
        return Conversation(
            head=head,
            tail=tail,
            count=self.count + len(messages),
            turns=self.turns + sum(m.role == "assistant" for m in messages),
            root=self.root or digest,
            pinned=pinned,
            pin_segments=self.pin_segments + [digest] if len(pinned) > len(self.pinned) else self.pin_segments,
            size=(self.size + size) if keep is None else _estimate(head, tail),
            summary=self.summary,
            hidden=self.hidden,
        )

    def summarised(self, summary: Message, digest: str, size: int) -> Conversation:
        """This conversation with its compaction's summary (one segment, named `digest`) added:
        the model sees the head, the summary and what comes after."""
        return Conversation(
            head=list(self.head),
            tail=[],
            count=self.count + 1,
            turns=self.turns,
            root=self.root or digest,
            pinned=list(self.pinned),
            pin_segments=list(self.pin_segments),
            size=_estimate(self.head, [summary]) + size,
            summary=summary,
            hidden=self.count - len(self.head),
        )


def _estimate(head: list[Message], tail: list[Message]) -> int:
    return sum(len(m.content or "") + 200 for m in head + tail)


def write(
    store: ArtifactStore, base: Conversation, messages: list[Message], prev: str | None, summary: bool = False
) -> ArtifactRef:
    """One segment: `messages` added to `base`, the conversation named `prev` (`summary`: the one
    message is a compaction's summary of `base`)."""
    body: dict = {
        "ratchet_transcript": FORMAT,
        "count": base.count,
        "turns": base.turns,
        "messages": [m.model_dump(exclude_defaults=True) for m in messages],
    }
    if summary:
        body["summary"] = True
    if prev is not None:
        body["prev"] = prev
        body["root"] = base.root or prev
    if base.pin_segments:
        body["pins"] = base.pin_segments
    return put_json(store, body)


def read_segment(store: ArtifactStore, digest: str) -> Segment:
    raw = store.get(ArtifactRef.json(digest))
    body = json.loads(raw)
    if not isinstance(body, dict) or body.get("ratchet_transcript") != FORMAT:
        raise ValueError(f"artifact {digest[:12]} is not a transcript")
    return Segment(
        messages=[Message.model_validate(m) for m in body["messages"]],
        prev=body.get("prev"),
        root=body.get("root"),
        count=body["count"],
        turns=body["turns"],
        pins=body.get("pins", []),
        size=len(raw),
        summary=body.get("summary", False),
    )


def read(store: ArtifactStore, digest: str, keep: int | None = None) -> Conversation:
    """The conversation up to `digest`: all of it, or (with `keep`) its head, its pinned messages
    and at least its last `keep` messages, reading the chain back only that far."""
    last = segment = read_segment(store, digest)
    parts, size = {digest: segment}, segment.size
    while (
        segment.prev is not None
        and not segment.summary
        and (keep is None or sum(len(p.messages) for p in parts.values()) < keep + HEAD)
    ):
        prev = segment.prev
        segment = parts[prev] = read_segment(store, prev)
        size += segment.size
    messages = [m for part in reversed(parts.values()) for m in part.messages]
    total = last.count + len(last.messages)
    summary, hidden = None, 0
    if segment.summary:  # the model sees the head, this summary and what came after it
        summary, messages = messages[0], messages[1:]
        head = read_segment(store, last.root).messages[:HEAD] if last.root else []
        tail, hidden = messages, segment.count - len(head)
    elif segment.prev is None:  # read to the start
        if len(messages) != total:
            raise ValueError(f"transcript {digest[:12]} is broken: {len(messages)} messages, its header says {total}")
        head, tail = messages[:HEAD], messages[HEAD:]
    else:
        head = read_segment(store, last.root).messages[:HEAD] if last.root else []
        tail = messages
    pin_segments = list(last.pins) + ([digest] if _pinned(last) else [])
    pinned = []
    for pin in pin_segments:
        holder = parts.get(pin)
        if holder is None:
            holder = read_segment(store, pin)
            size += holder.size
        pinned += _pinned(holder)
    pinned.sort(key=lambda p: p[0])
    return Conversation(
        head=head,
        tail=tail,
        count=total,
        turns=last.turns + sum(m.role == "assistant" for m in last.messages),
        root=last.root or (digest if last.prev is None else None),
        pinned=pinned,
        pin_segments=pin_segments,
        size=size,
        summary=summary,
        hidden=hidden,
    )


def _pinned(segment: Segment) -> list[tuple[int, Message]]:
    """A segment's pinned messages after the head, with their place in the conversation."""
    return [(segment.count + j, m) for j, m in enumerate(segment.messages) if m.pinned and segment.count + j >= HEAD]


def read_all(store: ArtifactStore, digest: str) -> list[Message]:
    """Every message of the conversation up to `digest`, summaries and what they summarise included."""
    parts: list[Segment] = []
    at: str | None = digest
    while at is not None:
        parts.append(read_segment(store, at))
        at = parts[-1].prev
    messages = [m for part in reversed(parts) for m in part.messages]
    total = parts[0].count + len(parts[0].messages)
    if len(messages) != total:
        raise ValueError(f"transcript {digest[:12]} is broken: {len(messages)} messages, its header says {total}")
    return messages


class TranscriptCache:
    """Conversations by digest, so a run's next model call on this worker neither re-reads nor
    re-validates what came before (content-addressed: an entry can never be stale).

    An entry is kept while a run (`owner`) has it as its latest transcript: a run continues from
    its latest, so keeping its older ones only held memory that grew with the run (bench: long-run
    RSS +14 %). Runs whose conversations are alike share digests; an entry goes when the last run
    holding it moves on (or the cache is full: least recently used first). After a rollback the
    checkpoint's transcript is read from the artifact store once."""

    def __init__(self, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self.entries: OrderedDict[str, Conversation] = OrderedDict()
        self.bytes = 0
        self.latest: dict[str, str] = {}
        """owner -> the digest of its latest transcript."""
        self.holders: dict[str, set[str]] = {}
        """digest -> the owners whose latest transcript it is."""

    def get(self, digest: str) -> Conversation | None:
        entry = self.entries.get(digest)
        if entry is None:
            return None
        self.entries.move_to_end(digest)
        return entry

    def put(self, digest: str, conversation: Conversation, owner: str | None = None) -> None:
        if owner is not None and self.latest.get(owner) != digest:
            self._release(owner)
        if digest in self.entries:
            self.entries.move_to_end(digest)
        elif conversation.size <= self.max_bytes:
            self.entries[digest] = conversation
            self.bytes += conversation.size
        else:
            return
        if owner is not None:
            self.latest[owner] = digest
            self.holders.setdefault(digest, set()).add(owner)
        while self.bytes > self.max_bytes:
            self._drop(next(iter(self.entries)))

    def _release(self, owner: str) -> None:
        """`owner` moves on from its latest transcript: drop it unless another run holds it."""
        previous = self.latest.pop(owner, None)
        if previous is None:
            return
        holders = self.holders.get(previous, set())
        holders.discard(owner)
        if not holders:
            self._drop(previous)

    def _drop(self, digest: str) -> None:
        entry = self.entries.pop(digest, None)
        if entry is not None:
            self.bytes -= entry.size
        for owner in self.holders.pop(digest, ()):  # evicted: its runs hold nothing here any more
            self.latest.pop(owner, None)
