import Config

config :compilation_bridge,
  pool_size: 2,
  # Plan as on a CPU whatever the machine has, and keep the workers' logs to errors.
  pool_env: [
    {"COMPILATION_BRIDGE_PLATFORM", "cpu"},
    {"SNAKEPIT_LOG_LEVEL", "error"},
    {"PYTHONWARNINGS", "ignore"}
  ]
