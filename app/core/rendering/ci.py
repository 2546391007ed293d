"""Machine-read reports of a `Diagnosis` for CI systems: SARIF 2.1.0, JUnit XML, GitHub annotations.

Pure functions, like `text.py`. Roles map onto severities the same way in every format:
the initiating failure and the others that ended the run are errors, collateral echoes are
notes, trouble the run survived is a warning.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from urllib.parse import quote

from app.core.models import Candidate, Diagnosis, Evidence
from app.core.rendering.text import environment_lines
from app.core.rendering.verdict import verdict_sentence

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
_LEVEL = {"initiating": "error", "contributing": "error", "collateral": "note"}
_ANNOTATION = {"error": "error", "warning": "warning", "note": "notice"}
MAX_ANNOTATIONS = 10  # GitHub shows at most 10 error and 10 warning annotations per step


def level(c: Candidate) -> str:
    """SARIF level of a candidate: error, warning or note."""
    return "warning" if c.episode == "earlier" else _LEVEL[c.role]


def encyclopedia_url(c: Candidate, base_url: str) -> str | None:
    """The absolute address of a candidate's encyclopedia page, when the service's address is known."""
    return f"{base_url.rstrip('/')}{c.path}" if base_url else None


def _uri(file: str) -> str:
    # A uri-reference: forward slashes, everything unsafe percent-encoded ("<stdin>" too).
    return quote(file.replace("\\", "/"), safe="/._-~")


def _location(file: str | None, line: int, snippet: str | None = None) -> dict[str, object]:
    region: dict[str, object] = {"startLine": line}
    if snippet is not None:
        region["snippet"] = {"text": snippet}
    physical: dict[str, object] = {"region": region}
    if file:
        physical["artifactLocation"] = {"uri": _uri(file)}
    return {"physicalLocation": physical}


def _help(c: Candidate, url: str | None) -> dict[str, str]:
    steps = [f"{i}. {step}" for i, step in enumerate(c.fix, 1)]
    more = url or c.path
    text = "\n".join([c.summary, "", "Fix:", *steps, "", f"Verify: {c.verify}", f"Resume: {c.resume}", f"More: {more}"])
    link = f"[{c.title}]({url})" if url else f"`{c.path}`"
    markdown = "\n".join(
        [c.summary, "", "**Fix**", "", *steps, "", f"**Verify:** {c.verify}", "", f"**Resume:** {c.resume}", "", link]
    )
    return {"text": text, "markdown": markdown}


def suspect_text(d: Diagnosis, c: Candidate) -> str | None:
    """The hang's suspect rank, said once, with the failure that started the run."""
    if d.hang is None or c.role != "initiating":
        return None
    return f"Suspect rank: {d.hang.rank}, the rank the others were waiting for ({d.hang.why})."


def environment_summary(d: Diagnosis) -> str | None:
    """The environment in one sentence, with the conflicts the log proves; said with the initiating failure."""
    if not d.environment.facts:
        return None
    text = "Environment: " + "; ".join(environment_lines(d)) + "."
    if d.environment.conflicts:
        text += " Conflicts: " + " ".join(f"{c.summary}." for c in d.environment.conflicts)
    return text


def _message(d: Diagnosis, c: Candidate) -> str:
    head = {"initiating": "Initiating failure", "contributing": "Also failed", "collateral": "Collateral"}[c.role]
    if c.episode == "earlier":
        head = "Earlier trouble"
    extra = [*c.versions, suspect_text(d, c)]
    if c.role == "initiating":
        extra.append(environment_summary(d))
    text = f"{head}: {c.title} ({c.band}, confidence {c.confidence:.2f}). {c.summary} Why: {c.why}."
    return " ".join([text, *(e for e in extra if e)])


