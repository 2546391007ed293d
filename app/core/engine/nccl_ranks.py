"""The rank of a process's NCCL lines, from the NCCL lines of that process that state it.

NCCL's debug prefix names the host, the process and the CUDA device, never the rank; but
with NCCL_DEBUG=INFO the same process says which rank it is in its communicator ("comm 0x...
rank 3 nranks 8 ...", a send connection "Channel 00 : 3[...] -> 4[...] via ..."). A process
that states one rank only, which no other process states, lends it to its unranked NCCL lines
(an NCCL WARN among them). A process in several communicators states several ranks: it lends none.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Collection, Sequence

from app.core.engine.file_scan import FileScan
from app.core.models import Line

# NCCL's debug prefix (src/debug.cc): "host:pid:tid [device] NCCL INFO ...", a warning with its
# source line first: "host:pid:tid [device] enqueue.cc:1085 NCCL WARN ...".
_PROCESS = re.compile(
    r"(?P<host>[A-Za-z0-9][\w.-]{0,62}):(?P<pid>\d{1,9}):\d{1,9} \[\d{1,6}\] (?:[\w.-]{1,100}:\d{1,6} )?NCCL "
)
STATING = frozenset({"nccl_comm_rank", "nccl_send_rank"})  # the engine patterns (builtin.ENVIRONMENT) that state it


def _process(line: Line) -> tuple[str, str] | None:
    m = _PROCESS.search(line.text)
    return (m["host"], m["pid"]) if m and m.start() <= line.content_start else None  # a prefix, not quoted


def lend_nccl_ranks(scans: Sequence[FileScan], stating: Collection[int]) -> None:
    """Give the unranked NCCL lines of each process the rank its `stating` pattern hits name."""
    stated: dict[tuple[str, str], set[int]] = defaultdict(set)
    for scan in scans:
        for idx in stating:
            for hit in ph.first if (ph := scan.hits.get(idx)) else ():
                rank = hit.groups.get("nccl_rank", "")
                if rank.isdigit() and (proc := _process(hit.line)) is not None:
                    stated[proc].add(int(rank))
    one = {proc: next(iter(ranks)) for proc, ranks in stated.items() if len(ranks) == 1}
    claimed: dict[int, int] = defaultdict(int)
    for stated_rank in one.values():
        claimed[stated_rank] += 1
    lent = {proc: rank for proc, rank in one.items() if claimed[rank] == 1}
    if not lent:
        return
    settled: dict[int, Line] = {}  # by id: a line picked by several patterns stays one object

    def settle(line: Line) -> Line:
        if id(line) not in settled:
            proc = _process(line) if line.rank is None else None
            rank = lent.get(proc) if proc is not None else None
            settled[id(line)] = line if rank is None else line.model_copy(update={"rank": rank})
        return settled[id(line)]

    for scan in scans:
        scan.edge_lines = [settle(line) for line in scan.edge_lines]
        for ph in scan.hits.values():
            for hit in ph.first:
                hit.line = settle(hit.line)
