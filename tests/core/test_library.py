"""Loading the library: the scan rewrites of patterns and the cache of parsed files."""

from __future__ import annotations

import marshal
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import regex

import app.core.knowledge.loading as library_module
import app.core.knowledge.parse_cache as parse_cache_module
from app.core.engine.diagnose import diagnose
from app.core.knowledge.loading import load_library, signature_files
from app.core.knowledge.parse_cache import ParseCache, schema_fingerprint
from app.core.patterns.rewrites import frame_anchors, relaxed
from app.errors import LibraryError

SIGNATURES = Path(__file__).resolve().parents[2] / "signatures"


@pytest.mark.parametrize(
    ("pattern", "anchored"),
    [
        (r"^\s*Killed\s*$", r"(?:^|\r)\s*Killed\s*(?:$|\r)"),
        (r"[^:]+: (?:^|x)", r"[^:]+: (?:(?:^|\r)|x)"),
        (r"a\^b\$", r"a\^b\$"),  # escaped: literal characters
        (r"[]^$]x", r"[]^$]x"),  # a class holds them literally
        (r"[[:alpha:]^]$", r"[[:alpha:]^](?:$|\r)"),
        (r"\\^", r"\\(?:^|\r)"),  # an escaped backslash, then an anchor
    ],
)
def test_frame_anchors_rewrite_only_anchors(pattern: str, anchored: str) -> None:
    assert frame_anchors(pattern) == anchored


@pytest.mark.parametrize(
    ("pattern", "opened"),
    [
        (r"a.{0,200}b", r"a.{0,}b"),
        (r"\d{1,12}/\d{4}", r"\d{1,}/\d{4}"),  # an exact count stays
        (r"x{2,5}?", r"x{2,}?"),
        (r"[{0,3}]\{1,2\}", r"[{0,3}]\{1,2\}"),  # in a class or escaped: literal
        (r"^x{0,1}$", r"(?:^|\r)x{0,}(?:$|\r)"),
    ],
)
def test_relaxed_opens_bounded_repeats(pattern: str, opened: str) -> None:
    assert relaxed(pattern) == opened


def test_relaxed_patterns_match_a_superset() -> None:
    lines = ["a" + "-" * n + "b" for n in range(0, 300, 7)] + ["x" * n for n in range(8)]
    for pattern in (r"a.{0,200}b", r"^x{2,5}$", r"a-{3,9}b"):
        exact, loose = regex.compile(pattern), regex.compile(relaxed(pattern).replace(r"\r", "\r"))
        assert {s for s in lines if exact.search(s)} <= {s for s in lines if loose.search(s)}


@pytest.mark.parametrize(
    ("pattern", "line", "matches"),
    [
        (r"RuntimeError: ..不足", "RuntimeError: 显存不足", True),  # `.` is a character, not a byte
        (r"RuntimeError: .{2}不足", "RuntimeError: 显存不足", True),
        (r"RuntimeError: [显内]存不足", "RuntimeError: 内存不足", True),  # a class of characters beyond ASCII
        (r"RuntimeError: [显内]存不足", "RuntimeError: 外存不足", False),
        (r"RuntimeError: [^a]存不足", "RuntimeError: 内存不足", True),  # a negated class takes a whole character
        (r"RuntimeError: D[ée]j\S vu", "RuntimeError: Déjà vu", True),
        (r"RuntimeError: D[ée]ja", "RuntimeError: Daja", False),
        (r"RuntimeError: [一-龥]{2}不足", "RuntimeError: 内存不足", True),  # a range beyond ASCII
        (r"RuntimeError: 不?足", "RuntimeError: 足", True),  # a repeat applies to the whole character
        (r"RuntimeError: run ['‘](?P<cmd>[^'’]{1,200})['’]: no", "RuntimeError: run ‘a.sh’: no", True),
    ],
)
def test_patterns_beyond_ascii_match_characters_in_the_raw_scan(pattern: str, line: str, matches: bool) -> None:
    """The scan runs over raw bytes, where one Chinese character is three: the pattern's
    classes and `.` must still stand for whole characters, as they do on the decoded line."""
    from .conftest import library, signature

    lib = library(signature("host.cpu_alloc_failed", ("python", pattern, 0.85), source="emitted"))
    assert bool(diagnose(line.encode(), lib).candidates) is matches


@pytest.fixture
def library_copy(tmp_path: Path) -> Path:
    root = tmp_path / "signatures"
    shutil.copytree(SIGNATURES, root)
    return root


