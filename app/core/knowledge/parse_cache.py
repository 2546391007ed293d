"""The parse cache: the validated signatures of a valid library kept on disk, keyed by its files' bytes."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import marshal
import secrets
from pathlib import Path
from typing import Any

import pydantic
import pydantic_core

from app.core.knowledge import builtin, model_state, schema, screen
from app.core.patterns import literals


@functools.cache
def schema_fingerprint() -> str:
    """What the kept signatures depend on besides their files: the schema, `model_state` and
    pydantic; and what the kept atoms depend on: the engine's own patterns and how atoms are found."""
    digest = hashlib.sha256(f"{model_state.FORMAT}\0{pydantic.VERSION}\0{pydantic_core.__version__}\0".encode())
    for module in (schema.__file__, model_state.__file__, builtin.__file__, literals.__file__, screen.__file__):
        digest.update(Path(module or "").read_bytes())  # a missing source raises OSError: no cache
    return digest.hexdigest()


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

    def __init__(self, directory: Path, root: Path, files: list[tuple[Path, bytes]], *, schema: str = "") -> None:
        where = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
        self.file = directory / f"signatures-{where}.marshal"
        digest = hashlib.sha256(f"{schema}\0".encode())
        for path, data in files:
            digest.update(f"{path.relative_to(root)}\0{len(data)}\0".encode())
            digest.update(data)
        self.key = digest.hexdigest()

    def load(self) -> tuple[list[Any], str, dict[str, Any]] | None:
        """The files' signatures (as stored), the library's version and its patterns' atoms
        (`screen.Atoms` by pattern), if the cache holds these very files."""
        try:
            payload = marshal.loads(self.file.read_bytes())
        except (OSError, ValueError, EOFError, TypeError):  # missing, damaged or another Python's
            return None
        if not isinstance(payload, dict) or payload.get("key") != self.key:
            return None
        data, version, atoms = payload.get("data"), payload.get("version"), payload.get("atoms")
        if isinstance(data, list) and isinstance(version, str) and isinstance(atoms, dict):
            return data, version, atoms
        return None

    def store(self, data: list[Any], version: str, atoms: dict[str, Any]) -> None:
        try:
            blob = marshal.dumps({"key": self.key, "version": version, "data": data, "atoms": atoms})
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
