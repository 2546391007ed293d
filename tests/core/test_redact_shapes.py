"""Generated secrets of every shape issue #38 found unredacted, and of the vendor shapes added with them,
in the contexts logs put them: none survives a line, a block, or the stream that keeps whole logs.

Each shape is a generator of values (random as a real secret is, from a drawn seed) and the templates
it is found in; hypothesis picks the value, the template and what surrounds the line.
"""

from __future__ import annotations

import random
import re
import string
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.core.redaction.redactor import DEFAULT, MARK, all_rules
from app.core.redaction.vendor_shapes import VENDOR_SHAPES

AN = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
PASS = AN + "!#%+,.=^_~-"


def _run(alphabet: str, low: int, high: int | None = None) -> Callable[[random.Random], str]:
    return lambda r: "".join(r.choice(alphabet) for _ in range(r.randint(low, high or low)))


def _seq(*parts: str | Callable[[random.Random], str]) -> Callable[[random.Random], str]:
    return lambda r: "".join(p if isinstance(p, str) else p(r) for p in parts)


def _password(r: random.Random) -> str:
    # What people choose: letters and digits (one of each at least) and some punctuation.
    return r.choice(string.ascii_letters) + r.choice(string.digits) + _run(PASS, 6, 30)(r)


TOKEN = ["{v}", "export SECRET_VALUE={v}", "'{v}'", '{{"key": "{v}"}}', "client.auth({v})", "[rank0]: using {v}"]

# shape: (value generator, templates); {v} is the secret, which must not survive.
SHAPES: dict[str, tuple[Callable[[random.Random], str], list[str]]] = {
    "redis-empty-user": (_password, ["REDIS_URL=redis://:{v}@cache-0:6379/0", "broker rediss://:{v}@10.0.0.2:6380"]),
    "sendgrid": (_seq("SG.", _run(AN + "_-", 22), ".", _run(AN + "_-", 43)), TOKEN),
    "twilio": (_seq("SK", _run(HEX, 32)), TOKEN),
    "mailgun": (_seq("key-", _run(HEX, 32)), TOKEN),
    "sshpass": (_password, ["sshpass -p {v} ssh ubuntu@gpu-node-3", "+ sshpass -p '{v}' rsync -a ckpt/ host:/ckpt"]),
    "hub-token": (_password, ["python run_clm.py --hub_token {v} --push_to_hub", "--hub-token={v} --output_dir out"]),
    "token-flag": (_password, ["huggingface-cli login --token {v}", "vault login --token={v}", "x --token '{v}'"]),
    "curl-user": (
        _password,
        ["curl -u ci-bot:{v} https://registry.example.org/v2/", "curl -sS --user 'me:{v}' -X GET u"],
    ),
    "url-query": (
        _seq(_run(AN, 12, 40)),
        ["GET https://api.example.org/v1/runs?token={v}&limit=5", "fetch https://h/x?a=1&access_token={v}#top"],
    ),
    "telegram": (
        _seq(_run(string.digits, 8, 10), ":A", _run(AN + "_-", 34)),
        ["https://api.telegram.org/bot{v}/sendMessage", *TOKEN],
    ),
    "discord": (
        _seq(_run(string.digits, 18), "/", _run(AN + "_-", 68)),
        ["POST https://discord.com/api/webhooks/{v} -> 204", "notify: https://discordapp.com/api/webhooks/{v}"],
    ),
}

# The vendor shapes: values generated from each rule's own pattern (the value it redacts, without the
# word boundaries around it). Where a rule's guard spares text that is not random (`token`: a value
# of one repeated letter, no digit), generated values it spares are not secrets and are left out.
_VALUE_OF_GROUP = {"azure-ad-client-secret": r"[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}"}


def _vendor(spec: dict[str, Any]) -> st.SearchStrategy[str]:
    rule = next(r for r in all_rules() if r.regex.pattern == spec["pattern"])
    if spec["type"] in _VALUE_OF_GROUP:
        pattern = _VALUE_OF_GROUP[spec["type"]]
    else:
        assert rule.group == 0, spec["type"]
        pattern = re.sub(r"\\b$", "", re.sub(r"^\\b", "", spec["pattern"]))
    values = st.from_regex(pattern, fullmatch=True)
    return values.filter(lambda v: rule.keep(v, None)) if rule.guard else values


ISSUE_SHAPES = ("telegram-bot-token", "discord-webhook")  # generated above, in their own contexts
VENDOR = {f"vendor:{s['type']}:{i}": s for i, s in enumerate(VENDOR_SHAPES) if s["type"] not in ISSUE_SHAPES}


def test_there_are_the_ten_shapes_and_twenty_more() -> None:
    assert len(SHAPES) >= 10 and len({s["type"] for s in VENDOR.values()}) >= 20


def _check(shape: str, value: str, line: str) -> None:
    for text in (DEFAULT.line(line).text, DEFAULT.text(f"step 1\n{line}\nstep 2").text):
        assert value not in text, (shape, line, text)
        assert MARK in text
    stream = DEFAULT.stream()  # how a kept whole log is redacted, line after line
    assert value not in stream.line(line)


BEFORE = st.sampled_from(["", "2024-06-14 10:00:01 INFO ", "[rank3]: ", "  "])
AFTER = st.sampled_from(["", " ", " done", "\t# ok"])


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    shape=st.sampled_from(sorted(SHAPES)),
    seed=st.integers(0, 2**32),  # values as random as a real secret's (a shrunk Random gives 'AAAA0000')
    data=st.data(),
    before=BEFORE,
    after=AFTER,
)
def test_every_shape_the_issue_found_is_redacted_wherever_it_stands(  # type: ignore[no-untyped-def]
    shape: str, seed: int, data, before: str, after: str
) -> None:
    make, templates = SHAPES[shape]
    value = make(random.Random(seed))
    _check(shape, value, before + data.draw(st.sampled_from(templates)).format(v=value) + after)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much], deadline=None)
@given(shape=st.sampled_from(sorted(VENDOR)), data=st.data(), before=BEFORE, after=AFTER)
def test_every_vendor_shape_is_redacted_wherever_it_stands(  # type: ignore[no-untyped-def]
    shape: str, data, before: str, after: str
) -> None:
    value = data.draw(_vendor(VENDOR[shape]))
    _check(shape, value, before + data.draw(st.sampled_from(TOKEN)).format(v=value) + after)
