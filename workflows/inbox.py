"""A person's messages and pause/resume signals, as the run takes them (deterministic, no I/O).

Signals go to the run's state once it exists. Those of the first workflow task (sent with the
start) arrive before it does: they wait here and are taken in order when it is made, so a resume
sent during run.prepare is not undone by an earlier pause, and messages keep their order.
"""

from __future__ import annotations

from ratchet.contracts import MAX_MESSAGE_CHARS, AgentState, Message, PendingMessage, scrub_text
from . import sessions


class Inbox:
    def __init__(self) -> None:
        self._state: AgentState | None = None
        self._early: list[PendingMessage] = []
        self._paused: bool | None = None

    def attach(self, state: AgentState) -> None:
        """The state exists (a new run, or a continuation): early signals go to it (a session's
        continuation places them by its policy)."""
        if sessions.policy(state) is not None:
            for message in self._early:
                sessions.accept(state, message)
        else:
            state.session.inbox[:0] = self._early
        if self._paused is not None:
            state.paused = self._paused
        self._state = state

    def send(self, text: object) -> None:
        """A user message (blank ones are ignored): for the next step boundary, or for a session
        as its message policy says (workflows/sessions.py)."""
        if not isinstance(text, str) or not text.strip():
            return
        message = PendingMessage(text=scrub_text(text[:MAX_MESSAGE_CHARS]))
        if self._state is None:
            self._early.append(message)
        elif sessions.policy(self._state) is not None:
            sessions.accept(self._state, message)
        else:
            self._state.session.inbox.append(message)

    def set_paused(self, paused: bool) -> None:
        if self._state is None:
            self._paused = paused
        else:
            self._state.paused = paused


def deliver(state: AgentState) -> None:
    """The messages waiting in the state's inbox join the conversation (a session's turn in flight
    answers them too)."""
    sessions.joined(state)
    state.conversation.messages.extend(Message(role="user", content=message.text) for message in state.session.inbox)
    state.session.inbox.clear()
