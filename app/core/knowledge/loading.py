"""Load signature files into an immutable, compiled `Library`.

Loading collects every problem of every file before it fails, each located as
``path:line: field: message`` (a broken library is fixed in one round, not one
error at a time).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import marshal
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, get_args

import re2

from app.core.knowledge import builtin, model_state
from app.core.knowledge.compiled import Compiled
from app.core.knowledge.engines import SCAN, compile_loose, compile_re2, compile_text, scan_pattern
from app.core.knowledge.measured import Measured
from app.core.knowledge.neighbours import LazyNeighbours, NeighbourIndex
from app.core.knowledge.parse_cache import ParseCache
from app.core.knowledge.parsing import parse
from app.core.knowledge.schema import Pattern, Signature
from app.core.knowledge.screen import Atoms, PatternSet, SetParts, ascii_atoms, build_set_parts
from app.errors import Issue, LibraryError

if TYPE_CHECKING:
    from app.core.knowledge.similar import SimilarIndex

TAXONOMY_FILE = "taxonomy.yaml"  # the list of failure classes, beside the signature folders
MEASURED_FILE = "measured.json"  # what `tracelore eval` measured per signature, beside them too
NEIGHBOURS_FILE = "neighbours.json"  # the corpus's labelled logs, indexed (`tracelore eval --write-measured`)

# context: a companion of a clue fingerprint, whose line is shown as the clue's evidence.
PatternKind = Literal["fingerprint", "symptom", "near", "context", "exclude", "error", "progress", "version"]


@dataclass(frozen=True, slots=True)
class Rule:
    """One use of a pattern by a signature (or by the engine itself)."""

    kind: PatternKind
    signature: str | None  # None for the engine's own patterns
    name: str


@dataclass(frozen=True)
class Library:
    """Signatures and their patterns compiled once; read-only and shared by requests."""

    signatures: Mapping[str, Signature]
    regexes: tuple[str, ...]  # distinct patterns, the engine's index order
    rules: tuple[tuple[Rule, ...], ...]  # per regex: who uses it
    version: str
    compiled: Compiled = field(repr=False)  # RE2 per regex, over raw bytes
    confirm: Compiled = field(repr=False)  # RE2 per regex, over a decoded line
    loose: Compiled = field(repr=False)  # per regex with bounded repeats: what finds its lines faster
    index: Mapping[str, int] = field(repr=False)  # regex -> engine index
    patterns: PatternSet = field(repr=False)  # the RE2 Set of all regexes, relaxed, built when first needed
    paths: Mapping[str, Path] = field(default_factory=lambda: MappingProxyType({}))
    # What the corpus measured per signature, for this very version of the library (else empty).
    measured: Mapping[str, Measured] = field(default_factory=lambda: MappingProxyType({}))
    # The corpus's labelled logs, for a lead when nothing is recognised (read when first needed).
    neighbours: LazyNeighbours = field(default_factory=LazyNeighbours, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.signatures)

    @property
    def prefilter(self) -> Any:
        """The RE2 Set of every regex, relaxed: which may hit in a chunk (built on first use)."""
        return self.patterns.get()

    @functools.cached_property
    def similar(self) -> SimilarIndex:
        """The entries' wording indexed once, to suggest the nearest to a line nothing recognised."""
        from app.core.knowledge.similar import SimilarIndex  # here: most diagnoses recognise something

        return SimilarIndex.build(self.signatures.values())

    @functools.cached_property
    def kinds(self) -> Mapping[str, frozenset[int]]:
        """Per rule kind, the indexes of the patterns some rule of that kind uses."""
        found: dict[str, set[int]] = {k: set() for k in get_args(PatternKind)}
        for i, rules in enumerate(self.rules):  # one pass over the rules, not one per kind
            for rule in rules:
                found[rule.kind].add(i)
        return MappingProxyType({k: frozenset(v) for k, v in found.items()})

    @functools.cached_property
    def matched_by(self) -> tuple[frozenset[str], ...]:
        """Per pattern index, the signatures that use it as a fingerprint or a symptom.

        Ranking visits only the signatures some hit pattern belongs to, not the whole library.
        """
        return tuple(
            frozenset(r.signature for r in rules if r.signature and r.kind in ("fingerprint", "symptom"))
            for rules in self.rules
        )


_MULTILINE = "patterns match one line; remove the newline"


def _spans_lines(pattern: str) -> bool:
    return "\n" in pattern or "\\n" in pattern


def _compile_engines(pattern: str) -> tuple[Any, Any] | str:
    """The pattern compiled for raw chunks and for decoded lines, or why it cannot be."""
    if _spans_lines(pattern):
        return _MULTILINE
    try:
        return compile_re2(pattern), compile_text(pattern)
    except re2.error as exc:
        return f"not supported by the linear-time engine (RE2): {exc}"


