"""Every piece of I/O an agent does, as Temporal activities: `run.prepare`, `model.call` (through a
`ModelProvider`), `tool.<name>` and `undo.<name>` (through the idempotency ledger),
`checkpoint.verify` and `checkpoint.fork`, `workspace.open` and `workspace.rehydrate`,
`rollback.load` (a closed run, for its rollback), and the built-in tools. Never imports workflows."""
