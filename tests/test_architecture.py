"""The layering rule: the core knows nothing of the web, the store or the environment."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app"
FORBIDDEN = (
    "fastapi",
    "starlette",
    "sqlalchemy",
    "alembic",
    "uvicorn",
    "app.web",
    "app.store",
    "app.quota",
    "app.config",
    "os",
)


def imported_modules(tree: ast.AST) -> Iterator[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def test_core_has_no_io_or_web_imports() -> None:
    offenders = []
    for path in sorted((APP / "core").rglob("*.py")):
        for name in imported_modules(ast.parse(path.read_text())):
            if name == FORBIDDEN or any(name == f or name.startswith(f + ".") for f in FORBIDDEN):
                offenders.append(f"{path.relative_to(APP)} imports {name}")
    assert offenders == []


def test_core_reads_no_environment() -> None:
    for path in sorted((APP / "core").rglob("*.py")):
        text = path.read_text()
        assert "os.environ" not in text and "getenv" not in text, path
