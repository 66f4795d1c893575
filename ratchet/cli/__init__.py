"""The `ratchet` command: worker, config, codec-server, replay, and the run verbs (approve, reject,
send, watch, checkpoints, rollback, fork)."""
