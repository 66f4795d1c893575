"""Workflows: deterministic agent state machines. No I/O here; all I/O is in activities."""
