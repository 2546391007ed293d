"""Sizes as people read them, in messages and on the pages (the `bytes` filter of the templates)."""

from __future__ import annotations


def human_bytes(n: int) -> str:
    """1048576 -> '1 MiB'; any integer, however large (a stored diagnosis may hold one)."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            # Integer arithmetic: n / size overflows a float past about 10**308.
            tenths = (n * 10 + size // 2) // size
            whole, tenth = divmod(tenths, 10)
            return f"{whole} {unit}" if tenth == 0 else f"{whole}.{tenth} {unit}"
    return f"{n} bytes"