def render_sarif(
    d: Diagnosis, *, tool_version: str, base_url: str = "", permalink: str | None = None
) -> dict[str, object]:
    """A SARIF 2.1.0 log: one rule per signature found, one result per candidate at its log line."""
    rules: list[dict[str, object]] = []
    index: dict[str, int] = {}
    results: list[dict[str, object]] = []
    for c in d.candidates:
        url = encyclopedia_url(c, base_url)
        if c.id not in index:
            index[c.id] = len(rules)
            rule: dict[str, object] = {
                "id": c.id,
                "name": c.title,
                "shortDescription": {"text": c.title},
                "fullDescription": {"text": c.summary},
                "help": _help(c, url),
                "defaultConfiguration": {"level": "error" if c.severity in ("critical", "error") else "warning"},
                "properties": {"tags": [c.layer, c.severity], "layer": c.layer, "severity": c.severity},
            }
            if url:
                rule["helpUri"] = url
            rules.append(rule)
        first = next((e for e in c.evidence if e.line == c.line and e.file == c.file), None)
        result: dict[str, object] = {
            "ruleId": c.id,
            "ruleIndex": index[c.id],
            "level": level(c),
            "kind": "fail",
            "rank": round(c.confidence * 100, 1),
            "message": {"text": _message(d, c)},
            "locations": [_location(c.file, c.line, first.text if first else None)],
            "partialFingerprints": {"tracelore/signature": c.id},
            "properties": {
                "role": c.role,
                "episode": c.episode,
                "confidence": c.confidence,
                "band": c.band,
                "causedBy": c.caused_by,
                "rank": c.rank,
                "ranks": c.ranks,
                "count": c.count,
                "facts": c.facts,
                "versions": c.versions,
            },
        }
        related = [
            {"id": i, **_location(e.file, e.line, e.text), "message": {"text": f"{e.kind} {e.pattern}"}}
            for i, e in enumerate(c.evidence)
        ]
        if related:
            result["relatedLocations"] = related
        results.append(result)
    driver: dict[str, object] = {
        "name": "Tracelore",
        "version": tool_version,
        "rules": rules,
        "properties": {"libraryVersion": d.library_version},
    }
    if base_url:
        driver["informationUri"] = base_url.rstrip("/") + "/"
    properties: dict[str, object] = {
        "linesRead": d.input.lines,
        "bytesRead": d.input.bytes,
        "unexplained": [u.model_dump(exclude_none=True) for u in d.unexplained],
    }
    if permalink:
        properties["permalink"] = permalink
    if d.hang:
        properties["hang"] = d.hang.model_dump(mode="json", exclude_none=True)
    if d.environment.facts:
        properties["environment"] = d.environment.model_dump(mode="json", exclude_none=True)
    run: dict[str, object] = {
        "tool": {"driver": driver},
        "artifacts": [{"location": {"uri": _uri(f)}, "roles": ["analysisTarget"]} for f in d.input.files],
        "results": results,
        "invocations": [{"executionSuccessful": True}],
        "properties": properties,
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def _where(file: str | None, line: int) -> str:
    return f"{file}:{line}" if file else f"line {line}"


def _evidence_text(evidence: list[Evidence]) -> list[str]:
    return [f"{_where(e.file, e.line)} | {e.text}" for e in evidence]


def render_junit(d: Diagnosis, *, base_url: str = "", permalink: str | None = None) -> str:
    """JUnit XML: one failing test case per failure that ended the run, collateral as its properties."""
    suites = ET.Element("testsuites", name="tracelore")
    suite = ET.SubElement(suites, "testsuite", name="tracelore diagnosis")
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("library_version", d.library_version),
        ("files", ", ".join(d.input.files)),
        ("lines", str(d.input.lines)),
        ("permalink", permalink or ""),
        *((f"environment.{f.name}", f"{f.value} (line {f.line})") for f in d.environment.facts),
        *((f"environment.conflict.{i}", c.summary) for i, c in enumerate(d.environment.conflicts, 1)),
    ):
        if value:
            ET.SubElement(props, "property", name=name, value=value)
    failing, echoes, earlier = d.groups()
    cases = 0
    for c in failing:
        cases += 1
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"tracelore.{c.layer}",
            name=f"{c.id}: {c.title}",
            file=c.file or "",
            line=str(c.line),
            time="0",
        )
        cprops = ET.SubElement(case, "properties")
        values = [
            ("role", c.role),
            ("confidence", f"{c.confidence:.2f}"),
            ("encyclopedia", encyclopedia_url(c, base_url) or c.path),
        ]
        values += [(f"fact.{k}", v) for k, v in c.facts.items()]
        suspect = suspect_text(d, c)
        if suspect and d.hang:
            values.append(("suspect_rank", str(d.hang.rank)))
        mine = [e for e in echoes if e.caused_by == c.id or (c.role == "initiating" and e.caused_by is None)]
        values += [(f"collateral.{e.id}", f"{_where(e.file, e.line)}: {e.title} ({e.why})") for e in mine]
        for name, value in values:
            ET.SubElement(cprops, "property", name=name, value=value)
        body = [
            f"{c.title} at {_where(c.file, c.line)} ({c.band}, confidence {c.confidence:.2f})",
            c.summary,
            *([suspect] if suspect else []),
            *c.versions,
            *([env] if c.role == "initiating" and (env := environment_summary(d)) else []),
            "",
            "Evidence:",
            *_evidence_text(c.evidence),
            "",
            "Fix:",
            *[f"{i}. {step}" for i, step in enumerate(c.fix, 1)],
            "",
            f"Verify: {c.verify}",
        ]
        failure = ET.SubElement(case, "failure", message=f"{c.title}: {c.summary}", type=c.id)
        failure.text = "\n".join(body)
    for c in earlier:
        cases += 1
        case = ET.SubElement(suite, "testcase", classname=f"tracelore.{c.layer}", name=f"{c.id}: {c.title}", time="0")
        out = ET.SubElement(case, "system-out")
        out.text = f"Earlier trouble at {_where(c.file, c.line)}: {c.why}\n" + "\n".join(_evidence_text(c.evidence))
    if not failing and not earlier:
        cases += 1
        case = ET.SubElement(suite, "testcase", classname="tracelore", name="no known failure", time="0")
        if echoes:
            out = ET.SubElement(case, "system-out")
            out.text = "\n".join(f"{_where(e.file, e.line)}: {e.title} [{e.id}]" for e in echoes)
    if d.unexplained:
        out = ET.SubElement(suite, "system-out")
        out.text = "Unexplained error lines:\n" + "\n".join(
            f"{_where(u.file, u.line)} | {u.text}" + (f" (x{u.count})" if u.count > 1 else "") for u in d.unexplained
        )
    for element in (suites, suite):
        element.set("tests", str(cases))
        element.set("failures", str(len(failing)))
        element.set("errors", "0")
        element.set("skipped", "0")
        element.set("time", "0")
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _escape_data(value: str) -> str:
    # The runner's own escaping (actions/toolkit command.ts, escapeData).
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(value: str) -> str:
    # escapeProperty: data escaping plus the separators of the property list.
    return _escape_data(value).replace(":", "%3A").replace(",", "%2C")


