import Config

# The Python workers keep refs in a ref store under their state folder: a fresh one per test run, so
# that runs never see each other's refs or count them in their quotas.
System.get_env("COMPILATION_BRIDGE_STATE_DIR") ||
  System.put_env(
    "COMPILATION_BRIDGE_STATE_DIR",
    Path.join(System.tmp_dir!(), "cb_elixir_state_#{System.os_time()}")
  )

config :compilation_bridge,
  pool_size: 2,
  # Plan as on a CPU whatever the machine has, and keep the workers' logs to errors.
  pool_env: [
    {"COMPILATION_BRIDGE_PLATFORM", "cpu"},
    {"SNAKEPIT_LOG_LEVEL", "error"},
    {"PYTHONWARNINGS", "ignore"}
  ]
