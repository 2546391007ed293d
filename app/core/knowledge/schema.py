"""The schema of one signature file: a matcher and an encyclopedia entry in one.

The YAML keys map one to one onto these models; unknown keys are errors
(``extra="forbid"``) so a typo never silently drops knowledge.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

Id = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")]
Name = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$")]
Text = Annotated[str, StringConstraints(min_length=1, strip_whitespace=True)]

# benign: a known-harmless line people mistake for the failure; explained, never a candidate.
Role = Literal["root", "collateral", "either", "benign"]
# Indirect evidence a fingerprint can be, when it is not the message that names the failure:
# a frame of the raising component (Python or C++, e.g. `Exception raised from checkTimeout`),
# a generic exception type raised inside a known operation (a KeyError in load_state_dict),
# or a warning printed before the error that already names the cause.
Clue = Literal["frame", "type", "warning"]
Source = Literal["any", "emitted"]
Severity = Literal["critical", "error", "warning"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Window(_Strict):
    """Lines before and after an anchor line in which companion patterns must appear."""

    before: int = Field(default=10, ge=0, le=500)
    after: int = Field(default=10, ge=0, le=500)


class Pattern(_Strict):
    """One pattern: a fingerprint (creates a candidate) or a symptom (raises confidence)."""

    name: Name
    regex: Text
    weight: float = Field(gt=0, le=1)
    # What the message tells the reader (the encyclopedia's symptoms table).
    means: str | None = None
    # The literal message as users see it, shown copyable; the lint checks it matches.
    message: str | None = None
    # "emitted": the match must start the line's content (after launcher prefixes),
    # so a quote of the message inside prose or a traceback string does not count.
    source: Source | None = None
    # Companion patterns that must all match within the window (this pattern's own
    # `window` if set, else the signature's), e.g. a header line a few lines above.
    near: tuple[Text, ...] = ()
    window: Window | None = None
    # Set on a fingerprint that is indirect evidence: a candidate found by clues alone is at
    # most `possible`, and says which lines made it.
    clue: Clue | None = None


class Exclude(_Strict):
    """A pattern that vetoes the signature when it appears within the window of a hit."""

    regex: Text
    reason: Text


class RootCause(_Strict):
    cause: Text
    tell: Text  # how to tell this cause apart from the others


class DeadEnd(_Strict):
    attempt: Text
    why: Text


class CodeExample(_Strict):
    stack: Text  # "PyTorch", "Hugging Face Trainer", "DeepSpeed", ...
    title: Text
    language: Text = "python"
    code: Text
    why: Text


class Reference(_Strict):
    title: Text
    url: Annotated[str, StringConstraints(pattern=r"^https?://\S+$")]


class VersionRange(_Strict):
    """Where a failure can happen at all: outside the range, a match loses confidence and says why."""

    range: Text  # a PEP 440 range: ">=2.6", ">=4.0,<5"
    why: Text  # what changed at the range's edge
    reference: Annotated[str, StringConstraints(pattern=r"^https?://\S+$")]  # release notes or the PR


class VersionNote(_Strict):
    """Advice for the versions in a range, shown when the log shows one: `{version}` is the one it shows."""

    package: Name
    range: Text
    text: Text
    reference: Annotated[str, StringConstraints(pattern=r"^https?://\S+$")]


class RaiseSite(_Strict):
    """One place upstream that raises or logs this failure, and the message it prints.

    The inventory is written from the sources, across the releases people still run, not from
    one paste; `tracelore lint` diagnoses each `message` and fails when the signature does not
    come out of it, so a wording the fingerprints miss cannot be listed and forgotten.
    """

    project: Text  # pytorch, transformers, nccl, redis-py, the Linux kernel, ...
    where: Text  # the file and function (or log call) that raises or prints it
    versions: Text  # the releases that print this wording: "all", ">=2.2", "1.8 to 2.1", "NCCL 2.18+"
    template: Text | None = None  # the format string as the source writes it
    # The message rebuilt from the template as it is printed, with the lines it needs around it
    # when the wording alone does not say which failure it is (a frame, a header).
    message: Text
    url: Annotated[str, StringConstraints(pattern=r"^https?://\S+$")] | None = None


class FixStep(_Strict):
    """A fix step that fits only some jobs: shown when the log's facts meet `when`.

    `when` maps a fact the engine reads from the log (`app.core.engine.advice.CONDITIONS`:
    framework, program, os, launcher, scheduler, storage) to the values under which the step
    applies; every key must hold. A log that states the fact with none of the values gets no
    such step; a log that does not state it gets the step with its condition written out.
    """

    step: Text
    when: dict[Name, tuple[Text, ...]] = Field(min_length=1)


class Verify(_Strict):
    """A check that proves the fix: a command to copy and run, and what its output should show."""

    command: Text
    explain: Text


class Faq(_Strict):
    q: Text
    a: Text


class Example(_Strict):
    log: Text
    source: Text  # where the excerpt comes from: an issue thread, docs page or source file


class Examples(_Strict):
    match: tuple[Example, ...] = Field(min_length=1)
    no_match: tuple[Example, ...] = Field(min_length=1)


class Signature(_Strict):
    """A failure class: how to recognise it and what to do about it."""

    # identity
    id: Id
    title: Text
    layer: Name
    tags: tuple[Name, ...] = ()
    severity: Severity = "error"
    summary: Text

    # matching
    fingerprints: tuple[Pattern, ...] = Field(min_length=1)
    symptoms: tuple[Pattern, ...] = ()
    excludes: tuple[Exclude, ...] = ()
    window: Window = Window.model_construct()  # the defaults, without building the validator at import
    source: Source = "any"
    applies_to: dict[Name, VersionRange] = Field(default_factory=dict)
    version_notes: tuple[VersionNote, ...] = ()
    role: Role = "root"
    consequence_of: tuple[Id, ...] = ()

    # knowledge
    mechanism: Text
    root_causes: tuple[RootCause, ...] = Field(min_length=1)
    confirm: tuple[Text, ...] = Field(min_length=1)
    fix: tuple[Text | FixStep, ...] = Field(min_length=1)
    verify: Text | Verify
    resume: Text
    dead_ends: tuple[DeadEnd, ...] = ()
    prevention: tuple[Text, ...] = Field(min_length=1)
    code_examples: tuple[CodeExample, ...] = ()
    references: tuple[Reference, ...] = Field(min_length=1)
    faq: tuple[Faq, ...] = ()
    related: tuple[Id, ...] = ()

    # where upstream raises it, release by release
    raise_sites: tuple[RaiseSite, ...] = ()

    # tests
    examples: Examples

    @field_validator("fingerprints", "symptoms")
    @classmethod
    def _unique_names(cls, patterns: tuple[Pattern, ...]) -> tuple[Pattern, ...]:
        names = [p.name for p in patterns]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"duplicate pattern names: {', '.join(dupes)}")
        return patterns

    def all_patterns(self) -> tuple[Pattern, ...]:
        """Fingerprints then symptoms."""
        return self.fingerprints + self.symptoms

    def steps(self) -> tuple[tuple[str, dict[str, tuple[str, ...]]], ...]:
        """Each fix step's text and its condition (empty: every job)."""
        return tuple((s.step, dict(s.when)) if isinstance(s, FixStep) else (s, {}) for s in self.fix)

    def verify_parts(self) -> tuple[str | None, str]:
        """The verify command (None when the check is written as prose) and its explanation."""
        if isinstance(self.verify, Verify):
            return self.verify.command, self.verify.explain
        return None, self.verify

    def texts(self) -> list[tuple[str, str]]:
        """(field, text) of every text a reader is shown as advice: fix steps, verify parts, resume."""
        command, explain = self.verify_parts()
        out = [("fix", text) for text, _ in self.steps()]
        if command is not None:
            out.append(("verify", command))
        return [*out, ("verify", explain), ("resume", self.resume)]
