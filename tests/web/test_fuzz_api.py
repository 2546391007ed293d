"""Schemathesis over the OpenAPI schema against a real server: no 5xx, nothing off-schema."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from app.core.knowledge.loading import Library
from tests.support import live_server, make_settings

CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_headers_conformance",
        "response_schema_conformance",
        "allow_header_conformance",
    ]
)
MAX_EXAMPLES = 8  # per operation and phase; --max-time bounds the run at 90 s (about 1,400 cases)


def test_schemathesis_finds_no_server_error_and_no_schema_violation(
    sqlite_url: str, tmp_path: Path, library: Library
) -> None:
    st = Path(sys.executable).with_name("st")
    settings = make_settings(sqlite_url, tmp_path, max_upload_bytes=64 << 10)
    with live_server(settings, library) as server:
        result = subprocess.run(
            [
                str(st),
                "run",
                f"{server.url}/openapi.json",
                "--checks",
                CHECKS,
                "--max-examples",
                str(MAX_EXAMPLES),
                "--workers",
                "1",
                "--seed",
                "20261130",
                "--phases",
                "examples,coverage,fuzzing",
                "--max-time",
                "90",
                "--request-timeout",
                "30",
            ],
            capture_output=True,
            text=True,
            timeout=400,
            cwd=tmp_path,
        )
    output = result.stdout + result.stderr
    generated = re.search(r"(\d+) generated", output)
    assert result.returncode == 0, output[-6000:]
    assert generated and int(generated.group(1)) >= 100, output[-2000:]
    print(f"schemathesis: {generated.group(1)} test cases")
