"""Translate library patterns for other regex engines: required literals and JavaScript sources.

A browser picks evidence out of a large log before anything is sent (app/core/selection/rules.py
holds the rules). It screens lines with a multi-literal search first and runs a pattern
only on lines holding one of its *atoms*: literals, one of which every match contains
(compared in ASCII lower case). Both translations err on the side of keeping lines: a
pattern whose atoms cannot be worked out gets none (it is run on every line), and a
construct JavaScript would read differently makes the pattern unusable in the browser
rather than silently narrower.
"""

from __future__ import annotations

import re
import re._constants as sre  # type: ignore[import-not-found]  # private stdlib module (the parser, without a deprecation warning), not in typeshed
import re._parser as sre_parse  # type: ignore[import-not-found]  # private stdlib module, not in typeshed
from collections.abc import Iterable
from itertools import product
from typing import Any

MIN_ATOM = 3  # shorter literals screen nothing (almost every line holds "at")
MAX_SET = 24  # alternatives tracked per node before a set is given up
MAX_ATOM = 32  # atoms are cut to this length (a prefix of a required literal is required too)

_Info = tuple[set[str] | None, set[str] | None]  # (every string the node can match, required atoms)


def _lower(text: str) -> str:
    """ASCII lower case only: the browser folds bytes, not Unicode."""
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _score(atoms: set[str] | None) -> tuple[int, int]:
    """How well a set of atoms screens: longer shortest atom first, then fewer atoms."""
    if not atoms or any(len(a) < MIN_ATOM for a in atoms):
        return (0, 0)
    return (min(len(a) for a in atoms), -len(atoms))


def _best(*candidates: set[str] | None) -> set[str] | None:
    best: set[str] | None = None
    for c in candidates:
        if c and _score(c) > _score(best):
            best = c
    return best if best and _score(best)[0] else None


def _as_atoms(exact: set[str] | None) -> set[str] | None:
    if exact is None or any(len(s) < MIN_ATOM for s in exact):
        return None
    return {s[:MAX_ATOM] for s in exact}


def _char(code: int, ignore_case: bool) -> set[str] | None:
    ch = chr(code)
    if ch == "\n":
        return None
    if ignore_case and not ch.isascii() and ch.lower() != ch.upper():
        return None  # its other case has other bytes
    return {_lower(ch)}


def _info(items: Iterable[tuple[Any, Any]], ignore_case: bool, max_set: int) -> _Info:
    """Exact strings and required atoms of a sequence of parsed nodes."""
    run: set[str] = {""}  # every string the current run of exact nodes can match
    whole = True  # the run covers the whole sequence so far
    required: set[str] | None = None
    for op, av in items:
        e, r = _node(op, av, ignore_case, max_set)
        if e is not None and len(run) * len(e) <= max_set:
            run = {a + b for a, b in product(run, e)}
            continue
        # The run of exact strings ends here: keep the best screen seen so far.
        whole = False
        required = _best(required, _as_atoms(run), r)
        run = e if e is not None else {""}
    required = _best(required, _as_atoms(run))
    return (run if whole else None), required


def _node(op: Any, av: Any, ignore_case: bool, max_set: int) -> _Info:
    if op is sre.LITERAL:
        return _char(av, ignore_case), None
    if op is sre.NOT_LITERAL or op is sre.ANY or op is sre.CATEGORY:
        return None, None
    if op is sre.IN:
        chars: set[str] = set()
        for kind, value in av:
            if kind is sre.LITERAL:
                c = _char(value, ignore_case)
                if c is None:
                    return None, None
                chars |= c
            elif kind is sre.RANGE and value[1] - value[0] < 12:
                for code in range(value[0], value[1] + 1):
                    c = _char(code, ignore_case)
                    if c is None:
                        return None, None
                    chars |= c
            else:
                return None, None
        return (chars if 0 < len(chars) <= 8 else None), None
    if op is sre.AT:
        return {""}, None
    if op is sre.SUBPATTERN:
        _group, add_flags, del_flags, sub = av
        case = (ignore_case or bool(add_flags & sre.SRE_FLAG_IGNORECASE)) and not del_flags & sre.SRE_FLAG_IGNORECASE
        exact, required = _info(sub, case, max_set)
        return exact, required
    if op is sre.BRANCH:
        exacts: set[str] = set()
        atoms: set[str] = set()
        exact_ok, atoms_ok = True, True
        for branch in av[1]:
            e, r = _info(branch, ignore_case, max_set)
            if exact_ok and e is not None:
                exacts |= e
            else:
                exact_ok = False
            screen = _best(r, _as_atoms(e))
            if atoms_ok and screen is not None:
                atoms |= screen
            else:
                atoms_ok = False
        exact = exacts if exact_ok and len(exacts) <= max_set else None
        return exact, (atoms if atoms_ok and len(atoms) <= max_set * 2 else None)
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
        low, high, sub = av
        e, r = _info(sub, ignore_case, max_set)
        if low == 0:
            if e is not None and high == 1:
                return e | {""}, None
            return None, None
        if low == high == 1:
            return e, r
        # At least one copy is in every match.
        return None, _best(r, _as_atoms(e))
    return None, None  # anything else (lookaround, backreferences): assume nothing


def atoms(pattern: str, *, max_set: int = MAX_SET) -> tuple[str, ...] | None:
    """Literals (ASCII lower case) one of which every match of pattern contains; None if unknown.

    `max_set` bounds the alternatives tracked per node (and twice that the atoms of an
    alternation): a larger bound finds atoms for more patterns, but more of them.
    """
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None
    ignore_case = bool(parsed.state.flags & sre.SRE_FLAG_IGNORECASE)
    exact, required = _info(parsed.data, ignore_case, max_set)
    screen = _best(required, _as_atoms(exact))
    if not screen:
        return None
    # An atom that holds another atom screens nothing more.
    kept = [a for a in screen if not any(b != a and b in a for b in screen)]
    return tuple(sorted(kept))


# --- JavaScript --------------------------------------------------------------------------------

# Constructs JavaScript reads differently from RE2/`regex` (or not at all) outside a class.
_JS_UNSAFE = re.compile(r"\\[AzZQEpPCGXKRhHvVNa]|\[\[:|\(\?[a-zA-Z]*[smxuU]|\(\?<[=!]|\(\?[=!]|\{,")


def to_js(pattern: str) -> tuple[str, str] | None:
    """The pattern as a JavaScript RegExp (source, flags), or None where JavaScript would differ."""
    flags = ""
    source = pattern
    if source.startswith("(?i)"):
        source, flags = source[4:], "i"
    if "(?i:" in source:
        # Case-insensitive groups are recent in browsers: the whole pattern insensitive
        # matches a little more, which only keeps a few more lines.
        source, flags = source.replace("(?i:", "(?:"), "i"
    if "(?i" in source or _JS_UNSAFE.search(source):
        return None
    # Named groups: Python's (?P<name>...) is JavaScript's (?<name>...).
    source = source.replace("(?P<", "(?<")
    if "(?P" in source:
        return None
    # JavaScript sees "/" as nothing special in a RegExp source, but a lone "]" or "{" is
    # read as a literal only without the u flag, which is how the browser compiles them.
    return source, flags
