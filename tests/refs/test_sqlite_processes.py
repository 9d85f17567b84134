"""Workers of one host share the SQLite store, each in a process of its own, and start or die at any time.

SQLite keeps the WAL index in `<db>-shm`, mapped by every process, and each process holds a shared POSIX
lock on one byte of it (SQLite's "DMS" lock, byte 128) while it has the database open. A process that
finds no such lock believes it is alone and truncates the file: every other process that has it mapped
then dies of SIGBUS on its next store call (a worker did, in the chaos test, when a replacement started).
POSIX locks are per process and dropped by closing *any* descriptor of the file, so the worker must never
open and close SQLite's files itself.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

from compilation_bridge.refs.keys import StateFolder
from compilation_bridge.refs.store.sqlite import DB_FILE, SqliteStore

DMS_BYTE = 128  # UNIX_SHM_DMS in SQLite's os_unix.c: (22 + SQLITE_SHM_NLOCK) * 4 + SQLITE_SHM_NLOCK
LOCK = "hhqqi"  # struct flock on Linux x86-64/aarch64: l_type, l_whence, l_start, l_len, l_pid


def _another_process_holds_dms(shm: Path) -> bool:
    """Ask as another process would (F_GETLK: locks of the asking process never conflict)."""
    probe = textwrap.dedent(
        f"""
        import fcntl, os, struct
        fd = os.open({str(shm)!r}, os.O_RDWR)
        asked = struct.pack({LOCK!r}, fcntl.F_WRLCK, os.SEEK_SET, {DMS_BYTE}, 1, 0)
        print(struct.unpack({LOCK!r}, fcntl.fcntl(fd, fcntl.F_GETLK, asked))[0] != fcntl.F_UNLCK)
        """
    )
    answer = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return answer.stdout.strip() == "True"


def test_an_open_store_keeps_its_lock_on_the_shared_memory(folder: StateFolder) -> None:
    store = SqliteStore(folder)  # opens a connection, then checks the -wal and -shm files SQLite made
    try:
        assert _another_process_holds_dms(folder.path / f"{DB_FILE}-shm")
    finally:
        store.close()


def test_the_probe_sees_a_lock_it_did_not_take(tmp_path: Path) -> None:
    # The probe itself can fail: a lock this test process holds on byte 128 is seen by another process.
    shm = tmp_path / "file"
    shm.write_bytes(b"\0" * 256)
    fd = os.open(shm, os.O_RDWR)
    try:
        assert not _another_process_holds_dms(shm)
        fcntl.fcntl(fd, fcntl.F_SETLK, struct.pack(LOCK, fcntl.F_RDLCK, os.SEEK_SET, DMS_BYTE, 1, 0))
        assert _another_process_holds_dms(shm)
    finally:
        os.close(fd)
