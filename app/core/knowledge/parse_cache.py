"""The parse cache: the validated signatures of a valid library kept on disk, keyed by its files' bytes."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import marshal
import secrets
import time
from pathlib import Path
from typing import Any

import pydantic
import pydantic_core

from app.core.knowledge import builtin, model_state, schema, screen
from app.core.patterns import literals

# A file changed less than this before the cache was written may change again within the
# resolution of its time stamps unseen by them: its stats are not trusted (its bytes are read).
SETTLED_NS = 2_000_000_000


def _sources() -> tuple[Path, ...]:
    """The modules the kept data depends on besides the files: the schema, `model_state`, and
    what the kept atoms depend on: the engine's own patterns and how atoms are found."""
    return tuple(Path(m.__file__ or "") for m in (schema, model_state, builtin, literals, screen))


@functools.cache
def schema_fingerprint() -> str:
    """What the kept signatures depend on besides their files: the schema, `model_state` and
    pydantic; and what the kept atoms depend on: the engine's own patterns and how atoms are found."""
    digest = hashlib.sha256(f"{model_state.FORMAT}\0{pydantic.VERSION}\0{pydantic_core.__version__}\0".encode())
    for module in _sources():
        digest.update(module.read_bytes())  # a missing source raises OSError: no cache
    return digest.hexdigest()


def _stat(path: Path, name: str) -> tuple[str, int, int, int, int]:
    st = path.stat()
    return name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


class ParseCache:
    """The validated signatures of a valid library as plain data (`model_state`), kept beside
    nothing else of the library, with the library's version (its digest costs as much as
    reading the data).

    libyaml takes ~0.2 s for the shipped files: that was most of a command's start-up. The
    data is kept in `marshal`'s format, the one Python's own byte code cache uses: it loads
    in half the time of the same data as JSON (~6 ms against ~13 ms for 1.9 MB) and holds
    exactly what it was given. The key is a digest of every file's path and bytes and of
    `schema` (what else the data depends on), so an edit, a new file, a removed one or a
    changed schema misses. Only plain data is kept, and a cache that cannot be written (or
    read back) is skipped.
    """

    def __init__(self, directory: Path, root: Path, files: list[Path], *, schema: str | None = None) -> None:
        """`schema`: what else the data depends on (`schema_fingerprint()` when not given).

        Reading and hashing the files (5 MB for the shipped library) was a tenth of a short
        diagnosis, so the cache also keeps every file's stats (and its sources'): when they
        are all the same, and were settled when the cache was written, the files are not
        read. A stat that differs (an edit, `touch`, a copy; the change time moves even when
        a tool keeps the modification time) falls back to the digest of their bytes.
        """
        where = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
        self.file = directory / f"signatures-{where}.marshal"
        self.root, self.files, self.schema = root, files, schema
        sources = () if schema is not None else _sources()  # a missing source raises OSError: no cache
        self.stats = (
            f"{model_state.FORMAT}\0{pydantic.VERSION}\0{pydantic_core.__version__}\0{schema}",
            tuple(_stat(path, str(path.relative_to(root))) for path in files),
            tuple(_stat(path, str(path)) for path in sources),
        )

    @functools.cached_property
    def key(self) -> str:
        """The digest of every file's path and bytes and of what else the data depends on."""
        schema = self.schema if self.schema is not None else schema_fingerprint()
        digest = hashlib.sha256(f"{schema}\0".encode())
        for path in self.files:
            data = path.read_bytes()
            digest.update(f"{path.relative_to(self.root)}\0{len(data)}\0".encode())
            digest.update(data)
        return digest.hexdigest()

    def _settled(self) -> bool:
        """Whether every file was last changed long enough ago for its stats to tell a change."""
        latest = max((max(st[2], st[3]) for part in self.stats[1:] for st in part), default=0)
        return latest <= time.time_ns() - SETTLED_NS

    def load(self) -> tuple[list[Any], str, dict[str, Any]] | None:
        """The files' signatures (as stored), the library's version and its patterns' atoms
        (`screen.Atoms` by pattern), if the cache holds these very files."""
        try:
            payload = marshal.loads(self.file.read_bytes())
        except (OSError, ValueError, EOFError, TypeError):  # missing, damaged or another Python's
            return None
        if not isinstance(payload, dict):
            return None
        same_stats = payload.get("stats") == self.stats
        if not same_stats and payload.get("key") != self.key:
            return None
        data, version, atoms = payload.get("data"), payload.get("version"), payload.get("atoms")
        if not (isinstance(data, list) and isinstance(version, str) and isinstance(atoms, dict)):
            return None
        if not same_stats and self._settled():  # the same bytes, newly stated: trust the stats next time
            self._write({**payload, "stats": self.stats})
        return data, version, atoms

    def store(self, data: list[Any], version: str, atoms: dict[str, Any]) -> None:
        stats = self.stats if self._settled() else None
        self._write({"key": self.key, "stats": stats, "version": version, "data": data, "atoms": atoms})

    def _write(self, payload: dict[str, Any]) -> None:
        try:
            blob = marshal.dumps(payload)
        except ValueError:
            return  # a value marshal cannot hold (a YAML date, say): parse the files next time
        tmp = self.file.with_name(f"{self.file.name}.{secrets.token_hex(6)}.tmp")
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(blob)
            tmp.replace(self.file)  # atomic: a concurrent reader sees the old or the new file
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
