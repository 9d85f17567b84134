"""What the worker tells those who watch it: each tool call and each compile phase (`hub`).

Observers (Snakepit's telemetry stream, OpenTelemetry) register at start-up. With none registered, a call
pays one check and builds nothing.
"""
