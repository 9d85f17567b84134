"""What each environment variable the worker reads means and defaults to: the one source of the table in
docs/settings.md. `compilation-bridge settings` prints the table and `--update docs/settings.md` rewrites
it in place; tests/test_settings.py fails when the page is behind this catalog or when settings.py names
a variable the catalog lacks. Defaults and meanings are Markdown, as they appear on the page."""

from __future__ import annotations

from dataclasses import dataclass

from compilation_bridge import settings


@dataclass(frozen=True)
class Variable:
    names: tuple[str, ...]  # more than one where they share a meaning (vLLM's, or three byte limits)
    default: str
    meaning: str
    flag: str = ""  # the start-up flag that sets the same value, if any

    def row(self) -> str:
        names = ", ".join(f"`{name}`" for name in self.names)
        if self.flag:
            names += f" (or `{self.flag}`)"
        return f"| {names} | {self.default} | {self.meaning} |"


VARIABLES: tuple[Variable, ...] = (
    Variable(
        (settings.HOST_ENV,),
        "`localhost` (127.0.0.1 and ::1)",
        (
            "address to bind; widen only behind your own network controls (any other address is logged as"
            " a warning at start)"
        ),
        flag="--host",
    ),
    Variable(
        (settings.ALLOWED_PEER_UIDS_ENV,),
        "none: only the worker's own user",
        (
            "comma-separated uids whose processes may call the gRPC worker besides its own user's; others"
            " get `PERMISSION_DENIED`. `any`: every user who can reach the port, as before (and the only "
            "way to serve where there is no `/proc/net/tcp` to tell users apart). Callers from other "
            "hosts are answered only when `--host` binds beyond loopback"
        ),
    ),
    Variable(
        (settings.PLATFORM_ENV,),
        "detected",
        "`cpu` or `cuda`: the platform the config model plans for",
        flag="--platform",
    ),
    Variable(
        (settings.ALLOWED_ROOTS_ENV,),
        (
            "the user cache folder `~/.cache/compilation-bridge` only (created 0700); never the temporary"
            " directory"
        ),
        (
            "`:`-separated folders the worker may write to (compile cache, Inductor cache, debug dumps, "
            "the cache MAC key). Each must exist (`mkdir -m 700`), be owned by the worker's user and "
            "writable by no one else, in parent folders no other user can rename it out of; otherwise it "
            "is refused with an error naming it and the fix. When the user cache folder is not among "
            "them, the default compile cache, Inductor's cache and the key go under the first root"
        ),
    ),
    Variable(
        (settings.MODEL_ROOTS_ENV,),
        "none",
        (
            "`:`-separated folders from which model folders (`config.json`) may be read, besides the "
            "bundled models; a `config.json` that is a symlink out of these roots is refused"
        ),
    ),
    Variable(
        (settings.ALLOWED_CALLABLES_ENV,),
        "none",
        (
            "comma-separated qualified names that `inductor_passes` values or an out-of-tree `backend` "
            "may resolve to"
        ),
    ),
    Variable(
        (settings.ALLOWED_INDUCTOR_OPTIONS_ENV,),
        "none",
        ("comma-separated Inductor options allowed in `inductor_compile_config` beyond the tuning knobs"),
    ),
    Variable(
        (settings.MAX_REQUEST_BYTES_ENV,),
        "4 MiB",
        "larger requests get `success=false` (beyond it plus 1 MiB gRPC refuses them)",
    ),
    Variable(
        (settings.MAX_CONCURRENT_CALLS_ENV,),
        "8",
        'calls beyond it are refused at once ("worker busy"), so heartbeats always find a thread',
    ),
    Variable(
        (settings.MAX_SESSION_CALLS_ENV,),
        "4",
        (
            "one SnakeBridge session's share of those calls; beyond it that session is refused at once "
            '("worker busy", with `limit`, `current` and `max` in the error\'s context) while other '
            "sessions still get in"
        ),
    ),
    Variable(
        (settings.MAX_TOTAL_REFS_ENV,),
        "50000",
        (
            "refs of the application in all (in the ref store: every worker of the application sharing it"
            " counts); beyond it new refs are refused, never taken from other sessions"
        ),
    ),
    Variable(
        (settings.MAX_RSS_MB_ENV,),
        "8192 (or ¾ of RAM)",
        (
            "above this resident size new refs, changes and restores are refused with `MemoryError`, a "
            "restore before it is decoded (0: off)"
        ),
    ),
    Variable(
        (settings.MAX_SESSIONS_ENV,),
        "10000",
        (
            "sessions holding refs in the ref store; beyond it refs in a new session are refused, never "
            "taken from other sessions (a session without refs is not kept and never counts)"
        ),
    ),
    Variable(
        (settings.MAX_MODEL_BYTES_ENV,),
        "1 GiB",
        (
            "total float32 parameter size of a reference model; larger option sets are refused before "
            "anything is allocated, with the computed size in the error"
        ),
    ),
    Variable(
        (settings.MAX_RUN_ELEMENTS_ENV,),
        "2**24",
        (
            "`run(num_tokens)` and the compile's trace: tokens x hidden size above this is refused (one "
            "hidden-state tensor of 64 MiB in float32)"
        ),
    ),
    Variable(
        (settings.MAX_RUN_BYTES_ENV,),
        "1 GiB",
        (
            "`run(num_tokens)` and the compile's trace: a run whose estimated peak allocation is above "
            "this is refused before it starts, the estimate and its largest term in the error "
            "(attention's heads x tokens² scores, the MLP's intermediate size, hidden states; doubled for"
            " the eager reference run beside the compiled one); the trace takes the most tokens within "
            "it. The default toy-llama runs up to 3045 tokens"
        ),
    ),
    Variable(
        (settings.REFLECTION_ENV,),
        "off",
        "`1`: serve gRPC server reflection (for grpcurl and the like)",
    ),
    Variable(
        (settings.MAX_REFLECTION_STREAMS_ENV,),
        "2",
        ("reflection streams open at once when reflection is on; more are refused with RESOURCE_EXHAUSTED"),
    ),
    Variable(
        (settings.STREAM_IDLE_SECONDS_ENV,),
        "30",
        "a reflection stream that sends nothing for this long is cancelled",
    ),
    Variable(
        (settings.REF_STORE_ENV,),
        "`sqlite`",
        (
            "where refs are shared between workers: `sqlite` (a file in the state folder: every worker of"
            " this user on this host), `redis://user:pass@host:port/db` or `rediss://` (every host "
            "pointed at that Redis), or `off` (each worker keeps its own refs, as before: pools of one "
            "worker only)"
        ),
    ),
    Variable(
        (settings.STATE_DIR_ENV,),
        "`state/` in the user cache folder",
        (
            "the worker's private state folder, checked as an allowed root is (created 0700; refused if "
            "another user owns it or may write it or a parent folder), then held open and every file in "
            "it opened through that descriptor, 0600: the SQLite ref store, `refstore.key` (the key that "
            "signs store entries and names each application's namespace) and the journal of changes that "
            "waited for the store at shutdown. Every host sharing one Redis needs the same key file"
        ),
    ),
    Variable(
        (settings.INDUCTOR_REMOTE_CACHE_ENV,),
        "off",
        (
            "`1` with a Redis ref store: Inductor's FX-graph and AOTAutograd caches in that Redis too, so"
            " a model compiled on one host loads warm on another; every entry carries a MAC with the ref "
            "store's key and one without it is a miss, never unpickled"
        ),
    ),
    Variable(
        (settings.APPLICATION_ENV,),
        "`default`",
        (
            "the application whose refs this worker serves when Snakepit passes no "
            "`--snakepit-instance-name` (Snakepit always does: its instance name wins). Applications "
            "sharing a store never see, change, count or prune each other's refs"
        ),
    ),
    Variable(
        (settings.REF_LEASE_ENV,),
        "3600 (Snakepit's session TTL)",
        (
            "a stored ref unused this long expires (any worker of any application drops it), so the refs "
            "of an application that stopped or crashed never pile up; `SNAKEBRIDGE_REF_TTL_SECONDS` "
            "replaces it when set; 0: never"
        ),
    ),
    Variable(
        (
            settings.MAX_REF_BYTES_ENV,
            settings.MAX_SESSION_BYTES_ENV,
            settings.MAX_STORE_BYTES_ENV,
        ),
        "16 MiB, 256 MiB, 1 GiB",
        (
            "encoded state per ref, per session and per application in the ref store; a new ref or a "
            "change past one is refused in-band with the limit's value and maximum (0: no limit)"
        ),
    ),
    Variable(
        (settings.REF_TTL_ENV,),
        "0 (none)",
        "refs unused for this long are dropped",
    ),
    Variable(
        (settings.REF_MAX_ENV,),
        "10000",
        (
            "refs per session (in the ref store, wherever they were made); the session's least recently "
            "used ref goes first"
        ),
    ),
    Variable(
        (settings.ATOM_CLASS_ENV,),
        "off",
        ("`true`: Elixir atoms arrive as an `Atom` type instead of `str` (as SnakeBridge's own adapter)"),
    ),
    Variable(
        (settings.LEGACY_PROTOCOL_ENV,),
        "off",
        "`true`: accept payloads without SnakeBridge's protocol version fields",
    ),
    Variable(
        (settings.PRELOAD_COMPILE_ENV,),
        "off",
        (
            "`1`: import torch, Dynamo and Inductor right after start-up (first compile faster; about 350"
            " MiB resident from the start)"
        ),
    ),
    Variable(
        (
            settings.DISABLE_COMPILE_CACHE_ENV,
            "VLLM_DISABLE_COMPILE_CACHE",
        ),
        "off",
        (
            "`1`: never read or write the compile cache. vLLM's variable is read as vLLM reads it, as an "
            "integer (non-zero: off); a value that is no integer (`yes`) fails the compile with an error "
            "naming it, as vLLM does"
        ),
    ),
    Variable(
        (settings.INDUCTOR_MAX_AUTOTUNE_ENV,),
        "off",
        "`1`: Inductor's max-autotune, as vLLM (minutes per piece on CPU)",
    ),
    Variable(
        (settings.INDUCTOR_CACHE_DIR_ENV,),
        (
            "Inductor's default (`/tmp/torchinductor_<user>`, outside the default roots) moved to `<cache"
            " home>/inductor`"
        ),
        "Inductor's own cache; must lie under an allowed root",
    ),
    Variable(
        (settings.XDG_CACHE_HOME_ENV,),
        "`~/.cache`",
        (
            "holds the user cache folder `compilation-bridge/` (the default root; `state/cache-mac.key` "
            "in it, 0600, authenticates the compile cache)"
        ),
    ),
    Variable(
        (settings.LOG_FORMAT_ENV,),
        "text",
        "`json`: one JSON log record per line on stderr",
    ),
    Variable(
        (settings.LOG_LEVEL_ENV,),
        "`warning` (`info` under `compilation-bridge serve`)",
        (
            "`debug`, `info`, `warning`, `error` or `none`; another value leaves the default, with a "
            "warning. Logs go to stderr with the correlation id, stdout carries nothing"
        ),
    ),
    Variable(
        (settings.OTEL_ENDPOINT_ENV,),
        "none: no OpenTelemetry",
        (
            "an OTLP/HTTP collector (`http://host:4318`, or Snakepit's form ending in `/v1/traces`): a "
            "span per tool call and per compile phase, and the worker's metrics, go there. Needs the "
            "`otel` extra (`pip install 'compilation-bridge[otel]'`); without it one warning at start "
            "and the worker serves on ([observability.md](observability.md#opentelemetry))"
        ),
    ),
    Variable(
        (settings.OTEL_CONSOLE_ENV,),
        "off",
        (
            "`1`: spans and metrics also printed to stderr (with no endpoint: only there). Snakepit's "
            "own server prints spans to stdout when it has no endpoint, unless told `0`; this worker never "
            "writes to stdout"
        ),
    ),
    Variable(
        (settings.SERVICE_NAME_ENV,),
        f"`{settings.DEFAULT_SERVICE_NAME}`",
        "OpenTelemetry's `service.name` of the worker's spans and metrics (as Snakepit's server)",
    ),
    Variable(
        (settings.INSTANCE_ID_ENV,),
        "a fresh id per process",
        "OpenTelemetry's `service.instance.id` (as Snakepit's server)",
    ),
    Variable(
        (settings.READY_FILE_ENV,),
        "none",
        (
            "where the bound port is written once serving; with `--snakepit-run-id`, what makes "
            "`grpc_server.py` serve at all"
        ),
        flag="--ready-file",
    ),
    Variable(
        (settings.HEARTBEAT_CONFIG_ENV,),
        "dependent, every 2 s, 3 misses",
        "Snakepit's heartbeat settings (JSON); dependent: exit after that many failed heartbeats",
    ),
    Variable(
        (
            settings.GRPC_ADDRESS_ENV,
            settings.ELIXIR_ADDRESS_ENV,
        ),
        "none",
        "Snakepit's address when `--elixir-address` is absent",
    ),
    Variable(
        (settings.PROCESS_GROUP_ENV,),
        "off",
        "`1`: `setsid()` at start, so Snakepit can kill the worker's whole process group",
    ),
    Variable(
        (
            "VLLM_COMPILE_CACHE_SAVE_FORMAT",
            "VLLM_DEBUG_DUMP_PATH",
            "VLLM_CPU_CI_ENV",
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN",
            "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE",
            "VLLM_ALL2ALL_BACKEND",
            "VLLM_DP_SIZE",
            "VLLM_DP_RANK",
            "VLLM_DP_RANK_LOCAL",
            "VLLM_DP_MASTER_IP",
            "VLLM_DP_MASTER_PORT",
            "RANK",
        ),
        "as in vLLM 0.14.0",
        (
            "read where vLLM's config code reads them, with vLLM's meaning, so that a config behaves as "
            "it would under vLLM"
        ),
    ),
    Variable(
        (settings.TEST_HOOKS_ENV,),
        "off",
        (
            "`1` adds `compilation_bridge.testing` (sleep/spin) for the test suites; never set it in "
            "production"
        ),
    ),
)

BEGIN = "<!-- generated from compilation_bridge/settings_catalog.py by `compilation-bridge settings` -->"
END = "<!-- end of the generated table -->"


def markdown_table() -> str:
    """The table, header included, one row per catalog entry in catalog order."""
    rows = [row.row() for row in VARIABLES]
    return "\n".join(["| variable | default | meaning |", "|---|---|---|", *rows])


def updated_page(page: str) -> str:
    """`page` with the text between its BEGIN and END markers replaced by the current table."""
    head, begin, rest = page.partition(BEGIN)
    _old, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"the page has no generated table: it needs the lines {BEGIN!r} and {END!r}")
    return f"{head}{BEGIN}\n{markdown_table()}\n{END}{tail}"
