"""The C heap of the long-running commands (`tracelore watch`, `tracelore lsp`).

glibc serves an allocation above its mmap threshold from a mapping of its own, returned to
the system when it is freed. But the threshold moves: once such a block is freed it rises to
that block's size (up to 32 MiB), and from then on the blocks read from a growing log and
their copies (tens of KiB to 1 MiB, freed at different times) come from the heap, between
small objects that live on (lines kept as evidence) and pin it. The holes they leave are
seldom the size asked for next, so the heap's free part grows as long as the log does
(measured with `bench/watch.py`). Fixing the threshold at glibc's own starting value keeps
every large buffer in its own mapping, whatever was freed before.
"""

from __future__ import annotations

import ctypes
import os

M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
MMAP_THRESHOLD = 128 << 10  # glibc's default, held fixed instead of rising
ENV = "MALLOC_MMAP_THRESHOLD_"  # glibc's own setting: when given, it is the user's choice


def fix_mmap_threshold() -> bool:
    """Hold glibc's mmap threshold fixed for the rest of the process; False where that is not done."""
    if ENV in os.environ:
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 (only glibc has it: musl and macOS keep their own allocators)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
