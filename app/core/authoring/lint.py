"""`tracelore lint`: every promise a signature file makes, checked.

Per-file checks run on each parsed signature; `finalize` checks run across the
whole library (ids, cross-references, taxonomy coverage). Each check has a
snake_case id so it can be skipped by name. Issues are collected, never raised
one at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import regex
import yaml

from app.core.engine.advice import CONDITIONS
from app.core.engine.diagnose import diagnose
from app.core.engine.fill import named, required
from app.core.engine.versions import spec_problem
from app.core.knowledge.loading import Library, build_library, load_signatures, pattern_problem
from app.core.knowledge.schema import Signature
from app.core.models import Diagnosis
from app.errors import EmptyLog, Issue, LibraryError

# Time a backtracking engine (the browser's, Python's) may spend on one hostile line.
# Generous: catastrophic backtracking takes minutes, and a loaded machine must not fail the lint.
BACKTRACK_BUDGET = 1.0
_ADVERSARIAL_LEN = 20_000
_CAPTURE = regex.compile(r"\(\?P<([A-Za-z_][A-Za-z0-9_]*)>")


@dataclass(frozen=True)
class Taxonomy:
    """The failure classes the library must cover: id -> layer."""

    layers: Mapping[str, str]
    coverage: bool = True  # report taxonomy ids that have no file
    # Failures seen in the wild that no signature covers yet (`status: candidate`).
    candidates: frozenset[str] = frozenset()


def load_taxonomy(path: Path, *, coverage: bool = True) -> Taxonomy:
    """Read taxonomy.yaml: sections of {id, title, hint} entries."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    entries = [(layer, entry) for layer, items in data.items() for entry in items or ()]
    layers = {entry["id"]: layer for layer, entry in entries}
    candidates = frozenset(entry["id"] for _, entry in entries if entry.get("status") == "candidate")
    return Taxonomy(layers, coverage, candidates)


@dataclass
class Report:
    """What the lint found."""

    files: int = 0
    issues: list[Issue] = field(default_factory=list)
    # per layer: (signatures that can fail a run, those with a raise-site inventory, raise sites)
    raise_sites: dict[str, tuple[int, int, int]] = field(default_factory=dict)

    @property
    def errors(self) -> int:
        return sum(i.severity == "error" for i in self.issues)

    @property
    def warnings(self) -> int:
        return sum(i.severity == "warning" for i in self.issues)

    def summary(self) -> str:
        return f"{self.files} files, {self.errors} errors, {self.warnings} warnings"

    def inventory(self) -> str:
        """The raise-site inventory per layer (every listed message is checked by `raise_sites`)."""
        rows = self.raise_sites.values()
        total = [sum(r[i] for r in rows) for i in range(3)]
        out = [f"raise sites: {total[2]} listed, for {total[1]} of {total[0]} signatures that can fail a run"]
        out += [
            f"  {layer:<22} {sites:4d} sites  {listed:3d}/{sigs:<3d} signatures"
            for layer, (sigs, listed, sites) in self.raise_sites.items()
        ]
        return "\n".join(out)


FileCheck = Callable[[Signature, Path], Iterable[Issue]]


def _each_pattern(sig: Signature) -> Iterable[tuple[str, str]]:
    for p in sig.all_patterns():
        yield p.name, p.regex
        for i, companion in enumerate(p.near):
            yield f"{p.name}.near[{i}]", companion
    for i, ex in enumerate(sig.excludes):
        yield f"excludes[{i}]", ex.regex


def check_patterns_compile(sig: Signature, path: Path) -> Iterable[Issue]:
    for name, pattern in _each_pattern(sig):
        problem = pattern_problem(pattern)
        if problem:
            yield Issue(path, None, f"{name}: {problem}")


def check_messages_match(sig: Signature, path: Path) -> Iterable[Issue]:
    for p in sig.all_patterns():
        if p.message is not None and pattern_problem(p.regex) is None and not regex.search(p.regex, p.message):
            yield Issue(path, None, f"{p.name}: its `message` does not match its regex")


def check_backtracking(sig: Signature, path: Path) -> Iterable[Issue]:
    """Hostile lines (long runs of what a pattern repeats) must not make it backtrack."""
    for name, pattern in _each_pattern(sig):
        if pattern_problem(pattern):
            continue
        compiled = regex.compile(pattern)
        for bait in _adversarial(pattern):
            try:
                compiled.search(bait, timeout=BACKTRACK_BUDGET)
            except TimeoutError:
                yield Issue(path, None, f"{name}: catastrophic backtracking on a hostile line of {bait[:12]!r}...")
                break


