"""The layering rules of the design, each a function of a source root so that it can be shown
to fire on a planted violation:

* the core knows nothing of the web, the store or the environment, and does no file I/O
  outside the modules that read logs and load the library;
* the store and the quota never import the web layer;
* the CLI uses only the web layer's public entry points, and its command modules never import
  the `tracelore` group (`app.cli`), which imports them;
* the outer layers use the core only through its public surface: the `app.core` facade, the
  faces of its parts (`app.core.engine`, `app.core.knowledge`, ...: each package names what it
  shows in `__all__`) and its vocabulary modules (`models`, `times`, `stored`, `keep`), never a
  module deep inside a part (`app.core.engine.scanner`);
* the web layer never reads a log itself: what is kept of a log is the core's work
  (`app.core.keep`), so a request's walk stays in the core once it gets there;
* no router module of the web layer imports another: what two of them share (the diagnosis
  request's walk, the allowance, the URLs of a diagnosis) lives in a module of its own;
* the pages' templates call nothing of the core: no filter or global of their Jinja environment
  is the core's or lives in a module that imports it (a page's view model is worked out first);
* every error class lives in an errors module (`app/errors.py`, `app/cli/errors.py`);
* no module of the application is longer than MAX_MODULE_LINES lines: one that grows past
  it is split along what its parts hold.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

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
WEB = ("app.web", "fastapi", "starlette")
# What the CLI may take from the web layer: the app factory, the static site and its templates.
WEB_ENTRY_POINTS = {
    "app.web.app": {"create_app"},
    "app.web.site": {"build_site", "check_output"},
    "app.web.templating": {"make_templates"},
    # Sets the metrics directory before the web app (and prometheus_client) is imported.
    "app.web.metrics_dir": {"metrics_directory"},
    "app.web.state": {"state_of"},  # the served app's library and engine, typed
}
# The core's log reading and scanning: the web reaches it only through app.core.keep (and diagnose()).
LOG_READING = (
    "app.core.engine.reader",
    "app.core.engine.matcher",
    "app.core.engine.scanner",
    "app.core.engine.locate",
    "app.core.engine.sniff",
    "app.core.engine.job",
    "app.core.selection.excerpt",
)
# The core modules that touch files: the log reader, and the library's loading (with its parse
# cache) and linting.
CORE_FILE_IO = {"engine/reader.py", "knowledge/loading.py", "knowledge/parse_cache.py", "authoring/lint.py"}
# The longest a module of app/ may be, in lines; and the modules allowed past it, each with why.
MAX_MODULE_LINES = 400
LONG_MODULES: dict[str, str] = {}
# Calls that read, write or walk files (builtin open, pathlib, os).
FILE_CALLS = {"open", "read_text", "read_bytes", "walk", "glob", "rglob", "iterdir", "listdir", "scandir"}


def imports(tree: ast.AST) -> Iterator[tuple[str, list[str]]]:
    """Each import as (module, names taken from it); a plain `import x` takes no names."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module, [alias.name for alias in node.names]


