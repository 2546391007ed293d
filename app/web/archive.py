"""Logs out of an uploaded file: itself, gunzipped, or the members of a tar archive (`.tar`, `.tar.gz`).

Everything is bounded: the decompressed size, the number of members and their total size. Only
regular files are taken; links, devices, FIFOs, sparse files and names that climb out of the
archive (`../x`, `/etc/x`) refuse the whole archive. Member names are shown, never used as paths.
"""

from __future__ import annotations

import contextlib
import tarfile
import zlib
from collections.abc import Iterable, Iterator
from pathlib import PurePosixPath
from typing import BinaryIO

from app.errors import BadInput, TooLarge
from app.web.jsonbody import spool, too_large

READ_CHUNK = 64 << 10  # decompressed bytes produced per step
MAX_FILES = 128  # logs in one diagnosis: parts of a form, or members of an archive
# A log of a job stays in memory only this far (one of up to MAX_FILES): a request holds at most
# about MAX_FILES x 8 KiB of logs in memory, the rest on disk.
FILE_MEMORY = 8 << 10
TAR_BLOCK = 512
# A tar's own bytes on top of its members': a header and padding per member, and the end blocks.
TAR_OVERHEAD = MAX_FILES * 3 * TAR_BLOCK + 20 * TAR_BLOCK

Log = tuple[str | None, BinaryIO]


class BoundedGunzip:
    """Decompress gzip (several members too) without ever producing more than a cap."""

    def __init__(self, cap: int, shown: int | None = None) -> None:
        self.cap = cap
        self.shown = cap if shown is None else shown  # the limit the error names
        self.total = 0
        self._d = zlib.decompressobj(wbits=31)
        self._fed = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        """Decompressed pieces of data; raise TooLarge past the cap, BadInput on corrupt data."""
        buf = data
        while buf:
            self._fed = True
            if self._d.eof:  # the next gzip member
                self._d = zlib.decompressobj(wbits=31)
            try:
                out = self._d.decompress(buf, READ_CHUNK)
            except zlib.error as exc:
                raise BadInput(f"the gzip data is corrupt ({exc}); check the file with `gzip -t`") from exc
            self.total += len(out)
            if self.total > self.cap:
                raise too_large(self.shown, "the decompressed log")
            if out:
                yield out
            buf = self._d.unused_data if self._d.eof else self._d.unconsumed_tail

    def finish(self) -> None:
        """Check the stream ended on a complete member."""
        if self._fed and not self._d.eof:
            raise BadInput("the gzip data is truncated; check the file with `gzip -t`")


def gunzip_file(source: BinaryIO, limit: int, *, cap: int | None = None) -> BinaryIO:
    """Decompress a gzip file into a temporary file, never past `cap` (default the limit; blocking)."""
    source.seek(0)
    gunzip = BoundedGunzip(limit if cap is None else cap, limit)
    out = spool(FILE_MEMORY)
    with contextlib.ExitStack() as on_error:
        on_error.callback(out.close)
        while block := source.read(READ_CHUNK):
            for piece in gunzip.feed(block):
                out.write(piece)
        gunzip.finish()
        on_error.pop_all()  # decoded whole: the caller holds it now
    out.seek(0)
    return out


def close_logs(logs: Iterable[Log]) -> None:
    """Close (and so delete) the spooled files of some logs."""
    for _, file in logs:
        file.close()


def is_gzip(file: BinaryIO) -> bool:
    head = file.read(2)
    file.seek(0)
    return head == b"\x1f\x8b"


def is_tar(file: BinaryIO) -> bool:
    """A POSIX or GNU tar: the `ustar` magic of its first header, or an empty one (see `is_empty_tar`)."""
    head = file.read(TAR_BLOCK)
    file.seek(0)
    return len(head) == TAR_BLOCK and head[257:262] == b"ustar" or is_empty_tar(file)


def is_empty_tar(file: BinaryIO) -> bool:
    """A tar of no files: nothing but its end, zero blocks (`tar -czf x.tar.gz -T /dev/null` makes 20).

    Without this it was read as a log of NUL bytes and refused as binary data (issue #38).
    """
    size = 0
    try:
        while block := file.read(READ_CHUNK):
            if block.count(0) != len(block):
                return False
            size += len(block)
    finally:
        file.seek(0)
    return size >= 2 * TAR_BLOCK and size % TAR_BLOCK == 0


