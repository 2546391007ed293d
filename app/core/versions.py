"""Compare versions found in a log with a signature's `applies_to` ranges."""

from __future__ import annotations

import regex

_CLAUSE = regex.compile(r"^\s*(>=|<=|==|!=|>|<)\s*(\d+(?:\.\d+)*)\s*$")


def _tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("."):
        digits = regex.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits[0]))
    return tuple(parts)


def spec_problem(spec: str) -> str | None:
    """Why a range like ">=2.1,<2.6" is malformed, or None."""
    for clause in spec.split(","):
        if not _CLAUSE.match(clause):
            return f"cannot read version range clause {clause.strip()!r}"
    return None


def satisfies(version: str, spec: str) -> bool:
    """Whether a version lies in a comma-separated range (all clauses must hold)."""
    have = _tuple(version)
    for clause in spec.split(","):
        m = _CLAUSE.match(clause)
        if m is None:
            return True  # the lint rejects malformed ranges; never veto on one
        op, want = m[1], _tuple(m[2])
        width = max(len(have), len(want))
        h, w = have + (0,) * (width - len(have)), want + (0,) * (width - len(want))
        ok = {">=": h >= w, "<=": h <= w, "==": h == w, "!=": h != w, ">": h > w, "<": h < w}[op]
        if not ok:
            return False
    return True