def _within(name: str, packages: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _modules(root: Path, pattern: str) -> Iterator[tuple[Path, ast.AST]]:
    for path in sorted(root.glob(pattern)):
        yield path, ast.parse(path.read_text(), filename=str(path))


def import_offenders(root: Path, pattern: str, forbidden: Iterable[str]) -> list[str]:
    """Modules under `root` matching `pattern` that import one of the forbidden packages."""
    forbidden = tuple(forbidden)
    return [
        f"{path.relative_to(root)} imports {name}"
        for path, tree in _modules(root, pattern)
        for name, _ in imports(tree)
        if _within(name, forbidden)
    ]


def environment_offenders(root: Path) -> list[str]:
    """Core modules that read the environment (settings come in as arguments)."""
    return [
        str(path.relative_to(root))
        for path in sorted((root / "core").rglob("*.py"))
        if "os.environ" in (text := path.read_text()) or "getenv" in text
    ]


def cli_web_offenders(root: Path) -> list[str]:
    """CLI modules that reach past the web layer's public entry points."""
    offenders = []
    for path, tree in _modules(root, "cli/**/*.py"):
        for module, names in imports(tree):
            if not _within(module, ("app.web",)):
                continue
            allowed = WEB_ENTRY_POINTS.get(module, set())
            taken = set(names) - allowed if names else {"(the module)"}
            offenders += [f"{path.relative_to(root)} imports {module}.{name}" for name in sorted(taken)]
    return offenders


# Modules of app/cli run as programs (`python -m`), which the group never imports: no cycle.
CLI_PROGRAMS = frozenset({"reference.py"})  # writes the command reference from the group itself


def cli_cycle_offenders(root: Path) -> list[str]:
    """Command modules that take something from the `tracelore` group's own module (`app/cli/__init__.py`):
    it imports them, so that is a cycle. Its sibling modules may be named through it."""
    siblings = {p.stem for p in (root / "cli").glob("*.py")}
    offenders = []
    for path, tree in _modules(root, "cli/**/*.py"):
        if path.name == "__init__.py" or path.name in CLI_PROGRAMS:
            continue
        for module, names in imports(tree):
            if module != "app.cli":
                continue
            taken = [f"app.cli.{n}" for n in names if n not in siblings] if names else ["app.cli"]
            offenders += [f"{path.relative_to(root)} imports {name}" for name in taken]
    return offenders


def web_log_offenders(root: Path) -> list[str]:
    """Web modules that read or scan a log themselves, or check its bytes, instead of leaving it to the core.

    The excerpt module's `Excerpt` and `MAX_TEXT` (what a client may send) are the one exception.
    """
    offenders = []
    for path, tree in _modules(root, "web/**/*.py"):
        for module, names in through_faces(root, imports(tree)):
            if _within(module, LOG_READING) and not (
                module == "app.core.selection.excerpt" and set(names) <= EXCERPT_SHAPE
            ):
                offenders.append(f"{path.relative_to(root)} imports {module}")
    return offenders


EXCERPT_SHAPE = {"Excerpt", "MAX_TEXT"}


def through_faces(root: Path, found: Iterable[tuple[str, list[str]]]) -> Iterator[tuple[str, list[str]]]:
    """Imports as they reach the core's modules: a name taken from a face, from the module it lives in."""
    for module, names in found:
        homes = face_homes(root, module) if _within(module, ("app.core",)) else {}
        if not names or set(names) - set(homes):
            yield module, [n for n in names if n not in homes]
        yield from ((homes[n][0], [homes[n][1]]) for n in names if n in homes)


def _module_name(root: Path, path: Path) -> str:
    """The dotted name of a module under `root` (the `app` package)."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(("app", *(parts[:-1] if parts[-1] == "__init__" else parts)))


def _makes_a_router(tree: ast.Module) -> bool:
    """The module makes an `APIRouter(...)` at its top level."""
    for node in tree.body:
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if isinstance(value, ast.Call):
            func = value.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name == "APIRouter":
                return True
    return False


def router_offenders(root: Path) -> list[str]:
    """Router modules of the web layer (each makes an `APIRouter`) that import another router module."""
    trees = {_module_name(root, path): tree for path, tree in _modules(root, "web/**/*.py")}
    routers = {name for name, tree in trees.items() if isinstance(tree, ast.Module) and _makes_a_router(tree)}
    offenders = []
    for name in sorted(routers):
        for module, names in imports(trees[name]):
            taken = {module} | {f"{module}.{n}" for n in names}  # `from app.web import api` takes a module
            offenders += [f"{name} imports {other}" for other in sorted(taken & routers) if other != name]
    return offenders


def core_file_io_offenders(root: Path) -> list[str]:
    """Core modules outside the allow-list that open, read, write or walk files."""
    offenders = []
    for path, tree in _modules(root, "core/**/*.py"):
        if path.relative_to(root / "core").as_posix() in CORE_FILE_IO:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in FILE_CALLS or name.startswith("write_"):
                offenders.append(f"{path.relative_to(root)}:{node.lineno} calls {name}()")
    return offenders


def test_core_has_no_io_or_web_imports() -> None:
    assert import_offenders(APP, "core/**/*.py", FORBIDDEN) == []


def test_core_reads_no_environment() -> None:
    assert environment_offenders(APP) == []


def test_core_does_file_io_only_in_its_reader_and_library_loading() -> None:
    assert core_file_io_offenders(APP) == []


@pytest.mark.parametrize("package", ["store", "quota"])
def test_store_and_quota_never_import_the_web(package: str) -> None:
    assert import_offenders(APP, f"{package}/**/*.py", WEB) == []


def test_the_web_never_reads_a_log_itself() -> None:
    assert web_log_offenders(APP) == []


def test_no_router_imports_another_router() -> None:
    assert router_offenders(APP) == []


def runtime_imports(tree: ast.AST) -> Iterator[tuple[str, list[str]]]:
    """The imports a module makes when it runs: those under `if TYPE_CHECKING:` aside."""
    checking = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
    ]
    only_typing = {id(n) for block in checking for stmt in block.body for n in ast.walk(stmt)}
    return ((m, names) for m, names in imports(tree) if not _imported_in(tree, m, names, only_typing))


def _imported_in(tree: ast.AST, module: str, names: list[str], skipped: set[int]) -> bool:
    """Every import statement of `module` taking `names` is among the skipped nodes."""
    statements = [
        n
        for n in ast.walk(tree)
        if (isinstance(n, ast.ImportFrom) and n.module == module and [a.name for a in n.names] == names)
        or (isinstance(n, ast.Import) and not names and module in [a.name for a in n.names])
    ]
    return all(id(n) in skipped for n in statements)


def template_core_offenders(callables: dict[str, object], root: Path) -> list[str]:
    """Filters and globals of a Jinja environment that are the core's, or live in a module that imports it."""
    offenders = []
    for name, value in sorted(callables.items()):
        module = getattr(value, "__module__", None) or ""
        if not callable(value) or not _within(module, ("app",)):
            continue  # Jinja's own filters, and values (a tuple of samples) the templates only read
        if _within(module, ("app.core",)):
            offenders.append(f"{name} is {module}.{getattr(value, '__name__', '?')}")
            continue
        parts = module.split(".")[1:]
        path = root.joinpath(*parts).with_suffix(".py")
        path = path if path.is_file() else root.joinpath(*parts, "__init__.py")
        offenders += [
            f"{name} ({module}) imports {m}"
            for m, _ in runtime_imports(ast.parse(path.read_text()))
            if _within(m, ("app.core",))
        ]
    return offenders


def test_the_templates_call_nothing_of_the_core() -> None:
    from app.web.identity import csrf_token
    from app.web.templating import make_templates

    env = make_templates().env
    found = {**env.filters, **env.globals, "csrf_token": csrf_token}  # the app adds csrf_token
    assert template_core_offenders(found, APP) == []


def test_the_template_rule_fires(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "web/fine.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from app.core.models import Evidence\n",
            "web/calls.py": "from app.core.rendering import merged_spans\nimport app.core.times\n",
        },
    )

    def filter_in(module: str) -> object:
        def f(text: str) -> str:
            return text

        f.__module__ = module
        return f

    from app.core.engine.fill import template

    found = {
        "visible": filter_in("app.web.fine"),
        "marked": filter_in("app.web.calls"),
        "template": template,
        "truncate": filter_in("jinja2.filters"),
        "samples": ("a", "b"),
    }
    assert template_core_offenders(found, root) == [
        "marked (app.web.calls) imports app.core.rendering",
        "marked (app.web.calls) imports app.core.times",
        "template is app.core.engine.fill.template",
    ]


