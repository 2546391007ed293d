"""The pure diagnosis core: read, match, rank. No web, database or environment access."""

from app.core.engine.diagnose import diagnose, diagnose_many
from app.core.knowledge.loading import Library, build_library, load_library
from app.core.models import Candidate, Diagnosis, Line

__all__ = [
    "Candidate",
    "Diagnosis",
    "Library",
    "Line",
    "build_library",
    "diagnose",
    "diagnose_many",
    "load_library",
]
