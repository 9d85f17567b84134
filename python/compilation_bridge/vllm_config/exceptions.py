"""The error types vLLM 0.14.0 raises from its request parameters, under the names vLLM gives them.

Callers see an error's type and module (in the error payload, and as SnakeBridge's Elixir exception),
so each type here carries the module of vLLM's (or msgspec's) own class.
"""

from typing import Any


class VLLMValidationError(ValueError):
    """vLLM-specific validation error for request validation failures: its message, then the parameter
    and the value it rejected, when given."""

    def __init__(self, message: str, *, parameter: str | None = None, value: Any = None) -> None:
        super().__init__(message)
        self.parameter = parameter
        self.value = value

    def __str__(self) -> str:
        base = super().__str__()
        extras = []
        if self.parameter is not None:
            extras.append(f"parameter={self.parameter}")
        if self.value is not None:
            extras.append(f"value={self.value}")
        return f"{base} ({', '.join(extras)})" if extras else base


VLLMValidationError.__module__ = "vllm.exceptions"


class ValidationError(ValueError):
    """What msgspec raises when a value does not convert to the type asked for."""


ValidationError.__module__ = "msgspec"