def _set_problem(prefilter: Any, pattern: str) -> str | None:
    """Add a pattern to the Set, or say why it cannot be: compiling it alone tells."""
    if _spans_lines(pattern):
        return _MULTILINE
    try:
        prefilter.Add(scan_pattern(pattern, relax=True))
    except re2.error:
        engines = _compile_engines(pattern)
        return engines if isinstance(engines, str) else "not supported by the linear-time engine (RE2)"
    return None


def pattern_problem(pattern: str) -> str | None:
    """Why a pattern cannot be used, or None: it must compile for RE2 and for `regex`."""
    import regex  # here: a library read from the parse cache was validated when it was written

    if not _spans_lines(pattern):
        try:
            regex.compile(pattern)
        except regex.error as exc:
            return f"does not compile: {exc}"
    engines = _compile_engines(pattern)
    return engines if isinstance(engines, str) else None


def _signature_patterns(sig: Signature) -> Iterable[tuple[str, Rule]]:
    groups: tuple[tuple[PatternKind, tuple[Pattern, ...]], ...] = (
        ("fingerprint", sig.fingerprints),
        ("symptom", sig.symptoms),
    )
    for kind, patterns in groups:
        for p in patterns:
            yield p.regex, Rule(kind, sig.id, p.name)
            for i, companion in enumerate(p.near):
                yield companion, Rule("context" if p.clue else "near", sig.id, f"{p.name}.near[{i}]")
    for i, ex in enumerate(sig.excludes):
        yield ex.regex, Rule("exclude", sig.id, f"excludes[{i}]")


def library_version(signatures: Iterable[Signature]) -> str:
    """The version of a library: a digest of its signatures, whatever order they come in."""
    digest = hashlib.sha256()
    for sig in sorted(signatures, key=lambda s: s.id):
        digest.update(sig.model_dump_json().encode())
    return digest.hexdigest()[:12]


def build_library(
    signatures: Iterable[Signature], *, paths: Mapping[str, Path] | None = None, version: str | None = None
) -> Library:
    """Compile signatures (already validated) into a `Library`; raise on bad patterns.

    `version` is `library_version` of the same signatures when the caller knows it already.
    """
    sigs = sorted(signatures, key=lambda s: s.id)
    return _compile(
        [(sig.id, _signature_patterns(sig)) for sig in sigs],
        MappingProxyType({s.id: s for s in sigs}),
        paths=paths,
        version=version or library_version(sigs),
    )


def _compile(
    patterns: Sequence[tuple[str, Iterable[tuple[str, Rule]]]],
    signatures: Mapping[str, Signature],
    *,
    paths: Mapping[str, Path] | None,
    version: str,
    atoms: Mapping[str, Atoms] | None = None,
) -> Library:
    """The library of signatures given as (id, their patterns) in id order; raise on bad patterns.

    With `atoms` (the parse cache's: its patterns compiled when it was written), the patterns
    are not compiled again now, and the Set is built when a scan first needs it.
    """
    order: dict[str, int] = {}
    users: list[list[Rule]] = []
    issues: list[Issue] = []
    entries: list[tuple[str, Rule]] = [(p, Rule(kind, None, name)) for kind, name, p in builtin.PATTERNS]
    for _, used in patterns:
        entries.extend(used)
    checked = re2.Set.SearchSet(SCAN) if atoms is None else None
    for pattern, rule in entries:
        if pattern not in order:
            problem = _set_problem(checked, pattern) if checked is not None else None  # once per distinct pattern
            if problem:
                path = (paths or {}).get(rule.signature or "", Path("<builtin>"))
                issues.append(Issue(path, None, f"{rule.kind} {rule.name}: {problem}"))
                continue
            order[pattern] = len(users)
            users.append([])
        users[order[pattern]].append(rule)
    seen: set[str] = set()
    for sid, _ in patterns:
        if sid in seen:
            issues.append(Issue((paths or {}).get(sid, Path(sid)), None, f"duplicate id {sid}"))
        seen.add(sid)
    if issues:
        raise LibraryError(issues)
    regexes = tuple(order)

    def build() -> SetParts:
        return build_set_parts([scan_pattern(p, relax=True) for p in regexes], SCAN)

    return Library(
        signatures=signatures,
        regexes=regexes,
        rules=tuple(tuple(u) for u in users),
        version=version,
        compiled=Compiled(regexes, compile_re2),
        confirm=Compiled(regexes, compile_text),
        loose=Compiled(regexes, compile_loose),
        index=MappingProxyType(dict(order)),
        patterns=PatternSet(
            build, None if atoms is None else [atoms.get(p) for p in regexes], build() if atoms is None else None
        ),
        paths=MappingProxyType(dict(paths or {})),
    )


def signature_files(root: Path) -> list[Path]:
    """Every signature file under a directory (or the file itself)."""
    if root.is_file():
        return [root]
    return sorted(p for p in root.rglob("*.yaml") if p.is_file() and p.name != TAXONOMY_FILE)