ERROR_MODULES = ("errors.py", "cli/errors.py")  # where every error class of the application lives


def _base_name(node: ast.expr) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _error_classes(tree: ast.AST, known: set[str]) -> Iterator[ast.ClassDef]:
    """Classes deriving from an exception: a base named `...Error`, `...Exception` or one of `known`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = {_base_name(b) for b in node.bases}
            if any(b.endswith(("Error", "Exception")) or b in known for b in bases):
                yield node


def error_class_offenders(root: Path) -> list[str]:
    """Error classes defined outside the errors modules."""
    known: set[str] = set()
    for name in ERROR_MODULES:  # the errors' own names: `class NotOwner(TraceloreError)`, then `(NotOwner)`
        if (root / name).is_file():
            tree = ast.parse((root / name).read_text())
            known |= {c.name for c in _error_classes(tree, known)}
    return [
        f"{path.relative_to(root).as_posix()}:{node.lineno} defines {node.name}"
        for path, tree in _modules(root, "**/*.py")
        if path.relative_to(root).as_posix() not in ERROR_MODULES
        for node in _error_classes(tree, known)
    ]


def test_every_error_class_is_in_an_errors_module() -> None:
    assert error_class_offenders(APP) == []


def test_cli_uses_only_the_web_entry_points() -> None:
    assert cli_web_offenders(APP) == []


def test_cli_commands_never_import_their_group() -> None:
    assert cli_cycle_offenders(APP) == []


# The core's order, bottom first: a part imports only parts below it, so none import each
# other. Times and labels, then the models; the patterns' rewrites under the library and the
# redaction that both scan with; the library below the engine that runs it; selection and
# rendering over the engine's results; the work on the library itself (lint, explain) on top.
CORE_ORDER: tuple[frozenset[str], ...] = tuple(
    frozenset(level.split())
    for level in (
        "times env_labels faces",
        "models",
        "stored patterns",
        "redaction",
        "knowledge",
        "engine",
        "selection",
        "rendering keep",
        "authoring",
        "__init__",
    )
)


def _core_part(path: Path, core: Path) -> str:
    first = path.relative_to(core).parts[0]
    return first.removesuffix(".py")


def core_order_offenders(root: Path, order: tuple[frozenset[str], ...] = CORE_ORDER) -> list[str]:
    """Imports inside app/core that go up or sideways in its order (or from a part it does not place)."""
    core = root / "core"
    level = {part: i for i, parts in enumerate(order) for part in parts}
    found = []
    for path, tree in _modules(core, "**/*.py"):
        part = _core_part(path, core)
        for name, _ in imports(tree):
            if not name.startswith("app.core.") or name.split(".")[2] == part:
                continue
            target = name.split(".")[2]
            if part not in level or target not in level or level[target] >= level[part]:
                found.append(f"{path.relative_to(root)} imports {name}")
    return found


# The core's public surface: what the layers outside app/core may import from it. The facade;
# the faces of the parts, each a package naming in `__all__` what it shows (and, for type
# checkers, importing it under TYPE_CHECKING; `app.core.faces` imports each when first asked
# for); and the vocabulary the layers share with the core, modules of a few names each.
CORE_FACADE = "app.core"
CORE_PART_FACES = frozenset(
    f"app.core.{part}" for part in ("engine", "knowledge", "redaction", "rendering", "selection", "authoring")
)
CORE_MODULE_FACES = frozenset({"app.core.models", "app.core.times", "app.core.stored", "app.core.keep"})
CORE_FACES = frozenset({CORE_FACADE}) | CORE_PART_FACES | CORE_MODULE_FACES


def _face_file(root: Path, face: str) -> Path:
    return root.joinpath(*face.split(".")[1:], "__init__.py")


def face_names(root: Path, face: str) -> set[str] | None:
    """The names a package face shows (its literal `__all__`), or None for a module face."""
    path = _face_file(root, face)
    if not path.is_file():
        return None
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return {e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def face_homes(root: Path, face: str) -> dict[str, tuple[str, str]]:
    """What a package face's TYPE_CHECKING imports say of each name: (its module, its name there)."""
    path = _face_file(root, face)
    homes: dict[str, tuple[str, str]] = {}
    if not path.is_file():
        return homes
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imported in (n for n in node.body if isinstance(n, ast.ImportFrom) and n.module):
                homes |= {a.asname or a.name: (str(imported.module), a.name) for a in imported.names}
    return homes


