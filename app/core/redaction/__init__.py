"""Secret redaction: the rules as data and the linear-time redactor that applies them.

Its face: the redactor, its default rules and the kinds of secret it names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.core.faces import Home, lazy_names

if TYPE_CHECKING:
    from app.core.redaction.redactor import DEFAULT as DEFAULT
    from app.core.redaction.redactor import Redactor as Redactor
    from app.core.redaction.redactor import secret_types as secret_types

HOMES: dict[str, Home] = {
    "DEFAULT": "app.core.redaction.redactor",
    "Redactor": "app.core.redaction.redactor",
    "secret_types": "app.core.redaction.redactor",
}
__all__ = ["DEFAULT", "Redactor", "secret_types"]
if not TYPE_CHECKING:  # type checkers read the imports above, and so find a misspelt name
    __getattr__ = lazy_names(__name__, HOMES)
