"""`UsageContext` (vLLM 0.14.0's `vllm.usage.usage_lib`): where an engine is created from, which picks
`EngineArgs.create_engine_config`'s batch defaults. vLLM's usage-statistics reporting is not here."""

from enum import Enum


class UsageContext(str, Enum):  # noqa: UP042 (vLLM's: str() names the member, unlike StrEnum)
    UNKNOWN_CONTEXT = "UNKNOWN_CONTEXT"
    LLM_CLASS = "LLM_CLASS"
    API_SERVER = "API_SERVER"
    OPENAI_API_SERVER = "OPENAI_API_SERVER"
    OPENAI_BATCH_RUNNER = "OPENAI_BATCH_RUNNER"
    ENGINE_CONTEXT = "ENGINE_CONTEXT"
