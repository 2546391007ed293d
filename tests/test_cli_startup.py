"""`tracelore diagnose` imports only what a local diagnosis needs, so its start-up stays short.

Each command is imported when it runs (app/cli/__init__.py); these tests run the real
command in a fresh interpreter and read what it imported. pydantic is allowed: the core's
`Diagnosis` and `Signature` are pydantic models.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support import REPO

# A real log: the thread's paste (https://github.com/0Xiaohei0/LocalAIVtuber/issues/51).
CASE = REPO / "tests" / "corpus" / "cases" / "gh-0xiaohei0-localaivtuber-51"

# The web stack, the database, templates, the HTTP client, YAML (the parse cache is warm),
# `regex` (the library's patterns were validated when the cache was written; the engine's own
# use `re`), `importlib.metadata` (pydantic's plugin loader: plugins are off), numpy (large logs
# only), version ranges (no version in this log), the thread pool and `logging` (a log of one
# chunk), the report formats other than text, and the other command groups.
NOT_IMPORTED = (
    "fastapi",
    "starlette",
    "uvicorn",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "jinja2",
    "pygments",
    "httpx",
    "yaml",
    "regex",
    "importlib.metadata",
    "numpy",
    "packaging",
    "watchfiles",
    "concurrent.futures",
    "logging",
    "app.web",
    "app.store",
    "app.quota",
    "app.client.remote",
    "app.evaluation.corpus",
    "app.evaluation.evaluate",
    "app.core.rendering.ci",
    "app.core.authoring.lint",
    "app.cli.serve",
    "app.cli.admin",
    "app.cli.authoring",
    "app.cli.corpus",
    "app.cli.unknowns",
    "app.cli.watch",
    "app.cli.watch_reports",
    "app.cli.watch_sources",
)

# Runs the command as `python -m app` does, then writes the names of the modules it imported.
PROBE = """
import json, runpy, sys
out, sys.argv = sys.argv[1], ["tracelore", *sys.argv[2:]]
try:
    runpy.run_module("app", run_name="__main__")
finally:
    loader = sys.modules.get("pydantic.plugin._loader")
    built = sorted(  # the models pydantic built a validator for, by module
        f"{name.rsplit('.', 1)[-1]}.{k}"
        for name in ("app.core.knowledge.schema", "app.core.models")
        for k, v in vars(sys.modules.get(name, json)).items()
        if getattr(v, "__pydantic_complete__", False) and getattr(v, "__module__", "") == name
    )
    with open(out, "w") as f:  # the modules, whether pydantic scanned for plugins, the signature models built
        json.dump([sorted(sys.modules), getattr(loader, "_plugins", None) is not None, built], f)
"""


def _diagnose(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    run, modules, _, _ = _probe(tmp_path, "diagnose", *args, env=env)
    return run, modules


def _probe(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str], bool, list[str]]:
    """Run `tracelore ARGS`; its result, the modules it imported, whether pydantic scanned for plugins,
    and which signature models pydantic built (their validators)."""
    modules = tmp_path / "modules.json"
    base = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    env = {**base, "TRACELORE_CACHE_DIR": str(tmp_path / "cache"), **(env or {})}
    run = subprocess.run(
        [sys.executable, "-c", PROBE, str(modules), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    names, scanned, built = json.loads(modules.read_text())
    return run, set(names), scanned, built


def _offenders(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in NOT_IMPORTED))


def test_a_local_diagnosis_imports_neither_the_web_stack_nor_the_store(tmp_path: Path) -> None:
    log = str(CASE / "log.txt")
    _diagnose(tmp_path, log)  # fills the parse cache, as any earlier command would have
    run, modules = _diagnose(tmp_path, log)
    assert run.returncode == 1, run.stderr
    assert run.stdout.startswith("Verdict: ") and "\nINITIATING:" in run.stdout
    assert "[checkpoint.weights_only_rejected]" in run.stdout
    assert "app.core.engine.diagnose" in modules  # the probe saw the real command run
    assert _offenders(modules) == []


def test_the_offender_check_sees_a_command_that_loads_more(tmp_path: Path) -> None:
    args = (str(CASE / "log.txt"), "--format", "sarif", "--fail-on", "never")
    _diagnose(tmp_path, *args)  # fills the parse cache
    run, modules = _diagnose(tmp_path, *args)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["version"] == "2.1.0"
    assert _offenders(modules) == ["app.core.rendering.ci"]


def test_a_command_skips_the_pydantic_plugin_scan_unless_the_user_asks_for_it(tmp_path: Path) -> None:
    log = str(CASE / "log.txt")
    run, modules, scanned, _ = _probe(tmp_path, "diagnose", log)
    assert run.returncode == 1, run.stderr
    assert "pydantic" in modules and not scanned  # models were built, the installed packages not read
    # The user's own setting wins: empty disables nothing, so pydantic scans as usual.
    run, _, scanned, _ = _probe(tmp_path, "diagnose", log, env={"PYDANTIC_DISABLE_PLUGINS": ""})
    assert run.returncode == 1, run.stderr
    assert scanned


def test_a_text_diagnosis_builds_no_signature_model_nor_diagnosis_schema(tmp_path: Path) -> None:
    log = str(CASE / "log.txt")
    *_, built = _probe(tmp_path, "diagnose", log)  # parses the files: their models validate them
    assert "schema.Signature" in built
    run, _, _, built = _probe(tmp_path, "diagnose", log)
    assert run.returncode == 1, run.stderr
    # Restored from the cache as validated: no signature model was built. Nor was Diagnosis
    # (made of validated parts), which only a JSON report needs.
    assert not [name for name in built if name.startswith("schema.")] and "models.Diagnosis" not in built
    assert "models.Candidate" in built  # the probe sees the models a diagnosis validates
