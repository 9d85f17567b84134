"""`Range`: an inclusive interval of token counts (vLLM's `vllm.config.utils.Range`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Range:
    start: int
    end: int

    def is_single_size(self) -> bool:
        return self.start == self.end

    def __contains__(self, size: int) -> bool:
        return self.start <= size <= self.end

    def __eq__(self, other: object) -> bool:
        # Only another Range compares equal: Range(1, 2) != (1, 2), as in vLLM.
        if not isinstance(other, Range):
            return False
        return self.start == other.start and self.end == other.end

    def __hash__(self) -> int:
        return hash((self.start, self.end))

    def __str__(self) -> str:
        return f"({self.start}, {self.end})"

    def __repr__(self) -> str:
        return self.__str__()
