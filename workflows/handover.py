"""What a run hands to its continuation: the state, minus what only grows and is kept elsewhere.

Carrying the whole `AgentState` made the continue-as-new input grow with every step (a 5,000-step
run: 741 KiB -> 2.6 MiB, bench/results/latest.md), and every worker holding the run held it all.
Kept elsewhere, so dropped here:

- messages the model has already seen, up to the last checkpoint (its unsent messages stay): they
  are in the transcript artifact (`transcript`); a rollback to an older checkpoint reads its
  messages back from there (`checkpoints.rollback_to`, activity `transcript.messages`);
- tool call records but the last `KEEP_TOOL_CALLS`: their outputs are in the transcript, their
  side effects in `effects`;
- effects below the last checkpoint: they went to the artifact store just before
  (workflows/effects_archive.py); a rollback below that checkpoint loads them back.

The run input itself (`run`, with a scripted model's script) is kept as it came: it does not grow.
"""

from __future__ import annotations

from ratchet.contracts import AgentState


KEEP_TOOL_CALLS = 50


def trimmed(state: AgentState) -> AgentState:
    keep_from = min([state.unsent] + [c.unsent for c in state.checkpoints[-1:]])
    drop = keep_from - state.messages_base
    if drop > 0:
        del state.messages[:drop]
        state.messages_base = keep_from
    if len(state.tool_calls) > KEEP_TOOL_CALLS:
        state.tool_calls_archived += len(state.tool_calls) - KEEP_TOOL_CALLS
        del state.tool_calls[:-KEEP_TOOL_CALLS]
    return state
