"""Who may call the worker: processes of its own OS user (and of the users the operator lists), no others.

The gRPC port has no credentials of its own, and on loopback every user of the host can reach it. So every
RPC, the health service's included, first asks which user owns the caller's socket, and is refused with
PERMISSION_DENIED unless that is the worker's effective uid or one of `COMPILATION_BRIDGE_ALLOWED_PEER_UIDS`
(`any`: everyone, as before).

How the user is found (Linux): grpc gives the caller's address and port (`context.peer()`). The kernel's
`/proc/net/tcp` and `/proc/net/tcp6` list every socket of the network namespace with its local and remote
address and port, its owner's uid and its inode. The worker's end of the connection is the row whose
remote end is the caller and whose inode is one of this process's open sockets (`/proc/self/fd`); the
caller's end is the row whose local end is the caller and whose remote end is the worker's end; its uid is
the user that created the caller's socket. A caller's socket that no process holds any more (closed,
orphaned: inode 0) proves nothing and is refused.

That scan is once per connection, not per call: grpc does not report connections, so the verdict is kept
per peer string (an LRU of `CACHE_SIZE`), with the worker's end of the connection it was made for: its
file descriptor and inode. Each call checks, with one readlink and one getpeername, that this descriptor
is still that socket and still connected to the caller; a new connection from the same address and port
(the old one closed, another user bound its port) is a new socket with a new inode, so it is scanned
afresh instead of inheriting the verdict.

Peers whose socket is not on this host (in this network namespace) cannot be checked: they are refused
unless the operator bound an address beyond loopback (`--host 0.0.0.0`), which lets the network decide
who can reach the worker, as before. Local peers are checked whatever address they dialled. With such a
bind a local caller may hold two connections from one address and port to two addresses of the worker,
which one peer string cannot tell apart: the check is then as good as the first connection's verdict.

The worker listens on TCP only (no Unix socket, so no SO_PEERCRED). Without `/proc` (not Linux, or a
sandbox that hides it) no caller's user can be known: every call is refused, with a warning at start-up,
unless the operator sets `COMPILATION_BRIDGE_ALLOWED_PEER_UIDS=any`. Failing closed keeps the promise the
documentation makes; the operator who knows the host is single-user says so in one setting.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import grpc

from compilation_bridge.settings import ALLOWED_PEER_UIDS_ENV, allowed_peer_uids_setting
from compilation_bridge.transport.interception import Behavior, WrappedHandlers

log = logging.getLogger("compilation_bridge.transport")

TCP_TABLES = (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6))
FD_FOLDER = "/proc/self/fd"
CACHE_SIZE = 4096  # connections whose verdict is remembered
# The worker's end of a live connection: established, or the caller has shut down its sending side.
LIVE_STATES = frozenset({"01", "08"})
WARNINGS_PER_MINUTE = 10  # refused connections logged; beyond that they are counted and summed up later

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Endpoint:
    address: Address
    port: int


@dataclass(frozen=True)
class SocketRow:
    """One line of /proc/net/tcp or tcp6."""

    local: Endpoint
    remote: Endpoint
    state: str  # two hex digits: 01 established, 06 time-wait, 0A listen, ...
    uid: int
    inode: int  # 0: no process holds the socket any more
    family: int


def _plain(address: Address) -> Address:
    """An IPv4-mapped IPv6 address as the IPv4 address it is (grpc listens on IPv6 sockets for both)."""
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return mapped or address


def parse_endpoint(text: str) -> Endpoint:
    """`0100007F:1F90` -> 127.0.0.1:8080: the kernel prints each 32-bit word of the address in host order."""
    address, port = text.split(":")
    words = [int(address[i : i + 8], 16) for i in range(0, len(address), 8)]
    packed = b"".join(word.to_bytes(4, sys.byteorder) for word in words)
    return Endpoint(_plain(ipaddress.ip_address(packed)), int(port, 16))


def parse_row(line: str, family: int) -> SocketRow | None:
    """A socket row of /proc/net/tcp{,6}, or None for the header or a line of another shape."""
    fields = line.split()
    if len(fields) < 10 or not fields[0].endswith(":") or not fields[0][:-1].isdigit():
        return None
    try:
        return SocketRow(
            parse_endpoint(fields[1]),
            parse_endpoint(fields[2]),
            fields[3],
            int(fields[7]),
            int(fields[9]),
            family,
        )
    except ValueError:
        return None


def parse_peer(peer: str) -> Endpoint | None:
    """grpc's peer string (`ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000`, `ipv6:%5B::1%5D:5000`), or None."""
    scheme, _, rest = unquote(peer).partition(":")
    if scheme not in ("ipv4", "ipv6"):
        return None
    host, _, port = rest.rpartition(":")
    host = host.removeprefix("[").removesuffix("]").partition("%")[0]  # a scope id names no other host
    try:
        return Endpoint(_plain(ipaddress.ip_address(host)), int(port))
    except ValueError:
        return None


