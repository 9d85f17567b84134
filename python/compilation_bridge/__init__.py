"""compilation-bridge: live vLLM 0.14.0 CompilationConfig objects and real torch compilation over RPC."""

__version__ = "0.1.0"
