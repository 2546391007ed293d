"""How a part of the core shows its public names to the outer layers without importing them.

A part's package (`app.core.engine`, `app.core.knowledge`, ...) is its face: it names what the
outer layers may use and the module each name lives in. A name is imported from its module
when it is first asked for, so taking one name from a face costs what importing its module
did and no more: `tracelore diagnose` loads only the modules it runs. (Type checkers read the
same names from the face's `TYPE_CHECKING` imports, which an architecture test holds equal to
the table.)
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

# A public name and where it lives: its module and, when the face shows it under another name
# (one that would clash with a module of the package), its name there.
Home = str | tuple[str, str]


def lazy_names(face: str, homes: Mapping[str, Home]) -> Callable[[str], object]:
    """The `__getattr__` of the face module `face`: each name of `homes` imported when first asked for."""

    def __getattr__(name: str) -> object:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {face!r} has no attribute {name!r}")
        module, attribute = (home, name) if isinstance(home, str) else home
        value = getattr(importlib.import_module(module), attribute)
        setattr(sys.modules[face], name, value)  # asked once: later reads find it in the face
        return value

    return __getattr__
