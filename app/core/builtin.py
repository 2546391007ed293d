"""Patterns the engine itself needs, next to the signatures' own.

* ``error``: generic error markers; a matching line that no signature explains is
  reported as unexplained, so the library can grow from real traffic.
* ``progress``: training progress (steps, metric dicts, progress bars); an error
  followed by much progress is earlier trouble the run survived.
* ``version``: framework versions printed in the log, for `applies_to`.
"""

from __future__ import annotations

# (kind, name, regex) - the same dialect as signatures (RE2 and `regex`).
PATTERNS: tuple[tuple[str, str, str], ...] = (
    (
        "error",
        "exception",
        r"(?:^|[\s:\]>])(?:[A-Za-z_][\w]{0,60}\.){0,6}[A-Z]\w{0,60}(?:Error|Exception|Exit|Interrupt)(?::|$)",
    ),
    (
        "error",
        "fatal",
        r"\b(?:FATAL|Fatal error|fatal error|Segmentation fault|core dumped|Aborted)\b",
    ),
    ("error", "error_level", r"(?:^|[\s\[|])(?:ERROR|CRITICAL)(?:[\]|:\s]|$)"),
    ("progress", "metric_dict", r"\{'(?:loss|train_loss|eval_loss)': "),
    ("progress", "step", r"(?i)\b(?:step|iteration|iter)[ :=]{1,8}\d{1,9}\b.{0,200}\bloss\b"),
    ("progress", "bar", r"\d%\|.{0,200}\| *\d{1,12}/\d{1,12} \["),
    (
        "version",
        "torch",
        r"\b(?:torch|pytorch|PyTorch)(?: version)?(?:==|: | )(?P<torch>\d{1,3}\.\d{1,3}(?:\.\d{1,3})?)",
    ),
    ("version", "nccl", r"\bNCCL version (?P<nccl>\d{1,3}\.\d{1,3}\.\d{1,3})"),
    ("version", "cuda", r"\bCUDA (?:version|Version)[: ]{1,2}(?P<cuda>\d{1,3}\.\d{1,3})"),
    (
        "version",
        "transformers",
        r"\btransformers(?: version)?(?:==|: | )(?P<transformers>\d{1,3}\.\d{1,3}(?:\.\d{1,3})?)",
    ),
    (
        "version",
        "deepspeed",
        r"\bDeepSpeed(?: info)?: version=(?P<deepspeed>\d{1,3}\.\d{1,3}(?:\.\d{1,3})?)",
    ),
)
