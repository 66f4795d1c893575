"""The approval patterns (ratchet/contracts/approval_policy.py, ratchet/core/approval_rules.py):
what a glob, a regex, bounds and equals cover, the escapes that cover nothing, and rules that do
not parse refused at the profile, naming the rule."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ratchet.contracts import ApproveRequest, ToolPattern
from ratchet.core.approval_rules import covers, first_covering
from ratchet.core.profiles import AgentProfile, ProfileRegistry

DOCS = ToolPattern.model_validate({"tool": "write_file", "when": {"path": {"glob": "docs/**"}}})


@pytest.mark.parametrize(
    "path", ["docs/a.md", "docs/x/y/z.md", "./docs/a.md", "docs//a.md", "docs/./a.md", "docs/.hidden"]
)
def test_a_docs_glob_covers_paths_under_docs(path):
    assert covers(DOCS, "write_file", {"path": path})


@pytest.mark.parametrize(
    "path",
    [
        "docs/../secrets",
        "docs/a/../../secrets",
        "/work/docs/a.md",
        "docs\\..\\secrets",
        "C:\\docs\\a",
        "docs/**",
        "docs/*.md",
        "docs",
        "docs/",
        "docsx/a.md",
        "DOCS/a.md",
        "docs/a\x00.md",
        "",
        ["docs/a.md"],
        7,
    ],
)
def test_escapes_and_look_alikes_are_not_covered(path):
    assert not covers(DOCS, "write_file", {"path": path})


def test_a_missing_argument_another_tool_and_single_stars_are_not_covered():
    assert not covers(DOCS, "write_file", {"content": "x"})
    assert not covers(DOCS, "read_file", {"path": "docs/a.md"})
    one = ToolPattern.model_validate({"tool": "t", "when": {"path": {"glob": "docs/*.md"}}})
    assert covers(one, "t", {"path": "docs/a.md"}) and not covers(one, "t", {"path": "docs/sub/a.md"})
    middle = ToolPattern.model_validate({"tool": "t", "when": {"path": {"glob": "src/**/test_?.py"}}})
    assert covers(middle, "t", {"path": "src/test_a.py"}) and covers(middle, "t", {"path": "src/x/y/test_b.py"})
    assert not covers(middle, "t", {"path": "src/x/test_ab.py"})


def test_a_regex_must_match_the_whole_value_and_a_list_is_matched_as_quoted_words():
    pytest_rule = ToolPattern.model_validate({"tool": "run_command", "when": {"argv": {"regex": "pytest( -q)?"}}})
    assert covers(pytest_rule, "run_command", {"argv": ["pytest"]})
    assert covers(pytest_rule, "run_command", {"argv": ["pytest", "-q"]})
    for argv in (["pytest", "-q", "x"], ["pytest -q"], ["pytestx"], "pytest -q\n", ["sh", "-c", "pytest"], [1]):
        assert not covers(pytest_rule, "run_command", {"argv": argv}), argv


def test_bounds_take_numbers_only_and_equals_takes_the_same_type():
    small = ToolPattern.model_validate({"tool": "pay", "when": {"amount": {"lt": 100}}})
    assert covers(small, "pay", {"amount": 99.99}) and covers(small, "pay", {"amount": -5})
    for amount in (100, 1e309, float("nan"), "50", True, None, [1]):
        assert not covers(small, "pay", {"amount": amount}), amount
    ana = ToolPattern.model_validate({"tool": "pay", "when": {"to": {"equals": "ana"}, "amount": {"ge": 1, "le": 5}}})
    assert covers(ana, "pay", {"to": "ana", "amount": 5})
    assert not covers(ana, "pay", {"to": "ana ", "amount": 5}) and not covers(ana, "pay", {"to": "ana", "amount": 6})
    assert first_covering([small, ana], "pay", {"to": "ana", "amount": 3}) is small


def test_labels_name_the_rule_as_a_decision_records_it():
    assert DOCS.label() == "write_file path=docs/**"
    both = ToolPattern.model_validate({"tool": "pay", "when": {"to": {"equals": "ana"}, "amount": {"lt": 100}}})
    assert both.label() == "pay amount=<100 to='ana'"


@pytest.mark.parametrize(
    ("when", "says"),
    [
        ({"path": {"glob": "/etc/**"}}, "a relative path"),
        ({"path": {"glob": "docs/../x"}}, "'..' segments"),
        ({"path": {"glob": "docs/a**"}}, "'**' must be a whole segment"),
        ({"argv": {"regex": "pytest("}}, "does not compile"),
        ({"amount": {"lt": 1, "glob": "x"}}, "exactly one of"),
        ({"amount": {}}, "exactly one of"),
        ({"amount": {"below": 3}}, "Extra inputs are not permitted"),
        ({"bad name": {"equals": 1}}, "not identifiers"),
    ],
)
def test_a_rule_that_does_not_parse_fails_the_profile_naming_the_rule(when, says):
    with pytest.raises(ValidationError) as refused:
        AgentProfile(
            name="p", system_prompt="s", tools=["t"], auto_approve=[{"tool": "t"}, {"tool": "t", "when": when}]
        )
    assert says in str(refused.value) and "auto_approve.1" in str(refused.value)


def test_a_rule_for_a_tool_the_profile_lacks_stops_the_worker():
    registry = ProfileRegistry()
    registry.register(
        AgentProfile(name="p", system_prompt="s", tools=["write_file"], auto_approve=[DOCS, {"tool": "wirte_file"}])
    )
    assert registry.problems() == ["profile 'p': auto_approve[1] (wirte_file): 'wirte_file' is not one of its tools"]


@pytest.mark.parametrize("by", ["rule:write_file path=docs/**", "grant:g1", "timeout"])
def test_a_person_cannot_sign_as_a_rule_a_grant_or_the_timeout(by):
    with pytest.raises(ValidationError):
        ApproveRequest(call_id="call_1_0", by=by)
