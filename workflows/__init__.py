"""The agent's state machine (`AgentWorkflow`), deterministic and free of I/O: every model call,
tool call, undo and verification is an activity. `agent.py` holds the handlers, the start, the
loop and the finish; what a step does is in plain functions over state and plan (acting,
checkpoints, saga, approvals, children, handover). `closed_rollback.py` holds `RollbackWorkflow`,
which undoes a closed run's effects with the same saga. Imports only contracts, core keys and budget,
and the SDK's workflow API (tests/static/test_determinism.py enforces it)."""