def read_rows(port: int, families: Iterable[int] = (socket.AF_INET, socket.AF_INET6)) -> list[SocketRow]:
    """The sockets of this network namespace whose local or remote port is `port`. Reading a table costs
    the kernel a walk of its whole connection hash (about 2 ms), whatever the number of sockets: once
    per connection, never per call."""
    needle = f":{port:04X} ".encode()  # filters the lines before any is decoded: hosts may have thousands
    rows = []
    for path, family in TCP_TABLES:
        if family not in families:
            continue
        try:
            with open(path, "rb") as table:
                text = table.read()
        except FileNotFoundError:  # a host without IPv6 has no tcp6
            continue
        lines = [line.decode() for line in text.splitlines() if needle in line]
        rows += [row for line in lines if (row := parse_row(line, family)) is not None]
    return rows


def socket_fds() -> dict[int, int]:
    """This process's open sockets: inode -> file descriptor."""
    found = {}
    for name in os.listdir(FD_FOLDER):
        try:
            link = os.readlink(f"{FD_FOLDER}/{name}")
        except OSError:  # closed meanwhile (the listing's own descriptor among them)
            continue
        if link.startswith("socket:["):
            found[int(link[8:-1])] = int(name)
    return found


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str = ""  # why not, for the caller and the log


@dataclass(frozen=True)
class Connection:
    """The worker's end of a checked connection, and the verdict its caller got."""

    fd: int
    link: str  # `socket:[inode]`, what /proc/self/fd/<fd> reads while the descriptor is this socket
    family: int
    peername: Any  # what getpeername gave at the check
    verdict: Verdict

    def still_open(self) -> bool:
        """The descriptor is still this socket, and it is still connected to the same caller (a reset
        connection is no longer connected even while grpc has not closed its descriptor yet)."""
        try:
            if os.readlink(f"{FD_FOLDER}/{self.fd}") != self.link:
                return False
            return _peername(self.fd, self.family) == self.peername
        except OSError:
            return False


def _peername(fd: int, family: int) -> Any:
    # A socket object over grpc's descriptor, detached before it could close it.
    sock = socket.socket(family, socket.SOCK_STREAM, 0, fd)
    try:
        return sock.getpeername()
    finally:
        sock.detach()


class WarningBudget:
    """At most `per_minute` warnings a minute; the rest are counted and the count told with the next."""

    def __init__(self, per_minute: int = WARNINGS_PER_MINUTE, clock: Callable[[], float] = time.monotonic):
        self._per_minute, self._clock = per_minute, clock
        self._lock = threading.Lock()
        self._window_start, self._told, self._untold = -60.0, 0, 0

    def warn(self, message: str, *args: object) -> None:
        with self._lock:
            now = self._clock()
            if now - self._window_start >= 60:
                self._window_start, self._told = now, 0
            if self._told >= self._per_minute:
                self._untold += 1
                return
            self._told += 1
            untold, self._untold = self._untold, 0
        if untold:
            message += " (and %d more refused connections not logged)"
            args = (*args, untold)
        log.warning(message, *args)


