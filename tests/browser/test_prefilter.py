"""The published patterns run in the browser's own regex engine as they do on the server."""

from __future__ import annotations

import httpx
import regex
from playwright.sync_api import Page

from app.core.knowledge.loading import Library
from tests.support import LiveServer

RUN = """([patterns, lines]) => {
  const failed = [];
  const hits = {};
  for (const p of patterns) {
    if (p.js === null) continue;
    let re;
    try {
      re = new RegExp(p.js, p.flags);
    } catch (err) {
      failed.push([p.regex, String(err)]);
      continue;
    }
    hits[p.id] = lines.flatMap((line, i) => (re.test(line) ? [i] : []));
  }
  return { failed, hits };
}"""


def test_every_pattern_compiles_and_matches_what_it_matches_on_the_server(
    page: Page, server: LiveServer, library: Library
) -> None:
    spec = httpx.get(server.url + "/api/v1/signatures/prefilter.json").json()
    lines = sorted(
        {
            line
            for sig in library.signatures.values()
            for example in (*sig.examples.match, *sig.examples.no_match)
            for line in example.log.splitlines()
            if line.strip()
        }
    )
    page.goto(server.url + "/")
    result = page.evaluate(RUN, [spec["patterns"], lines])
    assert result["failed"] == []
    missed, extra, checked = [], 0, 0
    for p in spec["patterns"]:
        if p["js"] is None:
            continue
        checked += 1
        compiled = regex.compile(p["regex"])
        python = {i for i, line in enumerate(lines) if compiled.search(line)}
        browser = set(result["hits"][str(p["id"])])
        missed += [(p["regex"], lines[i]) for i in sorted(python - browser)]
        extra += len(browser - python)
    assert checked > 0.95 * len(spec["patterns"])
    assert missed == [], "the browser must keep every line the server would match"
    assert extra <= len(lines) // 100  # translations may keep a little more, never less
