"""The secret-redaction rules, as data: one entry per kind of secret, in the order they run.

The entries live in app/core/redaction/token_shapes.py and vendor_shapes.py (secrets known by their
shape) and app/core/redaction/by_context.py (secrets known by what surrounds them); this module puts
them in order and holds the word lists the redactor's guards use.

Each rule has a `type` (the placeholder says `[REDACTED:<type>]`), an RE2 pattern (no
lookaround, no backreferences, every repeat followed by a literal bounded), the group
that is replaced (0 = the whole match), an optional `guard` (a named false-positive check
in app/core/redaction/redactor.py, for patterns that are too loose alone), `hints` (lower-case
substrings one of which a line must contain for the rule to run: a cheap prefilter), the
`group` of rules it belongs to (`network` rules can be switched off), and test strings:
`positive` lines must be redacted by this rule, `negative` lines must come out unchanged
(tests/core/test_redact.py checks both). Derivations (gitleaks, trufflehog, detect-secrets,
Sentry Relay) are listed in docs of the rule where the shape is not obvious.

Order matters: specific token shapes come first, so `HF_TOKEN=hf_...` is typed as a
Hugging Face token rather than a generic assignment; later rules never re-redact a
placeholder.
"""

from __future__ import annotations

from typing import Any

from app.core.redaction.by_context import BY_CONTEXT
from app.core.redaction.token_shapes import TOKEN_SHAPES
from app.core.redaction.vendor_shapes import VENDOR_SHAPES

RULES: list[dict[str, Any]] = [*TOKEN_SHAPES, *VENDOR_SHAPES, *BY_CONTEXT]

# Environment names that hold secrets (HF_TOKEN yes; TOKENIZERS_PARALLELISM, MAX_TOKENS no).
SECRET_NAME_PARTS = frozenset({"SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "APIKEY"})
SECRET_NAME_PAIRS = (
    "API_KEY",
    "ACCESS_KEY",
    "PRIVATE_KEY",
    "SECRET_KEY",
    "AUTH_KEY",
    "KAGGLE_KEY",
    "_PWD",
)  # bare PWD = cwd

# Last labels of `name@file.ext` strings that are files, not mail domains.
FILE_SUFFIXES = frozenset(
    {"pt", "pth", "bin", "ckpt", "json", "py", "yaml", "yml", "txt", "log", "h5", "onnx", "gguf", "safetensors"}
    | {"npz", "npy", "tar", "gz", "zip", "csv", "parquet", "arrow", "jpg", "png", "so", "whl", "pkl", "cu", "cpp", "h"}
)

# Values of `password=` style assignments that are not secrets.
NOT_SECRET_VALUES = frozenset(
    {"none", "null", "nil", "true", "false", "undefined", "required", "optional", "empty", "unset", "default", "str"}
)
