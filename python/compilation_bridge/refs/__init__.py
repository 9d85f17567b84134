"""Refs: the objects callers hold between calls, and the store that lets every worker serve them.

`table.RefTable` is the interface; `local` keeps objects in one worker, `shared` keeps their state in a
`store` (SQLite on one host, Redis across hosts) under the application's namespace, signed
(`signing`, with the key of `keys`), encoded by `state`, bounded by `limits`. `setup.open_ref_table`
picks one by the operator's settings.
"""

from compilation_bridge.refs import (  # noqa: F401  (each teaches the state format at its import)
    compiled,  # compiled models, stored as the call that made them
    derived,  # fields the config model computes, not stored
    dtypes,  # torch dtypes, stored by name
    overrides,  # a speculative draft model's config override, stored by name
)
