"""The one JSON shape of a diagnosis, shared by the API, the CLI and storage.

`Diagnosis` is what `diagnose()` returns; `Line` is what the reader yields.
Bump `SCHEMA_VERSION` on any incompatible change to `Diagnosis`; fields added with a
default (like `redactions`) are compatible: older stored diagnoses still validate.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal, NamedTuple

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    WrapSerializer,
    WrapValidator,
)

from app.core.env_labels import ENV_LABELS
from app.core.times import OLD_SENTINEL_YEAR, Yearless

SCHEMA_VERSION = 1

Role = Literal["initiating", "collateral", "contributing"]
Band = Literal["likely", "possible"]
Episode = Literal["terminal", "earlier"]


def _read_time(value: object, handler: ValidatorFunctionWrapHandler) -> datetime:
    if isinstance(value, Yearless):
        return value
    if isinstance(value, str) and value.startswith("--"):
        return Yearless.parse(value)
    parsed: datetime = handler(value)
    # Diagnoses stored by earlier releases wrote a year-less time as year 1900.
    return Yearless.of(parsed) if parsed.year == OLD_SENTINEL_YEAR else parsed


def _write_time(value: datetime, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> object:
    if isinstance(value, Yearless) and info.mode_is_json():
        return value.isoformat()
    return handler(value)


# A timestamp read from a log: ISO 8601, with a UTC offset only when the log gave one (most
# logs print local time without one), so it is not an RFC 3339 `date-time`. A time whose
# year neither the line nor the rest of the job gave (glog, syslog) is written without one:
# "--12-01T03:14:21.618403" (ISO 8601's truncated form, XML Schema's gMonthDay).
LogTime = Annotated[
    datetime,
    WrapValidator(_read_time),
    WrapSerializer(_write_time),
    WithJsonSchema(
        {
            "type": "string",
            "description": "ISO 8601 time as the log wrote it; no UTC offset when the log gave none; "
            "'--MM-DDThh:mm:ss[.ffffff]' (no year) when neither the line nor the rest of the job gave a year",
        }
    ),
]

LIKELY = 0.5  # confidence at or above which a candidate is reported as "likely"


def entry_path(signature_id: str) -> str:
    """Where a failure class's encyclopedia entry is served."""
    return f"/failures/{signature_id}"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)


class Line(_Frozen):
    """One log line (one carriage-return frame of a physical line), normalised."""

    no: int = Field(description="1-based physical line number in its file")
    text: str = Field(description="decoded text, ANSI stripped, NUL removed, capped")
    file: str | None = None
    rank: int | None = None
    host: str | None = None
    time: LogTime | None = None
    content_start: int = Field(0, description="offset in text where launcher prefixes end")
    cut: int = Field(0, description="bytes cut from this line by the length cap")
    rewrapped: int = Field(
        0, description="the console width this line's message had been hard-wrapped at; it is read rejoined"
    )
    untagged: bool = Field(False, description="a launcher's output tag repeated mid-line was removed from it")


class Evidence(_Frozen):
    """A line that supports a candidate, with the matched span."""

    line: int
    file: str | None = None
    rank: int | None = None
    time: LogTime | None = None
    text: str
    span: tuple[int, int] = Field(
        description='character offsets of the match in text, without the separators it begins with ("] ", ": ")'
    )
    pattern: str = Field(description="name of the fingerprint or symptom that matched")
    kind: Literal["fingerprint", "symptom", "context"] = Field(
        description="context: a line that made an indirect clue count (the frame or operation a generic error was"
        " raised in)"
    )


class Candidate(_Frozen):
    """One failure class found in the log."""

    id: str
    title: str
    layer: str
    severity: str
    confidence: float = Field(ge=0, le=1)
    band: Band
    role: Role
    basis: Literal["signature", "neighbours"] = "signature"  # neighbours: a lead from the most similar logs
    episode: Episode = "terminal"
    caused_by: str | None = Field(None, description="id of the failure this one echoes")
    why: str = Field(description="why the ranker gave this role")
    line: int = Field(description="first line where it appears")
    file: str | None = None
    rank: int | None = None
    time: LogTime | None = None
    began: LogTime | None = Field(
        None,
        description="when the failing operation began, dated back from the duration its own line prints "
        "(a collective that 'ran for 600021 milliseconds' began ten minutes before the line)",
    )
    ranks: list[int] = Field(default_factory=list, description="ranks on which it appears")
    count: int = Field(description="matching lines in the log")
    evidence: list[Evidence]
    facts: dict[str, str] = Field(default_factory=dict)
    versions: list[str] = Field(
        default_factory=list,
        description="what the versions the log shows mean for this failure: outside the range where it happens "
        "(lower confidence), or advice for those versions",
    )
    summary: str
    fix: list[str] = Field(description="the fix steps that fit this log, a conditioned one with its condition")
    verify: str = Field(description="how to check the fix, in one sentence")
    verify_command: str | None = Field(None, description="the command that checks the fix (null: not one command)")
    verify_explain: str | None = Field(None, description="what the verify command's output shows when the fix worked")
    resume: str
    path: str = Field(description="encyclopedia path of the failure class")
    trust: str = Field("", description="what the corpus of real logs measured for this signature, in words")


