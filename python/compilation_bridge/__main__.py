"""`python -m compilation_bridge ...` is the `compilation-bridge` command."""

from compilation_bridge.cli import main

raise SystemExit(main())
