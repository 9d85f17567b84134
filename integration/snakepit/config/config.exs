import Config

# No pool until a test installs a README recipe; the pool's workers log through Logger.
config :snakepit, pooling_enabled: false
config :logger, level: :warning
