"""vLLM 0.14.0's transformers config of a model: its attributes, and the JSON vLLM hashes.

vLLM holds a model's config as a transformers `PretrainedConfig`: its class's defaults fill in what
`config.json` leaves out, it derives attributes as it loads, and it reads some names through its class's
`attribute_map`. `ModelConfig.compute_hash()` hashes it and its text config as `to_json_string()`. This
worker keeps the config as a dict, so it builds the object here the way vLLM's `get_config` does for a
local folder without remote code (vllm/transformers_utils/config.py: transformers' `AutoConfig` or one of
vLLM's own config classes, the flat hf_overrides through `config.update`, the RoPE patches, then
`ModelConfig._apply_dict_overrides`): `hf_config_dict` gives the dict of its attributes as loaded, for
`ModelConfig` to hold, and `hf_config_jsons` the JSON to hash, with whatever the worker changed in its
dict after loading replayed on the object (vLLM sets those attributes on its object).

transformers is imported here only, when the first model config is built: a worker that never builds one
never loads it. It is loaded with its torch support off (`_load_transformers`): with it on, importing
transformers imports torch, and a worker's first model config took four seconds, as long as vLLM's whole
import; a config class builds the same object either way (a dtype stays its name where transformers
would hold the torch dtype, and `to_dict` writes the name in both cases).

`config.json` is the caller's: nothing is imported by a name it gives except through
transformers' own `CONFIG_MAPPING`, remote code is never allowed, and a config that cannot be built (or a
model type whose class vLLM defines itself and this module does not port) answers None, for the caller to
fall back to the dict of `config.json`.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import logging
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from compilation_bridge.settings import import_environment
from compilation_bridge.vllm_config.hf_config import patch_rope_parameters
from compilation_bridge.vllm_config.limits import check_config_counts

logger = logging.getLogger(__name__)

# vLLM's `_CONFIG_REGISTRY`: model types whose config class vLLM defines itself; of those only Medusa's and
# LFM2-MoE's are ported below (served test models), the others are not reproduced.
_VLLM_CONFIG_TYPES = frozenset(
    {
        "afmoe",
        "bagel",
        "chatglm",
        "deepseek_vl_v2",
        "deepseek_v32",
        "flex_olmo",
        "hunyuan_vl",
        "isaac",
        "kimi_linear",
        "kimi_vl",
        "RefinedWeb",
        "RefinedWebModel",
        "jais",
        "mlp_speculator",
        "medusa",
        "midashenglm",
        "eagle",
        "speculators",
        "nemotron",
        "olmo3",
        "ovis",
        "ultravox",
        "step3_vl",
        "step3_text",
        "qwen3_next",
        "lfm2_moe",
        "tarsier2",
    }
)


@functools.cache
def _medusa_config_class() -> Any:
    """vLLM's `MedusaConfig` (vllm/transformers_utils/configs/medusa.py), without its `from_pretrained`
    key renaming, which `_vllm_config` applies to the dict."""
    from transformers import PretrainedConfig

    class MedusaConfig(PretrainedConfig):
        model_type = "medusa"

        def __init__(
            self,
            hidden_size: int = 4096,
            vocab_size: int = 32001,
            num_heads: int = 5,
            num_hidden_layers: int = 1,
            max_paths: int = 64,
            topk: int = 10,
            truncated_vocab_size: int | None = None,
            **kwargs: Any,
        ) -> None:
            self.hidden_size = hidden_size
            self.vocab_size = vocab_size
            self.num_heads = num_heads
            self.num_hidden_layers = num_hidden_layers
            self.max_paths = max_paths
            self.topk = topk
            self.max_seq_len = 2**20
            self.truncated_vocab_size = vocab_size if truncated_vocab_size is None else truncated_vocab_size
            if "architectures" not in kwargs:
                kwargs["architectures"] = ["MedusaModel"]
            super().__init__(**kwargs)

        @property
        def num_attention_heads(self) -> int:
            return 0

        @property
        def num_lookahead_tokens(self) -> int:
            return self.num_heads

        @num_lookahead_tokens.setter
        def num_lookahead_tokens(self, num_lookahead_tokens: int) -> None:
            self.num_heads = num_lookahead_tokens

    return MedusaConfig


@functools.cache
def _lfm2_moe_config_class() -> Any:
    """vLLM's `Lfm2MoeConfig` (vllm/transformers_utils/configs/lfm2_moe.py)."""
    from transformers import PretrainedConfig

    class Lfm2MoeConfig(PretrainedConfig):
        model_type = "lfm2_moe"
        keys_to_ignore_at_inference = ["past_key_values"]

        def __init__(
            self,
            vocab_size: int = 65536,
            hidden_size: int = 2048,
            intermediate_size: int = 7168,
            moe_intermediate_size: int = 1792,
            num_hidden_layers: int = 32,
            pad_token_id: int = 0,
            bos_token_id: int = 1,
            eos_token_id: int = 2,
            tie_word_embeddings: bool = True,
            rope_parameters: dict[str, Any] | None = None,
            max_position_embeddings: int = 128_000,
            use_cache: bool = True,
            norm_eps: float = 0.00001,
            num_attention_heads: int = 32,
            num_key_value_heads: int = 8,
            conv_bias: bool = False,
            conv_L_cache: int = 3,
            num_dense_layers: int = 2,
            num_experts_per_tok: int = 4,
            num_experts: int = 32,
            use_expert_bias: bool = True,
            routed_scaling_factor: float = 1.0,
            norm_topk_prob: bool = True,
            layer_types: list[str] | None = None,
            **kwargs: Any,
        ) -> None:
            self.vocab_size = vocab_size
            self.hidden_size = hidden_size
            self.intermediate_size = intermediate_size
            self.num_hidden_layers = num_hidden_layers
            rope_theta = kwargs.pop("rope_theta", 1000000.0)
            if rope_parameters is None:
                rope_parameters = {"rope_type": "default", "rope_theta": rope_theta}
            self.rope_parameters = rope_parameters
            self.max_position_embeddings = max_position_embeddings
            self.use_cache = use_cache
            self.norm_eps = norm_eps
            self.num_attention_heads = num_attention_heads
            self.num_key_value_heads = num_key_value_heads
            self.conv_bias = conv_bias
            self.conv_L_cache = conv_L_cache
            self.num_dense_layers = num_dense_layers
            self.moe_intermediate_size = moe_intermediate_size
            self.num_experts_per_tok = num_experts_per_tok
            self.num_experts = num_experts
            self.use_expert_bias = use_expert_bias
            self.routed_scaling_factor = routed_scaling_factor
            self.norm_topk_prob = norm_topk_prob
            self.layer_types = layer_types
            tie_word_embeddings = kwargs.get("tie_embedding", tie_word_embeddings)  # original config keys
            super().__init__(
                pad_token_id=pad_token_id,
                bos_token_id=bos_token_id,
                eos_token_id=eos_token_id,
                tie_word_embeddings=tie_word_embeddings,
                **kwargs,
            )

    return Lfm2MoeConfig


