"""The OpenAPI document as a person would write it: tags with descriptions, summaries, the bearer
security scheme, one schema per name and a way back to the site.

FastAPI generates the document from the routes; this fills in what generation cannot know, in
one place, so the routes keep their own concerns.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app.core import models
from app.core.knowledge import PatternWindow

DESCRIPTION = """\
Tracelore reads the log of a failed ML training run and names the failure that started it, its
echoes on other ranks, the fix and a command that verifies it.

Send a log to `POST /api/v1/diagnoses` (text, gzip, JSON or a multipart file) and read the
diagnosis back by its id. Errors are `application/problem+json` (RFC 9457). Without a key, a
client address gets a small daily allowance; an API key (made on the account page) is sent as
`Authorization: Bearer <key>` and counts against its account's allowance.

[Back to Tracelore](/) · [The failure encyclopedia](/failures/) · [ReDoc](/redoc)
"""

TAGS = [
    {
        "name": "diagnoses",
        "description": "Diagnose a log, read a stored diagnosis and the log lines kept with it, delete it.",
    },
    {
        "name": "signatures",
        "description": "The failure classes Tracelore knows, and the rules a client uses to send only evidence.",
    },
    {"name": "quota", "description": "The caller's daily allowance."},
    {"name": "operations", "description": "Liveness, readiness and Prometheus metrics, for operators."},
]

# Written by hand: the generated ones read "Delete Diagnosis Api".
SUMMARIES = {
    ("post", "/api/v1/diagnoses"): "Diagnose a log",
    ("get", "/api/v1/diagnoses/{diagnosis_id}"): "Read a stored diagnosis",
    ("delete", "/api/v1/diagnoses/{diagnosis_id}"): "Delete a stored diagnosis",
    ("get", "/api/v1/diagnoses/{diagnosis_id}/windows"): "Read the log lines kept around the evidence",
    ("get", "/api/v1/diagnoses/{diagnosis_id}/log"): "Read the whole log (when the server keeps logs)",
    ("get", "/api/v1/signatures"): "List the failure classes",
    ("get", "/api/v1/signatures/{signature_id}"): "Read one failure class",
    ("get", "/api/v1/signatures/prefilter.json"): "Read the evidence rules for clients",
    ("get", "/api/v1/quota"): "Read today's allowance",
    ("get", "/healthz"): "Is the process up",
    ("get", "/readyz"): "Is the service ready",
    ("get", "/metrics"): "Prometheus metrics",
}

# The API key is optional wherever an anonymous caller is served too: `{}` means "no credentials".
SECURED = {
    ("post", "/api/v1/diagnoses"),
    ("delete", "/api/v1/diagnoses/{diagnosis_id}"),
    ("get", "/api/v1/quota"),
}
SECURITY_SCHEMES = {
    "apiKey": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key from the account page or `tracelore admin create-key` (`tlk_...`).",
    }
}


def _qualified(model: type) -> str:
    """The name FastAPI gives a model whose class name another model shares: its module path."""
    return f"{model.__module__}.{model.__qualname__}".replace(".", "__")


# Two models share the class name `Window`; FastAPI would name them after their modules.
RENAMES = {
    _qualified(models.Window): "Window",
    _qualified(PatternWindow): "PatternWindow",
}

EXAMPLES: dict[tuple[str, str], dict[str, Any]] = {
    ("post", "/api/v1/diagnoses"): {
        "text/plain": "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n",
        "application/json": {"log": "[rank3]: torch.OutOfMemoryError: CUDA out of memory.\n", "store": False},
    },
}


def _rename_refs(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                name = value.rsplit("/", 1)[-1]
                value = f"#/components/schemas/{RENAMES.get(name, name)}"
            out[key] = _rename_refs(value)
        return out
    if isinstance(node, list):
        return [_rename_refs(v) for v in node]
    return node


def document(app: FastAPI) -> dict[str, Any]:
    """Generate the OpenAPI document and complete it."""
    doc = get_openapi(
        title="Tracelore API",
        version=app.version,
        summary=app.summary,
        description=DESCRIPTION,
        routes=app.routes,
        tags=TAGS,
    )
    schemas = doc.get("components", {}).get("schemas", {})
    for old, new in RENAMES.items():
        if old in schemas:
            schema = schemas.pop(old)
            schema["title"] = new
            schemas[new] = schema
    doc = dict(_rename_refs(doc))
    doc.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
    for path, operations in doc.get("paths", {}).items():
        for method, op in operations.items():
            if path.startswith("/api/v1/signatures"):
                op["tags"] = ["signatures"]
            if (method, path) in SUMMARIES:
                op["summary"] = SUMMARIES[(method, path)]
            if (method, path) in SECURED:
                op["security"] = [{}, {"apiKey": []}]
            for media, example in EXAMPLES.get((method, path), {}).items():
                content = op.get("requestBody", {}).get("content", {})
                if media in content:
                    content[media]["example"] = example
    return doc


def install(app: FastAPI) -> None:
    """Serve the completed document at /openapi.json (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to replace the document