def core_surface_offenders(root: Path, faces: frozenset[str] = CORE_FACES) -> list[str]:
    """Modules outside app/core that import a core module that is no face, or a name a face does not show."""
    offenders = []
    for path, tree in _modules(root, "**/*.py"):
        where = path.relative_to(root)
        if where.parts[0] == "core":
            continue
        for module, names in imports(tree):
            if not _within(module, ("app.core",)):
                continue
            if module not in faces:
                offenders.append(f"{where.as_posix()} imports {module}")
                continue
            shown = face_names(root, module)
            for name in names:
                hidden = name.startswith("_") or (shown is not None and name not in shown)
                if hidden and f"{module}.{name}" not in faces:
                    offenders.append(f"{where.as_posix()} imports {module}.{name}")
    return offenders


def test_the_outer_layers_use_the_core_through_its_faces() -> None:
    assert core_surface_offenders(APP) == []


@pytest.mark.parametrize("face", sorted(CORE_PART_FACES))
def test_every_face_shows_what_it_imports_and_nothing_else(face: str) -> None:
    import importlib

    module = importlib.import_module(face)
    homes = face_homes(APP, face)
    assert face_names(APP, face) == set(homes) == set(module.HOMES), face
    for name, (home, attribute) in homes.items():
        assert module.HOMES[name] in (home, (home, attribute)), name
        assert getattr(module, name) is getattr(importlib.import_module(home), attribute), name
    # A name that is also one of the package's modules would be that module once it is imported.
    package = _face_file(APP, face).parent
    assert not {p.stem for p in package.glob("*.py")} & set(homes), face


