"""Evidence selection: the rules a client uses to pick the evidence, and the excerpt it sends.

Its face: the excerpt a client sends and its largest size, the rules it selects by, and the
selection itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.core.faces import Home, lazy_names

if TYPE_CHECKING:
    from app.core.selection.excerpt import MAX_TEXT as MAX_TEXT
    from app.core.selection.excerpt import Excerpt as Excerpt
    from app.core.selection.rules import SPEC_VERSION as SPEC_VERSION
    from app.core.selection.rules import prefilter_spec as prefilter_spec
    from app.core.selection.selector import select_evidence as select_evidence

HOMES: dict[str, Home] = {
    "Excerpt": "app.core.selection.excerpt",
    "MAX_TEXT": "app.core.selection.excerpt",
    "SPEC_VERSION": "app.core.selection.rules",
    "prefilter_spec": "app.core.selection.rules",
    "select_evidence": "app.core.selection.selector",
}
__all__ = ["Excerpt", "MAX_TEXT", "SPEC_VERSION", "prefilter_spec", "select_evidence"]
if not TYPE_CHECKING:  # type checkers read the imports above, and so find a misspelt name
    __getattr__ = lazy_names(__name__, HOMES)
