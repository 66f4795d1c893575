"""The model's tool arguments as the workflow reads them (workflows/acting.py, parse_arguments): what
is not a JSON object goes back to the model as a problem, never as an error of the workflow task."""

from __future__ import annotations

from ratchet.workflows.acting import parse_arguments


def test_arguments_that_are_a_json_object_are_taken():
    assert parse_arguments('{"path": "a.py"}') == ({"path": "a.py"}, None)
    assert parse_arguments("") == ({}, None)


def test_arguments_that_are_not_json_say_where():
    args, problem = parse_arguments('{"path": ')
    assert args == {} and problem is not None
    assert "not valid JSON (Expecting value at position 9)" in problem


def test_an_integer_past_pythons_digit_limit_is_a_problem_for_the_model():
    """json.loads raises a plain ValueError there, not a JSONDecodeError (it has no .msg)."""
    args, problem = parse_arguments('{"n": ' + "7" * 5000 + "}")
    assert args == {} and problem is not None
    assert problem.startswith("tool arguments are not valid JSON (Exceeds the limit")


def test_arguments_that_are_not_an_object_are_refused():
    assert parse_arguments("[1, 2]") == ({}, "tool arguments must be a JSON object")
