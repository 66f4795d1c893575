"""A tiny calculator with a bug for the demo agent to fix."""


def add(a: float, b: float) -> float:
    return a - b


def multiply(a: float, b: float) -> float:
    return a * b