class SimilarEntry(_Frozen):
    """A library entry whose wording is near an unrecognised line: a lead, not a match."""

    id: str
    title: str
    path: str = Field(description="encyclopedia path of the entry")
    score: float = Field(description="BM25 score of the entry's wording against the line")


class UnknownStart(_Frozen):
    """The most likely start of a run whose first failure no signature recognises."""

    text: str
    line: int
    file: str | None = None
    rank: int | None = None
    why: str
    similar: list[SimilarEntry] = Field(
        default_factory=list, description="entries worded most like this line; similar, not matched"
    )


class HangLine(_Frozen):
    """A log line that shows which rank a hang waited for."""

    line: int
    file: str | None = None
    rank: int | None = None
    time: LogTime | None = None
    text: str


class HangSuspect(_Frozen):
    """The rank a job that ended in collective timeouts most likely hung on (the others waited for it)."""

    rank: int
    why: str = Field(description="what in the log points at this rank")
    evidence: list[HangLine] = Field(default_factory=list)


class RunEnding(_Frozen):
    """How a log in which no failure was found ends: a run that finished, or one that just stops."""

    state: Literal["completed", "stopped"] = Field(
        description="completed: a line says the run finished; stopped: the log ends on training progress, with "
        "no error and no end"
    )
    line: int = Field(description="the line that says so: the finishing line, or the last progress line")
    file: str | None = None
    rank: int | None = None
    text: str
    step: int | None = Field(None, description="the step, iteration or epoch the last progress line reports")


class Harmless(_Frozen):
    """Lines a benign signature explains: known to be harmless, never the failure."""

    id: str
    title: str
    summary: str
    line: int = Field(description="first line where it appears")
    file: str | None = None
    rank: int | None = None
    time: LogTime | None = None
    count: int = Field(description="matching lines in the log")
    text: str = Field(description="the first matching line")
    path: str = Field(description="encyclopedia path of the harmless line's entry")


class EnvFact(_Frozen):
    """One fact about the job's environment, as a log line states it."""

    name: str = Field(description="torch, cuda, cuda_driver, driver, nccl, gpu, gpu_memory, world_size, launcher, ...")
    value: str
    line: int
    file: str | None = None
    rank: int | None = None
    host: str | None = Field(None, description="the host its line's prefix names (NCCL's host:pid:tid, pdsh, syslog)")
    text: str = Field(description="the line that states it")


def env_label(name: str) -> str:
    """How a reader sees an environment fact's name."""
    return ENV_LABELS.get(name, name)


class EnvConflict(_Frozen):
    """Facts of the log that cannot all hold for a healthy job (e.g. two NCCL versions across ranks)."""

    kind: Literal["cuda_driver", "across_ranks", "unsupported"]
    summary: str
    facts: list[EnvFact] = Field(description="the lines that prove it")


class Environment(_Frozen):
    """What the job ran on, read from its own lines (nothing guessed)."""

    facts: list[EnvFact] = Field(default_factory=list, description="each distinct value of each fact, first line")
    conflicts: list[EnvConflict] = Field(default_factory=list)

    def first(self, name: str) -> EnvFact | None:
        """The first line that states a fact."""
        return next((f for f in self.facts if f.name == name), None)

    def grouped(self) -> list[tuple[str, list[EnvFact]]]:
        """Facts by name, in the order first stated: (label, the lines stating each value)."""
        names: dict[str, list[EnvFact]] = {}
        for f in self.facts:
            names.setdefault(f.name, []).append(f)
        return [(env_label(n), fs) for n, fs in names.items()]


class Unexplained(_Frozen):
    """An error line that no signature explains (deduplicated)."""

    text: str
    count: int
    line: int
    file: str | None = None
    rank: int | None = None


