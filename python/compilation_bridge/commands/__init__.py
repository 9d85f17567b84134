"""Sub-commands of the `compilation-bridge` CLI, one module each (see `compilation_bridge.cli`)."""
