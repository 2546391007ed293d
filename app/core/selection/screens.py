"""The published patterns compiled for Python's selection: one RE2 set that screens bytes for
the patterns that may match, each pattern's own RE2 to locate and confirm matches, and the
atoms that stand in for a pattern the browser cannot run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import re2

from app.core.knowledge.screen import PART_PATTERNS, SetParts, build_set_parts
from app.core.patterns.rewrites import byte_superset


@dataclass(frozen=True)
class CompiledSpec:
    rules: Mapping[str, int]
    matchers: list[Any]  # [(RE2 Set, its pattern ids)..., None] over the patterns with a regex, on first use
    set_ids: tuple[int, ...]  # Set index -> pattern id
    atom_only: tuple[tuple[int, tuple[str, ...]], ...]
    progress: frozenset[int]
    ansi: Any
    single: dict[int, Any]  # pattern id -> its own RE2 (compiled when first needed)
    regexes: Mapping[int, str]
    screen: SetParts  # RE2 Set of every pattern, loosened, over a block's text: which may match in it
    screen_ids: tuple[int, ...]  # screen index -> pattern id
    screens: Mapping[int, bytes]  # pattern id -> its screen, to locate it in a block
    everywhere: frozenset[int]  # patterns the screen cannot bound: every line is a candidate
    atom_map: Mapping[int, tuple[str, ...]]  # atom_only as a mapping
    exact: frozenset[int]  # patterns whose screen is the pattern itself on a clean line (`BlockText.clean`)
    located: dict[int, Any] = field(default_factory=dict)  # pattern id -> its screen's search (on first use)


# A screen must match wherever its pattern matches some frame of a line: `\A` and `\z`
# mean a frame's ends there but the block's ends in a screen, so such patterns are not screened.
_FRAME_ENDS = re.compile(r"\\.")
# Characters a pattern's ASCII letters match under `(?i)` in text, not in bytes (the Kelvin
# sign and the long s): lines holding them are candidates for every pattern.
FOLDS = (b"\xe2\x84\xaa", b"\xc5\xbf")
_FOLD_SCREEN = b"(?:\\xe2\\x84\\xaa|\\xc5\\xbf)"
FOLD = -1  # the screen's id for them


def _literal(text: str) -> str:
    """A literal for RE2 over bytes: ASCII as escapes, any other character as its bytes may be."""
    return "".join(f"\\x{ord(ch):02x}" if ch.isascii() else r"(?:[\x80-\xff]{1,4})" for ch in text)


def _screen_source(p: Mapping[str, Any]) -> tuple[str, bool] | None:
    """A pattern for the screen over raw bytes (see `rewrites.byte_superset`), or None."""
    if p["js"] is None:  # matched by its atoms in ASCII lower case: any case is a superset
        return "(?i)(?:" + "|".join(_literal(a) for a in p["atoms"]) + ")", True
    if any(m[0] in ("\\A", "\\z") for m in _FRAME_ENDS.finditer(p["regex"])):
        return None
    source, exact = byte_superset(p["regex"])
    return "(?m)" + source, exact


def compile_spec(spec: Mapping[str, Any]) -> CompiledSpec:
    set_ids: list[int] = []
    atom_only: list[tuple[int, tuple[str, ...]]] = []
    for p in spec["patterns"]:
        if p["js"] is not None:
            set_ids.append(p["id"])
        elif p["atoms"]:
            atom_only.append((p["id"], tuple(p["atoms"])))
    sources: list[bytes] = []
    screen_ids: list[int] = []
    screens: dict[int, bytes] = {}
    exact: set[int] = set()
    everywhere: set[int] = set()
    for p in spec["patterns"]:
        if p["js"] is None and not p["atoms"]:
            continue  # neither engine can run it
        found = _screen_source(p)
        if found is None:
            everywhere.add(p["id"])
            continue
        source = found[0].encode("ascii")
        sources.append(source)
        screen_ids.append(p["id"])
        screens[p["id"]] = source
        if found[1]:
            exact.add(p["id"])
    screen = build_set_parts([*sources, _FOLD_SCREEN], _BYTES)  # the fold last: its index is len(screen_ids)
    return CompiledSpec(
        rules=spec["rules"],
        matchers=[],
        set_ids=tuple(set_ids),
        atom_only=tuple(atom_only),
        progress=frozenset(p["id"] for p in spec["patterns"] if p["kind"] == "progress"),
        ansi=re.compile(spec["ansi"]),  # RE2 refuses {0,4096}; the reader uses `re` too
        single={},
        regexes={p["id"]: p["regex"] for p in spec["patterns"] if p["js"] is not None},
        screen=screen,
        screen_ids=(*screen_ids, FOLD),
        screens=screens,
        everywhere=frozenset(everywhere),
        atom_map=dict(atom_only),
        exact=frozenset(exact),
    )


def _bytes_options() -> Any:
    options = re2.Options()
    options.never_nl = True
    # Per part of the screen's Set (`SetParts`). With 64 MiB RE2 flushed its cache of
    # automaton states now and then over a long log and built them again: with more, the Set
    # scans about 15 % faster (memory grows only as far as the log's states need).
    options.max_mem = 256 << 20
    options.encoding = re2.Options.Encoding.LATIN1  # bytes as bytes: invalid UTF-8 needs no decoding
    return options


_BYTES = _bytes_options()
_LOCATE = _bytes_options()
_LOCATE.never_capture = True  # only where a line may match is wanted


def frames_of(compiled: CompiledSpec, text: str) -> list[str]:
    """A line as `matching_patterns` judges it: without escape sequences, frame by frame."""
    if "\x1b" in text:
        text = compiled.ansi.sub("", text)
    return [f for f in (text.split("\r") if "\r" in text else (text,)) if f]


def single_regex(compiled: CompiledSpec, pid: int) -> Any:
    """A pattern's own RE2 over a line's text (compiled when first needed)."""
    regex = compiled.single.get(pid)
    if regex is None:
        options = re2.Options()
        options.never_nl = True
        regex = compiled.single[pid] = re2.compile(compiled.regexes[pid], options)
    return regex


UNANCHORED = re2._Anchor.UNANCHORED
AHEAD = 1024  # matches of a pattern located per slice while it is screened (more, if needed, later)


def locator(compiled: CompiledSpec, pid: int) -> Any:
    """The search of a pattern's screen over a block's text (compiled when first needed)."""
    search = compiled.located.get(pid)
    if search is None:  # two threads may compile it at once: either result will do
        search = compiled.located[pid] = re2.compile(compiled.screens[pid], _LOCATE)._regexp.Match
    return search


ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _compiled_sets(regexes: Mapping[int, str], ids: Sequence[int]) -> list[tuple[Any, Sequence[int]]]:
    """RE2 Sets over `ids`' patterns: parts of PART_PATTERNS (see `SetParts`), halved until
    each part fits its automaton's memory."""
    if len(ids) > PART_PATTERNS:
        return [
            m for i in range(0, len(ids), PART_PATTERNS) for m in _compiled_sets(regexes, ids[i : i + PART_PATTERNS])
        ]
    options = re2.Options()
    options.never_nl = True
    options.max_mem = 64 << 20
    matchers = re2.Set.SearchSet(options)
    for pid in ids:
        matchers.Add(regexes[pid])
    try:
        matchers.Compile()
    except re2.error:
        if len(ids) == 1:
            raise
        half = len(ids) // 2
        return _compiled_sets(regexes, ids[:half]) + _compiled_sets(regexes, ids[half:])
    return [(matchers, ids)]


