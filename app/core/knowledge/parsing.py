"""Parse one signature file: YAML (refusing duplicate keys) into a validated `Signature`,
or the problems found, each located at its line.

YAML is imported on first use: a start-up that finds the parse cache never imports it.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from app.core.knowledge.schema import Signature
from app.errors import Issue

if TYPE_CHECKING:
    import yaml


@functools.cache
def _loader() -> Any:
    """A safe YAML loader that refuses duplicate mapping keys (they silently drop knowledge).

    Built on first use: a start-up that finds the parse cache never imports YAML.
    """
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when present: ~10x faster

    class UniqueKeyLoader(base):  # type: ignore[misc, valid-type]  # a base chosen at run time
        pass

    def construct_mapping(loader: Any, node: yaml.MappingNode, deep: bool = False) -> Any:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return loader.construct_mapping(node, deep=deep)

    UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return UniqueKeyLoader


def _line_of(node: yaml.Node | None, loc: tuple[int | str, ...]) -> int | None:
    """The 1-based line of the YAML node at a pydantic error location."""
    import yaml

    best = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == part), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            break
        if node is None:
            break
        best = node.start_mark.line + 1
    return best


def parse_signature(text: str, path: Path) -> tuple[Signature | None, list[Issue]]:
    """Parse one signature file; return it or the located issues."""
    sig, _, issues = parse(text, path)
    return sig, issues


def parse(text: str, path: Path) -> tuple[Signature | None, Any, list[Issue]]:
    """A signature file's signature (or its located issues) and the YAML data it came from."""
    import yaml

    loader = _loader()(text)
    try:  # one parse: the node tree gives line numbers, the same tree gives the data
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else None
        return None, None, [Issue(path, line, f"invalid YAML: {getattr(exc, 'problem', exc)}")]
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        return None, data, [Issue(path, 1, "a signature file must be a YAML mapping")]
    try:
        sig = Signature.model_validate(data)
    except ValidationError as exc:
        issues = []
        errors = exc.errors()
        deeper = {err["loc"][:i] for err in errors for i in range(len(err["loc"]))}
        for err in errors:
            if err["type"] == "too_short" and err["loc"] in deeper:
                continue  # pydantic's echo of an invalid item below this one
            where = ".".join(str(p) for p in err["loc"]) or "(file)"
            issues.append(Issue(path, _line_of(node, err["loc"]), f"{where}: {err['msg']}"))
        return None, data, issues
    return sig, data, []
