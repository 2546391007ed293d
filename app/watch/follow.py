"""Following growing logs for `tracelore watch`: the file I/O around `app.core.engine.live`.

A `Follower` keeps one open descriptor and one `LiveScan` per file and reads only what was
appended since it last looked. Files that appear later in a watched directory (or at a
watched path) are picked up; a rotated file (renamed or removed, a new one created in its
place) is read to its end and kept under the name it went to (the last KEEP_ROTATED parts
of a file), and the new file is followed from its start; a truncated file (copytruncate)
starts a new scan. A `Waiter` sleeps until the kernel reports a change (inotify through
watchfiles) or, where that is not available, polls.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from app.core.engine import BLOCK, LiveJob, LiveScan

# Already compressed or rotated away: never a log being written.
_SKIPPED_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".zip", ".tmp", ".swp", ".lock", ".json")
_ROTATED = re.compile(r"^(?P<base>.+?)(?:\.\d{1,3}|-\d{8,14})$")
# Rotated-away parts of one file whose scans stay in the job: a job that rotates its log
# every hour for a week must not keep a week of scans (the oldest are dropped).
KEEP_ROTATED = 4
REMEMBER_ROTATED = 1024  # rotated-away files whose inodes are remembered
READ_MAX = 16 * BLOCK  # bytes read from one file per look, so no file starves the others


@dataclass(slots=True)
class _Followed:
    path: Path
    stream: BinaryIO
    ident: tuple[int, int]  # device and inode of the open file
    live: LiveScan
    pos: int = 0


@dataclass(slots=True)
class Follower:
    """Reads what was appended to the watched files, directories and paths not there yet."""

    job: LiveJob
    files: list[Path] = field(default_factory=list)  # followed when they exist
    dirs: list[Path] = field(default_factory=list)  # every log file directly in them is followed
    _open: dict[Path, _Followed] = field(default_factory=dict)
    # Files rotated away and read to their end: inode -> modification time then. A file found
    # later with both is one of them under its new name, not a new file; a new file that got
    # a freed inode back (rotation deletes the oldest part) has a later time.
    _rotated_away: dict[tuple[int, int], int] = field(default_factory=dict)
    _retired: int = 0  # rotated-away scans, for unique keys
    _rotated: dict[Path, list[str]] = field(default_factory=dict)  # a path's rotated-away scans, oldest first
    _warned: set[Path] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)  # what could not be read, for the caller to say
    behind: bool = False  # the last poll left bytes unread

    def watched_dirs(self) -> list[Path]:
        """The directories whose changes matter (a file's own folder: it may be created or rotated)."""
        # Not resolved: a link that loops or dangles must not stop the watch of the others.
        out = {Path(os.path.abspath(d)) for d in self.dirs} | {Path(os.path.abspath(f)).parent for f in self.files}
        return sorted(out)

    def _candidates(self) -> Iterator[Path]:
        yield from self.files
        for d in self.dirs:
            try:
                entries = sorted(os.scandir(d), key=lambda e: e.name)
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith(".") or entry.name.endswith(_SKIPPED_SUFFIXES):
                    continue
                with contextlib.suppress(OSError):
                    if entry.is_file():
                        yield Path(entry.path)

    def poll(self) -> int:
        """Read what was appended since the last look (READ_MAX at most per file); the bytes read.

        `behind` says whether a file had more than that: read on without waiting for a change,
        since none will be reported for bytes already written.
        """
        read = 0
        self.behind = False
        for path in list(self._open):
            read += self._check_rotation(path)
        for path in self._candidates():
            if path not in self._open:
                read += self._start(path)
        for followed in list(self._open.values()):
            got = self._read(followed)
            read += got
            self.behind = self.behind or got >= READ_MAX
        return read

    def _start(self, path: Path) -> int:
        try:
            stream = path.open("rb")
            st = os.fstat(stream.fileno())
        except FileNotFoundError:
            return 0  # not there yet: looked at again on the next change
        except OSError as exc:  # unreadable, too many open files: said once, tried again later
            if path not in self._warned:
                self._warned.add(path)
                self.problems.append(f"cannot read {path}: {exc.strerror or exc}")
            return 0
        ident = (st.st_dev, st.st_ino)
        following = any(f.ident == ident for f in self._open.values())  # another name of a followed file
        read_before = self._rotated_away.get(ident) == st.st_mtime_ns
        if following or read_before or not stat.S_ISREG(st.st_mode) or self._is_rotated_copy(path):
            stream.close()
            return 0
        live = self.job.file(str(path), _shown(path))
        self._open[path] = _Followed(path, stream, ident, live)
        return 0

    def _is_rotated_copy(self, path: Path) -> bool:
        """`train.log.1` or `train.log-20240101` beside a followed `train.log`: its lines were read there."""
        m = _ROTATED.match(path.name)
        if m is None:
            return False
        return any(p.parent == path.parent and p.name == m["base"] for p in self._open)

    def _read(self, followed: _Followed, *, limit: int = READ_MAX) -> int:
        read = 0
        while read < limit:
            try:
                data = followed.stream.read(BLOCK)
            except OSError:
                return read
            if not data:
                break
            followed.pos += len(data)
            followed.live.feed(data)
            read += len(data)
        return read

    def _check_rotation(self, path: Path) -> int:
        followed = self._open[path]
        try:
            st = path.stat()
        except FileNotFoundError:
            st = None
        except OSError:
            return 0
        if st is not None and (st.st_dev, st.st_ino) == followed.ident:
            if st.st_size >= followed.pos:
                return 0
            # Truncated in place (copytruncate): what was read stays, as the file it was.
            read = 0
            name = f"{_shown(path)} (before truncation)"
        else:
            # Renamed or removed, maybe a new file in its place: read the old one to its end.
            read = self._read(followed, limit=1 << 62)
            moved = _find_inode(path.parent, followed.ident)
            name = _shown(moved) if moved is not None else f"{_shown(path)} (rotated)"
        followed.live.flush()
        self._retired += 1
        key = f"{path}#rotated-{self._retired}"
        self.job.retire(str(path), key, name)
        kept = self._rotated.setdefault(path, [])
        kept.append(key)
        while len(kept) > KEEP_ROTATED:
            self.job.files.pop(kept.pop(0), None)
        del self._open[path]
        if st is None or (st.st_dev, st.st_ino) != followed.ident:
            with contextlib.suppress(OSError):
                mtime = os.fstat(followed.stream.fileno()).st_mtime_ns
                # Last in line to be forgotten: an inode handed back by the file system (a new file
                # after the oldest part was deleted) keeps its first place in the dict unless moved.
                self._rotated_away.pop(followed.ident, None)
                self._rotated_away[followed.ident] = mtime
            while len(self._rotated_away) > REMEMBER_ROTATED:  # the oldest are long gone
                del self._rotated_away[next(iter(self._rotated_away))]
        followed.stream.close()
        return read

    def flush(self) -> None:
        """The files ended: scan their partial last lines too."""
        for followed in self._open.values():
            followed.live.flush()

    def close(self) -> None:
        for followed in self._open.values():
            followed.stream.close()
        self._open.clear()

    def written(self) -> float | None:
        """When the followed files were last written (epoch seconds)."""
        times = []
        for followed in self._open.values():
            with contextlib.suppress(OSError):
                times.append(os.fstat(followed.stream.fileno()).st_mtime)
        return max(times) if times else None


def _shown(path: Path) -> str:
    return str(path)


def _find_inode(folder: Path, ident: tuple[int, int]) -> Path | None:
    """Where a rotated file went, if it stayed in its folder."""
    try:
        with os.scandir(folder) as entries:  # closed on the early return too
            for entry in entries:
                with contextlib.suppress(OSError):
                    st = entry.stat(follow_symlinks=False)
                    if (st.st_dev, st.st_ino) == ident:
                        return Path(entry.path)
    except OSError:
        return None
    return None


class Waiter:
    """Sleeps until something changes in the watched directories, or a timeout passes.

    inotify (through watchfiles) costs nothing while the job is quiet; polling is the
    fallback where it is missing or refused (no watchfiles, inotify limits, some network
    file systems), and what `--poll` asks for.
    """

    def __init__(self, dirs: list[Path], *, poll: bool = False, interval: float = 0.25) -> None:
        self.interval = interval
        self.stop = threading.Event()
        self._notify = None if poll else _rust_notify(dirs)
        self.mode = "polling" if self._notify is None else "inotify"

    def wait(self, timeout: float) -> None:
        """Return when something changed, after `timeout` seconds at most, or when stopped."""
        timeout = max(0.0, timeout)
        if self._notify is None:
            self.stop.wait(min(timeout, self.interval))
            return
        try:
            self._notify.watch(50, 50, max(1, int(timeout * 1000)), self.stop)
        except OSError:  # the watch went away (a folder removed): poll from now on
            self._notify, self.mode = None, "polling"

    def close(self) -> None:
        self.stop.set()
        if self._notify is not None:
            with contextlib.suppress(Exception):
                self._notify.close()


def _rust_notify(dirs: list[Path]) -> Any:
    # watchfiles' Rust backend (documented in its API reference): unlike `watchfiles.watch`,
    # each wait takes its own timeout, so a quiet job costs one wake-up per RESCAN_EVERY.
    try:
        from watchfiles._rust_notify import RustNotify
    except ImportError:
        return None
    try:
        # Non-recursive, so a directory of many runs does not cost a watch per sub-folder.
        return RustNotify([str(d) for d in dirs], False, False, 300, False, True)
    except (OSError, RuntimeError):
        return None


def now() -> float:
    return time.monotonic()
