"""`Window`: the latest items of a list that only grows at its end, and the offset of the first.

A long run keeps only the newest part of what grows (its messages, effects, tool call records,
turns, checkpoints): older items leave at a continue-as-new, into an artifact or for good. Item
number `i` of the whole list (its *index*, counted from the run's first item, what checkpoints and
offsets name) is `items[i - base]`. The arithmetic between the two lives here, once.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, TypeVar

from pydantic import BaseModel, Field

T = TypeVar("T")


class Window(BaseModel, Generic[T]):
    """Items `base` .. `end - 1` of a list whose first `base` items are no longer held."""

    items: list[T] = Field(default_factory=list)
    base: int = 0
    """How many items came before `items[0]` (dropped, or kept elsewhere)."""

    @property
    def end(self) -> int:
        """How many items the whole list has: the index the next item gets."""
        return self.base + len(self.items)

    @property
    def last(self) -> T | None:
        return self.items[-1] if self.items else None

    def local(self, index: int) -> int:
        """Where item `index` of the whole list is in `items` (it must not have been dropped)."""
        if index < self.base:
            raise IndexError(f"item {index} is no longer held (the window starts at {self.base})")
        return index - self.base

    def at(self, index: int) -> T:
        """Item `index` of the whole list."""
        return self.items[self.local(index)]

    def since(self, index: int) -> list[T]:
        """The items from index `index` on (those held: a dropped part is left out)."""
        return self.items[max(index - self.base, 0) :]

    def append(self, item: T) -> None:
        self.items.append(item)

    def extend(self, items: Iterable[T]) -> None:
        self.items.extend(items)

    def cut_at(self, index: int) -> None:
        """Keep only the items before index `index` (all of them held before it, if any)."""
        del self.items[max(index - self.base, 0) :]

    def drop_before(self, index: int) -> list[T]:
        """Stop holding the items before index `index` (returned, oldest first)."""
        count = min(max(index - self.base, 0), len(self.items))
        dropped = self.items[:count]
        del self.items[:count]
        self.base += count
        return dropped

    def keep_last(self, count: int) -> list[T]:
        """Hold only the newest `count` items (the others returned, oldest first)."""
        return self.drop_before(self.end - count)

    def reset(self, items: list[T], base: int = 0) -> None:
        """Hold `items`, the first of them item number `base`."""
        self.items, self.base = list(items), base

    def page(self, offset: int, limit: int) -> tuple[int, list[T]]:
        """At most `limit` items from index `offset` on (from the first held, if `offset` was
        dropped): the index of the first item returned, and the items."""
        first = max(offset, self.base)
        start = first - self.base
        return first, self.items[start : start + limit]
