"""Validated signatures as plain data, and back without validating them again.

The parse cache keeps each signature as validation left it: every field's value and which
fields its file set, nested models likewise. Rebuilding a model from that is what unpickling
one does (`BaseModel.__setstate__`), minus pickle's power to run code: no validation and no
core schema, so a command that only reads the library never builds the signature models'
validators (the models are built lazily, `defer_build`). `Restored` rebuilds each signature
only when it is first asked for: a diagnosis reads the few whose patterns occur. A state is
only as good as the schema it was validated with: the parse cache's key holds a digest of
the schema, of this module and pydantic's version, so a change to any misses and the files
are parsed and validated again.
"""

from __future__ import annotations

import functools
import marshal
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel

FORMAT = 1  # bump when the shape of a state changes (the parse cache's key holds it)

M = TypeVar("M", bound=BaseModel)
Decode = Callable[[Any], Any]


def dump(model: BaseModel) -> tuple[dict[str, Any], tuple[str, ...]]:
    """A validated model as plain data (what `marshal` holds): its fields and those set."""
    if model.__pydantic_extra__ or model.__pydantic_private__:
        raise ValueError(f"{type(model).__name__} holds more than its fields")
    return {name: _dump_value(value) for name, value in model.__dict__.items()}, tuple(
        sorted(model.__pydantic_fields_set__)
    )


def _dump_value(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return dump(value)
    if isinstance(value, tuple):
        return tuple(_dump_value(v) for v in value)
    if isinstance(value, dict):
        return {k: _dump_value(v) for k, v in value.items()}
    return value


def restore(cls: type[M], state: Any) -> M:
    """The model `dump` gave `state` for, rebuilt as unpickling does (no validation)."""
    values, fields_set = state
    decoders = _decoders(cls)
    model = cls.__new__(cls)
    model.__setstate__(
        {
            "__dict__": {name: decoders[name](value) if name in decoders else value for name, value in values.items()},
            "__pydantic_fields_set__": set(fields_set),
            "__pydantic_extra__": None,
            "__pydantic_private__": None,
        }
    )
    return model


@functools.cache
def _decoders(cls: type[BaseModel]) -> dict[str, Decode]:
    """Per field that holds models (in a tuple, a dict or optionally): how to rebuild its value."""
    found = {}
    for name, field in cls.model_fields.items():
        decode = _decoder(field.annotation)
        if decode is not None:
            found[name] = decode
    return found


def _decoder(annotation: Any) -> Decode | None:
    """How to rebuild a value of this type from its state; None when it is kept as is."""
    origin, args = get_origin(annotation), get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return functools.partial(restore, annotation)
    if origin is Annotated:
        return _decoder(args[0])
    if origin is tuple:
        item = _decoder(args[0]) if len(args) == 2 and args[1] is Ellipsis else None
        if item is None and any(_decoder(a) for a in args if a is not Ellipsis):
            raise TypeError(f"unsupported field type {annotation!r}")
        return (lambda value: tuple(item(v) for v in value)) if item else None
    if origin is dict:
        value_decoder = _decoder(args[1])
        return (lambda value: {k: value_decoder(v) for k, v in value.items()}) if value_decoder else None
    if origin in (Union, types.UnionType):
        inner = [d for a in args if a is not type(None) and (d := _decoder(a)) is not None]
        if len(inner) > 1:
            raise TypeError(f"unsupported field type {annotation!r}")
        if inner:
            only = inner[0]
            if any(_decoder(a) is None for a in args if a is not type(None)):
                # A model or a plain value (a fix step written as a string): only a model's state is rebuilt.
                return lambda value: only(value) if _is_state(value) else value
            return lambda value: None if value is None else only(value)
        return None
    if origin is not None and any(_decoder(a) for a in args):
        raise TypeError(f"unsupported field type {annotation!r}")
    return None


def _is_state(value: Any) -> bool:
    """Whether a value is a model's state as `dump` gives it: (its fields, the fields set)."""
    return isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], dict)


class Restored(Mapping[str, M]):
    """Models by key, each kept as its `dump` in `marshal`'s format and rebuilt when first read.

    Read-only, as the library is. Two threads reading a key at once may both rebuild it: each
    gets an equal model, and one of them is kept.
    """

    __slots__ = ("_cls", "_done", "_states")

    def __init__(self, cls: type[M], states: dict[str, bytes]) -> None:
        self._cls = cls
        self._states = states
        self._done: dict[str, M] = {}

    def __getitem__(self, key: str) -> M:
        model = self._done.get(key)
        if model is None:
            model = self._done[key] = restore(self._cls, marshal.loads(self._states[key]))
        return model

    def __contains__(self, key: object) -> bool:
        return key in self._states  # without rebuilding the model

    def __iter__(self) -> Iterator[str]:
        return iter(self._states)

    def __len__(self) -> int:
        return len(self._states)
