"""The fields of a JSON upload, how their errors are reported, and an excerpt as read."""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import Any, BinaryIO

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.core.selection import Excerpt
from app.errors import BadInput, Invalid

EXPECTED = ' (expected {"log": "..."} or {"excerpt": [{"line": 1, "text": "..."}]})'

# The largest line number or size a request may give: the largest integer every JSON client
# (JavaScript's Number) holds exactly, and far beyond any real log.
MAX_COUNT = 2**53 - 1


class JsonOptions(BaseModel):
    """The fields of a JSON upload; `log` and `excerpt` stand for what was streamed."""

    model_config = ConfigDict(extra="forbid")

    log: str | None = Field(None, description="the log text")
    excerpt: list[Any] | None = Field(
        None, description="lines picked out of a larger log, in order, with their original numbers"
    )
    total_lines: int | None = Field(None, ge=0, le=MAX_COUNT, description="with `excerpt`: lines in the original log")
    total_bytes: int | None = Field(None, ge=0, le=MAX_COUNT, description="with `excerpt`: size of the original log")
    name: str | None = Field(None, max_length=1000, description="with `excerpt`: the original file name")
    store: bool | None = Field(None, description="keep a permalink (default true)")
    top: int | None = Field(None, ge=1, le=100, description="at most this many candidates")


class ExcerptLine(BaseModel):
    """One line of an excerpt: its number in the original log and its text."""

    model_config = ConfigDict(extra="forbid")

    line: int = Field(ge=1, le=MAX_COUNT, description="1-based line number in the original log")
    text: str = Field(description="the line, without its newline")


def invalid(exc: ValidationError, prefix: str = "") -> Invalid:
    """A 422 listing where each validation error is."""
    errors = [
        {"location": ".".join(map(str, (prefix, *e["loc"]) if prefix else e["loc"])) or "body", "message": e["msg"]}
        for e in exc.errors()
    ]
    return Invalid("; ".join(f"{e['location']}: {e['message']}" for e in errors) + EXPECTED, extra={"errors": errors})


def malformed(reason: str) -> BadInput:
    return BadInput(f"the body is not valid JSON: {reason[:200]}")


@dataclass
class ExcerptBody:
    """An excerpt as read: its line numbers here, its text (one line each) in the upload's file."""

    numbers: array[int]
    total_lines: int | None
    total_bytes: int | None
    chars: int  # characters of the text, newlines included (the default total_bytes)

    def load(self, file: BinaryIO) -> Excerpt:
        """The excerpt as the core takes it (blocking; done once a diagnosis slot is held)."""
        file.seek(0)
        texts = file.read().decode("utf-8", errors="replace").split("\n")[: len(self.numbers)]
        file.seek(0)
        lines = tuple(zip(self.numbers, texts, strict=True))
        last = lines[-1][0] if lines else 0
        excerpt = Excerpt(
            lines=lines,
            total_lines=self.total_lines if self.total_lines is not None else last,
            total_bytes=self.total_bytes if self.total_bytes is not None else self.chars,
        )
        excerpt.check()
        return excerpt