def test_the_core_surface_rule_fires(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "core/__init__.py": 'from app.core.models import Diagnosis\n__all__ = ["Diagnosis", "diagnose"]\n',
            "core/engine/__init__.py": '__all__ = ["LiveJob"]\n',
            "core/engine/live.py": "from app.core.engine.scanner import FileScanner\n",  # inside the core: any module
            "core/models.py": "class Window: ...\n",
            "web/fine.py": (
                "from app.core import Diagnosis, diagnose, engine\n"
                "from app.core.engine import LiveJob\n"
                "from app.core.models import Window\n"
            ),
            "web/deep.py": "from app.core.engine.live import LiveJob\n",
            "cli/hidden.py": "from app.core.engine import LiveJob, FileScanner\nfrom app.core.models import _Shape\n",
            "lsp/server.py": "def scan():\n    import app.core.engine.scanner\n",
            "store/facade.py": "from app.core import load_everything\n",
            "watch/follow.py": "from app.core.patterns.rewrites import open_repeats\n",
        },
    )
    faces = frozenset({"app.core", "app.core.engine", "app.core.models"})
    assert core_surface_offenders(root, faces) == [
        "cli/hidden.py imports app.core.engine.FileScanner",
        "cli/hidden.py imports app.core.models._Shape",
        "lsp/server.py imports app.core.engine.scanner",
        "store/facade.py imports app.core.load_everything",
        "watch/follow.py imports app.core.patterns.rewrites",
        "web/deep.py imports app.core.engine.live",
    ]


def test_the_core_keeps_its_order() -> None:
    assert core_order_offenders(APP) == []


def test_every_part_of_the_core_has_its_place() -> None:
    parts = {_core_part(p, APP / "core") for p in (APP / "core").iterdir() if p.suffix == ".py" or p.is_dir()}
    placed = set().union(*CORE_ORDER)
    assert parts - {"__pycache__"} == placed


# Each rule fires on a planted violation (and lets the same tree's allowed code pass).


def _plant(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_the_core_import_rule_fires(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "core/fine.py": "import regex\nfrom app.core.models import Diagnosis\n",
            "core/deep/bad.py": "from sqlalchemy.orm import Session\n",
            "core/env.py": "import os\n",
        },
    )
    assert import_offenders(root, "core/**/*.py", FORBIDDEN) == [
        "core/deep/bad.py imports sqlalchemy.orm",
        "core/env.py imports os",
    ]


def test_the_environment_rule_fires(tmp_path: Path) -> None:
    root = _plant(tmp_path, {"core/fine.py": "x = 1\n", "core/bad.py": "from os import getenv\n"})
    assert environment_offenders(root) == ["core/bad.py"]


def test_the_core_file_io_rule_fires(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "core/engine/reader.py": "def read(p):\n    return open(p, 'rb')\n",
            "core/knowledge/loading.py": "def load(d):\n    return [p.read_text() for p in d.rglob('*.yaml')]\n",
            "core/engine/matcher.py": "def match(data):\n    return data.count(b'\\n')\n",
            "core/opens.py": "def f(p):\n    with open(p) as f:\n        return f.read()\n",
            "core/paths.py": "def f(p):\n    p.write_bytes(b'')\n    return p.read_bytes(), list(p.iterdir())\n",
            "core/sub/walks.py": "import os\n\ndef f(d):\n    return os.walk(d)\n",
        },
    )
    assert core_file_io_offenders(root) == [
        "core/opens.py:2 calls open()",
        "core/paths.py:2 calls write_bytes()",
        "core/paths.py:3 calls read_bytes()",
        "core/paths.py:3 calls iterdir()",
        "core/sub/walks.py:4 calls walk()",
    ]


@pytest.mark.parametrize("package", ["store", "quota"])
def test_the_store_and_quota_rule_fires(tmp_path: Path, package: str) -> None:
    root = _plant(
        tmp_path,
        {
            f"{package}/fine.py": "from sqlalchemy.orm import Session\nfrom app.core.models import Diagnosis\n",
            f"{package}/web.py": "from app.web.deps import SessionDep\n",
            f"{package}/http.py": "import starlette.requests\nfrom fastapi import Request\n",
        },
    )
    assert sorted(import_offenders(root, f"{package}/**/*.py", WEB)) == [
        f"{package}/http.py imports fastapi",
        f"{package}/http.py imports starlette.requests",
        f"{package}/web.py imports app.web.deps",
    ]


