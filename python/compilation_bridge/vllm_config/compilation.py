"""`CompilationConfig`: vLLM 0.14.0's `vllm.config.CompilationConfig`, field for field.

The class is a pydantic dataclass declared exactly as vLLM declares it (same field types, defaults,
validators and their order), so pydantic produces the same values and the same error texts. Quirks of
vLLM are kept on purpose (docs/design.md, vLLM's quirks): `level` copies a raw int into `mode`, an unknown
`cudagraph_mode` string raises a bare KeyError, `custom_ops=[""]` raises IndexError.

Departures, for safety: `inductor_passes` names and out-of-tree backends resolve only against the
operator's allowlist, and sizes that drive allocations are capped (`limits.MAX_SIZE`).
"""

import functools
import importlib
from collections import Counter
from collections.abc import Callable
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import ConfigDict, Field, TypeAdapter, field_validator
from pydantic.dataclasses import dataclass

from compilation_bridge.settings import ALLOWED_CALLABLES_ENV, get_settings
from compilation_bridge.vllm_config.dynamic_shapes import DynamicShapesConfig
from compilation_bridge.vllm_config.enums import CompilationMode, CUDAGraphMode
from compilation_bridge.vllm_config.env import env_with_choices
from compilation_bridge.vllm_config.hashing import get_hash_factors, hash_factors, vllm_name
from compilation_bridge.vllm_config.inductor_pass import CallableInductorPass, InductorPass
from compilation_bridge.vllm_config.limits import check_size, check_sizes
from compilation_bridge.vllm_config.logs import info_once, logger, warning_once
from compilation_bridge.vllm_config.pass_config import PassConfig
from compilation_bridge.vllm_config.platforms import current_platform
from compilation_bridge.vllm_config.range import Range
from compilation_bridge.vllm_config.versions import is_torch_equal_or_newer

if TYPE_CHECKING:
    from compilation_bridge.vllm_config.vllm import VllmConfig

SAVE_FORMATS = ("binary", "unpacked")
CAPPED_SIZE_FIELDS = (
    "compile_sizes",
    "compile_ranges_split_points",
    "cudagraph_capture_sizes",
    "max_cudagraph_capture_size",
)

# Set by the compile layer when it is imported: VllmConfig -> a VllmBackend (see init_backend).
_vllm_backend_factory: Callable[[Any], Any] | None = None


def set_vllm_backend_factory(factory: Callable[[Any], Any] | None) -> None:
    global _vllm_backend_factory
    _vllm_backend_factory = factory


def _default_save_format() -> str | None:
    return env_with_choices("VLLM_COMPILE_CACHE_SAVE_FORMAT", "binary", SAVE_FORMATS)


def resolve_allowed_callable(qualname: str, what: str) -> Any:
    """Import `module.attr` only when the operator allowlisted that exact name."""
    if qualname not in get_settings().allowed_callables:
        raise ValueError(
            f"{what} {qualname!r} is not on the operator's allowlist ({ALLOWED_CALLABLES_ENV}); "
            "nothing was imported"
        )
    module_name, obj_name = qualname.rsplit(".", 1)
    return getattr(importlib.import_module(module_name), obj_name)


def _as_inductor_pass(func: Any) -> InductorPass:
    return func if isinstance(func, InductorPass) else CallableInductorPass(func)


