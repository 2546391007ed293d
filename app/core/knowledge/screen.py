"""Which patterns may hit in a chunk: the RE2 Set of every pattern, built when a scan first
needs it, and, until then, a screen of a short text by the patterns' required literals.

Building the Set of the library's ~1,100 patterns takes ~35 ms: most of what a one-shot
command spends on a short log (a pasted traceback, the lines CI keeps). A pattern matches
only a text holding one of its atoms (`app.core.patterns.literals.atoms`, ASCII lower
case), so a short text is screened by the atoms it holds (~0.5 us a byte) and the few
patterns left are searched alone, with the engines that locate their hits anyway. Past a
few screened kilobytes the Set pays for itself, and it is built.

The atoms are worked out when the library is parsed (~0.2 s) and kept in the parse cache;
a library built otherwise has none, and uses the Set from the start.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import re2

SCREEN_BYTES = 16 << 10  # the longest text screened by atoms (16 KiB: ~8 ms, a quarter of the Set's build)
SCREEN_TOTAL = 64 << 10  # bytes screened in all before the Set is built instead

Atoms = tuple[bytes, ...] | None  # a pattern's atoms; None: unknown, so every text may hold a match


def ascii_atoms(found: Sequence[str] | None) -> Atoms:
    """Atoms as the screen compares them: bytes of ASCII lower case; None if any is not ASCII.

    `bytes.lower()` folds ASCII only, as the atoms are folded; a non-ASCII letter may be
    folded by RE2 (Latin-1 `(?i)`), so such a pattern is not screened.
    """
    if not found or not all(a.isascii() for a in found):
        return None
    return tuple(a.encode() for a in found)


class PatternSet:
    """The RE2 Set of a library's patterns (as the scan compiles them), built on first use.

    Two threads building it at once both get a valid, equal Set; one is kept. The count of
    screened bytes is read and written without a lock: it only decides when the Set is built.
    """

    __slots__ = ("_atoms", "_build", "_built", "_by_atom", "_screened", "_unscreened")

    def __init__(self, build: Any, atoms: Sequence[Atoms] | None, built: Any = None) -> None:
        self._build = build  # () -> a compiled re2.Set
        self._built = built
        self._atoms = atoms
        self._screened = 0
        self._by_atom: Mapping[bytes, tuple[int, ...]] | None = None
        self._unscreened: tuple[int, ...] = ()
        if atoms is not None:
            by_atom: dict[bytes, list[int]] = {}
            for idx, found in enumerate(atoms):
                for atom in found or ():
                    by_atom.setdefault(atom, []).append(idx)
            self._by_atom = {atom: tuple(ids) for atom, ids in by_atom.items()}
            self._unscreened = tuple(idx for idx, found in enumerate(atoms) if found is None)

    def get(self) -> Any:
        """The Set, built now if it was not."""
        built = self._built
        if built is None:
            built = self._built = self._build()
        return built

    @property
    def built(self) -> bool:
        return self._built is not None

    @property
    def screening(self) -> bool:
        """Whether short texts can be screened (the patterns' atoms are known)."""
        return self._by_atom is not None

    def restarted(self) -> PatternSet:
        """The same patterns as a new process has them: the Set not built, nothing screened."""
        return PatternSet(self._build, self._atoms)

    def screens(self, size: int) -> bool:
        """Whether a text of `size` bytes is screened by atoms rather than matched by the Set
        (counted as screened when it is)."""
        if self._built is not None or self._by_atom is None or size > SCREEN_BYTES:
            return False
        if self._screened + size > SCREEN_TOTAL:
            return False
        self._screened += size
        return True

    def candidates(self, data: bytes) -> list[int]:
        """The patterns that may match somewhere in data, by their atoms (ascending)."""
        assert self._by_atom is not None, "a library without atoms is not screened"
        low = data.lower()
        found = set(self._unscreened)
        for atom, ids in self._by_atom.items():
            if atom in low:
                found.update(ids)
        return sorted(found)


def build_set(patterns: Sequence[bytes], options: Any) -> Any:
    """A compiled RE2 Set of patterns already known to compile."""
    built = re2.Set.SearchSet(options)
    for pattern in patterns:
        built.Add(pattern)
    built.Compile()
    return built


# Uncompiled patterns left by the screen of a short text from which one Set of them narrows them.
NARROW_NEW = 8


def narrow(
    candidates: Sequence[int],
    data: bytes,
    ready: Callable[[int], bool],
    set_form: Callable[[int], bytes],
    options: Any,
) -> list[int]:
    """The screened patterns still worth searching in data: the ones whose engine is `ready`,
    and of the others (when there are NARROW_NEW or more) those that one Set of their
    `set_form`s (a superset of each) names. Compiling each engine to search it cost more
    than that Set (28 patterns left by a two-line log: 9 ms against 5)."""
    new = [idx for idx in candidates if not ready(idx)]
    if len(new) < NARROW_NEW:
        return list(candidates)
    named = build_set([set_form(idx) for idx in new], options)
    kept = {new[i] for i in named.Match(data) or ()}
    return [idx for idx in candidates if idx in kept or ready(idx)]


# Patterns per part of the library's Set. One automaton of every pattern needs a state per
# mix of partial matches: over text of failures of every kind (a log of many crashes, the
# corpus) the mixes of ~1,900 patterns outgrew any memory given to it (512 MiB tried) and
# its states were thrown away and rebuilt without end, at about 10 us a byte. Parts of 512
# keep their states (35 ms for 720 KB of such text once built, against 6.4 s) in less
# memory in all; quiet text costs a pass per part (about 1.4 ns a byte each).
PART_PATTERNS = 512


class SetParts:
    """The RE2 Set of many patterns, as parts of at most PART_PATTERNS, matched as one Set.

    `Match` returns the indexes of the patterns that match, in the numbering of the whole
    list, ascending (each part's are, and the parts come in order).
    """

    __slots__ = ("_parts", "match")

    def __init__(self, parts: Sequence[Any]) -> None:
        self._parts = tuple(parts)  # keeps the Sets alive: `match` holds only their bound methods
        calls = [(part._set.Match, i * PART_PATTERNS) for i, part in enumerate(parts)]
        if len(calls) == 1:
            self.match: Any = calls[0][0]
        else:

            def match(data: bytes | memoryview) -> list[int]:
                found: list[int] = []
                for call, base in calls:
                    hit = call(data)
                    if hit:
                        found.extend([base + i for i in hit] if base else hit)
                return found

            self.match = match

    def Match(self, data: bytes | memoryview) -> list[int]:  # noqa: N802 (the name re2.Set's callers use)
        return self.match(data)  # type: ignore[no-any-return]

    def __len__(self) -> int:
        return len(self._parts)


def build_set_parts(patterns: Sequence[bytes], options: Any) -> SetParts:
    """The Set of patterns already known to compile, in parts of at most PART_PATTERNS."""
    return SetParts(
        [build_set(patterns[i : i + PART_PATTERNS], options) for i in range(0, len(patterns), PART_PATTERNS)]
    )
