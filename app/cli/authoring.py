"""Commands for signature authors: `tracelore lint`, `tracelore explain` and `tracelore example add`."""

from __future__ import annotations

import gzip
import sys
from pathlib import Path

import click

from app.cli.context import current
from app.cli.errors import CommandError
from app.cli.logs import open_logs, progress_line
from app.cli.options import SIGNATURES
from app.core import load_library
from app.core.authoring import (
    CHECKS,
    FILE_CHECKS,
    append_example,
    check_examples,
    cut_excerpt,
    explain_signature,
    lint_library,
    load_taxonomy,
    parse_range,
    render_explanation,
)
from app.core.knowledge import TAXONOMY_FILE, parse_signature
from app.errors import AuthoringError, LibraryError, TraceloreError


@click.command("lint")
@click.argument("path", type=click.Path(exists=True, path_type=Path), required=False)
@click.option("--skip", multiple=True, help="Skip a check by its id (see --list-checks), e.g. backtracking.")
@click.option("--fail-on-warnings", is_flag=True, help="Exit 1 on warnings too.")
@click.option("--inventory", is_flag=True, help="Also print the raise sites listed per layer.")
@click.option("--list-checks", is_flag=True, help="List the checks, each with its id and what it holds, and exit.")
def lint_command(
    path: Path | None, skip: tuple[str, ...], fail_on_warnings: bool, inventory: bool, list_checks: bool
) -> None:
    """Check signature files: schema, patterns, references, taxonomy, examples, raise sites.

    Each problem is printed as FILE[:LINE]: SEVERITY[CHECK]: MESSAGE; skip a check with --skip CHECK.
    """
    if list_checks:
        width = max(map(len, CHECKS))
        for name, what in CHECKS.items():
            click.echo(f"{name:<{width}}  {what}")
        return
    unknown = sorted(set(skip) - set(CHECKS))
    if unknown:
        raise click.BadParameter(
            f"unknown check {', '.join(unknown)}; the checks are {', '.join(CHECKS)}", param_hint="--skip"
        )
    root = path or current().settings.signatures_dir
    root = root.resolve()
    folder = root if root.is_dir() else root.parent
    taxonomy_path = next(
        (p / TAXONOMY_FILE for p in (folder, *folder.parents) if (p / TAXONOMY_FILE).is_file()),
        None,
    )
    taxonomy = load_taxonomy(taxonomy_path, coverage=taxonomy_path.parent == root.resolve()) if taxonomy_path else None
    report = lint_library(root, taxonomy=taxonomy, skip=skip)
    for issue in report.issues:
        click.echo(str(issue), err=issue.severity == "error")
    click.echo(report.summary())
    if inventory:
        click.echo(report.inventory())
    if report.errors or (fail_on_warnings and report.warnings):
        sys.exit(1)


@click.command("explain")
@click.argument("signature_id", metavar="ID")
@click.argument("logs", nargs=-1, required=True)
@SIGNATURES
def explain_command(signature_id: str, logs: tuple[str, ...], signatures: Path | None) -> None:
    """Show why signature ID did or did not fire on LOGS: pattern hits, vetoes, the ranker's decision.

    Exit status: 0 it fired, 1 it did not, 2 usage or input error.
    """
    library = current().library(signatures)
    try:
        with open_logs(logs) as opened, progress_line() as shown:
            result = explain_signature(opened, library, signature_id, progress=shown)
    except (TraceloreError, OSError, EOFError, gzip.BadGzipFile) as exc:
        raise CommandError(getattr(exc, "detail", None) or str(exc)) from exc
    click.echo(render_explanation(result), nl=False)
    sys.exit(0 if result.fired else 1)


@click.group()
def example() -> None:
    """Signature examples cut from real logs."""


@example.command("add")
@click.argument("signature_id", metavar="ID")
@click.argument("logfile", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--lines", "line_range", default=None, metavar="A-B", help="The lines to cut (1-based, inclusive).")
@click.option("--no-match", is_flag=True, help="Add it to examples.no_match (a near miss that must not fire).")
@click.option("--source", default=None, help="Where the log comes from (an issue thread, a docs page, a run).")
@SIGNATURES
def example_add(
    signature_id: str,
    logfile: Path,
    line_range: str | None,
    no_match: bool,
    source: str | None,
    signatures: Path | None,
) -> None:
    """Cut a redacted excerpt of LOGFILE into the examples of signature ID, then check the file.

    The file keeps its comments and layout; the example is appended as text. If the file
    then fails to load or its examples fail, the change is undone and the exit status is 1.
    """
    root = signatures or current().settings.signatures_dir
    try:
        library = load_library(root)
    except LibraryError as exc:
        raise CommandError(f"the signature library is broken:\n{exc.detail}") from exc
    path = library.paths.get(signature_id)
    if path is None:
        raise CommandError(f"no signature {signature_id!r} under {root}")
    kind = "no_match" if no_match else "match"
    try:
        lines = parse_range(line_range) if line_range else None
        data = logfile.read_bytes()
        if logfile.suffix == ".gz":
            data = gzip.decompress(data)
        cut = cut_excerpt(data, lines)
        where = f"{logfile.name}, lines {cut.first}-{cut.last}"
        original = path.read_text(encoding="utf-8")
        updated = append_example(original, cut.text, source or where, kind=kind)
    except (AuthoringError, OSError, EOFError, gzip.BadGzipFile) as exc:
        raise CommandError(str(exc)) from exc
    path.write_text(updated, encoding="utf-8")
    problems = _check(root, path, updated)
    if problems:
        path.write_text(original, encoding="utf-8")
        for problem in problems:
            click.echo(problem, err=True)
        click.echo(f"{path} is unchanged: the new example did not pass (see above)", err=True)
        sys.exit(1)
    redacted = ", ".join(f"{n} {kind}" for kind, n in sorted(cut.redactions.items()))
    click.echo(
        f"added examples.{kind} item from {where} to {path}"
        + (f" ({redacted} redacted)" if redacted else "")
        + "; the file loads and its examples pass"
    )


def _check(root: Path, path: Path, text: str) -> list[str]:
    """Problems of the edited file: it must parse, and its examples must pass against the whole library."""
    sig, issues = parse_signature(text, path)
    if sig is None:
        return [str(i) for i in issues]
    try:
        library = load_library(root)
    except LibraryError as exc:
        return [str(i) for i in exc.issues]
    problems = [str(i) for check in FILE_CHECKS.values() for i in check(sig, path) if i.severity == "error"]
    problems += [str(i) for i in check_examples(library, {sig.id: (path, sig)})]
    return problems
