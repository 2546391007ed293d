"""Work on the library itself: its lint, why a signature fired or not, unknown failures as
templates, and examples cut from real logs. Above the engine: each runs the diagnosis it checks.

Its face: lint and its checks (`lint_library` is the module's `lint()`), a signature explained
(`explain_signature` is the module's `explain()`), unknown lines and drafts from them, and
examples cut from a log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.core.faces import Home, lazy_names

if TYPE_CHECKING:
    from app.core.authoring.examples import append_example as append_example
    from app.core.authoring.examples import cut_excerpt as cut_excerpt
    from app.core.authoring.examples import parse_range as parse_range
    from app.core.authoring.explain import explain as explain_signature
    from app.core.authoring.explain import render_explanation as render_explanation
    from app.core.authoring.lint import CHECKS as CHECKS
    from app.core.authoring.lint import FILE_CHECKS as FILE_CHECKS
    from app.core.authoring.lint import check_examples as check_examples
    from app.core.authoring.lint import lint as lint_library
    from app.core.authoring.lint import load_taxonomy as load_taxonomy
    from app.core.authoring.unknowns import draft_signature as draft_signature
    from app.core.authoring.unknowns import recognised_by as recognised_by
    from app.core.authoring.unknowns import similarity as similarity
    from app.core.authoring.unknowns import unknown_lines as unknown_lines

HOMES: dict[str, Home] = {
    "append_example": "app.core.authoring.examples",
    "cut_excerpt": "app.core.authoring.examples",
    "parse_range": "app.core.authoring.examples",
    "explain_signature": ("app.core.authoring.explain", "explain"),
    "render_explanation": "app.core.authoring.explain",
    "CHECKS": "app.core.authoring.lint",
    "FILE_CHECKS": "app.core.authoring.lint",
    "check_examples": "app.core.authoring.lint",
    "lint_library": ("app.core.authoring.lint", "lint"),
    "load_taxonomy": "app.core.authoring.lint",
    "draft_signature": "app.core.authoring.unknowns",
    "recognised_by": "app.core.authoring.unknowns",
    "similarity": "app.core.authoring.unknowns",
    "unknown_lines": "app.core.authoring.unknowns",
}
__all__ = [
    "CHECKS",
    "FILE_CHECKS",
    "append_example",
    "check_examples",
    "cut_excerpt",
    "draft_signature",
    "explain_signature",
    "lint_library",
    "load_taxonomy",
    "parse_range",
    "recognised_by",
    "render_explanation",
    "similarity",
    "unknown_lines",
]
if not TYPE_CHECKING:  # type checkers read the imports above, and so find a misspelt name
    __getattr__ = lazy_names(__name__, HOMES)