def _adversarial(pattern: str) -> Iterable[str]:
    literals = [w for w in regex.findall(r"[A-Za-z0-9_]{2,}|[ .:=/-]", regex.sub(r"\\.", " ", pattern)) if w]
    fragments = {"a", "1", " ", "a ", "1.", "a-", "a:", "=", "/", "_", "\t", "a1 ", *literals[:12]}
    for fragment in sorted(fragments):
        yield (fragment * (_ADVERSARIAL_LEN // len(fragment) + 1))[:_ADVERSARIAL_LEN] + "\x00!"


def check_placeholders(sig: Signature, path: Path) -> Iterable[Issue]:
    """A fact outside `[[ ]]` must be captured by every fingerprint; any fact by some pattern.

    A candidate can fire on any one fingerprint, so only what all of them capture is sure to
    be known; anything else would reach the reader as `{name}`.
    """
    captures = {c for _, p in _each_pattern(sig) for c in _CAPTURE.findall(p)} | {"rank"}
    sure = set.intersection(*(set(_CAPTURE.findall(p.regex)) for p in sig.fingerprints))
    for p in (*sig.fingerprints, *sig.symptoms):
        for name in sorted(named(p.means or "")):
            # `means` is shown as written (symptoms table, clue notes, reports): never filled.
            yield Issue(path, None, f"{p.name}: its `means` shows {{{name}}} as written: say it in words")
    for field_name, text in sig.texts():
        for name in sorted(named(text) - captures):
            yield Issue(path, None, f"{field_name} uses {{{name}}} but no pattern captures it", "warning")
        for name in sorted((required(text) & captures) - sure):
            yield Issue(
                path,
                None,
                f"{field_name} uses {{{name}}}, which not every fingerprint captures:"
                " put it in an optional part [[ ... ]] that reads well without it",
            )


def check_applies_to(sig: Signature, path: Path) -> Iterable[Issue]:
    ranges = [(f"applies_to.{package}", r.range) for package, r in sig.applies_to.items()]
    ranges += [(f"version_notes[{i}]", n.range) for i, n in enumerate(sig.version_notes)]
    for where, spec in ranges:
        problem = spec_problem(spec)
        if problem:
            yield Issue(path, None, f"{where}: {problem}")
    for i, note in enumerate(sig.version_notes):
        unknown = named(note.text) - {"version"}
        if unknown:
            yield Issue(path, None, f"version_notes[{i}].text: only {{version}} can be filled, not {sorted(unknown)}")


def check_conditions(sig: Signature, path: Path) -> Iterable[Issue]:
    """A fix step's `when` names only facts the engine reads from a log, with values it can state."""
    for i, (_, when) in enumerate(sig.steps()):
        for key, values in when.items():
            condition = CONDITIONS.get(key)
            if condition is None:
                known = ", ".join(CONDITIONS)
                yield Issue(path, None, f"fix[{i}].when: {key!r} is not a fact the engine reads (it reads {known})")
                continue
            if not values:
                yield Issue(path, None, f"fix[{i}].when.{key}: no value given")
            for value in values:
                if value not in condition.values:
                    known = ", ".join(condition.values)
                    yield Issue(path, None, f"fix[{i}].when.{key}: {value!r} is not a value it can be ({known})")
    if all(when for _, when in sig.steps()):
        yield Issue(path, None, "every fix step has a condition: a log that meets none of them gets no fix", "warning")


def check_verify(sig: Signature, path: Path) -> Iterable[Issue]:
    """A verify command is one line to copy and run; what it should show is said beside it."""
    command, _ = sig.verify_parts()
    if command is not None and ("\n" in command.strip() or "`" in command):
        yield Issue(path, None, "verify.command: one command line, without backquotes (it is copied as it is)")


def check_weights(sig: Signature, path: Path) -> Iterable[Issue]:
    if max(p.weight for p in sig.fingerprints) < max((p.weight for p in sig.symptoms), default=0):
        yield Issue(path, None, "a symptom outweighs every fingerprint", "warning")


_TODO = regex.compile(r"\bTODO\b")
_NOT_KNOWLEDGE = frozenset({"examples", "regex", "message", "near", "id"})


def _texts(value: object, where: str) -> Iterable[tuple[str, str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in _NOT_KNOWLEDGE:
                yield from _texts(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _texts(item, f"{where}[{i}]")


def check_todos(sig: Signature, path: Path) -> Iterable[Issue]:
    """A draft (`tracelore unknowns draft`) lands only once every TODO is written."""
    for where, text in _texts(sig.model_dump(mode="json"), ""):
        if _TODO.search(text):
            yield Issue(path, None, f"{where}: still TODO (a draft: write it from the raise site and the threads)")


FILE_CHECKS: dict[str, FileCheck] = {
    "todos": check_todos,
    "patterns_compile": check_patterns_compile,
    "messages_match": check_messages_match,
    "backtracking": check_backtracking,
    "placeholders": check_placeholders,
    "applies_to": check_applies_to,
    "weights": check_weights,
    "conditions": check_conditions,
    "verify": check_verify,
}


def check_references(sigs: Mapping[str, tuple[Path, Signature]], taxonomy: Taxonomy | None) -> Iterable[Issue]:
    planned = taxonomy.layers if taxonomy is not None else {}
    for path, sig in sigs.values():
        for field_name in ("related", "consequence_of"):
            for ref in getattr(sig, field_name):
                if ref in planned and ref not in sigs:
                    yield Issue(path, None, f"{field_name}: {ref!r} has no signature file yet", "warning")
                elif ref not in sigs:
                    yield Issue(path, None, f"{field_name}: unknown id {ref!r}")
                if ref == sig.id:
                    yield Issue(path, None, f"{field_name}: refers to itself")


def check_taxonomy(
    sigs: Mapping[str, tuple[Path, Signature]], taxonomy: Taxonomy | None, root: Path
) -> Iterable[Issue]:
    if taxonomy is None:
        return
    for path, sig in sigs.values():
        layer = taxonomy.layers.get(sig.id)
        if layer is None:
            yield Issue(path, 1, f"id {sig.id!r} is not in the taxonomy; add it there", "warning")
        elif layer != sig.layer:
            yield Issue(path, 1, f"layer {sig.layer!r}, but the taxonomy puts {sig.id} in {layer!r}")
        if sig.id in taxonomy.candidates:
            yield Issue(
                path, 1, f"{sig.id} has a signature now: drop its `status: candidate` in the taxonomy", "warning"
            )
    for missing in sorted(set(taxonomy.layers) - set(sigs) - taxonomy.candidates) if taxonomy.coverage else ():
        yield Issue(root, None, f"taxonomy id {missing} has no signature file", "warning")


def _diagnosed(text: str, library: Library) -> Diagnosis | None:
    """A text of a signature file diagnosed as a log (None: no line); a lead is the corpus's doing, left out."""
    try:
        result = diagnose(text.encode(), library)
    except EmptyLog:
        return None
    found = [c for c in result.candidates if c.basis == "signature"]
    return result if len(found) == len(result.candidates) else result.model_copy(update={"candidates": found})


def _got(result: Diagnosis) -> str:
    """The top candidates, as an issue names what came instead."""
    return ", ".join(f"{c.id} ({c.role}, {c.confidence})" for c in result.candidates[:3]) or "nothing"


def check_examples(library: Library, sigs: Mapping[str, tuple[Path, Signature]]) -> Iterable[Issue]:
    """Every match example makes its signature the top candidate; no near miss yields it."""
    for path, sig in sigs.values():
        for i, example in enumerate(sig.examples.match):
            result = _diagnosed(example.log, library)
            if result is None:
                yield Issue(path, None, f"examples.match[{i}]: empty")
            elif not _names(result, sig):
                yield Issue(
                    path, None, f"examples.match[{i}] ({example.source}): expected {sig.id} on top, got {_got(result)}"
                )
        for i, example in enumerate(sig.examples.no_match):
            result = _diagnosed(example.log, library)
            if result is None:
                continue
            if any(c.id == sig.id for c in result.candidates) or any(h.id == sig.id for h in result.harmless):
                yield Issue(path, None, f"examples.no_match[{i}] ({example.source}): {sig.id} fired on a near miss")


def _names(result: Diagnosis, sig: Signature) -> bool:
    """Whether a diagnosis names the signature as its examples must: on top, or (an echo) anywhere."""
    ids = [c.id for c in result.candidates]
    if sig.role == "benign":
        return sig.id in {h.id for h in result.harmless} and sig.id not in ids
    if sig.role == "collateral":
        return sig.id in ids
    return bool(ids) and ids[0] == sig.id


def check_raise_sites(library: Library, sigs: Mapping[str, tuple[Path, Signature]]) -> Iterable[Issue]:
    """Every failure has an inventory of its raise sites, and every message listed there is recognised."""
    for path, sig in sigs.values():
        if sig.role != "benign" and not sig.raise_sites:
            yield Issue(path, None, "no raise_sites: list where upstream raises or logs this failure")
        for i, site in enumerate(sig.raise_sites):
            result = _diagnosed(site.message, library)
            if result is None:
                yield Issue(path, None, f"raise_sites[{i}]: empty message")
            elif not _names(result, sig):
                where = f"raise_sites[{i}] ({site.project}, {site.where})"
                yield Issue(path, None, f"{where}: its message is not recognised as {sig.id}; got {_got(result)}")


def raise_site_counts(sigs: Iterable[Signature]) -> dict[str, tuple[int, int, int]]:
    """Per layer: (signatures that can fail a run, those with an inventory, raise sites listed)."""
    counts: dict[str, list[int]] = {}
    for sig in sigs:
        if sig.role == "benign":
            continue
        row = counts.setdefault(sig.layer, [0, 0, 0])
        row[0] += 1
        row[1] += bool(sig.raise_sites)
        row[2] += len(sig.raise_sites)
    return {layer: (a, b, c) for layer, (a, b, c) in sorted(counts.items())}


# Every check by id, with what it holds (`tracelore lint --list-checks`). `schema` always runs:
# the other checks need a file that parses.
CHECKS: dict[str, str] = {
    "schema": "the file is valid YAML without duplicate keys, matches the signature schema, and its id is unique",
    "todos": "no TODO is left in the knowledge (a draft from `tracelore unknowns draft` lands once written)",
    "patterns_compile": "every pattern compiles for RE2 (linear time) and for `regex`, and matches one line",
    "messages_match": "a pattern's `message`, shown copyable on its page, is matched by its regex",
    "backtracking": "no pattern backtracks for long on hostile lines in a backtracking engine (the browser's)",
    "placeholders": "every {fact} a fix, verify or resume text names is captured, and `means` holds none",
    "applies_to": "version ranges parse, and version notes fill only {version}",
    "weights": "no symptom outweighs every fingerprint",
    "conditions": "a fix step's `when` names facts the engine reads from a log (framework, program, os, launcher,"
    " scheduler, storage) with values it can state",
    "verify": "a verify `command` is one line to copy and run, its explanation beside it",
    "references": "related and consequence_of name known ids, not the signature itself",
    "taxonomy": "each signature's id and layer agree with signatures/taxonomy.yaml, which covers every file",
    "examples": "every match example makes its signature the top candidate; no near miss yields it",
    "raise_sites": "every failure lists its upstream raise sites, and each listed message is recognised",
}


def _as(check: str, found: Iterable[Issue]) -> list[Issue]:
    return [replace(issue, check=issue.check or check) for issue in found]


def lint(root: Path, *, taxonomy: Taxonomy | None = None, skip: Iterable[str] = ()) -> Report:
    """Check every signature file under root, except the checks named in `skip` (ids of CHECKS)."""
    skipped = set(skip)
    unknown = sorted(skipped - set(CHECKS))
    if unknown:
        raise ValueError(f"unknown check {', '.join(unknown)}; the checks are {', '.join(CHECKS)}")
    loaded, issues = load_signatures(root)
    report = Report(files=len(loaded) + len({i.path for i in issues} - {p for p, _ in loaded}))
    report.issues.extend(_as("schema", issues))
    report.raise_sites = raise_site_counts(s for _, s in loaded)
    by_id: dict[str, tuple[Path, Signature]] = {}
    for path, sig in loaded:
        if sig.id in by_id:
            duplicate = f"duplicate id {sig.id!r} (also in {by_id[sig.id][0]})"
            report.issues.append(Issue(path, 1, duplicate, check="schema"))
        by_id[sig.id] = (path, sig)
        for name, check in FILE_CHECKS.items():
            if name not in skipped:
                report.issues.extend(_as(name, check(sig, path)))
    if "references" not in skipped:
        report.issues.extend(_as("references", check_references(by_id, taxonomy)))
    if "taxonomy" not in skipped:
        report.issues.extend(_as("taxonomy", check_taxonomy(by_id, taxonomy, root)))
    if not {"examples", "raise_sites"} <= skipped:
        # Examples and raise sites run against every file that is otherwise sound, so one
        # broken file does not hide the others' results.
        broken = {i.path for i in report.issues if i.severity == "error"}
        sound = {k: v for k, v in by_id.items() if v[0] not in broken}
        try:
            library = build_library((s for _, s in sound.values()), paths={k: v[0] for k, v in sound.items()})
        except LibraryError as exc:
            report.issues.extend(_as("patterns_compile", exc.issues))
        else:
            if "examples" not in skipped:
                report.issues.extend(_as("examples", check_examples(library, sound)))
            if "raise_sites" not in skipped:
                report.issues.extend(_as("raise_sites", check_raise_sites(library, sound)))
    return report