def member_name(name: str) -> str:
    """A member's path as shown: relative, printable, bounded; raise BadInput for one that climbs out."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts or not name.strip():
        raise BadInput(f"the archive holds a file outside its folder ({_shown(name)}); archive the logs themselves")
    shown = "".join(ch for ch in "/".join(p for p in path.parts if p != ".") if ch.isprintable())
    if not shown or len(shown) > 255:
        raise BadInput(f"the archive holds a file with an unusable name ({_shown(name)})")
    return shown


def _shown(name: str) -> str:
    return repr("".join(ch for ch in name if ch.isprintable())[:80])


def _kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return "a symbolic link"
    if member.islnk():
        return "a hard link"
    if member.ischr() or member.isblk():
        return "a device"
    if member.isfifo():
        return "a FIFO"
    if member.issparse():
        return "a sparse file"
    return "a special entry"


def unpack(file: BinaryIO, name: str | None, budget: int, *, limit: int) -> list[Log]:
    """The logs in one uploaded file, at most `budget` bytes in all (blocking).

    A gzip file is decompressed; a tar (plain or gzip-compressed) gives its regular files,
    each named by its path in the archive.
    """
    with contextlib.ExitStack() as decoded:  # a gunzipped copy is closed unless it is the log returned
        if is_gzip(file):
            file = gunzip_file(file, limit, cap=budget + TAR_OVERHEAD)
            decoded.callback(file.close)
        if is_tar(file):
            return _members(file, budget, limit=limit)
        file.seek(0, 2)
        size = file.tell()
        file.seek(0)
        if size > budget:
            raise too_large(limit)
        decoded.pop_all()
        return [(name, file)]


def _members(file: BinaryIO, budget: int, *, limit: int) -> list[Log]:
    logs: list[Log] = []
    with contextlib.ExitStack() as on_error:
        on_error.callback(close_logs, logs)  # whatever the list holds when it fails
        try:
            with tarfile.open(fileobj=file, mode="r|") as tar:  # read in order, never seeking back
                _extract(tar, logs, budget, limit=limit)
        except tarfile.TarError as exc:
            raise BadInput(f"the tar archive is corrupt or truncated ({exc}); check it with `tar -tzf`") from None
        if not logs:
            raise BadInput("the archive holds no files")
        on_error.pop_all()
    return logs


def _extract(tar: tarfile.TarFile, logs: list[Log], budget: int, *, limit: int) -> None:
    """Add each regular file of the archive to `logs`, spooled (gunzipped when it is gzip), within `budget` in all."""
    total = 0
    for count, member in enumerate(tar, 1):
        if count > MAX_FILES:
            raise TooLarge(
                f"the archive holds more than {MAX_FILES} files; send at most {MAX_FILES} logs",
                extra={"limit": MAX_FILES},
            )
        if member.isdir():
            continue
        if not member.isreg() or member.issparse():
            raise BadInput(
                f"the archive holds {_kind(member)} ({_shown(member.name)}); only regular files are accepted"
            )
        shown = member_name(member.name)
        total += member.size
        if total > budget:
            raise too_large(limit, "the logs in the archive are together")
        source = tar.extractfile(member)
        out = spool(FILE_MEMORY)
        logs.append((shown, out))
        if source is not None:
            while block := source.read(READ_CHUNK):
                out.write(block)
        out.seek(0)
        if is_gzip(out):  # rank3.log.gz inside the archive
            unpacked = gunzip_file(out, limit, cap=budget - total + member.size)
            out.close()
            logs[-1] = (shown.removesuffix(".gz"), unpacked)
            total += unpacked.seek(0, 2) - member.size
            unpacked.seek(0)
        if is_tar(logs[-1][1]):  # an archive in the archive was once read as a text log (issue #38)
            raise BadInput(
                f"the archive holds another archive ({_shown(member.name)}); put the logs themselves in one archive"
            )
