import Config