def _lfm2_moe_config(config_dict: dict[str, Any], name_or_path: str) -> Any:
    return _lfm2_moe_config_class().from_dict(config_dict, name_or_path=name_or_path)


def _medusa_config(config_dict: dict[str, Any], name_or_path: str) -> Any:
    # MedusaConfig.from_pretrained renames the head and layer counts of older Medusa checkpoints.
    for k in list(config_dict):
        if "num" in k:
            if "heads" in k:
                config_dict["num_heads"] = config_dict.pop(k)
            elif "layers" in k:
                config_dict["num_hidden_layers"] = config_dict.pop(k)
    return _medusa_config_class().from_dict(config_dict, name_or_path=name_or_path)


def _auto_config(config_dict: dict[str, Any], name_or_path: str) -> Any:
    """transformers' `AutoConfig.from_pretrained` on a folder, from its already read `config.json`, with
    `trust_remote_code=False`: the class only ever comes from `CONFIG_MAPPING`."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    if "model_type" not in config_dict:
        # AutoConfig's fallback: the longest model type found in the model's name.
        for pattern in sorted(CONFIG_MAPPING.keys(), key=len, reverse=True):
            if pattern in name_or_path:
                return CONFIG_MAPPING[pattern].from_dict(config_dict, name_or_path=name_or_path)
        raise ValueError("no model_type")
    if config_dict["model_type"] == "mistral" and "layer_types" in config_dict:
        config_dict["model_type"] = "ministral"  # AutoConfig's alternating-attention heuristic
    # A KeyError for a type transformers does not know, as AutoConfig's own refusal.
    return CONFIG_MAPPING[config_dict["model_type"]].from_dict(config_dict, name_or_path=name_or_path)


# The config classes of vLLM's own ported here (those of the served test models), by model type.
_PORTED: dict[str, Callable[[dict[str, Any], str], Any]] = {
    "medusa": _medusa_config,
    "lfm2_moe": _lfm2_moe_config,
}


def _load(source: dict[str, Any], name_or_path: str, hf_overrides_kw: dict[str, Any]) -> Any | None:
    """vLLM's `HFConfigParser.parse`: one of its own classes for the types it registers, else AutoConfig."""
    config_dict = copy.deepcopy(source)
    model_type = config_dict.get("model_type")
    if model_type is None and config_dict.get("speculators_config") is not None:
        model_type = "speculators"
    model_type = hf_overrides_kw.get("model_type", model_type)
    if model_type in _PORTED:
        config = _PORTED[model_type](config_dict, name_or_path)
    elif model_type in _VLLM_CONFIG_TYPES:
        return None
    else:
        config = _auto_config(config_dict, name_or_path)
    # `_maybe_remap_hf_config_attrs`
    if hasattr(config, "llm_config") and not hasattr(config, "text_config"):
        config.update({"text_config": config.llm_config})
    return config