class ExcerptInfo(_Frozen):
    """What was received when the client sent an excerpt of a larger log (see app.core.selection.rules)."""

    lines: int = Field(description="lines received")
    bytes: int = Field(description="bytes of text received")


class InputInfo(_Frozen):
    """What was read."""

    bytes: int
    lines: int
    files: list[str] = Field(default_factory=list)
    ranks: list[int] = Field(default_factory=list, description="ranks seen on evidence lines")
    start: LogTime | None = None
    end: LogTime | None = None
    cut_lines: int = Field(0, description="extracted lines shortened by the line cap")
    unreadable_lines: int = Field(
        0,
        description="lines read (each file's ends and every line a pattern picked) holding text that could not be"
        " decoded (U+FFFD): a console's code page pasted as UTF-8, or bytes of another encoding",
    )
    rejoined_lines: int = Field(0, description="lines holding a message a console had hard-wrapped, read rejoined")
    untagged_lines: int = Field(0, description="lines a launcher's output tag split mid-line, read without it")
    versions: dict[str, str] = Field(default_factory=dict, description="versions found")
    excerpt: ExcerptInfo | None = Field(
        None, description="set when only an excerpt was received; bytes and lines are then the original log's"
    )

    def reading_notes(self) -> list[str]:
        """What the reader had to do with the text, for the person reading the diagnosis."""
        notes = []
        if self.unreadable_lines:
            n = self.unreadable_lines
            notes.append(
                f"{n} line{'s' if n > 1 else ''} held text that could not be read (replacement characters, U+FFFD):"
                " typically a Windows console's code page (GBK, Shift-JIS, cp1252) pasted as UTF-8."
                " The readable lines were diagnosed."
            )
        if self.rejoined_lines:
            n = self.rejoined_lines
            notes.append(
                f"{n} message{'s' if n > 1 else ''} a console had hard-wrapped at a fixed width"
                f" {'were' if n > 1 else 'was'} read rejoined."
            )
        if n := self.untagged_lines:
            notes.append(f"{n} line(s) had a launcher's output tag again mid-line: read without it.")
        return notes


class WindowLine(_Frozen):
    """One line of log context."""

    no: int
    text: str


class Window(_Frozen):
    """Consecutive log lines around evidence, from one file."""

    file: str | None = None
    lines: list[WindowLine] = Field(default_factory=list)


class Groups(NamedTuple):
    """A diagnosis's candidates the way a person reads them."""

    main: list[Candidate]  # what ended the run: the initiating failure and any that failed with it
    echoes: list[Candidate]  # collateral of the terminal episode
    earlier: list[Candidate]  # earlier trouble the run survived


class Diagnosis(_Frozen):
    """Ranked candidate failures for one log (or one job's logs)."""

    schema_version: int = SCHEMA_VERSION
    library_version: str
    input: InputInfo
    candidates: list[Candidate]
    unexplained: list[Unexplained]
    unrecognised_start: UnknownStart | None = Field(
        None,
        description="when every failure found is an echo, or nothing was recognised in a run that did not finish: "
        "the error line most likely to have started the run, which no signature recognises",
    )
    hang: HangSuspect | None = Field(
        None,
        description="when the run ended in collective timeouts with no failure recognised before them: the rank "
        "the others were waiting for, when the log tells (never guessed)",
    )
    harmless: list[Harmless] = Field(
        default_factory=list, description="lines known to be harmless that people mistake for the failure"
    )
    ending: RunEnding | None = Field(
        None,
        description="when no failure was found: whether the log shows the run finishing (healthy) or stopping "
        "mid-run without an error (killed from outside, still running or hung, or cut)",
    )
    environment: Environment = Field(
        default_factory=Environment,
        description="the job's environment as its lines state it: versions, GPUs, topology, launcher, "
        "scheduler job, and conflicts between them",
    )
    redactions: dict[str, int] = Field(
        default_factory=dict,
        description="secrets replaced by [REDACTED:<type>] placeholders in the log text this diagnosis keeps "
        "and shows, counted by type (never the values)",
    )

    @property
    def initiating(self) -> Candidate | None:
        """The candidate that started the terminal episode, if any."""
        return next((c for c in self.candidates if c.role == "initiating"), None)

    def groups(self) -> Groups:
        """The candidates as every report shows them: what ended the run, its echoes, earlier trouble."""
        terminal = [c for c in self.candidates if c.episode == "terminal"]
        return Groups(
            main=[c for c in terminal if c.role != "collateral"],
            echoes=[c for c in terminal if c.role == "collateral"],
            earlier=[c for c in self.candidates if c.episode == "earlier"],
        )
