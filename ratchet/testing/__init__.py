"""Test doubles a user's own tests may use: a strict OpenAI-compatible server (real HTTP, real
openai client) and the store conformance suites any backend must pass."""
