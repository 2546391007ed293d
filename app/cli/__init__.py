"""The `tracelore` command. Commands stay thin: parse, call the core or the store, print.

Each command lives in the module of its group and is imported only when it runs (or when
--help lists it): `tracelore diagnose` never loads the web stack, the store or the
authoring tools. Exit codes of `diagnose` follow grep: 0 nothing found, 1 failure
identified, 2 usage or input error.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import sys
import types
from collections.abc import Iterator

import click

from app import __version__

# Command name -> (module, attribute): the one list of the commands.
COMMANDS = {
    "diagnose": ("app.cli.diagnose", "diagnose"),
    "serve": ("app.cli.serve", "serve"),
    "build-site": ("app.cli.serve", "build_site_command"),
    "db": ("app.cli.admin", "db"),
    "purge": ("app.cli.admin", "purge"),
    "admin": ("app.cli.admin", "admin"),
    "lint": ("app.cli.authoring", "lint_command"),
    "explain": ("app.cli.authoring", "explain_command"),
    "example": ("app.cli.authoring", "example"),
    "corpus": ("app.cli.corpus", "corpus"),
    "eval": ("app.cli.corpus", "eval_command"),
    "unknowns": ("app.cli.unknowns", "unknowns"),
    "watch": ("app.cli.watch", "watch_command"),
    "lsp": ("app.cli.watch", "lsp_command"),
}

# `tracelore --help`: the commands by what people use them for, each with a summary that fits
# an 80-column line whole (click's own listing cut most of them at 45 characters). Here rather
# than read from each command: listing them imports none of their modules.
SECTIONS: dict[str, dict[str, str]] = {
    "Diagnose logs": {
        "diagnose": "Say what failed first in logs (files, .gz, - for stdin)",
        "watch": "Follow growing logs and report a failure as it appears",
        "explain": "Show why a signature did or did not fire on logs",
        "lsp": "The language server for log files, for editors",
    },
    "Library and corpus": {
        "lint": "Check signature files: schema, patterns, examples",
        "example": "Cut signature examples from real logs",
        "corpus": "Add labelled real logs to the corpus",
        "eval": "Measure the library on the corpus of real logs",
        "unknowns": "Group the lines stored diagnoses could not explain",
    },
    "Service and admin": {
        "serve": "Migrate the database, then serve the web app and API",
        "build-site": "Write the failure encyclopedia as a static site",
        "db": "Database migrations",
        "purge": "Delete diagnoses older than the retention time",
        "admin": "Accounts, tiers, API keys and usage",
    },
}

# Commands that run as a service: a pydantic plugin installed beside them (observability) stays on.
SERVICES = frozenset({"serve"})


_PLUGIN_LOADER = "pydantic.plugin._loader"


def without_pydantic_plugins() -> None:
    """Spare a one-shot command pydantic's scan of every installed package's entry points.

    pydantic looks for plugins when it builds its first model (~5 ms); Tracelore's models are
    its own, so a command has nothing for a plugin to observe. Called before the command's
    module builds any model. A user who set the variable (even empty, which scans) keeps theirs.

    With plugins off, pydantic's loader only answers "none", but importing it imports
    `importlib.metadata` (~18 ms, 7% of a short diagnosis): the loader is stood in for by
    a module that gives that answer, unless it is loaded already.
    """
    if os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__") != "__all__" or _PLUGIN_LOADER in sys.modules:
        return
    loader = types.ModuleType(_PLUGIN_LOADER, "pydantic's plugin loader with every plugin disabled (app.cli)")
    loader.get_plugins = lambda *_args, **_kwargs: ()  # type: ignore[attr-defined]
    sys.modules[_PLUGIN_LOADER] = loader


class _Commands(click.Group):
    """A group whose commands are imported only when one is asked for (or listed)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *COMMANDS})

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        for title, summaries in SECTIONS.items():
            with formatter.section(title):
                formatter.write_dl(list(summaries.items()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            one_shot = cmd_name not in SERVICES
            if one_shot:
                without_pydantic_plugins()
            module, name = COMMANDS[cmd_name]
            with _collector_paused() if one_shot else contextlib.nullcontext():
                self.add_command(getattr(importlib.import_module(module), name), cmd_name)
        return super().get_command(ctx, cmd_name)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """A command's imports make objects that live as long as the process (modules, classes): the
    cyclic collector would walk them again and again for nothing. It waits for the import, then
    what the process made so far is moved out of its way (`gc.freeze`)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tracelore")
@click.pass_context
def main(ctx: click.Context) -> None:
    """Tracelore: diagnose failed ML training runs from their logs."""
    from app.cli.context import CliContext

    ctx.ensure_object(CliContext)  # one for the whole command line: its settings are read once
