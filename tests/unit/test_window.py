"""`Window`: a list held from an offset on, and the arithmetic between a whole list's indexes and
the items held (pure: no server)."""

import pytest

from ratchet.contracts import Window


def window(base: int, *items: str) -> Window[str]:
    return Window[str](items=list(items), base=base)


def test_a_window_maps_indexes_of_the_whole_list_to_the_items_it_holds():
    held = window(10, "k", "l", "m")
    assert held.end == 13 and held.last == "m"
    assert held.local(10) == 0 and held.local(12) == 2 and held.at(11) == "l"
    assert held.since(12) == ["m"] and held.since(3) == ["k", "l", "m"], "a dropped part is left out"
    assert held.since(13) == [] and window(0).last is None


def test_an_index_that_was_dropped_is_refused_not_read_from_elsewhere():
    with pytest.raises(IndexError, match="item 9 is no longer held"):
        window(10, "k").local(9)
    with pytest.raises(IndexError):
        window(10, "k").at(3)


def test_append_extends_the_whole_list_and_the_index_of_the_next_item():
    held = window(4)
    held.append("e")
    held.extend(iter(["f", "g"]))
    assert (held.base, held.items, held.end) == (4, ["e", "f", "g"], 7)


def test_dropping_the_oldest_moves_the_offset_and_returns_what_went():
    held = window(2, "c", "d", "e", "f")
    assert held.drop_before(4) == ["c", "d"] and (held.base, held.items) == (4, ["e", "f"])
    assert held.drop_before(3) == [] and held.base == 4, "an index already dropped changes nothing"
    assert held.keep_last(1) == ["e"] and (held.base, held.items) == (5, ["f"])
    assert held.keep_last(5) == [] and held.base == 5
    assert held.drop_before(99) == ["f"] and (held.base, held.items, held.end) == (6, [], 6), "never past the end"


def test_cutting_at_an_index_keeps_only_what_came_before_it():
    held = window(3, "d", "e", "f")
    held.cut_at(5)
    assert (held.base, held.items) == (3, ["d", "e"])
    held.cut_at(1)
    assert (held.base, held.items, held.end) == (3, [], 3), "below the offset: nothing held is before it"


def test_reset_holds_new_items_from_a_given_index():
    held = window(7, "x")
    held.reset(["a", "b"], base=2)
    assert (held.base, held.items, held.end) == (2, ["a", "b"], 4)
    held.reset([])
    assert (held.base, held.end) == (0, 0)


def test_a_page_starts_at_the_first_held_item_when_its_offset_was_dropped():
    held = window(10, "k", "l", "m", "n")
    assert held.page(11, 2) == (11, ["l", "m"])
    assert held.page(0, 2) == (10, ["k", "l"])
    assert held.page(13, 50) == (13, ["n"]) and held.page(20, 5) == (20, [])


def test_a_window_round_trips_through_json_with_its_offset():
    held = Window[int](items=[5, 6], base=5)
    assert Window[int].model_validate_json(held.model_dump_json()) == held
    assert Window[int]().model_dump(exclude_defaults=True) == {}