def _set_architectures(config: Any) -> None:
    """`get_config`'s architecture for a config without one: the base model class of its type."""
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    if not config.architectures and config.model_type in MODEL_MAPPING_NAMES:
        config.update({"architectures": [MODEL_MAPPING_NAMES[config.model_type]]})


class AttributeView:
    """A transformers config object's attributes read and written as `hf_config.patch_rope_parameters`
    reads and writes the worker's dict, so that vLLM's patch is written once for both."""

    __slots__ = ("_config",)

    def __init__(self, config: Any) -> None:
        self._config = config

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and hasattr(self._config, name)

    def __getitem__(self, name: str) -> Any:
        try:
            return getattr(self._config, name)
        except AttributeError:
            raise KeyError(name) from None

    def __setitem__(self, name: str, value: Any) -> None:
        setattr(self._config, name, value)

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self._config, name, default)


def _patch_all_rope_parameters(config: Any) -> None:
    """`get_config` patches RoPE everywhere it may be: the config, its text config, its sub-configs."""
    patch_rope_parameters(AttributeView(config))
    patch_rope_parameters(AttributeView(config.get_text_config()))
    for name in getattr(config, "sub_configs", None) or {}:
        patch_rope_parameters(AttributeView(getattr(config, name, None)))


def _update_nested(target: Any, updates: dict[str, Any]) -> None:
    """vLLM's `ModelConfig._update_nested` on a config object or dict."""
    for key, value in updates.items():
        if isinstance(value, dict):
            nested = target.get(key) if isinstance(target, dict) else getattr(target, key, None)
            if nested is not None and (isinstance(nested, dict) or hasattr(nested, "__dict__")):
                _update_nested(nested, value)
                continue
        if isinstance(target, dict):
            target[key] = value
        else:
            setattr(target, key, value)


def _apply_dict_overrides(config: Any, overrides: dict[str, Any]) -> None:
    """vLLM's `ModelConfig._apply_dict_overrides`: a sub-config is updated, anything else set."""
    from transformers import PretrainedConfig

    for key, value in overrides.items():
        attr = getattr(config, key, None)
        if attr is not None and isinstance(attr, PretrainedConfig):
            _update_nested(attr, copy.deepcopy(value))
        else:
            setattr(config, key, copy.deepcopy(value))


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (`1 == True == 1.0` must not hide a change)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _replay(target: Any, before: dict[str, Any], after: dict[str, Any]) -> None:
    """Set on the object what the worker changed in its dict after loading, as vLLM sets attributes."""
    from transformers import PretrainedConfig

    for key in before.keys() - after.keys():
        if hasattr(target, key):
            delattr(target, key)
    for key, value in after.items():
        old = before.get(key)
        if key in before and _same(old, value):
            continue
        attr = getattr(target, key, None)
        if isinstance(attr, PretrainedConfig) and isinstance(old, dict) and isinstance(value, dict):
            _replay(attr, old, value)
        else:
            setattr(target, key, copy.deepcopy(value))


