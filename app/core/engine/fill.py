"""Facts captured from the log, filled into a signature's fix, verify and resume texts.

A text names a fact as `{name}`. A fact that not every fingerprint captures goes inside an
optional part, `[[ ... ]]`, which is shown only when every fact in it was found: the text
reads naturally either way, and no `{name}` ever reaches a reader.
"""

from __future__ import annotations

import re

PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)\}")
OPTIONAL = re.compile(r"\[\[(.*?)\]\]", re.DOTALL)


def fill(text: str, facts: dict[str, str]) -> str:
    """The text for one diagnosis: optional parts kept only when all their facts are known."""

    def part(m: re.Match[str]) -> str:
        return str(m[1]) if all(name in facts for name in PLACEHOLDER.findall(m[1])) else ""

    kept = OPTIONAL.sub(part, text)
    return str(PLACEHOLDER.sub(lambda m: facts.get(m[1], m[0]), kept))


def template(text: str) -> str:
    """The text as the encyclopedia shows it: every optional part, with its facts as slots."""
    return str(OPTIONAL.sub(lambda m: m[1], text))


def required(text: str) -> set[str]:
    """The facts a text names outside its optional parts (they must always be captured)."""
    return set(PLACEHOLDER.findall(OPTIONAL.sub("", text)))


def named(text: str) -> set[str]:
    """Every fact a text names."""
    return set(PLACEHOLDER.findall(text))
