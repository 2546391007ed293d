"""Where the folders the service reads at run time live: beside the package, or installed data."""

from __future__ import annotations

import sys
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parent.parent  # a checkout, an editable install, the Docker image
DATA_ROOT = Path(sys.prefix) / "share" / "tracelore"  # a wheel installs them here (pyproject data-files)


def resource_dir(name: str, *, roots: tuple[Path, ...] = (SOURCE_ROOT, DATA_ROOT)) -> Path:
    """The first of `roots` holding folder `name` (signatures, templates, migrations); the first root if none does."""
    for root in roots:
        if (root / name).is_dir():
            return root / name
    return roots[0] / name