def workflow_command(kind: str, message: str, **props: str | int | None) -> str:
    """One GitHub Actions workflow command line, e.g. `::error file=a.log,line=3::text`."""
    given = ",".join(f"{k}={_escape_property(str(v))}" for k, v in props.items() if v not in (None, ""))
    return f"::{kind}{' ' + given if given else ''}::{_escape_data(message)}"


def render_github(d: Diagnosis, *, base_url: str = "", permalink: str | None = None) -> str:
    """GitHub Actions annotations: one per candidate, at the log file and line where it appears."""
    out: list[str] = []
    for c in d.candidates[: MAX_ANNOTATIONS * 2]:
        kind = _ANNOTATION[level(c)]
        first = next((e for e in c.evidence if e.line == c.line and e.file == c.file), None)
        lines = [c.summary]
        if suspect := suspect_text(d, c):
            lines += ["", suspect]
        if c.versions:
            lines += ["", *c.versions]
        if c.role == "initiating" and (env := environment_summary(d)):
            lines += ["", env]
        if first is not None:
            lines += ["", f"{_where(first.file, first.line)} | {first.text}"]
        if c.role != "collateral" and c.episode == "terminal":
            lines += ["", "Fix:", *[f"{i}. {step}" for i, step in enumerate(c.fix, 1)], "", f"Verify: {c.verify}"]
        else:
            lines += ["", c.why]
        lines += ["", f"More: {permalink or encyclopedia_url(c, base_url) or c.path}"]
        role = "earlier trouble" if c.episode == "earlier" else c.role
        title = f"{c.title} [{c.id}] ({role}, {c.band})"
        file = c.file if c.file and c.file != "<stdin>" else None
        out.append(workflow_command(kind, "\n".join(lines), file=file, line=c.line if file else None, title=title))
    for conflict in d.environment.conflicts:  # at the first line that proves it
        proof = conflict.facts[0]
        file = proof.file if proof.file and proof.file != "<stdin>" else None
        title = "Environment conflict (Tracelore)"
        out.append(
            workflow_command("warning", conflict.summary, file=file, line=proof.line if file else None, title=title)
        )
    if not d.candidates:
        out.append(
            workflow_command(
                "notice",
                verdict_sentence(d)
                if d.ending
                else f"No known failure found in {d.input.lines:,} line{'' if d.input.lines == 1 else 's'}.",
                title="Tracelore",
            )
        )
    return "\n".join(out) + "\n"
