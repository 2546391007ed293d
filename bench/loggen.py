"""Seeded generator of realistic multi-node training logs of any size.

The noise is what real torchrun + DeepSpeed + Hugging Face Trainer jobs print:
rank prefixes, tqdm frames redrawn with carriage returns, metric dicts, NCCL INFO
bursts, timestamped launcher lines, warnings, now and then invalid UTF-8, and
benign lines that look alarming. The failure cascade comes at the end: a CUDA OOM
on one rank, then NCCL watchdog timeouts on the others, SIGTERMs and the
launcher's ChildFailedError summary.

    python bench/loggen.py OUT.log --size 100M [--seed 7] [--ranks 32] [--no-failure]
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Iterator
from pathlib import Path

WARNINGS = (
    "UserWarning: TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the only storage class.",
    "FutureWarning: `torch.cuda.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cuda', args...)` instead.",
    "Token indices sequence length is longer than the specified maximum sequence length for this model (612 > 512). Running this sequence through the model will result in indexing errors",
    "[W reducer.cpp:1346] Warning: find_unused_parameters=True was specified in DDP constructor, but did not find any unused parameters in the forward pass.",
    "huggingface/tokenizers: The current process just got forked, after parallelism has already been used. Disabling parallelism to avoid deadlocks...",
    "wandb: WARNING Serializing object of type dict that is 1234 bytes",
)


def _noise(rng: random.Random, ranks: int, step: int) -> Iterator[bytes]:
    rank = rng.randrange(ranks)
    kind = rng.random()
    if kind < 0.35:
        loss = 2.5 / (1 + step / 5000) + rng.random() * 0.1
        yield f"[rank{rank}]: {{'loss': {loss:.4f}, 'grad_norm': {rng.random() * 3:.3f}, 'learning_rate': {5e-5 * (1 - step / 1e6):.3e}, 'epoch': {step / 10000:.2f}}}\n".encode()
    elif kind < 0.55:
        total = 1000
        frames = [
            f" {p * 100 // total:3d}%|{'#' * (p * 10 // total):<10}| {p}/{total} [{p // 60:02d}:{p % 60:02d}<00:00, {rng.uniform(1, 9):.2f}it/s]"
            for p in range(step % total, min(total, step % total + rng.randint(3, 12)))
        ]
        yield ("\r".join(frames) + "\n").encode()
    elif kind < 0.75:
        host = f"node{rank // 8:03d}"
        yield (
            f"{host}:{1000 + rank}:{2000 + rank} [{rank % 8}] NCCL INFO Channel {rng.randrange(32):02d}/32 : "
            f"{rank} {(rank + 1) % ranks} via P2P/CUMEM/read\n"
        ).encode()
    elif kind < 0.85:
        yield (
            f"[2024-06-14 10:{step // 60 % 60:02d}:{step % 60:02d},{rng.randrange(1000):03d}] [INFO] "
            f"[engine.py:{rng.randrange(2000)}:step] step={step}, skipped=0, lr=[{5e-5:.3e}], mom=[(0.9, 0.95)]\n"
        ).encode()
    elif kind < 0.93:
        yield f"[rank{rank}]: {rng.choice(WARNINGS)}\n".encode()
    elif kind < 0.97:
        yield f"[rank{rank}]: eval sample: caf\xe9 \xff\xfe decoded with errors at byte {rng.randrange(10**6)}\n".encode(
            "latin-1"
        )
    else:
        yield f"[rank{rank}]: Saving model checkpoint to /checkpoints/run-17/checkpoint-{step}\n".encode()


def failure_cascade(ranks: int, failing: int = 5) -> bytes:
    """The end of the log: OOM on one rank, echoes on all the others."""
    lines = [
        f"[rank{failing}]: Traceback (most recent call last):",
        f'[rank{failing}]:   File "/workspace/train.py", line 88, in train_step',
        f"[rank{failing}]:     outputs = model(**batch)",
        f"[rank{failing}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU {failing % 8} has a total capacity of 79.15 GiB of which 1.23 GiB is free. Including non-PyTorch memory, this process has 77.91 GiB memory in use. Of the allocated memory 74.10 GiB is allocated by PyTorch, and 2.31 GiB is reserved by PyTorch but unallocated.",
    ]
    for r in range(ranks):
        if r != failing:
            lines.append(
                f"[rank{r}]:[E0614 11:20:{r % 60:02d}.123456 {4000 + r} ProcessGroupNCCL.cpp:607] [Rank {r}] Watchdog caught "
                f"collective operation timeout: WorkNCCL(SeqNum=48213, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, "
                f"Timeout(ms)=600000) ran for 600089 milliseconds before timing out."
            )
    lines += [
        f"W0614 11:21:00.000000 900 torch/distributed/elastic/multiprocessing/api.py:890] Sending process {4000 + r} closing signal SIGTERM"
        for r in range(min(ranks, 8))
        if r != failing
    ]
    lines += [
        "Traceback (most recent call last):",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "train.py FAILED",
        "------------------------------------------------------------",
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2024-06-14_11:21:00",
        "  host      : node000",
        f"  rank      : {failing} (local_rank: {failing % 8})",
        f"  exitcode  : 1 (pid: {4000 + failing})",
        "  error_file: <N/A>",
        "============================================================",
    ]
    return ("\n".join(lines) + "\n").encode()


def generate(path: Path, size: int, *, seed: int = 7, ranks: int = 32, failure: bool = True) -> None:
    """Write about `size` bytes of log to path, streaming (constant memory)."""
    rng = random.Random(seed)
    tail = failure_cascade(ranks) if failure else b""
    written, step = 0, 0
    with path.open("wb") as out:
        buf: list[bytes] = []
        pending = 0
        while written + pending < size - len(tail):
            for piece in _noise(rng, ranks, step):
                buf.append(piece)
                pending += len(piece)
            step += 1
            if pending > 1 << 20:
                out.write(b"".join(buf))
                written += pending
                buf, pending = [], 0
        out.write(b"".join(buf))
        out.write(tail)


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--size", type=parse_size, default=parse_size("100M"))
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ranks", type=int, default=32)
    parser.add_argument("--no-failure", action="store_true")
    args = parser.parse_args()
    generate(args.out, args.size, seed=args.seed, ranks=args.ranks, failure=not args.no_failure)


if __name__ == "__main__":
    main()
