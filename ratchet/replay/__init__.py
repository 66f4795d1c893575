"""The replay deploy gate: replays recorded histories against today's workflow code and locates a
divergence in the agent's terms (`ratchet replay`, docs/REPLAY.md)."""
