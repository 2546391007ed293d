"""The knowledge: signature files, their schema, loading, linting, authoring and measuring.

Its face, besides the `Library` and its loading (from `app.core`): the library's files, a
signature's schema and parsing, and how the library's diagnoses are scored and measured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.core.faces import Home, lazy_names

if TYPE_CHECKING:
    from app.core.knowledge.loading import MEASURED_FILE as MEASURED_FILE
    from app.core.knowledge.loading import NEIGHBOURS_FILE as NEIGHBOURS_FILE
    from app.core.knowledge.loading import TAXONOMY_FILE as TAXONOMY_FILE
    from app.core.knowledge.neighbours import LazyNeighbours as LazyNeighbours
    from app.core.knowledge.neighbours import NeighbourIndex as NeighbourIndex
    from app.core.knowledge.parsing import parse_signature as parse_signature
    from app.core.knowledge.schema import Example as Example
    from app.core.knowledge.schema import Pattern as Pattern
    from app.core.knowledge.schema import Signature as Signature
    from app.core.knowledge.schema import Window as PatternWindow
    from app.core.knowledge.scoring import (
        ESTABLISHED as ESTABLISHED,
    )
    from app.core.knowledge.scoring import (
        FIGURES as FIGURES,
    )
    from app.core.knowledge.scoring import (
        SAMPLED as SAMPLED,
    )
    from app.core.knowledge.scoring import (
        SCOPES as SCOPES,
    )
    from app.core.knowledge.scoring import (
        Outcome as Outcome,
    )
    from app.core.knowledge.scoring import (
        Report as Report,
    )
    from app.core.knowledge.scoring import (
        score as score,
    )
    from app.core.knowledge.sights import Ratio as Ratio
    from app.core.knowledge.sights import Sight as Sight
    from app.core.knowledge.sights import SightGroup as SightGroup

HOMES: dict[str, Home] = {
    "MEASURED_FILE": "app.core.knowledge.loading",
    "NEIGHBOURS_FILE": "app.core.knowledge.loading",
    "TAXONOMY_FILE": "app.core.knowledge.loading",
    "LazyNeighbours": "app.core.knowledge.neighbours",
    "NeighbourIndex": "app.core.knowledge.neighbours",
    "parse_signature": "app.core.knowledge.parsing",
    "Example": "app.core.knowledge.schema",
    "Pattern": "app.core.knowledge.schema",
    "Signature": "app.core.knowledge.schema",
    "PatternWindow": ("app.core.knowledge.schema", "Window"),
    "ESTABLISHED": "app.core.knowledge.scoring",
    "FIGURES": "app.core.knowledge.scoring",
    "Outcome": "app.core.knowledge.scoring",
    "Report": "app.core.knowledge.scoring",
    "SAMPLED": "app.core.knowledge.scoring",
    "SCOPES": "app.core.knowledge.scoring",
    "score": "app.core.knowledge.scoring",
    "Ratio": "app.core.knowledge.sights",
    "Sight": "app.core.knowledge.sights",
    "SightGroup": "app.core.knowledge.sights",
}
__all__ = [
    "ESTABLISHED",
    "Example",
    "FIGURES",
    "LazyNeighbours",
    "MEASURED_FILE",
    "NEIGHBOURS_FILE",
    "NeighbourIndex",
    "Outcome",
    "Pattern",
    "PatternWindow",
    "Ratio",
    "Report",
    "SAMPLED",
    "SCOPES",
    "Sight",
    "SightGroup",
    "Signature",
    "TAXONOMY_FILE",
    "parse_signature",
    "score",
]
if not TYPE_CHECKING:  # type checkers read the imports above, and so find a misspelt name
    __getattr__ = lazy_names(__name__, HOMES)
