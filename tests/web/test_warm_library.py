"""The app builds what its first requests would otherwise wait for."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from app.core.knowledge.loading import Library, load_library
from app.web.app import create_app
from tests.support import SIGNATURES, make_settings


def test_the_set_of_every_pattern_is_built_when_the_app_is_made(sqlite_url: str, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    load_library(SIGNATURES, cache=cache)
    library: Library = load_library(SIGNATURES, cache=cache)  # from the parse cache: the Set not built yet
    library = dataclasses.replace(library, patterns=library.patterns.restarted())
    assert not library.patterns.built
    create_app(make_settings(sqlite_url, tmp_path), library=library)
    assert library.patterns.built  # a short first request is not screened, nor does one build it
