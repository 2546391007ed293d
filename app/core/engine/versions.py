"""Versions found in a log, read and compared as PEP 440 versions (`packaging`).

Logs print versions with local parts (`2.4.0+cu121`), pre-releases of nightly builds and
containers (`2.6.0a0+ecf3bae40a`, `2.13.0.dev20260516+cu130`) and short forms (`3.10`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# `packaging` is imported when a log prints a version: most diagnoses never compare one,
# and its import (its grammar compiled) is a noticeable part of a command's start-up.
if TYPE_CHECKING:
    from packaging.version import Version


def parse(version: str) -> Version | None:
    """A version as PEP 440 reads it, or None when it is not one."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version)
    except InvalidVersion:
        return None


def spec_problem(spec: str) -> str | None:
    """Why a range like ">=2.1,<2.6" is malformed, or None."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        parsed = SpecifierSet(spec)
    except InvalidSpecifier as exc:
        return f"cannot read version range {spec!r}: {exc}"
    if not len(parsed):
        return f"version range {spec!r} is empty"
    return None


def satisfies(version: str, spec: str) -> bool | None:
    """Whether a version lies in a range (all clauses must hold); None when either cannot be read.

    Pre-releases count as their release (a `2.6.0a0` container build behaves as 2.6) and local
    parts are ignored, as PEP 440 says for range comparisons.
    """
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import Version

    parsed = parse(version)
    if parsed is None:
        return None
    try:
        specifiers = SpecifierSet(spec)
    except InvalidSpecifier:
        return None  # the lint rejects malformed ranges; never veto on one
    return specifiers.contains(Version(parsed.base_version), prereleases=True)


def same_version(a: str, b: str) -> bool:
    """Whether two printed versions can be the same build: equal where both are precise.

    `3.10` and `3.10.12` agree, `2.1.2` and `2.1.2+cu121` agree (one leaves out the local
    part), `2.1.2+cu118` and `2.1.2+cu121` do not.
    """
    va, vb = parse(a), parse(b)
    if va is None or vb is None:
        return a == b
    width = min(len(va.release), len(vb.release))
    if va.release[:width] != vb.release[:width] or va.pre != vb.pre or va.dev != vb.dev:
        return False
    return va.local is None or vb.local is None or va.local == vb.local
