"""The command's own error: what `tracelore` prints and exits 2 for (the rest of the tree is `app/errors.py`)."""

from __future__ import annotations

import click


class CommandError(click.ClickException):
    """An input or usage error of a command: `Error: <message>` on stderr, exit status 2, like grep's.

    click's own ClickException exits 1, which `tracelore diagnose` keeps for "failure identified".
    """

    exit_code = 2
