"""Over every real log of the corpus: no report in any format shows an unfilled `{name}`, and no
highlight begins on a separator."""

from __future__ import annotations

import re

from app.core.engine.diagnose import diagnose_many
from app.core.knowledge.loading import Library
from app.core.rendering.registry import FORMATS, Links, render_report
from app.evaluation.corpus import load_corpus
from tests.support import REPO

PLACEHOLDER = re.compile(r"\{[a-z][a-z0-9_]*\}")


def test_no_placeholder_reaches_any_format(library: Library) -> None:
    cases = load_corpus(REPO / "tests" / "corpus")
    defects: list[str] = []
    diagnosed = 0
    for case in cases:
        logs = [(p.name, p.read_bytes()) for p in case.logs]
        d = diagnose_many(logs, library)
        if not d.candidates:
            continue
        diagnosed += 1
        for c in d.candidates:
            for e in c.evidence:
                start, end = e.span
                if end - start > 1 and e.text[start : start + 1] in (" ", "\t", ":", "]", ">", "|"):
                    defects.append(f"{case.id}: highlight begins on a separator: {e.text[start:end][:60]!r}")
        in_log = {m for _, data in logs for m in PLACEHOLDER.findall(data.decode("utf-8", "replace"))}
        for fmt in FORMATS:
            out = render_report(d, fmt, Links(base_url="https://tracelore.example.org"))
            leaked = set(PLACEHOLDER.findall(out)) - in_log
            if leaked or ("[[" in out and not any("[[" in data.decode("utf-8", "replace") for _, data in logs)):
                defects.append(f"{case.id} ({fmt}): {sorted(leaked)}")
    assert diagnosed > len(cases) // 2
    assert not defects, "\n".join(defects[:20])
