"""Tell a text log from other data by its first bytes: the service and the CLI refuse alike."""

from __future__ import annotations

from app.errors import NotText

SNIFF = 64 << 10  # bytes looked at to tell text from binary
GZIP_MAGIC = b"\x1f\x8b"
MIN_ODD = 8  # a few stray bytes never make a log binary
# Control characters a text log does not hold (tab, newlines, form feed, backspace and ESC it may).
# Counted on the bytes: in UTF-8 a byte below 0x80 is always a character of its own.
_NOT_TEXT = bytes(c for c in range(32) if chr(c) not in "\t\n\r\x0b\x0c\x08\x1b")


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
    # NUL bytes alone decide nothing: the reader drops them, and a log written when a machine
    # crashed holds a block of them. What is left is judged by its share of bytes no text log
    # has (control characters, invalid UTF-8), so a paste is judged alike at any size.
    rest = head.replace(b"\x00", b"")
    if not rest.strip():
        if len(rest) < len(head):
            raise NotText("this is binary data, not a text log (nothing but NUL bytes)")
        return  # blank: the diagnosis says the log is empty
    text = rest.decode("utf-8", errors="replace")
    # Bytes, not characters, decide: a U+FFFD written as such (mojibake pasted as UTF-8) is
    # text; so is a console's legacy code page, which the reader shows with replacements.
    invalid = text.count("\ufffd") - rest.count(_REPLACEMENT)
    if invalid and legacy_code_page(rest) is not None:
        invalid = 0
    odd = invalid + len(rest) - len(rest.translate(None, _NOT_TEXT))
    if odd >= MIN_ODD and odd > len(text) // 20:
        raise NotText("this looks like binary data, not a text log (control characters or invalid UTF-8)")


_REPLACEMENT = "\ufffd".encode()
# Code pages Windows consoles write in, tried in this order; cp1252 last, since it takes
# nearly any byte and so tells least.
LEGACY = ("gbk", "shift_jis", "cp1252")


def legacy_code_page(data: bytes) -> str | None:
    """The console code page invalid UTF-8 decodes in whole, if one does (a cut last character allowed)."""
    for name in LEGACY:
        for end in range(len(data), max(len(data) - 4, 0), -1):
            try:
                data[:end].decode(name)
            except UnicodeDecodeError:
                continue
            return name
    return None
