"""The agent's vocabulary, shared by workflows and activities: the `@tool` registry and
`ToolContext`, agent profiles, idempotency keys and budget arithmetic."""