class PeerCheck:
    """The verdict for a caller, by its peer string: cached per connection (module docstring)."""

    def __init__(
        self,
        allowed_uids: Iterable[int],
        beyond_loopback: bool = False,
        cache_size: int = CACHE_SIZE,
        available: bool | None = None,
    ) -> None:
        self.worker_uid = os.geteuid()
        self.allowed_uids = frozenset({self.worker_uid, *allowed_uids})
        self.beyond_loopback = beyond_loopback
        self.available = proc_available() if available is None else available
        self._cache: OrderedDict[str, Connection] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self.warnings = WarningBudget()

    def verdict(self, peer: str) -> Verdict:
        with self._lock:
            known = self._cache.get(peer)
            if known is not None:
                self._cache.move_to_end(peer)
        if known is not None and known.still_open():
            return known.verdict
        verdict, connection = self._check(peer)
        with self._lock:
            if connection is not None:
                self._cache[peer] = connection
                self._cache.move_to_end(peer)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
            else:
                self._cache.pop(peer, None)
        if not verdict.allowed:  # once per connection: its next calls find the refusal cached
            self.warnings.warn("refused a call from %s: %s", peer, verdict.reason)
        return verdict

    def cached(self, peer: str) -> Connection | None:
        """What the cache holds for `peer` (diagnostics and tests)."""
        with self._lock:
            return self._cache.get(peer)

    def __len__(self) -> int:
        return len(self._cache)

    def _check(self, peer: str) -> tuple[Verdict, Connection | None]:
        if not self.available:
            return self._refusal(
                f"cannot tell which user the caller ({peer}) runs as on this system (no /proc/net/tcp)"
            ), None
        caller = parse_peer(peer)
        if caller is None:
            return self._refusal(f"cannot tell which user the caller ({peer}) runs as: not a TCP peer"), None
        # An IPv4 caller may hold an IPv4 socket or a dual-stack IPv6 one (grpc's clients do), and the
        # worker's end is IPv6 when grpc listens dual-stack: both tables. An IPv6 caller is in tcp6 only.
        families = (socket.AF_INET6,) if caller.address.version == 6 else (socket.AF_INET, socket.AF_INET6)
        rows = read_rows(caller.port, families)
        fds = socket_fds()
        ours = [row for row in rows if row.remote == caller and row.inode in fds and row.state in LIVE_STATES]
        if not ours:
            return self._refusal(f"the connection from {peer} is gone"), None
        verdicts = [self.judge(peer, caller, row, rows) for row in ours]
        refused = next((v for v in verdicts if not v.allowed), None)
        if len(ours) > 1:  # one peer string, several connections (a bind beyond loopback): no cache
            return refused or verdicts[0], None
        mine = ours[0]
        fd = fds[mine.inode]
        try:
            connection = Connection(
                fd, f"socket:[{mine.inode}]", mine.family, _peername(fd, mine.family), verdicts[0]
            )
        except OSError:
            return verdicts[0], None
        return verdicts[0], connection if connection.still_open() else None

    def judge(self, peer: str, caller: Endpoint, mine: SocketRow, rows: list[SocketRow]) -> Verdict:
        """The verdict for the caller of one connection whose worker's end is `mine`, from the socket rows."""
        theirs = [row for row in rows if row.local == caller and row.remote == mine.local]
        if not theirs:
            if self.beyond_loopback and not caller.address.is_loopback:
                return Verdict(True)  # from another host: the operator's network decides
            return self._refusal(f"cannot find the socket of the caller ({peer}) on this host")
        owned = [row for row in theirs if row.inode != 0]
        if not owned:
            return self._refusal(f"the caller's socket ({peer}) is held by no process any more")
        uid = owned[0].uid
        if uid in self.allowed_uids:
            return Verdict(True)
        return self._refusal(f"the caller ({peer}) runs as uid {uid}, the worker as uid {self.worker_uid}")

    def _refusal(self, why: str) -> Verdict:
        return Verdict(
            False,
            f"compilation-bridge answers only its own user's processes: {why}; to let another user in, list "
            f"its uid in {ALLOWED_PEER_UIDS_ENV} (comma-separated, or `any`) where the worker is started",
        )


def proc_available() -> bool:
    return os.path.exists(TCP_TABLES[0][0]) and os.path.isdir(FD_FOLDER)


class PeerGuard(grpc.ServerInterceptor):
    """Runs `PeerCheck` before every RPC of the server; a refused call is aborted with PERMISSION_DENIED."""

    def __init__(self, check: PeerCheck) -> None:
        self.check = check
        self._wrapped = WrappedHandlers(lambda _kind, behavior: self._guard(behavior))

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        return self._wrapped.of(handler_call_details.method, handler)

    def _guard(self, behavior: Behavior) -> Behavior:
        check = self.check

        def guarded(request: Any, context: grpc.ServicerContext, *more: Any) -> Any:
            verdict = check.verdict(context.peer())
            if not verdict.allowed:
                context.abort(grpc.StatusCode.PERMISSION_DENIED, verdict.reason)
            return behavior(request, context, *more)

        return guarded


def beyond_loopback(host: str) -> bool:
    """Whether binding `host` opens the worker past loopback (the operator's explicit choice)."""
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return True  # a host name other than localhost: the operator chose an address of the network


def peer_interceptors(host: str) -> list[grpc.ServerInterceptor]:
    """The server's interceptors for the caller check: none when the operator lets any user in."""
    uids = allowed_peer_uids_setting()
    if uids is None:
        return []
    check = PeerCheck(uids, beyond_loopback(host))
    if not check.available:
        log.warning(
            "no /proc/net/tcp here: the worker cannot tell which user a caller runs as and will refuse "
            "every call; set %s=any to let every local user call it",
            ALLOWED_PEER_UIDS_ENV,
        )
    return [PeerGuard(check)]