# Read by transformers once, when it is first imported: torch support off, no advice to install torch,
# and the hub off (a second lock, behind `_refuse_other_configs`, on the door that one closes).
_IMPORT_ENV = {"USE_TORCH": "0", "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1", "HF_HUB_OFFLINE": "1"}


def _refuse_other_configs(cls: Any, name: object, **kwargs: Any) -> Any:
    raise OSError(f"config {name!r} not loaded: this worker reads only the model folder's own config.json")


def _close_the_loading_door() -> None:
    """Some of transformers' config classes load another config by a name as they are built: EdgeTAM its
    default backbone from the hub, LightGlue its keypoint detector by the `_name_or_path` a caller's
    config gives, with the `trust_remote_code` that config gives (so a config.json could run code from
    any folder or hub repository), XCodec its semantic model the same way (reading any folder's
    config.json). Every such load goes through `PretrainedConfig._get_config_dict`, which this worker
    never needs (it builds configs from the dict it read): in this process it refuses, and the class
    falls back as for any config it cannot build."""
    from transformers import PretrainedConfig

    PretrainedConfig._get_config_dict = classmethod(_refuse_other_configs)


@functools.cache
def _load_transformers() -> None:
    """Imports transformers without torch, unless something in this process imported it already (the
    objects, and so their JSON, are the same either way). The environment is as it was afterwards.
    transformers' own warnings about a config are not logged: the configs are callers', and a caller
    could fill the worker's log with them, one a call. No config is ever loaded by name
    (`_close_the_loading_door`)."""
    if "transformers" not in sys.modules:
        with import_environment(_IMPORT_ENV):
            import transformers.models.auto.configuration_auto  # noqa: F401
    _close_the_loading_door()
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()


def _loaded_object(source: dict[str, Any], name_or_path: str, hf_overrides_kw: dict[str, Any]) -> Any | None:
    """vLLM's transformers config as `get_config` returns it, before its RoPE patches: the class's object
    from `source`, its architecture filled in, the flat hf_overrides applied by `config.update`."""
    _load_transformers()
    config = _load(source, name_or_path, hf_overrides_kw)
    if config is None:
        return None
    _set_architectures(config)
    if (quantization_config := source.get("quantization_config")) is not None:
        config.quantization_config = copy.deepcopy(quantization_config)
    if hf_overrides_kw:
        config.update(copy.deepcopy(hf_overrides_kw))
    return config