def test_a_cached_library_is_read_without_parsing_yaml(
    library_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    first = load_library(library_copy, cache=cache)
    assert len(list(cache.glob("signatures-*.marshal"))) == 1

    def no_yaml(*_: object) -> None:
        raise AssertionError("the cache was not used")

    monkeypatch.setattr(library_module, "parse", no_yaml)
    again = load_library(library_copy, cache=cache)
    assert again.version == first.version and again.regexes == first.regexes
    assert again.rules == first.rules and dict(again.index) == dict(first.index)


def test_cached_signatures_are_the_validated_ones(library_copy: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    parsed = load_library(library_copy, cache=cache)
    restored = load_library(library_copy, cache=cache)
    assert len(restored.signatures) == len(parsed.signatures) and list(restored.signatures) == list(parsed.signatures)
    assert "no.such_id" not in restored.signatures and restored.signatures.get("no.such_id") is None
    for sid, sig in parsed.signatures.items():
        again = restored.signatures[sid]
        assert again == sig and again.model_fields_set == sig.model_fields_set
        assert again.model_dump_json() == sig.model_dump_json()  # every nested value, of the same types
        assert again.window == sig.window and type(again.fingerprints) is tuple
    assert dict(restored.signatures) == dict(parsed.signatures)


def test_the_cache_is_keyed_by_the_schema_as_well(library_copy: Path, tmp_path: Path) -> None:
    files = signature_files(library_copy)
    keys = {ParseCache(tmp_path, library_copy, files, schema=schema).key for schema in ("one", "two")}
    assert len(keys) == 2  # a changed schema (or pydantic) misses: the files are validated again
    assert len(schema_fingerprint()) == 64


def test_an_edited_file_is_parsed_again(library_copy: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    load_library(library_copy, cache=cache)
    path = signature_files(library_copy)[0]
    path.write_text(path.read_text().replace("\ntitle: ", "\ntitle: Edited ", 1))
    edited = load_library(library_copy, cache=cache)
    assert edited.signatures[path.name.removesuffix(".yaml")].title.startswith("Edited ")
    path.unlink()
    assert len(load_library(library_copy, cache=cache)) == len(edited) - 1


def _settle(root: Path, seconds: int = 60) -> None:
    """Date every file of a library `seconds` back, as files installed or checked out a while ago."""
    when = time.time_ns() - seconds * 1_000_000_000
    for path in signature_files(root):
        os.utime(path, ns=(when, when))


def test_settled_files_are_not_read_again(library_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    _settle(library_copy)
    # Changed too recently to trust their stats: the cache keeps none; once settled, it does.
    monkeypatch.setattr(parse_cache_module, "SETTLED_NS", 10**18)
    load_library(library_copy, cache=cache)
    assert marshal.loads(next(cache.glob("signatures-*.marshal")).read_bytes())["stats"] is None
    monkeypatch.setattr(parse_cache_module, "SETTLED_NS", 0)
    first = load_library(library_copy, cache=cache)
    assert marshal.loads(next(cache.glob("signatures-*.marshal")).read_bytes())["stats"] is not None
    read: list[Path] = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: read.append(self) or real(self))
    again = load_library(library_copy, cache=cache)
    monkeypatch.undo()
    assert [p.suffix for p in read] == [".marshal"]  # the cache alone, not the signature files
    assert again.version == first.version and dict(again.signatures) == dict(first.signatures)


def test_an_edit_that_keeps_size_and_time_is_seen(
    library_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setattr(parse_cache_module, "SETTLED_NS", 0)
    load_library(library_copy, cache=cache)
    load_library(library_copy, cache=cache)  # the stats kept
    path = signature_files(library_copy)[0]
    before = path.stat()
    text = path.read_text()
    at = text.index("\ntitle: ") + len("\ntitle: ")
    path.write_text(text[:at] + "X" + text[at + 1 :])  # one ASCII letter for another: the same size
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # as `rsync -t` or `cp -p` would
    assert path.stat().st_size == before.st_size
    edited = load_library(library_copy, cache=cache)
    assert edited.signatures[path.name.removesuffix(".yaml")].title.startswith("X")


def test_a_broken_library_is_reported_not_cached(library_copy: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    path = signature_files(library_copy)[0]
    path.write_text(path.read_text() + "\nid: again\n")
    with pytest.raises(LibraryError, match="duplicate"):
        load_library(library_copy, cache=cache)
    assert not list(cache.glob("signatures-*"))
    with pytest.raises(LibraryError):  # and again: nothing stale hides the problem
        load_library(library_copy, cache=cache)


@pytest.mark.parametrize(
    "damage",
    [
        lambda blob: b"",
        lambda blob: b"{not marshal",
        lambda blob: blob[: len(blob) // 2],  # a write cut short
        lambda blob: marshal.dumps({"key": "x", "data": []}),
        lambda blob: marshal.dumps([]),
        lambda blob: b"\xff" + blob[1:],  # an unknown type code
    ],
)
def test_a_damaged_cache_is_ignored(library_copy: Path, tmp_path: Path, damage: Callable[[bytes], bytes]) -> None:
    cache = tmp_path / "cache"
    reference = load_library(library_copy, cache=cache)
    (cached,) = cache.glob("signatures-*.marshal")
    cached.write_bytes(damage(cached.read_bytes()))
    again = load_library(library_copy, cache=cache)
    assert again.version == reference.version and again.signatures == reference.signatures
    assert marshal.loads(cached.read_bytes())["version"] == reference.version  # and the cache is whole again


def test_a_cache_that_cannot_be_written_is_skipped(library_copy: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory would be")
    assert len(load_library(library_copy, cache=blocker / "cache")) == len(load_library(library_copy))