def test_the_cli_rule_fires(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "cli/serve.py": (
                "def serve():\n"
                "    from app.web.app import create_app\n"
                "    from app.web.site import build_site, check_output\n"
                "    from app.web.retention import purge_once\n"
            ),
            "cli/extra.py": "import app.web.quota\nfrom app.web import retention\nfrom app.web.app import _lifespan\n",
            "cli/sub/commands.py": "from app.web.templating import make_templates, human_date\n",
        },
    )
    assert cli_web_offenders(root) == [
        "cli/extra.py imports app.web.quota.(the module)",
        "cli/extra.py imports app.web.retention",
        "cli/extra.py imports app.web.app._lifespan",
        "cli/serve.py imports app.web.retention.purge_once",
        "cli/sub/commands.py imports app.web.templating.human_date",
    ]


def test_the_web_log_rule_fires(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "web/fine.py": "from app.core.keep import keep\nfrom app.core.selection.excerpt import MAX_TEXT, Excerpt\n",
            "web/windows.py": "from app.core.engine.reader import decode, iter_chunks\n",
            "web/deep/sniffs.py": "import app.core.engine.sniff\n",
            "web/remaps.py": "from app.core.selection.excerpt import excerpt_windows\n",
            "core/engine/__init__.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from app.core.engine.fill import template as template\n"
                "    from app.core.engine.reader import strip_ansi as strip_ansi\n"
            ),
            "web/faced.py": "from app.core.engine import strip_ansi, template\n",  # a face of the reader
        },
    )
    assert sorted(web_log_offenders(root)) == [
        "web/deep/sniffs.py imports app.core.engine.sniff",
        "web/faced.py imports app.core.engine.reader",
        "web/remaps.py imports app.core.selection.excerpt",
        "web/windows.py imports app.core.engine.reader",
    ]


def test_the_router_rule_fires(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "web/api.py": "from fastapi import APIRouter\nfrom app.web.urls import diagnosis_url\nrouter = APIRouter()\n",
            "web/pages.py": "import fastapi\nfrom app.web.api import diagnosis_json\nrouter = fastapi.APIRouter()\n",
            "web/quota.py": "from app.web import api, urls\nrouter: APIRouter = APIRouter()\n",
            "web/retention.py": "def f():\n    import app.web.pages\napi = APIRouter()\n",
            "web/urls.py": "from app.web.state import state_of\n",
            "web/app.py": "from app.web import api, pages, quota, retention\n",  # the app includes every router
        },
    )
    assert router_offenders(root) == [
        "app.web.pages imports app.web.api",
        "app.web.quota imports app.web.api",
        "app.web.retention imports app.web.pages",
    ]


def test_the_error_class_rule_fires(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "errors.py": "class TraceloreError(Exception): ...\nclass NotFound(TraceloreError): ...\n",
            "cli/errors.py": "import click\nclass CommandError(click.ClickException): ...\n",
            "web/fine.py": "from app.errors import NotFound\nclass Page:\n    pass\nraise NotFound('x')\n",
            "web/pages.py": "from app.errors import NotFound\n\nclass Gone(NotFound):\n    status = 410\n",
            "client/remote.py": "class RemoteError(Exception):\n    pass\n",
            "core/deep/budget.py": "def f():\n    class Stop(builtins.LookupError): ...\n",
            "cli/watch.py": "import click\nclass Quit(click.exceptions.ClickException): ...\n",
        },
    )
    assert error_class_offenders(root) == [
        "cli/watch.py:2 defines Quit",
        "client/remote.py:1 defines RemoteError",
        "core/deep/budget.py:2 defines Stop",
        "web/pages.py:3 defines Gone",
    ]


def test_the_cli_cycle_rule_fires(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "cli/__init__.py": "import importlib\n",
            "cli/fine.py": "from app.cli.context import current\nfrom app.cli import options\n",
            "cli/options.py": "import click\n",
            "cli/explain.py": "def explain():\n    from app.cli import _library\n",
            "cli/whole.py": "import app.cli\n",
        },
    )
    assert cli_cycle_offenders(root) == ["cli/explain.py imports app.cli._library", "cli/whole.py imports app.cli"]


