"""Tell a text log from other data by its first bytes: the service and the CLI refuse alike."""

from __future__ import annotations

from app.errors import NotText

SNIFF = 64 << 10  # bytes looked at to tell text from binary
GZIP_MAGIC = b"\x1f\x8b"


def check_text(head: bytes) -> None:
    """Refuse data that is not a text log, with a message that says what it looks like."""
    if head.startswith(GZIP_MAGIC):
        raise NotText(
            "the log is gzip-compressed; send it with Content-Type: application/gzip or Content-Encoding: gzip"
        )
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise NotText("the log is UTF-16 encoded; convert it first: `iconv -f UTF-16 -t UTF-8 train.log`")
    if head.startswith(b"PK\x03\x04"):
        raise NotText("zip archives are not accepted; send the log itself (gzip is fine)")
    if not head:
        return
    nul = head.count(b"\x00")
    replaced = head.decode("utf-8", errors="replace").count("\ufffd")
    if nul > len(head) // 100 or replaced > len(head) // 20:
        raise NotText("this looks like binary data, not a text log (too many NUL bytes or invalid UTF-8)")
