"""The redaction rules' false-positive guards: given a matched value (and the match), keep it as a secret?

A rule names its guard (`guard` in app/core/redaction/rules.py) when its pattern alone is too loose:
`token` spares dash-separated words, `ip` spares version numbers, `value` spares references such as
`${API_KEY}` and placeholders such as `<your key>`. Pure functions.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from app.core.redaction.rules import FILE_SUFFIXES, NOT_SECRET_VALUES, SECRET_NAME_PAIRS, SECRET_NAME_PARTS


def entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    if not value:
        return 0.0
    counts = Counter(value)
    size = len(value)
    return -sum(n / size * math.log2(n / size) for n in counts.values())


def _guard_entropy(value: str, _match: Any) -> bool:
    return entropy(value) >= 3.0 and max(Counter(value).values()) <= len(value) // 2


def guard_token(value: str, match: Any) -> bool:
    # Random tokens mix digits and letters; dash-separated words (package names) do not.
    return _guard_entropy(value, match) and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _guard_not_word(value: str, _match: Any) -> bool:
    return len(value) >= 20 or not value.isalpha()


def _guard_value(value: str, _match: Any) -> bool:
    bare = value.strip("\"'()[]{}<>")
    low = bare.lower()
    if len(bare) < 4 or low in NOT_SECRET_VALUES or len(set(bare)) == 1:
        return False
    if bare.startswith(("$", "%(", "{{", "<", "***", "xxx", "...", "os.env", "environ", "env:")):  # references
        return False
    return not low.startswith(("none", "null"))


def is_secret_env_name(name: str) -> bool:
    """HF_TOKEN yes; TOKENIZERS_PARALLELISM, MAX_TOKENS, OLDPWD no."""
    return bool(set(name.split("_")) & SECRET_NAME_PARTS) or any(p in name for p in SECRET_NAME_PAIRS)


def _guard_env(value: str, match: Any) -> bool:
    return is_secret_env_name(match.group(1)) and _guard_value(value, match)


_VERSION_WORDS = ("version", "cudnn", "driver", "cuda", "nccl", "release", "build")


def _guard_ip(value: str, match: Any) -> bool:
    if value.startswith(("127.", "0.")) or value == "255.255.255.255":
        return False
    before = match.before(24).lower()
    if before.endswith(("=", "v", "@", "-", "_", "+", "~", "^", ">", "<")):
        return False  # a version: torch==2.1.0.1, v1.2.3.4
    return not before.rstrip(" :").endswith(_VERSION_WORDS)


def _guard_email(value: str, _match: Any) -> bool:
    return value.rsplit(".", 1)[-1].lower() not in FILE_SUFFIXES


def _guard_ipv6(value: str, _match: Any) -> bool:
    return value.count(":") >= 2 and any(c.isdigit() for c in value)


GUARDS = {
    "entropy": _guard_entropy,
    "token": guard_token,
    "not_word": _guard_not_word,
    "value": _guard_value,
    "secret_env_name": _guard_env,
    "ip": _guard_ip,
    "email": _guard_email,
    "ipv6": _guard_ipv6,
}
