"""The OpenAPI document reads as written by hand: tags, summaries, the bearer scheme, one `Window`."""

from __future__ import annotations

import re

import httpx


def _operations(doc: dict) -> list[tuple[str, str, dict]]:
    return [(method, path, op) for path, ops in doc["paths"].items() for method, op in ops.items()]


def test_every_operation_has_a_written_summary_and_the_right_tag(client: httpx.Client) -> None:
    doc = client.get("/openapi.json").json()
    tags = {t["name"]: t["description"] for t in doc["tags"]}
    assert set(tags) == {"diagnoses", "signatures", "quota", "operations"} and all(tags.values())
    for method, path, op in _operations(doc):
        generated = " ".join(w.capitalize() for w in op["operationId"].split("_api_")[0].split("_"))
        assert op.get("summary") and op["summary"] != generated, f"{method} {path}: {op.get('summary')!r}"
        assert op["description"], f"{method} {path} has no description"
        assert len(op["tags"]) == 1 and op["tags"][0] in tags
        if path.startswith("/api/v1/signatures"):
            assert op["tags"] == ["signatures"], path
    assert "Api" not in " ".join(op["summary"] for _, _, op in _operations(doc))


def test_api_keys_are_a_bearer_security_scheme(client: httpx.Client) -> None:
    doc = client.get("/openapi.json").json()
    assert doc["components"]["securitySchemes"]["apiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "description": doc["components"]["securitySchemes"]["apiKey"]["description"],
    }
    post = doc["paths"]["/api/v1/diagnoses"]["post"]
    assert post["security"] == [{}, {"apiKey": []}]  # anonymous callers are served too
    assert doc["paths"]["/api/v1/quota"]["get"]["security"] == [{}, {"apiKey": []}]
    assert "example" in post["requestBody"]["content"]["text/plain"]


def test_one_schema_per_name(client: httpx.Client) -> None:
    text = client.get("/openapi.json").text
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    assert "app__" not in text, "no module-qualified schema names"
    assert sorted(n for n in schemas if n.endswith("Window")) == ["PatternWindow", "Window"]
    windows = client.get("/openapi.json").json()["paths"]["/api/v1/diagnoses/{diagnosis_id}/windows"]["get"]
    assert windows["responses"]["200"]["content"]["application/json"]["schema"]["items"]["$ref"].endswith("/Window")
    assert "WindowLine" in str(schemas["Window"])


def test_the_reference_links_back_to_the_site(client: httpx.Client) -> None:
    doc = client.get("/openapi.json").json()
    assert "[Back to Tracelore](/)" in doc["info"]["description"]
    page = client.get("/docs")
    assert page.status_code == 200
    assert re.search(r'<nav aria-label="Site"><a href="/">Tracelore</a>', page.text)