def long_modules(root: Path, limit: int = MAX_MODULE_LINES, allowed: Iterable[str] = LONG_MODULES) -> list[str]:
    """Modules under `root` longer than `limit` lines, but for the allowed ones (paths relative to root)."""
    allowed = set(allowed)
    offenders = []
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit and name not in allowed:
            offenders.append(f"{name} has {lines} lines (at most {limit})")
    return offenders


def test_app_modules_stay_under_the_size_limit() -> None:
    assert long_modules(APP) == []


def test_every_allowed_long_module_exists_and_is_long() -> None:
    # An exemption outlives its reason once the module is split or gone: drop it then.
    for name in LONG_MODULES:
        path = APP / name
        assert path.is_file(), name
        assert len(path.read_text(encoding="utf-8").splitlines()) > MAX_MODULE_LINES, name


def test_the_module_size_rule_fires(tmp_path: Path) -> None:
    short = "x = 1\n" * MAX_MODULE_LINES
    root = _plant(
        tmp_path,
        {
            "core/short.py": short,
            "core/engine/long.py": short + "y = 2\n",
            "web/long.py": short * 2,
            "lsp.py": short * 2,
        },
    )
    assert long_modules(root, allowed={"lsp.py"}) == [
        f"core/engine/long.py has {MAX_MODULE_LINES + 1} lines (at most {MAX_MODULE_LINES})",
        f"web/long.py has {2 * MAX_MODULE_LINES} lines (at most {MAX_MODULE_LINES})",
    ]
    assert long_modules(root) == [
        f"core/engine/long.py has {MAX_MODULE_LINES + 1} lines (at most {MAX_MODULE_LINES})",
        f"lsp.py has {2 * MAX_MODULE_LINES} lines (at most {MAX_MODULE_LINES})",
        f"web/long.py has {2 * MAX_MODULE_LINES} lines (at most {MAX_MODULE_LINES})",
    ]


MAX_TOP_MODULES = 5  # the top of app/ shows the architecture: packages by concern, a few shared modules


def top_modules(root: Path) -> list[str]:
    """The modules at the top of `root` (packages aside)."""
    return sorted(p.name for p in root.glob("*.py"))


def test_the_top_of_app_holds_packages_and_at_most_five_modules() -> None:
    modules = top_modules(APP)
    assert len(modules) <= MAX_TOP_MODULES, f"app/ has {len(modules)} top-level modules: {modules}; group them"


def test_the_top_modules_rule_fires(tmp_path: Path) -> None:
    root = _plant(tmp_path, {f"m{i}.py": "x = 1\n" for i in range(MAX_TOP_MODULES + 1)} | {"pkg/a.py": "x = 1\n"})
    assert len(top_modules(root)) == MAX_TOP_MODULES + 1 and "a.py" not in top_modules(root)


MAX_ROUTE_LINES = 22  # about 20: a route parses, calls one function, answers


def long_routes(root: Path, limit: int = MAX_ROUTE_LINES) -> list[str]:
    """Route functions (decorated with a router's get/post/...) longer than `limit` lines."""
    verbs = {"get", "post", "put", "patch", "delete", "api_route"}
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            routed = any(
                isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr in verbs
                for d in node.decorator_list
            )
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if routed and lines > limit:
                out.append(f"{path.relative_to(root).as_posix()}:{node.name} has {lines} lines (at most {limit})")
    return out


def test_routes_only_route() -> None:
    assert long_routes(APP / "web") == []


def test_the_route_length_rule_fires(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_ROUTE_LINES))
    root = _plant(tmp_path, {"r.py": f"@router.post('/a')\ndef a():\n{body}\n\ndef helper():\n{body}{body}\n"})
    assert long_routes(root) == [f"r.py:a has {MAX_ROUTE_LINES + 1} lines (at most {MAX_ROUTE_LINES})"]


def test_the_core_order_rule_fires(tmp_path: Path) -> None:
    root = _plant(
        tmp_path,
        {
            "core/engine/run.py": "from app.core.knowledge.loading import Library\nfrom app.core.engine import x\n",
            "core/knowledge/loading.py": "from app.core.engine.run import run\n",
            "core/models.py": "from app.core.times import Yearless\n",
            "core/times.py": "from app.core.models import Diagnosis\n",
            "core/new/part.py": "from app.core.models import Diagnosis\n",
        },
    )
    assert core_order_offenders(root) == [
        "core/knowledge/loading.py imports app.core.engine.run",
        "core/new/part.py imports app.core.models",
        "core/times.py imports app.core.models",
    ]
