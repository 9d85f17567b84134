"""`vllm.pooling_params`: the parameters of one request to a pooling model, as vLLM 0.14.0 defines them.

`PoolingParams` is a msgspec Struct in vLLM, built here as `SamplingParams` is (`structs`:
msgspec's constructor, no type checks); `verify` fills it in from the model's `PoolerConfig` and checks it
against the pooling task as vLLM does.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from compilation_bridge.vllm_config.model import ModelConfig
from compilation_bridge.vllm_config.pooler import PoolerConfig, get_use_activation
from compilation_bridge.vllm_config.sampling_params import RequestOutputKind
from compilation_bridge.vllm_config.structs import StructInit, msgspec_struct

PoolingTask = Literal["embed", "classify", "score", "token_embed", "token_classify", "plugin"]

_STEP_POOLING_PARAMETERS = ("step_tag_id", "returned_token_ids")


@msgspec_struct
class PoolingParams(StructInit):
    """API parameters for pooling models.

    Attributes:
        truncate_prompt_tokens: Controls prompt truncation.
            Set to -1 to use the model's default truncation size.
            Set to k to keep only the last k tokens (left truncation).
            Set to None to disable truncation.
        dimensions: Reduce the dimensions of embeddings
            if model support matryoshka representation.
        normalize: Deprecated, please use use_activation instead.
        softmax: Deprecated, please use use_activation instead.
        activation: Deprecated, please use use_activation instead.
        use_activation: Whether to apply activation function to
            the classification outputs.
    """

    truncate_prompt_tokens: int | None = None

    ## for embeddings models
    dimensions: int | None = None
    normalize: bool | None = None

    ## for classification, scoring and rerank
    softmax: bool | None = None
    activation: bool | None = None
    use_activation: bool | None = None

    ## for step pooling models
    step_tag_id: int | None = None
    returned_token_ids: list[int] | None = None

    ## Internal use only
    task: PoolingTask | None = None
    requires_token_ids: bool = False
    skip_reading_prefix_cache: bool | None = None
    extra_kwargs: dict[str, Any] | None = None
    output_kind: RequestOutputKind = RequestOutputKind.FINAL_ONLY

    @property
    def all_parameters(self) -> list[str]:
        return ["dimensions", "use_activation"]

    @property
    def valid_parameters(self) -> dict[str, list[str]]:
        return {
            "embed": ["dimensions", "use_activation"],
            "classify": ["use_activation"],
            "score": ["use_activation"],
            "token_embed": ["dimensions", "use_activation"],
            "token_classify": ["use_activation"],
        }

    def clone(self) -> PoolingParams:
        """Returns a deep copy of the PoolingParams instance."""
        return copy.deepcopy(self)

    def verify(self, task: PoolingTask, model_config: ModelConfig | None = None) -> None:
        if self.task is None:
            self.task = task
        elif self.task != task:
            msg = f"You cannot overwrite {self.task=!r} with {task=!r}!"
            raise ValueError(msg)
        # raise deprecated warning for softmax and activation
        self.use_activation = get_use_activation(self)
        # a plugin task verifies its inputs itself
        if self.task == "plugin":
            if self.skip_reading_prefix_cache is None:
                self.skip_reading_prefix_cache = True
            return
        self._merge_default_parameters(model_config)
        self._set_default_parameters(model_config)
        self._verify_valid_parameters()

    def _merge_default_parameters(self, model_config: ModelConfig | None = None) -> None:
        if model_config is None:
            return
        pooler_config = model_config.pooler_config
        if pooler_config is None:
            return
        assert self.task is not None, "task must be set"
        valid_parameters = self.valid_parameters[self.task]
        for k in valid_parameters:
            if getattr(pooler_config, k, None) is None:
                continue
            if getattr(self, k, None) is None:
                setattr(self, k, getattr(pooler_config, k))
        if self.skip_reading_prefix_cache is None:
            # With prefix caching, all pooling may cover fewer than the prompt's tokens.
            self.skip_reading_prefix_cache = self.task in ["token_embed", "token_classify"]
        self._verify_step_pooling(pooler_config, valid_parameters)

    def _verify_step_pooling(self, pooler_config: PoolerConfig, valid_parameters: list[str]) -> None:
        if pooler_config.tok_pooling_type != "STEP":
            invalid_parameters = [k for k in _STEP_POOLING_PARAMETERS if getattr(self, k, None) is not None]
            if invalid_parameters:
                raise ValueError(
                    f"Task {self.task} only supports {valid_parameters} "
                    f"parameters, does not support "
                    f"{invalid_parameters} parameters"
                )
            return
        for k in _STEP_POOLING_PARAMETERS:
            if getattr(pooler_config, k, None) is None:
                continue
            if getattr(self, k, None) is None:
                setattr(self, k, getattr(pooler_config, k))

    def _set_default_parameters(self, model_config: ModelConfig | None) -> None:
        if self.task in ["embed", "token_embed"]:
            if self.use_activation is None:
                self.use_activation = True
            if self.dimensions is not None and model_config is not None:
                self._check_dimensions(model_config)
        elif self.task in ["classify", "score", "token_classify"]:
            if self.use_activation is None:
                self.use_activation = True
        else:
            raise ValueError(f"Unknown pooling task: {self.task}")

    def _check_dimensions(self, model_config: ModelConfig) -> None:
        if not model_config.is_matryoshka:
            raise ValueError(
                f'Model "{model_config.served_model_name}" does not '
                f"support matryoshka representation, "
                f"changing output dimensions will lead to poor results."
            )
        mds = model_config.matryoshka_dimensions
        if mds is not None:
            if self.dimensions not in mds:
                raise ValueError(
                    f'Model "{model_config.served_model_name}" '
                    f"only supports {mds!s} matryoshka dimensions, "
                    f"use other output dimensions will "
                    f"lead to poor results."
                )
        elif self.dimensions is not None and self.dimensions < 1:
            raise ValueError("Dimensions must be greater than 0")

    def _verify_valid_parameters(self) -> None:
        assert self.task is not None, "task must be set"
        valid_parameters = self.valid_parameters[self.task]
        invalid_parameters = [
            k for k in self.all_parameters if k not in valid_parameters and getattr(self, k, None) is not None
        ]
        if invalid_parameters:
            raise ValueError(
                f"Task {self.task} only supports {valid_parameters} "
                f"parameters, does not support "
                f"{invalid_parameters} parameters"
            )

    def __repr__(self) -> str:
        return (
            f"PoolingParams("
            f"task={self.task}, "
            f"dimensions={self.dimensions}, "
            f"use_activation={self.use_activation}, "
            f"step_tag_id={self.step_tag_id}, "
            f"returned_token_ids={self.returned_token_ids}, "
            f"requires_token_ids={self.requires_token_ids}, "
            f"skip_reading_prefix_cache={self.skip_reading_prefix_cache}, "
            f"truncate_prompt_tokens={self.truncate_prompt_tokens}, "
            f"extra_kwargs={self.extra_kwargs})"
        )

    def __post_init__(self) -> None:
        assert self.output_kind == RequestOutputKind.FINAL_ONLY, (
            "For pooling output_kind has to be FINAL_ONLY"
        )
