"""The streaming JSON reader gives what json.loads gives, however the body is cut, and bounds what it holds."""

from __future__ import annotations

import json
import random

import pytest

from app.errors import BadInput, Invalid, TooLarge
from app.web.jsonbody import MAX_EXCERPT_LINES, JsonBody

TRICKY = (
    'plain ASCII, "quotes", back\\slash \\\\u0041 not an escape, tab\t, CR\r, NUL\x00, '
    "é ü ß, 中文, emoji 🙂 and 🚀, \u2028 \u2029, a lone \ud800 surrogate, \U0010ffff end\n"
)


def _parse(body: bytes, limit: int = 1 << 20, pieces: int = 1, seed: int = 0) -> JsonBody:
    parser = JsonBody(limit)
    cuts = sorted(random.Random(seed).sample(range(1, len(body)), min(pieces - 1, len(body) - 1)))
    try:
        for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True):
            parser.feed(body[a:b])
        parser.finish()
    except BaseException:
        parser.file.close()
        raise
    return parser


def _read(parser: JsonBody) -> bytes:
    with parser.file:
        return parser.file.read()


@pytest.mark.parametrize("ensure_ascii", [True, False])
@pytest.mark.parametrize("pieces", [1, 2, 7, 500])
def test_the_log_is_decoded_like_json_loads_however_it_is_cut(ensure_ascii: bool, pieces: int) -> None:
    log = TRICKY * 40
    body = json.dumps({"top": 3, "log": log, "store": False}, ensure_ascii=ensure_ascii).encode(
        "utf-8", "surrogatepass"
    )
    # What json.loads makes of it (a raw lone surrogate is invalid UTF-8: replaced, as everywhere).
    expected = json.loads(body.decode("utf-8", errors="replace"))["log"].encode("utf-8", errors="replace")
    for seed in range(5):
        parser = _parse(body, pieces=pieces, seed=seed)
        assert _read(parser) == expected
        assert parser.fields["top"] == 3 and parser.fields["store"] is False


def test_a_log_over_the_limit_is_refused_while_it_is_read() -> None:
    parser = JsonBody(1000)
    parser.feed(b'{"log": "')
    with parser.file, pytest.raises(TooLarge):
        for _ in range(100):
            parser.feed(b"\\n" * 100)  # 200 bytes on the wire, 100 decoded
            assert parser.file.tell() <= 1000


def test_the_limit_counts_decoded_bytes_not_the_wire() -> None:
    log = '"\\\n' * 300  # 900 bytes decoded, 1,800 escaped
    parser = _parse(json.dumps({"log": log}).encode(), limit=900)
    assert len(_read(parser)) == 900
    with pytest.raises(TooLarge):
        _parse(json.dumps({"log": log + "x"}).encode(), limit=900)


def test_an_excerpt_keeps_numbers_in_memory_and_text_in_the_file() -> None:
    lines = [{"line": n, "text": f"line {n} ü"} for n in (3, 9, 40)]
    parser = _parse(json.dumps({"excerpt": lines, "total_lines": 50, "name": "a.log"}).encode(), pieces=30)
    assert parser.excerpt is not None and list(parser.excerpt.numbers) == [3, 9, 40]
    excerpt = parser.excerpt.load(parser.file)
    assert excerpt.lines == ((3, "line 3 ü"), (9, "line 9 ü"), (40, "line 40 ü"))
    assert excerpt.total_lines == 50 and excerpt.total_bytes == sum(len(e["text"]) + 1 for e in lines)
    parser.file.close()


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b'{"log": "a", "log": "b"}', Invalid),
        (b'{"log": "a"} x', BadInput),
        (b'{"log": "a\\x"}', BadInput),
        (b'{"log": "one\\ntwo \\q three\\nfour"}', BadInput),  # a bad escape amid newline escapes
        (b'{"log": "one\\ntwo \x01 three\\nfour"}', BadInput),
        (b'{"log": "a\tb"}', BadInput),  # a raw control character, as json.loads says
        (b'{"log": "abc', BadInput),
        (b'{"log": 5}', Invalid),
        (b'{"colour": "red", "log": "a"}', Invalid),
        (b'["a log"]', Invalid),
        (b"[" * 100_000, BadInput),
        (b'{"log": "a", "top": ' + b"9" * 5000 + b"}", BadInput),
        (b'{"excerpt": [{"line": 2, "text": "a"}, {"line": 2, "text": "b"}]}', Invalid),
        (b'{"excerpt": [{"line": 1, "text": "a\\nb"}]}', Invalid),
        (b'{"excerpt": [{"line": 1}]}', Invalid),
    ],
)
def test_malformed_and_invalid_bodies(body: bytes, error: type[Exception]) -> None:
    with pytest.raises(error) as raised:
        _parse(body, pieces=3)
    assert type(raised.value) is error


def test_an_excerpt_of_too_many_lines_is_refused() -> None:
    parser = JsonBody(1 << 30)
    parser.feed(b'{"excerpt": [')
    with parser.file, pytest.raises(TooLarge):
        for n in range(1, MAX_EXCERPT_LINES + 2):
            parser.feed(b'{"line": %d, "text": ""},' % n)
