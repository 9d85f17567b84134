import Config

config :compilation_bridge, pool_size: 2
