"""The diagnosis engine: read a log, match every pattern in one pass, rank the candidates.

Its face, besides `diagnose` and `diagnose_many` (from `app.core`): filling a signature's
template, a fix step's condition in words, the live scan of a growing log, line prefixes, and how
a log is read and checked for text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.core.faces import Home, lazy_names

if TYPE_CHECKING:
    from app.core.engine.advice import condition_words as condition_words
    from app.core.engine.diagnose import indexed_text as indexed_text
    from app.core.engine.fill import template as template
    from app.core.engine.live import LiveJob as LiveJob
    from app.core.engine.live import LiveScan as LiveScan
    from app.core.engine.prefixes import parse_prefixes as parse_prefixes
    from app.core.engine.reader import BLOCK as BLOCK
    from app.core.engine.reader import strip_ansi as strip_ansi
    from app.core.engine.sniff import GZIP_MAGIC as GZIP_MAGIC
    from app.core.engine.sniff import SNIFF as SNIFF
    from app.core.engine.sniff import check_text as check_text

HOMES: dict[str, Home] = {
    "condition_words": "app.core.engine.advice",
    "indexed_text": "app.core.engine.diagnose",
    "template": "app.core.engine.fill",
    "LiveJob": "app.core.engine.live",
    "LiveScan": "app.core.engine.live",
    "parse_prefixes": "app.core.engine.prefixes",
    "BLOCK": "app.core.engine.reader",
    "strip_ansi": "app.core.engine.reader",
    "GZIP_MAGIC": "app.core.engine.sniff",
    "SNIFF": "app.core.engine.sniff",
    "check_text": "app.core.engine.sniff",
}
__all__ = [
    "BLOCK",
    "GZIP_MAGIC",
    "LiveJob",
    "LiveScan",
    "SNIFF",
    "check_text",
    "condition_words",
    "parse_prefixes",
    "strip_ansi",
    "indexed_text",
    "template",
]
if not TYPE_CHECKING:  # type checkers read the imports above, and so find a misspelt name
    __getattr__ = lazy_names(__name__, HOMES)
