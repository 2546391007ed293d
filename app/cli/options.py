"""Options several commands share, declared once (click only: cheap to import at start-up)."""

from __future__ import annotations

from pathlib import Path

import click

SIGNATURES = click.option(
    "--signatures",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="Signature folder [TRACELORE_SIGNATURES_DIR].",
)
