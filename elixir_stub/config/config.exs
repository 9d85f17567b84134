import Config

# The default pool the application starts on boot. The Python interpreter comes from
# COMPILATION_BRIDGE_PYTHON, else the project's own .venv (see CompilationBridge.Python).
config :compilation_bridge,
  start_default_pool: true,
  pool_size: 2,
  # SnakeBridge's :ml_inference profile for vllm calls: compiles may take minutes.
  call_timeout: 600_000,
  queue_timeout: 60_000

config :logger, level: :warning

import_config "#{config_env()}.exs"
