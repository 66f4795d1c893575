"""Tools from MCP (Model Context Protocol) servers, as durable tool sources.

- `config`: the servers a worker can reach (`McpServer`, RATCHET_MCP_SERVERS) and what a profile takes
  from them (`McpToolset`: tools, effects, compensations); the names the model sees (`public_name`).
- `catalog`: a run's pinned tool list (`McpCatalog`), made from a server's listing when the run is
  planned, stored once in the artifact store and named by digest in the plan.
- `pool`: one connection per server per worker, started lazily, restarted after a crash, closed on
  drain (`McpPool`); `stdio`: a server program and Ratchet's own JSON-RPC client for it; `http`: a
  streamable-HTTP server through the SDK's client; `errors`: what can go wrong, classified.
- `results`: an MCP tool result as a `ToolResult` (text, structured content, images and resources in
  the artifact store, `isError` as a tool error).
- `server`: the other direction, `ratchet mcp`: run control served over MCP.

Nothing here imports the `mcp` SDK at module level: a worker without MCP servers never loads it
(the `mcp` extra). docs/ARCHITECTURE.md, "Tools from MCP servers".
"""
