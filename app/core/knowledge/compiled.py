"""Engines compiled on first use, one per pattern of the library."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

_UNCOMPILED = object()


class Compiled:
    """One engine per pattern, compiled on first use.

    A diagnosis locates only the few patterns the Set says occur, so compiling all of
    them up front (two engines each) would double a command's start-up for nothing.
    Two threads compiling the same pattern at once both get a valid, equal engine.
    """

    __slots__ = ("_compile", "_done", "_patterns")

    def __init__(self, patterns: tuple[str, ...], compile: Callable[[str], Any]) -> None:
        self._patterns = patterns
        self._compile = compile
        self._done: list[Any] = [_UNCOMPILED] * len(patterns)

    def __len__(self) -> int:
        return len(self._patterns)

    def __getitem__(self, index: int) -> Any:
        done = self._done[index]
        if done is _UNCOMPILED:  # not None: an engine may be None (nothing to compile)
            done = self._done[index] = self._compile(self._patterns[index])
        return done

    def ready(self, index: int) -> bool:
        """Whether a pattern's engine is compiled already."""
        return self._done[index] is not _UNCOMPILED

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(len(self)))
