"""A person's messages and pause/resume signals, as the run takes them (deterministic, no I/O).

Signals go to the run's state once it exists. Those of the first workflow task (sent with the
start) arrive before it does: they wait here and are taken in order when it is made, so a resume
sent during run.prepare is not undone by an earlier pause, and messages keep their order.
"""

from __future__ import annotations

from ratchet.contracts import AgentState, Message, scrub_text

MAX_MESSAGE_CHARS = 100_000


class Inbox:
    def __init__(self) -> None:
        self._state: AgentState | None = None
        self._early: list[str] = []
        self._paused: bool | None = None

    def attach(self, state: AgentState) -> None:
        """The state exists (a new run, or a continuation): early signals go to it."""
        state.inbox[:0] = self._early
        if self._paused is not None:
            state.paused = self._paused
        self._state = state

    def send(self, text: object) -> None:
        """A user message (blank ones are ignored), for the next step boundary."""
        if not isinstance(text, str) or not text.strip():
            return
        text = scrub_text(text[:MAX_MESSAGE_CHARS])
        (self._state.inbox if self._state is not None else self._early).append(text)

    def set_paused(self, paused: bool) -> None:
        if self._state is None:
            self._paused = paused
        else:
            self._state.paused = paused


def deliver(state: AgentState) -> None:
    """The messages waiting in the state's inbox join the conversation."""
    state.messages.extend(Message(role="user", content=text) for text in state.inbox)
    state.inbox.clear()
