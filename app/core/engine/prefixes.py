"""Launcher and logger line prefixes: rank, host and time, table-driven.

Each entry is one launcher's or logger's prefix. Prefixes stack (a Slurm label
before a torchrun rank before a timestamp), so `parse_prefixes` strips entries
from the start of the line until none applies. A new launcher is one entry.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cache

from app.core.times import Yearless

_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}


def _iso(m: re.Match[str]) -> datetime | None:
    text = m["time"].replace(",", ".").replace("Z", "+00:00")
    if "." in text:  # fromisoformat wants at most 6 fraction digits
        head, _, frac = text.partition(".")
        digits = "".join(c for c in frac if c.isdigit())
        text = f"{head}.{digits[:6].ljust(6, '0')}{frac[len(digits) :]}"
    try:
        parsed = datetime.fromisoformat(text.replace(" ", "T", 1))
    except ValueError:
        return None
    return parsed.replace(tzinfo=None) - (parsed.utcoffset() or _ZERO)


def _glog(m: re.Match[str]) -> datetime | None:
    # glog has no year: the job lends it one (app.core.times); until then it is Yearless,
    # comparable only with other year-less times. Read by hand: strptime costs more than
    # the rest of a line's parsing.
    md, clock = m["md"], m["clock"]
    fraction = clock[9:15]
    try:
        return Yearless.at(
            int(md[:-2]),  # c10 prints the month unpadded: "E321" is 21 March
            int(md[-2:]),
            int(clock[:2]),
            int(clock[3:5]),
            int(clock[6:8]),
            int(fraction.ljust(6, "0")),
        )
    except ValueError:
        return None


def _month_day(m: re.Match[str]) -> datetime | None:
    # vLLM's logger: "08-19 13:12:57", no year (as glog).
    md, clock = m["md"], m["clock"]
    try:
        return Yearless.at(int(md[:2]), int(md[3:]), int(clock[:2]), int(clock[3:5]), int(clock[6:8]))
    except ValueError:
        return None


def _syslog(m: re.Match[str]) -> datetime | None:
    clock = m["clock"]
    try:
        return Yearless.at(_MONTHS[m["mon"]], int(m["day"]), int(clock[:2]), int(clock[3:5]), int(clock[6:8]))
    except (KeyError, ValueError):
        return None


def _ctime(m: re.Match[str]) -> datetime | None:
    # dmesg -T: "[Tue Jan  9 07:12:31 2024]", with its year.
    clock = m["clock"]
    try:
        return datetime(
            int(m["year"]), _MONTHS[m["mon"]], int(m["day"]), int(clock[:2]), int(clock[3:5]), int(clock[6:8])
        )
    except (KeyError, ValueError):
        return None


_ZERO = datetime(2000, 1, 1) - datetime(2000, 1, 1)


@dataclass(frozen=True, slots=True)
class PrefixRule:
    """One prefix: a pattern anchored at the current position and how to read its time."""

    name: str
    pattern: re.Pattern[str]
    time: Callable[[re.Match[str]], datetime | None] | None = None


_Spec = tuple[str, str, "Callable[[re.Match[str]], datetime | None] | None"]


def _rule(name: str, pattern: str, time: Callable[[re.Match[str]], datetime | None] | None = None) -> _Spec:
    return name, pattern, time


_ISO = r"(?P<time>\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d)?)"

# Compiled when a line first has a prefix (`rules()`): most lines of a short log have none.
SPECS: tuple[_Spec, ...] = (
    # torchrun / torch.distributed.run --tee: "[rank3]:" (>= 2.2) and "[default3]:" (older): the
    # elastic agent's "[${role_name}${local_rank}]:", so a job started with --role shows its role
    # there ("[trainer0]:", LocalElasticAgent's docstring)
    _rule("torchrun", r"\[(?:rank|default|[A-Za-z_][A-Za-z_-]{0,39})(?P<rank>\d{1,6})\]:[ ]?"),
    # Open MPI --tag-output: "[1,3]<stderr>:"
    _rule("mpirun", r"\[(?P<job>\d{1,6}),(?P<rank>\d{1,6})\]<(?:stdout|stderr|stddiag)>:[ ]?"),
    # horovodrun's Gloo launcher: "[3]<stderr>:", after time.asctime() with --prefix-timestamp:
    # "Mon Jun  7 11:51:57 2021[3]<stderr>:" (horovod/runner/common/util/safe_shell_exec.py,
    # forward_stream: '{time}[{rank}]<{prefix}>:{line}', the slot's rank as its index)
    _rule(
        "horovodrun",
        r"(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
        r" (?P<day>[ \d]\d) (?P<clock>\d\d:\d\d:\d\d) (?P<year>\d{4}))?"
        r"\[(?P<rank>\d{1,6})\]<(?:stdout|stderr)>:[ ]?",
        lambda m: _ctime(m) if m["clock"] else None,
    ),
    # Slurm srun --label, and torchrun's "--tee" with a numeric line prefix: "3: ". srun pads the
    # task id to the width of the largest (Slurm's _build_label: "%*d: "), so " 3: " in
    # a job of ten tasks or more, and a heterogeneous job's component goes first: "P1  3: "
    _rule("srun_label", r"(?:P\d{1,4} )?[ ]{0,5}(?P<rank>\d{1,6}): "),
    # NCCL debug lines: "host:pid:tid [3] NCCL INFO ..." (the NCCL word stays content). The
    # bracket is the CUDA device the thread uses (cudaGetDevice in NCCL's src/debug.cc), a local
    # GPU index that every node repeats, never the global rank.
    _rule(
        "nccl",
        r"(?P<host>[A-Za-z0-9][\w.-]{0,62}):(?P<pid>\d{1,9}):(?P<tid>\d{1,9}) \[(?P<device>\d{1,6})\] (?=NCCL)",
    ),
    # Open MPI's own messages, its signal handler's above all: "[node1:07661] Signal: Segmentation
    # fault (11)" (opal/util/stacktrace.c and opal_output's HOSTFORMAT "[%s:%05d] ", the pid padded
    # to five digits, which tells it from a "[file.py:123]" source location)
    _rule("openmpi", r"\[(?P<host>[A-Za-z0-9][\w.-]{0,62})(?<!\.py)(?<!\.cc)(?<!\.cpp)(?<!\.h):(?P<pid>\d{5,9})\] "),
    # A Ray actor's or task's output as the driver shows it, which vLLM's processes use too:
    # "(RayWorkerWrapper pid=4004, ip=172.17.0.2) ", "(EngineCore_DP0 pid=548) ",
    # "(VllmWorker rank=1 pid=97) ", and older Ray's unnamed task: "(pid=4004) ". Only `rank=` is a
    # rank: a TP or DP index is not the global one.
    _rule(
        "process",
        r"\((?:(?P<proc>[A-Za-z_][\w.-]{0,60})(?: rank=(?P<rank>\d{1,6}))? )?pid=(?P<pid>\d{1,9})"
        r"(?:, ip=(?P<host>\d{1,3}(?:\.\d{1,3}){3}))?\)[ ]?",
    ),
    # vLLM's logger (vllm/logger.py): "ERROR 08-19 13:12:57 [core.py:708] " since v0.8, and
    # "INFO 05-06 10:11:12 llm_engine.py:161] " before it.
    _rule(
        "vllm",
        r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<md>\d\d-\d\d) (?P<clock>\d\d:\d\d:\d\d)(?:\.\d{1,6})?"
        r" \[?(?P<src>[\w.-]{1,100}\.py:\d{1,6})\] ",
        _month_day,
    ),
    # ISO 8601 and Python logging's "[YYYY-MM-DD HH:MM:SS,mmm]", bracketed or not
    # (Hydra and some loggers put the next bracket right after it: "[2026-12-01 14:47:53,760][eval][INFO]")
    _rule("iso", r"\[?" + _ISO + r"\]?(?:[ \t]+|$|(?<=\])(?=\[))", _iso),
    # glog and c10 logging: "I0614 10:12:33.456789  1234 file.cpp:12] " (bracketed in c10; recent
    # torch builds print no thread id and an unpadded month: "[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] ")
    _rule(
        "glog",
        r"\[?(?P<level>[IWEF])(?P<md>\d{3,4}) (?P<clock>\d\d:\d\d:\d\d\.\d{1,9})(?:\s{1,8}(?P<pid>\d{1,9}))?"
        r" (?P<src>[^\]\s]{1,200})\] ?",
        _glog,
    ),
    # Python logging after the time, in the logging cookbook's format
    # "%(asctime)s - %(name)s - %(levelname)s - %(message)s" (and without the name): "- train - ERROR - "
    _rule("logging_dash", r"- (?:[\w.\[\]-]{1,100} - )?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL) - "),
    # A colour code whose escape byte was lost on the way into a paste ("[36m(RayWorkerWrapper
    # pid=4009) "), or that an old Windows console showed as "←" ("←[36m")
    _rule("lost_colour", r"(?:←?\[\d{1,3}(?:;\d{1,3}){0,4}m)+[ ]?"),
    # syslog: "Jun 14 10:12:33 node1 kernel: "
    _rule(
        "syslog",
        r"(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) (?P<day>[ \d]\d) (?P<clock>\d\d:\d\d:\d\d)"
        r" (?P<host>[\w.-]{1,63}) (?P<prog>[\w./-]{1,64})(?:\[\d{1,9}\])?: ",
        _syslog,
    ),
    # journald short-iso after the timestamp: "node1 kernel: "
    _rule("journal_host", r"(?P<host>[\w.-]{1,63}) kernel: "),
    # kernel ring buffer (dmesg): "[12345.678901] "
    _rule("kernel", r"\[\s{0,12}\d{1,10}\.\d{1,9}\] ?"),
    # dmesg -T (human times): "[Tue Jan  9 07:12:31 2024] "
    _rule(
        "kernel_ctime",
        r"\[(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) (?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
        r" (?P<day>[ \d]\d) (?P<clock>\d\d:\d\d:\d\d) (?P<year>\d{4})\] ?",
        _ctime,
    ),
    # docker compose logs: "trainer-1  | " (v2) or "trainer_1  | " (v1); the service is not a rank
    _rule("compose", r"(?P<service>[a-z0-9][\w.-]{0,62}[-_]\d{1,4})[ ]{1,40}\| "),
    # DeepSpeed launcher / pdsh: "worker-1: " (a host name holds a digit)
    _rule("pdsh", r"(?P<host>[a-z][a-z0-9-]{0,62}\d[a-z0-9.-]{0,62}|\d{1,3}(?:\.\d{1,3}){3}): "),
    # milabench's terminal log (milabench/log.py, TagConsole): "{tag} [stderr] {line}", the tag the
    # benchmark's dotted name ("diffusion-nodes.cn-n001.server.mila.quebec.nolog"); a torchrun
    # prefix may follow it
    _rule("milabench", r"(?P<tag>[A-Za-z0-9][\w.-]{0,200}) \[(?:stdout|stderr)\] ?"),
)


@dataclass(frozen=True, slots=True)
class Prefix:
    """What the prefixes of one line say."""

    end: int = 0
    rank: int | None = None
    host: str | None = None
    time: datetime | None = None


@cache
def rules() -> tuple[PrefixRule, ...]:
    """The prefix rules, compiled."""
    return tuple(PrefixRule(name, re.compile(pattern), time) for name, pattern, time in SPECS)


@cache
def _any_rule(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern that matches where any of the rules does (their group names made distinct).

    Most lines end their prefixes, or have none, where no rule applies: one match says so
    where trying each rule in turn costs a match per rule. None of them matches empty text.
    """
    branches = (pattern.replace("(?P<", f"(?P<_{i}_") for i, pattern in enumerate(patterns))
    return re.compile("|".join(f"(?:{branch})" for branch in branches))


@cache
def _default_any() -> re.Pattern[str]:
    return _any_rule(tuple(pattern for _, pattern, _ in SPECS))


def parse_prefixes(text: str, table: tuple[PrefixRule, ...] | None = None) -> Prefix:
    """Strip known prefixes (of `table`, the rules by default) from the start of a line; return where content starts."""
    pos, rank, host, time = 0, None, None, None
    # The default table's pattern without hashing the table on every line (a hot path).
    anyone = _default_any() if table is None else _any_rule(tuple(rule.pattern.pattern for rule in table))
    for _ in range(6):  # prefixes stack a few deep at most
        if anyone.match(text, pos) is None:
            break
        for rule in table or rules():
            m = rule.pattern.match(text, pos)
            if m is None or m.end() == pos:
                continue
            groups = m.groupdict()
            if rank is None and groups.get("rank") is not None:
                rank = int(groups["rank"])
            if host is None and groups.get("host"):
                host = groups["host"]
            if time is None and rule.time is not None:
                time = rule.time(m)
            pos = m.end()
            break
        else:
            break
    return Prefix(pos, rank, host, time)