def _placement(path: Path, root: Path, sid: str, layer: str) -> list[Issue]:
    issues = []
    if sid != path.name.removesuffix(".yaml"):
        issues.append(Issue(path, 1, f"id {sid!r} does not match the file name"))
    if path.parent != root and layer != path.parent.name:
        issues.append(Issue(path, 1, f"layer {layer!r} does not match folder {path.parent.name!r}"))
    return issues


def _cached(sig: Signature) -> tuple[str, str, tuple[tuple[str, str, str], ...], bytes]:
    """What the parse cache keeps of a signature: what compiling and placing it need, and its state."""
    patterns = tuple((p, rule.kind, rule.name) for p, rule in _signature_patterns(sig))
    return sig.id, sig.layer, patterns, marshal.dumps(model_state.dump(sig))


def _atoms(signatures: Iterable[Signature]) -> dict[str, Atoms]:
    """Every pattern's atoms, as the screen compares them (worked out once, kept in the parse cache)."""
    from app.core.patterns.literals import atoms  # here: only a library being parsed needs it

    patterns = [p for _, _, p in builtin.PATTERNS]
    patterns += [p for sig in signatures for p, _ in _signature_patterns(sig)]
    return {p: ascii_atoms(atoms(p)) for p in dict.fromkeys(patterns)}  # each distinct pattern once


def _from_cache(cache: ParseCache, files: list[Path], root: Path) -> Library | None:
    """The library as the cache holds it: compiled from the kept patterns, each signature restored when used."""
    found = cache.load()
    if found is None or len(found[0]) != len(files):
        return None
    data, version, atoms = found
    try:
        if any(_placement(path, root, sid, layer) for path, (sid, layer, _, _) in zip(files, data, strict=True)):
            return None
        paths = {row[0]: path for path, row in zip(files, data, strict=True)}
        rows = sorted(data, key=lambda row: row[0])  # the library's order: by id
        patterns = [(sid, [(p, Rule(kind, sid, name)) for p, kind, name in kept]) for sid, _, kept, _ in rows]
    except (TypeError, ValueError):
        return None  # not what `_cached` wrote: parse again
    lazy = model_state.Restored(Signature, {sid: state for sid, _, _, state in rows})
    return _compile(patterns, lazy, paths=paths, version=version, atoms=atoms)


def _parse_cache(cache: Path, root: Path, files: list[Path]) -> ParseCache | None:
    try:
        return ParseCache(cache, root, files)
    except OSError:
        return None  # the schema's source (or a file) is not at hand: what the cache holds could not be trusted


def _parse(
    root: Path, files: list[Path], store: ParseCache | None
) -> tuple[list[tuple[Path, Signature]], list[Issue], str | None]:
    """The signatures under root parsed from their files, their issues, and the version when it was computed."""
    if not files:
        return [], [Issue(root, None, "no signature files found")], None
    loaded: list[tuple[Path, Signature]] = []
    issues: list[Issue] = []
    for path in files:
        sig, _, problems = parse(path.read_text(encoding="utf-8"), path)
        issues.extend(problems)
        if sig is not None:
            issues.extend(_placement(path, root, sig.id, sig.layer))
            loaded.append((path, sig))
    if store is None or issues:
        return loaded, issues, None
    version = library_version(s for _, s in loaded)
    with contextlib.suppress(ValueError):  # a signature that is more than its fields is not kept
        store.store([_cached(s) for _, s in loaded], version, _atoms(s for _, s in loaded))
    return loaded, issues, version


def load_signatures(root: Path) -> tuple[list[tuple[Path, Signature]], list[Issue]]:
    """Parse every file under root; collect issues instead of stopping at the first."""
    loaded, issues, _ = _parse(root, signature_files(root), None)
    return loaded, issues


def load_library(root: Path, *, cache: Path | None = None) -> Library:
    """Load and compile every signature under root; raise LibraryError listing all issues."""
    files = signature_files(root)
    store = _parse_cache(cache, root, files) if cache is not None and files else None
    library = _from_cache(store, files, root) if store is not None else None
    if library is None:
        loaded, issues, version = _parse(root, files, store)
        if issues:
            raise LibraryError(issues)
        library = build_library((s for _, s in loaded), paths={s.id: p for p, s in loaded}, version=version)
    measured = read_measured(root / MEASURED_FILE, library.version)
    neighbours = LazyNeighbours(functools.partial(read_neighbours, root / NEIGHBOURS_FILE))
    return dataclasses.replace(library, measured=MappingProxyType(measured), neighbours=neighbours)


def read_neighbours(path: Path) -> NeighbourIndex | None:
    """The neighbour index beside a library; None when there is none or it cannot be read."""
    try:
        return NeighbourIndex.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_measured(path: Path, version: str) -> dict[str, Measured]:
    """Per signature, what the corpus measured, if it was measured on this version of the library.

    Measurements of another version are not shown (they may no longer be true); a missing or
    unreadable file measures nothing, as for a custom library with no corpus.
    """
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if raw["library_version"] != version:
            return {}
        return {
            sid: Measured(id=sid, **{k: int(v) for k, v in counts.items()}) for sid, counts in raw["signatures"].items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