def _exact_sets(compiled: CompiledSpec) -> list[tuple[Any, Sequence[int]]]:
    """The RE2 Sets of the exact patterns over a line's text; compiled when first needed.

    Their bounded repeats make them slow to compile (a second or so for the shipped library),
    and the block path needs them only for the rare lines longer than `line_bytes`. A library
    too large for one automaton is split in parts rather than refused.
    """
    if not compiled.matchers:
        compiled.matchers.extend(_compiled_sets(compiled.regexes, compiled.set_ids) if compiled.set_ids else [])
        compiled.matchers.append(None)  # compiled: the list is no longer empty when it holds no Set
    return [m for m in compiled.matchers if m is not None]


def matching_patterns(compiled: CompiledSpec, text: str) -> set[int]:
    """Ids of the patterns that match one line (any of its frames)."""
    if "\x1b" in text:
        text = compiled.ansi.sub("", text)
    found: set[int] = set()
    for frame in text.split("\r") if "\r" in text else (text,):
        if not frame:
            continue
        for matchers, ids in _exact_sets(compiled):
            found.update(ids[i] for i in matchers.Match(frame) or ())
        if compiled.atom_only:
            lower = frame.translate(ASCII_LOWER)
            found.update(pid for pid, words in compiled.atom_only if any(w in lower for w in words))
    return found
