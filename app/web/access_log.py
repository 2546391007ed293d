"""Keep secrets out of the server's access log: no query strings, no sign-in tokens, no secrets in paths.

uvicorn logs each request to the `uvicorn.access` logger with the path and query string as
the third argument. People paste tokens into `/search?q=`, and a sign-in link carries a live
one-time token in its path; neither may reach the log, which outlives both.
"""

from __future__ import annotations

import logging
import re

from app.core.redaction import Redactor

ACCESS_LOGGER = "uvicorn.access"
_PATH_TOKENS = re.compile(r"^(/account/sign-in/)[^/?]+")


class AccessLogFilter(logging.Filter):
    """Rewrite the path of uvicorn's access records: query dropped, path tokens masked, secrets redacted."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def safe_path(self, path: str) -> str:
        """The path as it may be logged."""
        path, mark, _query = path.partition("?")
        path = _PATH_TOKENS.sub(r"\1[token]", path)
        path = self.redactor.line(path).text
        return path + ("?[query]" if mark else "")

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            record.args = (args[0], args[1], self.safe_path(args[2]), args[3], args[4])
        return True


def install_access_log_filter(redactor: Redactor) -> None:
    """Filter uvicorn's access log (once per process; every app of the process shares the logger)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, AccessLogFilter) for f in logger.filters):
        logger.addFilter(AccessLogFilter(redactor))
