"""A stand-in for a training job: writes real log lines at real speed, as a separate process.

    python tests/watch/logwriter.py PLAN.json

PLAN is a list of steps, run in order:
  {"write": PATH or "-", "lines": [...], "delay": S}  append lines one by one (flushed), S seconds apart
  {"sleep": S}                                        wait
  {"rename": [OLD, NEW]}                              rotate a file away (logrotate's default)
  {"truncate": PATH}                                  empty a file in place (copytruncate)
  {"wait_for": PATH}                                  wait until PATH exists (the test's go-ahead)
A line holding the plan's "mark" text has its write time (epoch seconds) appended to the
plan's "stamps" file, so a test can tell how long a report took after the line landed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def main() -> None:
    plan = json.loads(Path(sys.argv[1]).read_text())
    mark, stamps = plan.get("mark"), plan.get("stamps")
    handles: dict[str, object] = {}
    for step in plan["steps"]:
        if "sleep" in step:
            time.sleep(step["sleep"])
        elif "wait_for" in step:
            give_up = time.monotonic() + 300
            while not Path(step["wait_for"]).exists() and time.monotonic() < give_up:
                time.sleep(0.05)
        elif "rename" in step:
            old, new = step["rename"]
            handles.pop(old, None)
            os.rename(old, new)
        elif "truncate" in step:
            with open(step["truncate"], "r+b") as f:
                f.truncate(0)
        else:
            target = step["write"]
            for line in step["lines"]:
                data = (line + "\n").encode()
                if target == "-":
                    sys.stdout.buffer.write(data)
                    sys.stdout.buffer.flush()
                else:
                    # Opened for append each time: a rotation or truncation between lines is seen.
                    with open(target, "ab") as f:
                        f.write(data)
                if mark and stamps and mark in line:
                    with open(stamps, "a") as f:
                        f.write(f"{time.time()}\n")
                time.sleep(step.get("delay", 0.0))


if __name__ == "__main__":
    main()
