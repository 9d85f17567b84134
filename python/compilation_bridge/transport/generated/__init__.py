"""Generated from proto/snakepit_bridge.proto by scripts/gen_proto.sh; do not edit."""