def _round_up(x: int, y: int) -> int:
    return ((x + y - 1) // y) * y


@vllm_name("vllm.config.compilation.CompilationConfig")
@dataclass(config=ConfigDict(extra="forbid"))
class CompilationConfig:
    level: int = Field(default=None)
    mode: CompilationMode = Field(default=None)
    debug_dump_path: Path | None = None
    cache_dir: str = ""
    compile_cache_save_format: Literal["binary", "unpacked"] = field(default_factory=_default_save_format)
    backend: str = ""
    custom_ops: list[str] = field(default_factory=list)
    splitting_ops: list[str] | None = None
    compile_mm_encoder: bool = False
    compile_sizes: list[int | str] | None = None
    compile_ranges_split_points: list[int] | None = None
    inductor_compile_config: dict = field(default_factory=dict)
    inductor_passes: dict[str, str] = field(default_factory=dict)
    cudagraph_mode: CUDAGraphMode = Field(default=None)
    cudagraph_num_of_warmups: int = 0
    cudagraph_capture_sizes: list[int] | None = None
    cudagraph_copy_inputs: bool = False
    cudagraph_specialize_lora: bool = True
    use_inductor_graph_partition: bool = Field(default=None)
    pass_config: PassConfig = field(default_factory=PassConfig)
    max_cudagraph_capture_size: int | None = field(default=None)
    dynamic_shapes_config: DynamicShapesConfig = field(default_factory=DynamicShapesConfig)
    local_cache_dir: str = field(default=None, init=False)
    bs_to_padded_graph_size: list[int] = field(default=None, init=False)
    enabled_custom_ops: Counter[str] = field(default_factory=Counter, init=False)
    disabled_custom_ops: Counter[str] = field(default_factory=Counter, init=False)
    traced_files: set[str] = field(default_factory=set, init=False)
    compilation_time: float = field(default=0.0, init=False)
    static_forward_context: dict[str, Any] = field(default_factory=dict, init=False)

    _attention_ops: ClassVar[list[str]] = [
        "vllm::unified_attention",
        "vllm::unified_attention_with_output",
        "vllm::unified_mla_attention",
        "vllm::unified_mla_attention_with_output",
        "vllm::mamba_mixer2",
        "vllm::mamba_mixer",
        "vllm::short_conv",
        "vllm::linear_attention",
        "vllm::plamo2_mamba_mixer",
        "vllm::gdn_attention_core",
        "vllm::kda_attention",
        "vllm::sparse_attn_indexer",
    ]

    def compute_hash(self) -> str:
        ignored_factors = {
            "debug_dump_path",
            "cache_dir",
            "local_cache_dir",
            "bs_to_padded_graph_size",
            "traced_files",
            "compilation_time",
            "static_forward_context",
            "pass_config",
            "dynamic_shapes_config",
        }
        factors = get_hash_factors(self, ignored_factors)
        factors["pass_config"] = self.pass_config.compute_hash()
        factors["dynamic_shapes_config"] = self.dynamic_shapes_config.compute_hash()
        return hash_factors(factors)

    def __repr__(self) -> str:
        exclude: dict[str, Any] = {
            "static_forward_context": True,
            "enabled_custom_ops": True,
            "disabled_custom_ops": True,
            "compilation_time": True,
            "bs_to_padded_graph_size": True,
            "traced_files": True,
            "inductor_compile_config": {"post_grad_custom_post_pass": True},
        }
        pass_config_exclude = {
            attr: True
            for attr, default_val in vars(PassConfig()).items()
            if getattr(self.pass_config, attr) == default_val
        }
        if pass_config_exclude:
            exclude["pass_config"] = pass_config_exclude
        dumped = _type_adapter().dump_python(self, exclude=exclude, exclude_unset=True)
        return str(dumped)

    __str__ = __repr__

    @field_validator("mode", mode="before")
    @classmethod
    def validate_mode_before(cls, value: Any) -> Any:
        if isinstance(value, str):
            mode_name = value.upper()
            if mode_name not in CompilationMode.__members__:
                raise ValueError(
                    f"Invalid compilation mode: {value}. "
                    f"Valid modes are: {', '.join(CompilationMode.__members__.keys())}"
                )
            return CompilationMode[mode_name]
        return value

    @field_validator("cudagraph_mode", mode="before")
    @classmethod
    def validate_cudagraph_mode_before(cls, value: Any) -> Any:
        if isinstance(value, str):
            return CUDAGraphMode[value.upper()]  # an unknown name is a bare KeyError, as in vLLM
        return value

    @field_validator("pass_config", mode="before")
    @classmethod
    def validate_pass_config_before(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return PassConfig(**value)
        return value

    @field_validator("compile_cache_save_format")
    @classmethod
    def validate_compile_cache_save_format(cls, value: str) -> str:
        if value not in SAVE_FORMATS:
            raise ValueError(f"compile_cache_save_format must be 'binary' or 'unpacked', got: {value}")
        return value

    @field_validator("level", "mode", "cudagraph_mode", "use_inductor_graph_partition", mode="wrap")
    @classmethod
    def _skip_none_validation(cls, value: Any, handler: Callable[[Any], Any]) -> Any:
        if value is None:
            return value
        return handler(value)

    @field_validator(*CAPPED_SIZE_FIELDS)
    @classmethod
    def _cap_sizes(cls, value: Any, info: Any) -> Any:
        if isinstance(value, list):
            check_sizes(info.field_name, value)
        else:
            check_size(info.field_name, value)
        return value

    def __post_init__(self) -> None:
        if self.level is not None:
            logger.warning(
                "Level is deprecated and will be removed in the next release,"
                "either 0.12.0 or 0.11.2 whichever is soonest."
                "Use mode instead."
                "If both level and mode are given,"
                "only mode will be used."
            )
            if self.mode is None:
                self.mode = self.level  # the raw int, not the enum: a vLLM quirk kept on purpose

        count_none = self.custom_ops.count("none")
        count_all = self.custom_ops.count("all")
        assert count_none + count_all <= 1, "Can only specify 'none' or 'all'"

        if is_torch_equal_or_newer("2.6"):
            key = "enable_auto_functionalized_v2"
            if key not in self.inductor_compile_config:
                self.inductor_compile_config[key] = False

        self._resolve_inductor_passes()

        if self.pass_config.enable_qk_norm_rope_fusion:
            self.custom_ops.append("+rotary_embedding")

        if (
            is_torch_equal_or_newer("2.9.0.dev")
            and "combo_kernels" not in self.inductor_compile_config
            and "benchmark_combo_kernel" not in self.inductor_compile_config
            and not current_platform.is_cpu()  # Inductor's combo kernels do not exist on CPU
        ):
            self.inductor_compile_config["combo_kernels"] = True
            self.inductor_compile_config["benchmark_combo_kernel"] = True

        if self.use_inductor_graph_partition and not is_torch_equal_or_newer("2.9.0.dev"):
            raise ValueError(
                "use_inductor_graph_partition is only supported "
                "with torch>=2.9.0.dev. Set "
                "use_inductor_graph_partition=False instead."
            )

        for op in self.custom_ops:
            if op[0] not in {"+", "-"} and op not in {"all", "none"}:
                raise ValueError(
                    f"Invalid syntax '{op}' for custom op, "
                    "must be 'all', 'none', '+op' or '-op' "
                    "(where 'op' is the registered op name)"
                )

        if self.mode == CompilationMode.VLLM_COMPILE and self.backend not in ["", "eager", "inductor"]:
            raise ValueError(f"Invalid backend for piecewise compilation: {self.backend}")

        if self.backend == "":
            self.backend = current_platform.get_compile_backend()

    def _resolve_inductor_passes(self) -> None:
        for k, v in self.inductor_passes.items():
            if not isinstance(v, str):
                assert callable(v), f"pass {k} should be callable or a qualified name"
                self.inductor_compile_config[k] = _as_inductor_pass(v)
                continue
            if v not in get_settings().allowed_callables:
                raise ValueError(
                    f"inductor pass {k}: {v!r} is not on the operator's allowlist "
                    f"({ALLOWED_CALLABLES_ENV}); nothing was imported"
                )
            # vLLM's resolution: only attributes of top-level modules resolve ("os.path.join" -> KeyError).
            names = v.split(".")
            module = ".".join(names[:-1])
            func = __import__(module).__dict__[names[-1]]
            self.inductor_compile_config[k] = _as_inductor_pass(func)

    def init_backend(self, vllm_config: "VllmConfig") -> str | Callable[..., Any]:
        """The torch.compile backend for this config: a backend name, an allowlisted callable, or a
        VllmBackend (provided by the compile layer) for VLLM_COMPILE."""
        if self.mode is None:
            raise ValueError(
                "No compilation mode is set. This method should only be called via vllm config "
                "where the level is set if none is provided."
            )
        if self.mode == CompilationMode.NONE:
            raise ValueError("No compilation mode is set.")

        if self.mode in [CompilationMode.STOCK_TORCH_COMPILE, CompilationMode.DYNAMO_TRACE_ONCE]:
            from torch._dynamo.backends.registry import list_backends

            if self.backend in list_backends(exclude_tags=()):
                return self.backend
            return resolve_allowed_callable(self.backend, "backend")

        assert self.mode == CompilationMode.VLLM_COMPILE
        if self.backend not in ["eager", "inductor"]:
            logger.info("Using OOT custom backend for compilation.")
        # vLLM's VllmBackend(vllm_config) reads this first, so a None (or any object without it) fails
        # with the very AttributeError vLLM raises, whether or not the compile layer is loaded.
        vllm_config.compilation_config  # noqa: B018
        if _vllm_backend_factory is None:
            raise RuntimeError("VllmBackend is provided by compilation_bridge.compile, which is not loaded")
        return _vllm_backend_factory(vllm_config)

    def post_init_cudagraph_sizes(self) -> None:
        """Expand `compile_sizes`, sort the capture sizes and build the padding table."""
        computed_compile_sizes: list[int] = []
        if self.compile_sizes is not None:
            # Through a set, as vLLM: duplicates go, and the order is the set's.
            self.compile_sizes = list(set(self.compile_sizes))
            for x in self.compile_sizes:
                if isinstance(x, str):
                    assert x == "cudagraph_capture_sizes", (
                        f"Unrecognized size type in compile_sizes, expect 'cudagraph_capture_sizes', got {x}"
                    )
                    computed_compile_sizes.extend(self.cudagraph_capture_sizes)
                else:
                    assert isinstance(x, int)
                    computed_compile_sizes.append(x)
        self.compile_sizes = computed_compile_sizes

        self.cudagraph_capture_sizes.sort()
        if self.cudagraph_capture_sizes:
            assert self.cudagraph_capture_sizes[-1] == self.max_cudagraph_capture_size
        self.compute_bs_to_padded_graph_size()

    def set_splitting_ops_for_v1(self, all2all_backend: str, data_parallel_size: int = 1) -> None:
        if self.mode != CompilationMode.VLLM_COMPILE:
            if self.splitting_ops is None:
                self.splitting_ops = []
            return

        if self.pass_config.fuse_attn_quant and not self.use_inductor_graph_partition:
            self.set_splitting_ops_for_attn_fusion()
        elif self.splitting_ops is None:
            self.splitting_ops = list(self._attention_ops)
        elif len(self.splitting_ops) == 0:
            self._drop_piecewise_cudagraphs_for_empty_splitting_ops()
            self.splitting_ops = []

        if (
            all2all_backend == "deepep_high_throughput"
            and data_parallel_size > 1
            and self.cudagraph_mode != CUDAGraphMode.NONE
        ):
            logger.info(
                "DeepEP: Disabling CUDA Graphs since DeepEP high-throughput kernels are optimized for "
                "prefill and are incompatible with CUDA Graphs. In order to use CUDA Graphs for "
                "decode-optimized workloads, use --all2all-backend with another option, such as "
                "deepep_low_latency, pplx, or allgather_reducescatter."
            )
            self.cudagraph_mode = CUDAGraphMode.NONE

    def _drop_piecewise_cudagraphs_for_empty_splitting_ops(self) -> None:
        if self.cudagraph_mode in (CUDAGraphMode.PIECEWISE, CUDAGraphMode.FULL_AND_PIECEWISE):
            warning_once("Using piecewise cudagraph with empty splitting_ops")
        if self.cudagraph_mode == CUDAGraphMode.PIECEWISE:
            warning_once(
                "Piecewise compilation with empty splitting_ops does not contain piecewise cudagraph. "
                "Setting cudagraph_mode to NONE. Hint: If you are using attention backends that support "
                "cudagraph, consider manually setting cudagraph_mode to FULL or FULL_DECODE_ONLY to "
                "enable full cudagraphs."
            )
            self.cudagraph_mode = CUDAGraphMode.NONE
        elif self.cudagraph_mode == CUDAGraphMode.FULL_AND_PIECEWISE:
            warning_once(
                "Piecewise compilation with empty splitting_ops does not contain piecewise cudagraph. "
                "Setting cudagraph_mode to FULL."
            )
            self.cudagraph_mode = CUDAGraphMode.FULL

    def set_splitting_ops_for_attn_fusion(self) -> None:
        assert self.pass_config.fuse_attn_quant
        if self.splitting_ops is None:
            self.splitting_ops = []
            if self.cudagraph_mode.has_piecewise_cudagraphs():
                warning_once(
                    "fuse_attn_quant is incompatible with piecewise cudagraph when "
                    "use_inductor_graph_partition is off. In this case, splitting_ops will be set to "
                    "empty list, and cudagraph_mode will be set to FULL. Please ensure you are using "
                    "attention backends that support cudagraph or set cudagraph_mode to NONE explicitly "
                    "if encountering any problems."
                )
                self.cudagraph_mode = CUDAGraphMode.FULL
        assert not self.splitting_ops_contain_attention(), (
            "attention ops should not be in splitting_ops when fuse_attn_quant is True"
        )

    def splitting_ops_contain_attention(self) -> bool:
        return self.splitting_ops is not None and all(op in self.splitting_ops for op in self._attention_ops)

    def is_attention_compiled_piecewise(self) -> bool:
        if not self.splitting_ops_contain_attention():
            return False
        if not self.use_inductor_graph_partition:
            return self.mode == CompilationMode.VLLM_COMPILE
        return self.backend == "inductor" and self.mode != CompilationMode.NONE

    def custom_op_log_check(self) -> None:
        """Warn about `+op` / `-op` rules that named an op the model never dispatched."""
        if len(self.enabled_custom_ops) + len(self.disabled_custom_ops) == 0:
            logger.debug("No custom ops found in model.")
            return
        logger.debug("enabled custom ops: %s", self.enabled_custom_ops)
        logger.debug("disabled custom ops: %s", self.disabled_custom_ops)
        all_ops_in_model = self.enabled_custom_ops | self.disabled_custom_ops
        for op in self.custom_ops:
            if op in {"all", "none"}:
                continue
            assert op[0] in {"+", "-"}, "Invalid custom op syntax (should be checked during init)"
            op_name = op[1:]
            if op_name not in all_ops_in_model:
                from compilation_bridge.vllm_config.custom_ops import registered_custom_ops

                missing_str = (
                    "doesn't exist (or wasn't imported/registered)"
                    if op_name not in registered_custom_ops()
                    else "not present in model"
                )
                enable_str = "enabling" if op[0] == "+" else "disabling"
                warning_once("Op '%s' %s, %s with '%s' has no effect", op_name, missing_str, enable_str, op)

    def is_custom_op_enabled(self, op: str) -> bool:
        if "all" in self.custom_ops:
            return f"-{op}" not in self.custom_ops
        assert "none" in self.custom_ops
        return f"+{op}" in self.custom_ops

    def adjust_cudagraph_sizes_for_spec_decode(
        self, uniform_decode_query_len: int, tensor_parallel_size: int
    ) -> None:
        multiple_of = uniform_decode_query_len
        if tensor_parallel_size > 1 and self.pass_config.enable_sp:
            multiple_of = max(uniform_decode_query_len, tensor_parallel_size)
            if multiple_of % uniform_decode_query_len != 0 or multiple_of % tensor_parallel_size != 0:
                raise ValueError(
                    f"Can't determine cudagraph shapes that are both a "
                    f"multiple of {uniform_decode_query_len} "
                    f"(num_speculative_tokens + 1) required by spec-decode "
                    f"and {tensor_parallel_size} (tensor_parallel_size) "
                    f"required by sequence parallelism please adjust "
                    f"num_speculative_tokens or disable sequence parallelism"
                )

        if not self.cudagraph_capture_sizes or multiple_of <= 1:
            return

        assert self.max_cudagraph_capture_size is not None
        rounded_sizes = sorted(
            {
                _round_up(size, multiple_of)
                for size in self.cudagraph_capture_sizes
                if _round_up(size, multiple_of) <= self.max_cudagraph_capture_size
            }
        )
        if len(rounded_sizes) == 0 and multiple_of <= self.max_cudagraph_capture_size:
            # The only valid size rounds down to the multiple itself.
            rounded_sizes = [multiple_of]
        if len(rounded_sizes) == 0:
            raise ValueError(
                f"No valid cudagraph sizes after rounding to multiple of {multiple_of} "
                f"(num_speculative_tokens + 1 or tp if sequence parallelism is enabled)"
                f" please adjust num_speculative_tokens ({uniform_decode_query_len - 1}"
                f") or max_cudagraph_capture_size ({self.max_cudagraph_capture_size})"
                f" or cudagraph_capture_sizes ({self.cudagraph_capture_sizes})"
            )

        self.max_cudagraph_capture_size = rounded_sizes[-1]
        self.cudagraph_capture_sizes = rounded_sizes
        self.compute_bs_to_padded_graph_size()

    def compute_bs_to_padded_graph_size(self) -> None:
        """Map every batch size up to the max to the capture size it is padded to."""
        check_size("max_cudagraph_capture_size", self.max_cudagraph_capture_size)
        self.bs_to_padded_graph_size = [0 for _ in range(self.max_cudagraph_capture_size + 1)]
        # List concatenation, not unpacking: with sizes None vLLM's TypeError text is the "+" one.
        for end, start in zip(
            self.cudagraph_capture_sizes + [self.max_cudagraph_capture_size + 1],  # noqa: RUF005
            [0] + self.cudagraph_capture_sizes,  # noqa: RUF005
            strict=False,
        ):
            for bs in range(start, end):
                self.bs_to_padded_graph_size[bs] = start if bs == start else end

    def get_compile_ranges(self) -> list[Range]:
        if self.compile_ranges_split_points is None:
            return []
        split_points = sorted(set(self.compile_ranges_split_points))
        starts = [0] + split_points[:-1]  # noqa: RUF005 - as vLLM writes it
        return [Range(start=s + 1, end=e) for s, e in zip(starts, split_points, strict=False)]


@functools.cache
def _type_adapter() -> TypeAdapter[CompilationConfig]:
    return TypeAdapter(CompilationConfig)


__all__ = ["CompilationConfig", "Range", "info_once", "set_vllm_backend_factory"]