def split_overrides(hf_overrides: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """vLLM's split of hf_overrides: the flat ones, set as the config loads, and the dict ones, after."""
    flat = {k: v for k, v in hf_overrides.items() if not isinstance(v, dict)}
    return flat, {k: v for k, v in hf_overrides.items() if isinstance(v, dict)}


def _build_jsons(
    source: dict[str, Any],
    name_or_path: str,
    hf_overrides: dict[str, Any],
    loaded: dict[str, Any],
    current: dict[str, Any],
) -> tuple[str, str] | None:
    flat_overrides, dict_overrides = split_overrides(hf_overrides)
    config = _loaded_object(source, name_or_path, flat_overrides)
    if config is None:
        return None
    _patch_all_rope_parameters(config)
    if dict_overrides:
        _apply_dict_overrides(config, dict_overrides)
    _replay(config, loaded, current)
    return config.to_json_string(), config.get_text_config().to_json_string()


def _read_as_attributes(config: Any, values: dict[str, Any]) -> None:
    """`to_dict()` of `config` made to read as its attributes do, in its sub-configs too: the names its
    class reads through `attribute_map` (GPT-2's `num_attention_heads` for its `n_head`, ...) beside the
    names `to_dict()` writes, and the model type the object holds (an hf_override sets it; `to_dict()`
    writes the class's)."""
    from transformers import PretrainedConfig

    for alias, name in getattr(type(config), "attribute_map", {}).items():
        if name in values and alias not in values:
            values[alias] = copy.deepcopy(values[name])
    if "model_type" in values:
        values["model_type"] = getattr(config, "model_type", values["model_type"])
    for key, value in values.items():
        sub_config = getattr(config, key, None)
        if isinstance(sub_config, PretrainedConfig) and isinstance(value, dict):
            _read_as_attributes(sub_config, value)


def _build_dict(
    source: dict[str, Any], name_or_path: str, hf_overrides_kw: dict[str, Any]
) -> dict[str, Any] | None:
    config = _loaded_object(source, name_or_path, hf_overrides_kw)
    if config is None:
        return None
    values = config.to_dict()
    _read_as_attributes(config, values)
    return values


class _BuiltCache:
    """What was built from a caller's config, by the digest of the `repr` of what it was built from, the
    oldest dropped first: at most `entries` of them and `max_bytes` of their `repr`s (a caller's config
    and overrides run to megabytes). Building costs milliseconds, and a config is built on every plan."""

    def __init__(self, entries: int, max_bytes: int) -> None:
        self._entries, self._max_bytes = entries, max_bytes
        self._items: OrderedDict[bytes, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()  # the worker builds on several threads

    def __len__(self) -> int:
        return len(self._items)

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def get_or_build(self, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        """The value built for `key`, a copy of it: callers change the dicts they get. `key` is digested
        now: it holds mutable dicts, and a `repr` tells `1`, `1.0` and `True` apart."""
        digest = hashlib.sha256(repr(key).encode()).digest()
        with self._lock:
            if digest in self._items:
                self._items.move_to_end(digest)
                return copy.deepcopy(self._items[digest][0])
        value = build()
        size = len(repr(value))
        with self._lock:
            if digest not in self._items:
                self._items[digest] = (value, size)
                self._bytes += size
                while len(self._items) > self._entries or (
                    self._bytes > self._max_bytes and len(self._items) > 1
                ):
                    self._bytes -= self._items.popitem(last=False)[1][1]
        return copy.deepcopy(value)


_CACHE = _BuiltCache(entries=64, max_bytes=16 * 1024 * 1024)


def _built_or_none(what: str, name_or_path: str, build: Callable[[], Any]) -> Any:
    try:
        return build()
    except Exception as e:  # any failure on a caller's config: the caller falls back, the worker lives
        logger.info("transformers %s for %s not reproduced (%s: %s)", what, name_or_path, type(e).__name__, e)
        return None


def hf_config_dict(
    source: dict[str, Any], name_or_path: str, hf_overrides_kw: dict[str, Any]
) -> dict[str, Any] | None:
    """vLLM's `hf_config` as it is loaded, before its RoPE patches and dict overrides, as the dict of its
    attributes: `to_dict()` of the transformers object, which holds the class's defaults for what
    `config.json` leaves out and its derived attributes, with the class's attribute aliases beside them.
    None when this module cannot build vLLM's object, for the caller to fall back to `config.json`'s dict."""
    for where, config in (("config.json", source), ("hf_overrides", hf_overrides_kw)):
        check_config_counts(config, where)
    build = functools.partial(_build_dict, source, name_or_path, hf_overrides_kw)
    return _CACHE.get_or_build(
        ("dict", source, name_or_path, hf_overrides_kw), lambda: _built_or_none("config", name_or_path, build)
    )


def hf_config_jsons(
    source: dict[str, Any],
    name_or_path: str,
    hf_overrides: dict[str, Any],
    loaded: dict[str, Any],
    current: dict[str, Any],
) -> tuple[str, str] | None:
    """`to_json_string()` of vLLM's `hf_config` and `hf_text_config` for a model whose `config.json` held
    `source`, opened as `name_or_path` with `hf_overrides`, whose worker dict was `loaded` once loaded and
    is `current` now; None when this module cannot build vLLM's object."""
    # transformers builds lists a layer long as it loads: refused here, not left to the fallback below.
    for where, config in (("config.json", source), ("hf_overrides", hf_overrides), ("hf_config", current)):
        check_config_counts(config, where)
    build = functools.partial(_build_jsons, source, name_or_path, hf_overrides, loaded, current)
    return _CACHE.get_or_build(
        ("json", source, name_or_path, hf_overrides, loaded, current),
        lambda: _built_or_none("config JSON", name_or_path, build),
    )
