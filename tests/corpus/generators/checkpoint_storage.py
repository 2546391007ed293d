"""Generate real failure logs for the checkpoint and cache/storage layers.

Usage:  python tests/corpus/generators/checkpoint_storage.py OUTDIR [CASE ...]

Run it with an interpreter that has torch, numpy, safetensors, transformers,
redis, msgpack, boto3 and moto installed (the committed cases used torch 2.13.0+cpu,
Python 3.11.7).  Every scenario writes a small, real training or utility
program, runs it in a subprocess with stdout and stderr merged (as
`python train.py 2>&1 | tee train.log` does), and saves the captured bytes
unchanged to OUTDIR/<case-id>/log.txt.  Nothing in a log is written by hand:
the failure is caused on purpose (a truncated file, a full tmpfs, a Redis
server configured to refuse ...) and the real software reports it.

OUTDIR/<case-id>/meta.json records the label (what the run really did), so the
cases can be added with `tracelore corpus add`.

Some scenarios need root (mounting a tiny tmpfs), redis-server, and moto_server
on PATH; they start their own servers on private loopback ports and stop them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

PY = sys.executable
WORK = Path(os.environ.get("TL_GEN_WORK", "/tmp/tlgen"))
SCENARIOS: dict[str, dict] = {}


def scenario(case, expected, notes, collateral=(), also_ok=(), tags=()):
    """Register a scenario function under its case id with its label."""

    def deco(fn):
        SCENARIOS[case] = {
            "fn": fn,
            "expected": expected,
            "notes": notes,
            "collateral": list(collateral),
            "also_ok": list(also_ok),
            "tags": list(tags),
        }
        return fn

    return deco


def run(
    workdir: Path,
    program: str,
    *,
    args=(),
    env=None,
    name="train.py",
    shell_prefix: str | None = None,
    timeout=600,
    cmd=None,
) -> bytes:
    """Write `program` to workdir/name, run it, return merged stdout+stderr."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / name).write_text(program)
    e = {
        "PATH": os.path.dirname(PY) + ":/usr/local/bin:/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "PYTHONUNBUFFERED": "1",
        "HF_HUB_OFFLINE": "1",
        "LANG": "C.UTF-8",
        "OMP_NUM_THREADS": "1",
    }
    e.update(env or {})
    if cmd is None:
        cmd = [PY, name, *args]
    if shell_prefix:
        cmd = ["bash", "-c", shell_prefix + " && exec " + " ".join(cmd)]
    p = subprocess.Popen(
        cmd, cwd=workdir, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # A hung run (e.g. DataLoader workers): kill its whole process group, keep what it printed.
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
    return out


# A tiny but ordinary training script: an MLP classifier on random data, an
# AdamW optimizer, a loss print every few steps and a checkpoint per epoch.
PRELUDE = r"""
import os, sys, time, math, argparse
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self, d_in=32, hidden=64, n_classes=10):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, x):
        return self.head(self.encoder(x))


def make_data(n=512, d_in=32, n_classes=10):
    x = torch.randn(n, d_in)
    w = torch.randn(d_in, n_classes)
    y = (x @ w).argmax(1)
    return x, y


def train_epoch(model, opt, x, y, epoch, bs=32, log_every=4, log=print):
    model.train()
    for i, s in enumerate(range(0, len(x), bs)):
        xb, yb = x[s:s + bs], y[s:s + bs]
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if i % log_every == 0:
            log(f"epoch {epoch} step {i:3d}/{len(x) // bs} loss {loss.item():.4f} lr {opt.param_groups[0]['lr']:.2e}")
    return loss.item()
"""


# ---------------------------------------------------------------- checkpoint.truncated


def _train_then_load(workdir, save_kw="", cut="half", load_kw="", size="small", logging_fmt=False):
    hidden = 64 if size == "small" else 1024
    cut_at = {
        "half": lambda n: n // 2,
        "tail": lambda n: n - 100,
        "third": lambda n: n // 3,
        "head": lambda n: 48,
        "head100": lambda n: 100,
        "zero": lambda n: 0,
    }[cut]
    log_setup = ""
    log_fn = "print"
    if logging_fmt:
        log_setup = (
            'import logging\nlogging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", '
            'level=logging.INFO)\nlogger = logging.getLogger("train")\n'
        )
        log_fn = "logger.info"
    prog = (
        PRELUDE
        + log_setup
        + f'''
x, y = make_data()
model = Net(hidden={hidden})
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
os.makedirs("checkpoints", exist_ok=True)
if not os.path.exists("checkpoints/last.pt"):
    for epoch in range(3):
        loss = train_epoch(model, opt, x, y, epoch, log={log_fn})
        torch.save({{"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch, "loss": loss}},
                   "checkpoints/last.pt"{save_kw})
        {log_fn}(f"saved checkpoint checkpoints/last.pt (epoch {{epoch}})")
    sys.exit(0)
{log_fn}("resuming from checkpoints/last.pt")
ckpt = torch.load("checkpoints/last.pt"{load_kw})
model.load_state_dict(ckpt["model"])
opt.load_state_dict(ckpt["optimizer"])
for epoch in range(ckpt["epoch"] + 1, 6):
    train_epoch(model, opt, x, y, epoch, log={log_fn})
'''
    )
    first = run(workdir, prog)
    p = workdir / "checkpoints/last.pt"
    data = p.read_bytes()
    p.write_bytes(data[: cut_at(len(data))])
    # The log holds the first job (which saved) and the resumed job, as a log appended to by both would.
    return first + run(workdir, prog)


@scenario(
    "gen-ckpt-truncated-zip-central-dir",
    "checkpoint.truncated",
    "A 3-epoch run saves checkpoints/last.pt (torch zip format, ~12 MB); the script then truncates the file to "
    "half its size, as a save killed mid-write leaves it, and the resumed job's torch.load reads it "
    "(miniz cannot find the zip central directory).",
)
def ckpt_truncated_zip_central_dir(w):
    """Resume from a large zip checkpoint cut in half (killed mid-save)."""
    return _train_then_load(w, cut="half", size="big")


@scenario(
    "gen-ckpt-truncated-zip-small-einval",
    "checkpoint.truncated",
    "A small (~60 KB) torch.save zip checkpoint is truncated to half its size by the script (torn write); "
    "torch 2.13's PyTorchFileReader then fails with OSError [Errno 22] Invalid argument when it seeks "
    "back from the end of the short file to look for the zip directory.",
)
def ckpt_truncated_zip_small(w):
    """A small checkpoint truncated mid-file: torch reports EINVAL from its seek."""
    return _train_then_load(w, cut="half", size="small", logging_fmt=True)


@scenario(
    "gen-ckpt-truncated-zip-header-only",
    "checkpoint.truncated",
    "The script keeps only the first 48 bytes of the zip checkpoint (a save killed right after it began); "
    "torch.load's miniz reader reports failed finding central directory.",
)
def ckpt_truncated_zip_head(w):
    """Only the first bytes of a zip checkpoint were written before the process died."""
    return _train_then_load(w, cut="head", size="small")


@scenario(
    "gen-ckpt-truncated-legacy-unexpected-eof",
    "checkpoint.truncated",
    "Checkpoint saved with _use_new_zipfile_serialization=False (legacy format), truncated to half by the "
    "script; torch.load reads the pickle part and then hits the cut inside a tensor record "
    "(unexpected EOF ... The file might be corrupted).",
)
def ckpt_truncated_legacy_eof(w):
    """Legacy (non-zip) checkpoint cut in the middle of its tensor data."""
    return _train_then_load(w, save_kw=", _use_new_zipfile_serialization=False", cut="half")


@scenario(
    "gen-ckpt-truncated-legacy-pickle-truncated",
    "checkpoint.truncated",
    "Legacy-format checkpoint truncated to its first 100 bytes by the script (save killed just after it "
    "started); the resumed job calls torch.load(weights_only=False), and the pickle reader reports "
    "pickle data was truncated.",
)
def ckpt_truncated_legacy_pickle(w):
    """Legacy checkpoint cut inside its pickle header, loaded with weights_only=False."""
    return _train_then_load(
        w, save_kw=", _use_new_zipfile_serialization=False", cut="head100", load_kw=", weights_only=False"
    )


@scenario(
    "gen-ckpt-truncated-legacy-weights-only-eof",
    "checkpoint.truncated",
    "Legacy-format checkpoint truncated to 48 bytes; torch.load with the default weights_only=True fails "
    "inside the weights-only unpickler with a bare EOFError (no message). The file was cut by the script.",
)
def ckpt_truncated_legacy_wo(w):
    """Legacy checkpoint cut early, loaded with the default weights_only=True: bare EOFError."""
    return _train_then_load(w, save_kw=", _use_new_zipfile_serialization=False", cut="head", logging_fmt=True)


@scenario(
    "gen-ckpt-truncated-zero-bytes-ran-out",
    "checkpoint.truncated",
    "The job was killed right after open() created checkpoints/last.pt, leaving a 0-byte legacy checkpoint "
    "(the script truncates it to 0 bytes); torch.load(weights_only=False) reports EOFError: Ran out of input.",
    also_ok=("checkpoint.pickle_protocol",),
)
def ckpt_truncated_zero(w):
    """An empty checkpoint file left by a save that never wrote anything."""
    return _train_then_load(
        w, save_kw=", _use_new_zipfile_serialization=False", cut="zero", load_kw=", weights_only=False"
    )


@scenario(
    "gen-ckpt-truncated-pickle-dump",
    "checkpoint.truncated",
    "A training script pickles its state (numpy weights + metrics history) with pickle.dump every epoch; "
    "the script truncates the file as a killed write would, and the resume's pickle.load fails.",
)
def ckpt_truncated_pickle(w):
    """A plain-pickle training state truncated mid-write."""
    prog = r"""
import pickle, os, sys
import numpy as np
rng = np.random.default_rng(0)
X = rng.normal(size=(2000, 50)); true_w = rng.normal(size=50); yv = (X @ true_w > 0).astype(float)
state_path = "state.pkl"
if os.path.exists(state_path):
    print(f"loading training state from {state_path}")
    with open(state_path, "rb") as f:
        state = pickle.load(f)
    print(f"resumed at epoch {state['epoch']}")
else:
    state = {"w": np.zeros(50), "epoch": 0, "history": []}
for epoch in range(state["epoch"], state["epoch"] + 5):
    p = 1 / (1 + np.exp(-(X @ state["w"])))
    loss = -np.mean(yv * np.log(p + 1e-9) + (1 - yv) * np.log(1 - p + 1e-9))
    state["w"] -= 0.5 * X.T @ (p - yv) / len(X)
    state["history"].append({"epoch": epoch, "loss": float(loss), "w_snapshot": state["w"].copy()})
    state["epoch"] = epoch + 1
    print(f"epoch {epoch} logistic loss {loss:.5f}")
    with open(state_path, "wb") as f:
        pickle.dump(state, f)
"""
    first = run(w, prog)
    p = w / "state.pkl"
    d = p.read_bytes()
    p.write_bytes(d[: len(d) * 2 // 3])
    return first + run(w, prog)


@scenario(
    "gen-ckpt-truncated-safetensors",
    "checkpoint.truncated",
    "The script writes model.safetensors with safetensors.torch.save_file after training, then truncates it "
    "to 60% (an interrupted copy); safetensors.torch.load_file rejects the shorter buffer.",
    also_ok=("checkpoint.safetensors_corrupt",),
)
def ckpt_truncated_safetensors(w):
    """A safetensors file cut short by an interrupted copy."""
    prog = (
        PRELUDE
        + r"""
from safetensors.torch import save_file, load_file
x, y = make_data()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
if sys.argv[1:] == ["train"]:
    for epoch in range(2):
        train_epoch(model, opt, x, y, epoch)
    save_file(model.state_dict(), "model.safetensors", metadata={"format": "pt"})
    print("exported model.safetensors")
else:
    print("evaluating exported model.safetensors")
    sd = load_file("model.safetensors")
    model.load_state_dict(sd)
    with torch.no_grad():
        acc = (model(x).argmax(1) == y).float().mean()
    print(f"accuracy {acc:.3f}")
"""
    )
    run(w, prog, args=["train"])
    p = w / "model.safetensors"
    d = p.read_bytes()
    p.write_bytes(d[: int(len(d) * 0.6)])
    return run(w, prog, args=["eval"])


@scenario(
    "gen-ckpt-truncated-safetensors-header",
    "checkpoint.truncated",
    "model.safetensors truncated by the script to its first 40 bytes (the copy died inside the JSON header); "
    "the 8-byte header length then points past the end of the file and safetensors reports an invalid "
    "header length when the eval job opens it.",
    also_ok=("checkpoint.safetensors_corrupt",),
)
def ckpt_truncated_safetensors_header(w):
    """A safetensors file cut inside its JSON header."""
    prog = (
        PRELUDE
        + r"""
from safetensors import safe_open
from safetensors.torch import save_file
if sys.argv[1:] == ["train"]:
    x, y = make_data(); model = Net(); opt = torch.optim.Adam(model.parameters(), 1e-3)
    for epoch in range(2):
        train_epoch(model, opt, x, y, epoch, log_every=8)
    save_file(model.state_dict(), "model.safetensors")
else:
    with safe_open("model.safetensors", framework="pt") as f:
        for k in f.keys():
            print(k, f.get_slice(k).get_shape())
"""
    )
    run(w, prog, args=["train"])
    p = w / "model.safetensors"
    p.write_bytes(p.read_bytes()[:40])
    return run(w, prog, args=["eval"])


# ---------------------------------------------------------------- weights_only


def _weights_only(w, extra_import, extra_obj, load_kw=""):
    prog = (
        PRELUDE
        + extra_import
        + f'''
x, y = make_data()
model = Net()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
if sys.argv[1:] == ["train"]:
    best = None
    for epoch in range(3):
        loss = train_epoch(model, opt, x, y, epoch, log_every=8)
        with torch.no_grad():
            acc = (model(x).argmax(1) == y).float().mean().item()
        print(f"epoch {{epoch}} train_acc {{acc:.4f}}")
    torch.save({{"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch, {extra_obj}}}, "best.pt")
    print("saved best.pt")
else:
    print("loading best.pt for evaluation")
    ckpt = torch.load("best.pt"{load_kw})
    model.load_state_dict(ckpt["model"])
    print("loaded epoch", ckpt["epoch"])
'''
    )
    run(w, prog, args=["train"])
    return run(w, prog, args=["eval"])


@scenario(
    "gen-ckpt-weights-only-numpy-scalar",
    "checkpoint.weights_only_rejected",
    "The checkpoint stores best_acc as a numpy float64 (np.float64 from a metrics computation); torch 2.13's "
    "default torch.load(weights_only=True) refuses the numpy global.",
)
def wo_numpy_scalar(w):
    """A numpy scalar metric inside the checkpoint dict, loaded with the default weights_only=True."""
    return _weights_only(w, "import numpy as np\n", '"best_acc": np.float64(acc), "seen": np.int64(1536)')


@scenario(
    "gen-ckpt-weights-only-argparse",
    "checkpoint.weights_only_rejected",
    "The checkpoint stores the run's argparse.Namespace (args) as many training scripts do; torch.load with "
    "the default weights_only=True refuses argparse.Namespace.",
)
def wo_argparse(w):
    """The training args (argparse.Namespace) saved in the checkpoint."""
    return _weights_only(
        w,
        'ap = argparse.ArgumentParser(); ap.add_argument("mode"); ap.add_argument("--lr", type=float, default=1e-3)\nargs = ap.parse_args()\n',
        '"args": args',
    )


@scenario(
    "gen-ckpt-weights-only-custom-class",
    "checkpoint.weights_only_rejected",
    "The checkpoint stores a project dataclass (TrainConfig) instance; torch.load with the default "
    "weights_only=True refuses the __main__.TrainConfig global.",
)
def wo_custom_class(w):
    """A custom config dataclass saved in the checkpoint."""
    return _weights_only(
        w,
        "from dataclasses import dataclass\n@dataclass\nclass TrainConfig:\n    lr: float = 1e-3\n    hidden: int = 64\n    epochs: int = 3\ncfg = TrainConfig()\n",
        '"config": cfg',
    )


@scenario(
    "gen-ckpt-weights-only-whole-model",
    "checkpoint.weights_only_rejected",
    "The training job saved the whole nn.Module (torch.save(model)) instead of its state_dict; the eval job's "
    "torch.load with default weights_only=True refuses the __main__.Net class global.",
)
def wo_whole_model(w):
    """torch.save(model) of a whole module, loaded with weights_only=True."""
    prog = (
        PRELUDE
        + r"""
x, y = make_data()
if sys.argv[1:] == ["train"]:
    model = Net(); opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(3):
        train_epoch(model, opt, x, y, epoch, log_every=8)
    torch.save(model, "model_full.pt")
    print("saved model_full.pt")
else:
    model = torch.load("model_full.pt", map_location="cpu")
    model.eval()
    print("eval acc", (model(x).argmax(1) == y).float().mean().item())
"""
    )
    run(w, prog, args=["train"])
    return run(w, prog, args=["eval"])


# ---------------------------------------------------------------- architecture / optimizer


@scenario(
    "gen-ckpt-arch-size-mismatch-head",
    "checkpoint.architecture_mismatch",
    "The model is trained with 10 classes and saved; the fine-tune job builds Net(n_classes=5) and calls "
    "load_state_dict (strict) on the checkpoint, which has a 10-row head: size mismatch for head.weight/bias.",
)
def arch_size_mismatch(w):
    """Checkpoint head has a different number of classes than the model it is loaded into."""
    prog = (
        PRELUDE
        + r"""
if sys.argv[1:] == ["pretrain"]:
    x, y = make_data(n_classes=10); model = Net(n_classes=10); opt = torch.optim.AdamW(model.parameters(), 2e-3)
    for epoch in range(2):
        train_epoch(model, opt, x, y, epoch)
    torch.save(model.state_dict(), "pretrained.pt")
    print("saved pretrained.pt")
else:
    x, y = make_data(n_classes=5)
    model = Net(n_classes=5)
    print("loading pretrained weights from pretrained.pt")
    model.load_state_dict(torch.load("pretrained.pt", map_location="cpu"))
"""
    )
    run(w, prog, args=["pretrain"])
    return run(w, prog, args=["finetune"])


@scenario(
    "gen-ckpt-arch-ddp-module-prefix",
    "checkpoint.architecture_mismatch",
    "The checkpoint was saved from a DDP-wrapped model (keys prefixed 'module.' by torchrun with gloo, 2 "
    "processes); the single-process eval job loads it into the bare model: missing keys / unexpected keys "
    "'module.*'. The first part of the log is the real torchrun training run.",
    tags=("multi-rank", "gloo"),
)
def arch_ddp_prefix(w):
    """Loading a DDP (module.-prefixed) state dict into an unwrapped model."""
    prog = (
        PRELUDE
        + r"""
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
if sys.argv[1:] == ["train"]:
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    x, y = make_data()
    model = DDP(Net())
    opt = torch.optim.AdamW(model.parameters(), 1e-3)
    shard = slice(rank, None, dist.get_world_size())
    for epoch in range(2):
        train_epoch(model, opt, x[shard], y[shard], epoch, log=lambda m: print(f"[rank{rank}] {m}"))
    if rank == 0:
        torch.save(model.state_dict(), "ddp_ckpt.pt")
        print("[rank0] saved ddp_ckpt.pt")
    dist.barrier()
    dist.destroy_process_group()
else:
    x, y = make_data()
    model = Net()
    sd = torch.load("ddp_ckpt.pt")
    print(f"loaded {len(sd)} tensors")
    model.load_state_dict(sd)
"""
    )
    a = run(
        w,
        prog,
        cmd=[
            os.path.join(os.path.dirname(PY), "torchrun"),
            "--nproc_per_node=2",
            "--master_port=29613",
            "train.py",
            "train",
        ],
    )
    b = run(w, prog, args=["eval"])
    return a + b


@scenario(
    "gen-ckpt-arch-hf-size-mismatch",
    "checkpoint.architecture_mismatch",
    "A tiny BERT (built from a local config, no hub) is saved with vocab 1000 and reloaded with "
    "from_pretrained(..., vocab_size=1200) as if the tokenizer had grown; transformers refuses the "
    "word_embeddings size mismatch.",
)
def arch_hf_size_mismatch(w):
    """transformers from_pretrained with a config that no longer matches the saved weights."""
    prog = r"""
import torch, sys
from transformers import BertConfig, BertForMaskedLM
cfg = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
if sys.argv[1:] == ["save"]:
    m = BertForMaskedLM(cfg)
    ids = torch.randint(0, 1000, (4, 16))
    opt = torch.optim.AdamW(m.parameters(), 5e-4)
    for step in range(6):
        out = m(input_ids=ids, labels=ids)
        out.loss.backward(); opt.step(); opt.zero_grad()
        print(f"step {step} mlm loss {out.loss.item():.4f}")
    m.save_pretrained("out/bert-tiny-mlm")
    print("saved to out/bert-tiny-mlm")
else:
    print("added 200 tokens to the tokenizer, vocab_size=1200")
    m = BertForMaskedLM.from_pretrained("out/bert-tiny-mlm", vocab_size=1200)
"""
    run(w, prog, args=["save"])
    return run(w, prog, args=["load"])


@scenario(
    "gen-ckpt-optimizer-group-size-mismatch",
    "checkpoint.optimizer_state_mismatch",
    "Between save and resume the script froze the encoder and built the optimizer over the head only "
    "(fewer params in the group); optimizer.load_state_dict raises the parameter-group size ValueError.",
)
def opt_group_size(w):
    """Optimizer state from a full-model optimizer loaded into a head-only optimizer."""
    prog = (
        PRELUDE
        + r"""
x, y = make_data()
model = Net()
if sys.argv[1:] == ["stage1"]:
    opt = torch.optim.AdamW(model.parameters(), 1e-3)
    for epoch in range(2):
        train_epoch(model, opt, x, y, epoch)
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 1}, "ckpt.pt")
else:
    ckpt = torch.load("ckpt.pt")
    model.load_state_dict(ckpt["model"])
    for p in model.encoder.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], 1e-3)
    print("stage 2: encoder frozen, resuming optimizer state")
    opt.load_state_dict(ckpt["optimizer"])
"""
    )
    run(w, prog, args=["stage1"])
    return run(w, prog, args=["stage2"])


@scenario(
    "gen-ckpt-optimizer-group-count-mismatch",
    "checkpoint.optimizer_state_mismatch",
    "The resumed job splits parameters into two groups (no weight decay on biases) while the checkpoint's "
    "optimizer had one group; optimizer.load_state_dict refuses the different number of parameter groups.",
)
def opt_group_count(w):
    """Optimizer built with a different number of param groups than the saved one."""
    prog = (
        PRELUDE
        + r"""
import logging
logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(levelname)s %(message)s")
log = logging.getLogger(__name__)
x, y = make_data()
model = Net()
if sys.argv[1:] == ["v1"]:
    opt = torch.optim.AdamW(model.parameters(), 1e-3, weight_decay=0.01)
    for epoch in range(2):
        train_epoch(model, opt, x, y, epoch, log=log.info)
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, "ckpt.pt")
    log.info("checkpoint saved")
else:
    decay = [p for n, p in model.named_parameters() if n.endswith("weight")]
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], 1e-3)
    ckpt = torch.load("ckpt.pt")
    model.load_state_dict(ckpt["model"])
    log.info("restoring optimizer state")
    opt.load_state_dict(ckpt["optimizer"])
"""
    )
    run(w, prog, args=["v1"])
    return run(w, prog, args=["v2"])


@scenario(
    "gen-ckpt-optimizer-state-shape-step",
    "checkpoint.optimizer_state_mismatch",
    "The resumed optimizer has the same number of parameters per group but in another order (the head was "
    "registered before the encoder in the new code), so load_state_dict maps Adam's exp_avg buffers onto "
    "parameters of other shapes; the failure only shows at the first opt.step() as a tensor size mismatch. "
    "Root cause: optimizer state does not match the parameter groups.",
    also_ok=(),
)
def opt_state_shape(w):
    """Adam state loaded onto reordered parameters; fails at the first step with a shape error."""
    prog = (
        PRELUDE
        + r"""
x, y = make_data()
if sys.argv[1:] == ["v1"]:
    model = Net(); opt = torch.optim.Adam(model.parameters(), 1e-3)
    for epoch in range(2):
        train_epoch(model, opt, x, y, epoch)
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 1}, "ckpt.pt")
else:
    model = Net()
    ckpt = torch.load("ckpt.pt")
    model.load_state_dict(ckpt["model"])
    params = list(model.head.parameters()) + list(model.encoder.parameters())
    opt = torch.optim.Adam(params, 1e-3)
    opt.load_state_dict(ckpt["optimizer"])
    print(f"resumed from epoch {ckpt['epoch']}")
    for epoch in range(ckpt["epoch"] + 1, 4):
        train_epoch(model, opt, x, y, epoch)
"""
    )
    run(w, prog, args=["v1"])
    return run(w, prog, args=["v2"])


def _as_if_saved_on_gpu(path: Path):
    """Rewrite a torch zip checkpoint's storage locations from 'cpu' to 'cuda:0'.

    This makes the file what torch.save writes for tensors that lived on a GPU (this machine has none).
    """
    import zipfile

    src = path.with_suffix(".cpu.pt")
    path.rename(src)
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename.endswith("data.pkl"):
                data = data.replace(b"X\x03\x00\x00\x00cpu", b"X\x06\x00\x00\x00cuda:0")
            zout.writestr(info, data)
    src.unlink()


@scenario(
    "gen-ckpt-device-cuda-on-cpu-host",
    "checkpoint.device_mismatch",
    "The checkpoint holds CUDA storages (the script rewrites the storage locations of a saved checkpoint to "
    "cuda:0, exactly what torch.save writes for a model trained on a GPU); the evaluation host has no GPU and "
    "torch.load is called without map_location, so deserializing the CUDA storages fails.",
    also_ok=("cuda.not_available",),
)
def device_cuda_ckpt(w):
    """A GPU-saved checkpoint loaded on a CPU-only machine without map_location."""
    prog = (
        PRELUDE
        + r"""
import logging
logging.basicConfig(level=logging.INFO, format="%(asctime)s [%(levelname)s] %(message)s")
if sys.argv[1:] == ["train"]:
    x, y = make_data(); model = Net(); opt = torch.optim.AdamW(model.parameters(), 1e-3)
    for epoch in range(2):
        train_epoch(model, opt, x, y, epoch, log_every=8, log=logging.info)
    torch.save({"model": model.state_dict(), "epoch": 1}, "model_best.pt")
else:
    logging.info("device: %s", "cuda" if torch.cuda.is_available() else "cpu")
    model = Net()
    ckpt = torch.load("model_best.pt")
    model.load_state_dict(ckpt["model"])
"""
    )
    run(w, prog, args=["train"])
    _as_if_saved_on_gpu(w / "model_best.pt")
    return run(w, prog, args=["eval"])


@scenario(
    "gen-ckpt-not-found-accelerate-load-state",
    "checkpoint.not_found",
    "An accelerate training script resumes with accelerator.load_state('ckpts/checkpoint_3') but only "
    "checkpoint_0..2 were saved by the previous run (in this log); accelerate raises that the folder does "
    "not exist.",
    tags=("accelerate",),
)
def notfound_accelerate(w):
    """accelerate load_state on a checkpoint folder that does not exist."""
    prog = (
        PRELUDE
        + r"""
from accelerate import Accelerator
from accelerate.logging import get_logger
import logging
logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(levelname)s - %(name)s - %(message)s")
logger = get_logger(__name__)
accelerator = Accelerator(cpu=True, project_dir=".")
x, y = make_data()
model = Net(); opt = torch.optim.AdamW(model.parameters(), 1e-3)
model, opt = accelerator.prepare(model, opt)
if len(sys.argv) > 1:
    logger.info(f"Resuming from {sys.argv[1]}")
    accelerator.load_state(sys.argv[1])
for epoch in range(3):
    train_epoch(model, opt, x, y, epoch, log_every=8, log=logger.info)
    accelerator.save_state(f"ckpts/checkpoint_{epoch}")
"""
    )
    return run(w, prog) + run(w, prog, args=["ckpts/checkpoint_3"])


DCP_PROG = (
    PRELUDE
    + r"""
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.fsdp import fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
log = lambda m: print(f"[rank{rank}] {m}", flush=True)
mode, hidden, wrap = sys.argv[1], int(sys.argv[2]), sys.argv[3]
x, y = make_data()
model = Net(hidden=hidden)
if wrap == "fsdp":
    for layer in model.encoder:
        if isinstance(layer, nn.Linear):
            fully_shard(layer)
    fully_shard(model)
else:
    model = DDP(model)
opt = torch.optim.AdamW(model.parameters(), 1e-3)
if mode == "train":
    shard = slice(rank, None, world)
    for epoch in range(2):
        train_epoch(model, opt, x[shard], y[shard], epoch, log=log)
    dcp.save({"model": model.state_dict()}, checkpoint_id="dcp_ckpt/step_100")
    log("saved distributed checkpoint dcp_ckpt/step_100")
else:
    state = {"model": model.state_dict()}
    log(f"loading dcp_ckpt/step_100 ({wrap}, hidden={hidden})")
    dcp.load(state, checkpoint_id="dcp_ckpt/step_100")
    model.load_state_dict(state["model"])
    log("resumed")
dist.destroy_process_group()
"""
)


def _dcp(w, load_hidden, load_wrap):
    torchrun = os.path.join(os.path.dirname(PY), "torchrun")
    a = run(
        w,
        DCP_PROG,
        cmd=[torchrun, "--nproc_per_node=2", "--master_port=29633", "train.py", "train", "64", "fsdp"],
        timeout=240,
    )
    b = run(
        w,
        DCP_PROG,
        cmd=[torchrun, "--nproc_per_node=2", "--master_port=29633", "train.py", "load", str(load_hidden), load_wrap],
        timeout=240,
    )
    return a + b


@scenario(
    "gen-ckpt-sharded-dcp-fsdp-to-ddp",
    "checkpoint.sharded_mismatch",
    "A 2-rank FSDP2 (fully_shard, gloo) run saves a torch.distributed.checkpoint; the resume job wraps the same "
    "model in DDP instead, so its state-dict keys carry the 'module.' prefix and dcp.load finds no matching "
    "entries (Missing key in checkpoint state_dict: model.module.encoder.0.weight) on both ranks; torchrun then "
    "prints the ChildFailedError summary. The checkpoint layout does not match the new parallel wrapper.",
    collateral=("dist.child_failed", "dist.sigterm_collateral"),
    also_ok=("checkpoint.architecture_mismatch",),
    tags=("multi-rank", "gloo"),
)
def dcp_fsdp_to_ddp(w):
    """DCP checkpoint saved under FSDP2 loaded under DDP (different state-dict layout)."""
    return _dcp(w, 64, "ddp")


@scenario(
    "gen-ckpt-arch-dcp-size-mismatch",
    "checkpoint.architecture_mismatch",
    "A 2-rank FSDP2 run saves a torch.distributed.checkpoint with hidden=64; the resume job builds the model with "
    "hidden=128 and dcp.load fails on both ranks with Size mismatch between saved torch.Size([64, 32]) and "
    "current torch.Size([128, 32]); torchrun prints the ChildFailedError summary.",
    collateral=("dist.child_failed", "dist.sigterm_collateral"),
    tags=("multi-rank", "gloo"),
)
def dcp_size_mismatch(w):
    """DCP checkpoint loaded into a model of another width."""
    return _dcp(w, 128, "fsdp")


@scenario(
    "gen-ckpt-write-parent-dir-missing",
    "checkpoint.write_failed",
    "The script saves each epoch to f'{args.output_dir}/epoch_{n}.pt' but never creates output_dir "
    "(runs/exp5); the first torch.save after epoch 0 fails because the parent directory does not exist.",
)
def write_parent_missing(w):
    """torch.save into a directory that was never created."""
    prog = (
        PRELUDE
        + r"""
ap = argparse.ArgumentParser(); ap.add_argument("--output_dir", default="runs/exp5"); args = ap.parse_args()
x, y = make_data(); model = Net(); opt = torch.optim.AdamW(model.parameters(), 1e-3)
for epoch in range(3):
    train_epoch(model, opt, x, y, epoch)
    torch.save({"model": model.state_dict(), "epoch": epoch}, f"{args.output_dir}/epoch_{epoch}.pt")
"""
    )
    return run(w, prog)


@scenario(
    "gen-ckpt-write-read-only-fs",
    "checkpoint.write_failed",
    "The checkpoint directory is a read-only mount (the script mounts a tmpfs with -o ro, like a volume "
    "mounted read-only in a container); torch.save fails: [enforce fail at inline_container.cc] open file failed "
    "with strerror: Read-only file system.",
)
def write_readonly(w):
    """torch.save onto a read-only filesystem."""
    mnt = w / "checkpoints"
    mnt.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(mnt)], check=True)
    try:
        prog = (
            PRELUDE
            + r"""
import logging
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s [%(name)s] %(message)s")
log = logging.getLogger("trainer")
x, y = make_data(); model = Net(); opt = torch.optim.AdamW(model.parameters(), 1e-3)
for epoch in range(2):
    train_epoch(model, opt, x, y, epoch, log=log.info)
    log.info("saving checkpoint to checkpoints/last.pt")
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, "checkpoints/last.pt")
"""
        )
        return run(w, prog)
    finally:
        _untmpfs(mnt)


@scenario(
    "gen-ckpt-hub-offline",
    "checkpoint.hub_download_failed",
    "The job calls AutoModelForCausalLM.from_pretrained('openai-community/gpt2') on a host with no network "
    "access to the hub (run with HF_HUB_OFFLINE=1, as air-gapped clusters set it) and no local cache; "
    "transformers cannot resolve config.json from the hub.",
)
def hub_offline(w):
    """from_pretrained of a hub id on an offline host with an empty cache."""
    prog = r"""
import logging
logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(levelname)s - %(name)s - %(message)s")
logger = logging.getLogger("finetune")
from transformers import AutoModelForCausalLM, AutoTokenizer
model_id = "openai-community/gpt2"
logger.info("loading %s", model_id)
tok = AutoTokenizer.from_pretrained(model_id)
model = AutoModelForCausalLM.from_pretrained(model_id)
"""
    cache = w / "hf_cache"
    cache.mkdir(parents=True, exist_ok=True)
    return run(w, prog, env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(cache)})


# ---------------------------------------------------------------- not a checkpoint / pickle


@scenario(
    "gen-ckpt-pickle-html-page",
    "checkpoint.pickle_protocol",
    "The 'checkpoint' is an HTML error page saved by a download script (curl -o of a login/404 page); "
    "torch.load fails with invalid load key, '<'.",
)
def pickle_html(w):
    """torch.load of an HTML page that a failed download saved under the checkpoint name."""
    w.mkdir(parents=True, exist_ok=True)
    (w / "resnet_pretrained.pth").write_text(
        "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>\n<body><h1>Not Found</h1>"
        "<p>The requested URL was not found on this server.</p></body></html>\n"
    )
    prog = (
        PRELUDE
        + r"""
model = Net()
path = "resnet_pretrained.pth"
print(f"=> loading pretrained weights '{path}'")
state = torch.load(path, map_location="cpu", weights_only=False)
model.load_state_dict(state)
"""
    )
    return run(w, prog)


@scenario(
    "gen-ckpt-pickle-npy-file",
    "checkpoint.pickle_protocol",
    "The script passes a NumPy .npy file (embeddings saved with np.save) to torch.load; it is neither a torch "
    "zip nor a pickle; torch.load(weights_only=False) falls back to the legacy pickle reader, which fails "
    "on the .npy magic bytes (unpickling stack underflow).",
)
def pickle_npy(w):
    """torch.load of a NumPy .npy file."""
    prog = (
        PRELUDE
        + r"""
import numpy as np
if not os.path.exists("embeddings.npy"):
    np.save("embeddings.npy", np.random.randn(100, 32).astype(np.float32))
print("loading embedding table")
emb = torch.load("embeddings.npy", weights_only=False)
"""
    )
    return run(w, prog)


@scenario(
    "gen-ckpt-pickle-unsupported-protocol",
    "checkpoint.pickle_protocol",
    "The state file was written with a future pickle protocol (the script patches the protocol byte of a "
    "pickle.dumps(protocol=5) payload to 6, as a newer Python would write); Python 3.11's pickle.load "
    "reports unsupported pickle protocol: 6.",
)
def pickle_protocol_6(w):
    """A pickle written by a newer protocol than this Python reads."""
    w.mkdir(parents=True, exist_ok=True)
    import pickle

    payload = bytearray(pickle.dumps({"step": 1200, "loss": 0.31}, protocol=5))
    payload[1] = 6
    (w / "trainer_state.pkl").write_bytes(bytes(payload))
    prog = r"""
import pickle, torch
print("restoring trainer state from trainer_state.pkl")
with open("trainer_state.pkl", "rb") as f:
    state = pickle.load(f)
print(state)
"""
    return run(w, prog)


# ---------------------------------------------------------------- not found


@scenario(
    "gen-ckpt-not-found-resume",
    "checkpoint.not_found",
    "The job is launched with --resume checkpoints/run3/last.pt but that directory does not exist (it was "
    "never created on this node); torch.load raises FileNotFoundError.",
)
def notfound_resume(w):
    """--resume pointing at a checkpoint that does not exist."""
    prog = (
        PRELUDE
        + r"""
ap = argparse.ArgumentParser()
ap.add_argument("--resume", default=None)
ap.add_argument("--epochs", type=int, default=5)
args = ap.parse_args()
print(f"args: {vars(args)}")
model = Net(); opt = torch.optim.AdamW(model.parameters(), 1e-3)
start = 0
if args.resume:
    print(f"=> resuming from {args.resume}")
    ckpt = torch.load(args.resume, map_location="cpu")
    model.load_state_dict(ckpt["model"]); opt.load_state_dict(ckpt["optimizer"]); start = ckpt["epoch"] + 1
x, y = make_data()
for epoch in range(start, args.epochs):
    train_epoch(model, opt, x, y, epoch)
"""
    )
    return run(w, prog, args=["--resume", "checkpoints/run3/last.pt"])


@scenario(
    "gen-ckpt-not-found-rank-local-torchrun",
    "checkpoint.not_found",
    "torchrun --nproc_per_node=2 (gloo) resumes each rank from a rank-local directory checkpoints/rank{N}/; "
    "only rank 0's directory exists (the script saved only rank 0's shard), so rank 1 raises FileNotFoundError "
    "and rank 0's DDP setup fails with gloo 'Connection closed by peer'; the elastic agent SIGTERMs rank 0 and "
    "prints the ChildFailedError summary. Output prefixed by --tee 3.",
    collateral=("dist.gloo_connection_closed", "dist.child_failed", "dist.sigterm_collateral"),
    tags=("multi-rank", "gloo", "wrapper"),
)
def notfound_rank_local(w):
    """One rank's rank-local checkpoint is missing under torchrun."""
    prog = (
        PRELUDE
        + r"""
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
rank = dist.get_rank()
x, y = make_data()
model = Net(); opt = torch.optim.AdamW(model.parameters(), 1e-3)
path = f"checkpoints/rank{rank}/last.pt"
if sys.argv[1:] == ["save"]:
    if rank == 0:
        os.makedirs("checkpoints/rank0", exist_ok=True)
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 0}, path)
    dist.barrier(); dist.destroy_process_group(); sys.exit(0)
print(f"[rank {rank}] loading {path}")
ckpt = torch.load(path, map_location="cpu")
model.load_state_dict(ckpt["model"]); opt.load_state_dict(ckpt["optimizer"])
model = DDP(model)
shard = slice(rank, None, dist.get_world_size())
for epoch in range(ckpt["epoch"] + 1, 5):
    train_epoch(model, opt, x[shard], y[shard], epoch, log=lambda m: print(f"[rank {rank}] {m}"))
dist.destroy_process_group()
"""
    )
    torchrun = os.path.join(os.path.dirname(PY), "torchrun")
    run(w, prog, cmd=[torchrun, "--nproc_per_node=2", "--master_port=29617", "train.py", "save"])
    return run(
        w,
        prog,
        cmd=[torchrun, "--nproc_per_node=2", "--master_port=29617", "--tee", "3", "train.py", "resume"],
        timeout=180,
    )


@scenario(
    "gen-ckpt-not-found-hf-dir-missing-weights",
    "checkpoint.not_found",
    "save_pretrained wrote config.json and the weights into out/model; the weights file was then removed "
    "(rotation / incomplete sync: only config.json left), and from_pretrained on the local dir finds no "
    "weights file.",
)
def notfound_hf_dir(w):
    """from_pretrained on a local directory that has config.json but no weights."""
    prog = r"""
import sys, os, torch
from transformers import GPT2Config, GPT2LMHeadModel
cfg = GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=500, n_positions=64)
if sys.argv[1:] == ["train"]:
    m = GPT2LMHeadModel(cfg); opt = torch.optim.AdamW(m.parameters(), 1e-3)
    ids = torch.randint(0, 500, (8, 32))
    for step in range(8):
        loss = m(input_ids=ids, labels=ids).loss
        loss.backward(); opt.step(); opt.zero_grad()
        print(f"step {step} loss {loss.item():.4f}")
    m.save_pretrained("out/model")
else:
    print("loading model from out/model")
    m = GPT2LMHeadModel.from_pretrained("out/model")
"""
    run(w, prog, args=["train"])
    for f in (w / "out/model").iterdir():
        if f.name != "config.json" and f.name != "generation_config.json":
            f.unlink()
    return run(w, prog, args=["load"])


@scenario(
    "gen-ckpt-not-found-trainer-resume",
    "checkpoint.not_found",
    "transformers Trainer.train(resume_from_checkpoint='out/checkpoint-500') with a checkpoint directory that "
    "does not exist (the run only got to checkpoint-8); Trainer raises Can't find a valid checkpoint.",
)
def notfound_trainer(w):
    """HF Trainer resume_from_checkpoint pointing at a missing directory."""
    prog = r"""
import torch, sys
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

class RandomLM(Dataset):
    def __len__(self): return 64
    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(0, 500, (32,), generator=g)
        return {"input_ids": ids, "labels": ids}

cfg = GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=500, n_positions=64)
model = GPT2LMHeadModel(cfg)
args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, num_train_epochs=1, logging_steps=2,
                         save_steps=8, report_to=[], use_cpu=True, disable_tqdm=False)
trainer = Trainer(model=model, args=args, train_dataset=RandomLM())
trainer.train(resume_from_checkpoint=sys.argv[1] if len(sys.argv) > 1 else None)
"""
    run(w, prog)
    return run(w, prog, args=["out/checkpoint-500"])


# ---------------------------------------------------------------- safetensors / LFS


@scenario(
    "gen-ckpt-safetensors-header-too-large",
    "checkpoint.safetensors_corrupt",
    "The model.safetensors file was overwritten by a proxy's HTML error page during download (the script "
    "writes the page bytes over it); safetensors reads the first 8 bytes as the header length and reports "
    "HeaderTooLarge.",
)
def st_header_too_large(w):
    """safetensors given an HTML page instead of weights."""
    w.mkdir(parents=True, exist_ok=True)
    (w / "model.safetensors").write_text(
        "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n"
        "<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
    )
    prog = (
        PRELUDE
        + r"""
from safetensors.torch import load_file
model = Net()
print("loading weights from model.safetensors")
model.load_state_dict(load_file("model.safetensors"))
"""
    )
    return run(w, prog)


@scenario(
    "gen-ckpt-safetensors-bad-json-header",
    "checkpoint.safetensors_corrupt",
    "Bit-rot/overwrite inside the JSON header of a valid model.safetensors (the script zeroes 16 bytes in the "
    "middle of the header, size unchanged); safetensors fails to parse the header.",
)
def st_bad_header(w):
    """safetensors header with corrupted bytes (same size)."""
    prog = (
        PRELUDE
        + r"""
from safetensors.torch import save_file, load_file
if sys.argv[1:] == ["train"]:
    x, y = make_data(); model = Net(); opt = torch.optim.AdamW(model.parameters(), 1e-3)
    for epoch in range(2):
        train_epoch(model, opt, x, y, epoch, log_every=8)
    save_file(model.state_dict(), "model.safetensors")
else:
    model = Net()
    model.load_state_dict(load_file("model.safetensors"))
    print("ok")
"""
    )
    run(w, prog, args=["train"])
    p = w / "model.safetensors"
    b = bytearray(p.read_bytes())
    hlen = int.from_bytes(b[:8], "little")
    mid = 8 + hlen // 2
    b[mid : mid + 16] = b"\x00" * 16
    p.write_bytes(bytes(b))
    return run(w, prog, args=["eval"])


LFS_POINTER = (
    "version https://git-lfs.github.com/spec/v1\n"
    "oid sha256:3f1c6cbd2b4c7a5e8a0a0a6d5f3bd8e1f1e4d8c3a9f0e1d2c3b4a5968778695a\n"
    "size 548118077\n"
)


@scenario(
    "gen-ckpt-lfs-pointer-safetensors",
    "checkpoint.lfs_pointer",
    "The model repo was cloned without git-lfs, so model.safetensors is a 130-byte LFS pointer text file "
    "(the script writes the pointer as git does); transformers from_pretrained / safetensors reads it as "
    "a header and fails (header too large). The log alone cannot tell a pointer from other garbage, and "
    "the taxonomy's safetensors_corrupt explicitly covers LFS pointers, so it is also accepted.",
    also_ok=("checkpoint.safetensors_corrupt",),
)
def lfs_safetensors(w):
    """from_pretrained on a local clone whose model.safetensors is an LFS pointer."""
    prog = r"""
import sys, torch
from transformers import GPT2Config, GPT2LMHeadModel
if sys.argv[1:] == ["make"]:
    cfg = GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=500, n_positions=64)
    GPT2LMHeadModel(cfg).save_pretrained("gpt2-small-local")
else:
    print("loading gpt2-small-local")
    model = GPT2LMHeadModel.from_pretrained("gpt2-small-local")
"""
    run(w, prog, args=["make"])
    (w / "gpt2-small-local/model.safetensors").write_text(LFS_POINTER)
    return run(w, prog, args=["load"])


@scenario(
    "gen-ckpt-lfs-pointer-torch-load",
    "checkpoint.lfs_pointer",
    "weights/model.pt is a Git LFS pointer (repository cloned without git-lfs; the script writes the "
    "pointer text as git does); torch.load reports invalid load key, 'v'.",
)
def lfs_torch(w):
    """torch.load on a Git LFS pointer file."""
    (w / "weights").mkdir(parents=True, exist_ok=True)
    (w / "weights/model.pt").write_text(LFS_POINTER)
    prog = (
        PRELUDE
        + r"""
model = Net()
print("Loading checkpoint weights/model.pt")
ckpt = torch.load("weights/model.pt", map_location="cpu")
model.load_state_dict(ckpt)
"""
    )
    return run(w, prog)


@scenario(
    "gen-ckpt-safetensors-shared-tied",
    "checkpoint.safetensors_shared_tensors",
    "A model with tied input/output embeddings (lm_head.weight is embed.weight) is exported with "
    "safetensors.torch.save_file(model.state_dict()); safetensors refuses tensors that share memory.",
)
def st_shared(w):
    """save_file on a state dict with tied weights."""
    prog = r"""
import torch, torch.nn as nn
from safetensors.torch import save_file

class TinyLM(nn.Module):
    def __init__(self, vocab=300, d=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.block = nn.TransformerEncoderLayer(d, 4, 128, batch_first=True)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.lm_head.weight = self.embed.weight  # weight tying

    def forward(self, ids):
        return self.lm_head(self.block(self.embed(ids)))

torch.manual_seed(0)
model = TinyLM()
opt = torch.optim.AdamW(model.parameters(), 3e-3)
ids = torch.randint(0, 300, (16, 24))
for step in range(10):
    logits = model(ids[:, :-1])
    loss = nn.functional.cross_entropy(logits.reshape(-1, 300), ids[:, 1:].reshape(-1))
    loss.backward(); opt.step(); opt.zero_grad()
    print(f"step {step:2d} | loss {loss.item():.4f}")
print("exporting to tinylm.safetensors")
save_file(model.state_dict(), "tinylm.safetensors")
"""
    return run(w, prog)


@scenario(
    "gen-ckpt-safetensors-shared-view",
    "checkpoint.safetensors_shared_tensors",
    "The script stores both a parameter and a slice (view) of it in the dict passed to safetensors "
    "save_file (e.g. 'pos_emb' and 'pos_emb_first64'); safetensors refuses tensors that share storage.",
)
def st_shared_view(w):
    """save_file with a tensor and a view of the same storage."""
    prog = (
        PRELUDE
        + r"""
from safetensors.torch import save_file
x, y = make_data(); model = Net(); opt = torch.optim.AdamW(model.parameters(), 1e-3)
for epoch in range(2):
    train_epoch(model, opt, x, y, epoch, log_every=8)
sd = dict(model.state_dict())
sd["head.weight.top5"] = sd["head.weight"][:5]
save_file(sd, "export.safetensors")
"""
    )
    return run(w, prog)


# ---------------------------------------------------------------- disk full


def _tmpfs(path: Path, size="2m"):
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["umount", str(path)], stderr=subprocess.DEVNULL)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)


def _untmpfs(path: Path):
    subprocess.run(["umount", str(path)], check=False)


@scenario(
    "gen-storage-disk-full-torch-save-zip",
    "storage.disk_full",
    "Checkpoints go to a 3 MB tmpfs (mounted by the script); the fourth ~0.93 MB torch.save fills it. "
    "torch 2.13 reports it only as 'basic_ios::clear: iostream error' and then "
    "'[enforce fail at inline_container.cc] unexpected pos' (no ENOSPC text). Cause: the disk was full.",
    also_ok=("checkpoint.write_failed",),
)
def disk_full_zip(w):
    """torch.save into a filesystem that runs out of space."""
    mnt = w / "ckpt_mnt"
    _tmpfs(mnt, "3m")
    try:
        prog = (
            PRELUDE
            + r"""
x, y = make_data()
model = Net(hidden=256); opt = torch.optim.AdamW(model.parameters(), 1e-3)
for epoch in range(8):
    train_epoch(model, opt, x, y, epoch, log_every=8)
    path = f"ckpt_mnt/epoch_{epoch}.pt"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch}, path)
    print(f"checkpoint saved to {path} ({os.path.getsize(path) / 1e6:.2f} MB)")
"""
        )
        return run(w, prog)
    finally:
        _untmpfs(mnt)


@scenario(
    "gen-storage-disk-full-legacy-save",
    "storage.disk_full",
    "Legacy torch.save (_use_new_zipfile_serialization=False) onto a 2 MB tmpfs mounted by the script; the "
    "write fails with OSError [Errno 28] No space left on device.",
    also_ok=("checkpoint.write_failed",),
)
def disk_full_legacy(w):
    """Legacy-format torch.save on a full filesystem."""
    mnt = w / "ckpt_mnt"
    _tmpfs(mnt, "2m")
    try:
        prog = (
            PRELUDE
            + r"""
import logging
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)-8s %(name)s: %(message)s")
log = logging.getLogger("trainer")
x, y = make_data()
model = Net(hidden=256); opt = torch.optim.SGD(model.parameters(), 0.05, momentum=0.9)
for epoch in range(8):
    train_epoch(model, opt, x, y, epoch, log_every=8, log=log.info)
    path = f"ckpt_mnt/model_{epoch:03d}.pth"
    torch.save({"state_dict": model.state_dict(), "optim": opt.state_dict()}, path, _use_new_zipfile_serialization=False)
    log.info("Saved %s", path)
"""
        )
        return run(w, prog)
    finally:
        _untmpfs(mnt)


@scenario(
    "gen-storage-disk-full-safetensors-hf",
    "storage.disk_full",
    "transformers save_pretrained into a 1 MB tmpfs mounted by the script; writing model.safetensors runs "
    "out of space.",
    also_ok=("checkpoint.write_failed",),
)
def disk_full_hf(w):
    """save_pretrained (safetensors) on a full filesystem."""
    mnt = w / "out"
    _tmpfs(mnt, "1m")
    try:
        prog = r"""
import torch
from transformers import GPT2Config, GPT2LMHeadModel
cfg = GPT2Config(n_layer=2, n_head=2, n_embd=128, vocab_size=2000, n_positions=64)
m = GPT2LMHeadModel(cfg); opt = torch.optim.AdamW(m.parameters(), 1e-3)
ids = torch.randint(0, 2000, (8, 32))
for step in range(6):
    loss = m(input_ids=ids, labels=ids).loss
    loss.backward(); opt.step(); opt.zero_grad()
    print(f"{{'loss': {loss.item():.4f}, 'step': {step}}}")
m.save_pretrained("out/final")
print("done")
"""
        return run(w, prog)
    finally:
        _untmpfs(mnt)


@scenario(
    "gen-storage-disk-full-tmp-cache",
    "storage.disk_full",
    "A preprocessing step writes numpy feature shards to a cache dir on a 2 MB tmpfs (mounted by the "
    "script) before training; the eighth 256 KB shard fills it and numpy's tofile reports only "
    "'OSError: 65536 requested and 58336 written' (a short write: the disk was full).",
)
def disk_full_npsave(w):
    """np.save of cached features fills the cache filesystem."""
    mnt = w / "cache"
    _tmpfs(mnt, "2m")
    try:
        prog = r"""
import numpy as np
from tqdm import tqdm
rng = np.random.default_rng(0)
for shard in tqdm(range(20), desc="caching features", ascii=True, ncols=80):
    feats = rng.normal(size=(256, 256)).astype(np.float32)
    np.save(f"cache/features_{shard:05d}.npy", feats)
print("cache complete")
"""
        return run(w, prog)
    finally:
        _untmpfs(mnt)


# ---------------------------------------------------------------- too many open files


@scenario(
    "gen-storage-too-many-open-files-dataset",
    "storage.too_many_open_files",
    "The dataset opens one file handle per sample and keeps them (a cache of open files); with ulimit -n 64 "
    "set by the script, open() fails with Errno 24 after ~60 samples.",
)
def emfile_dataset(w):
    """A dataset that leaks file handles under a low ulimit."""
    prog = r"""
import os, torch
from torch.utils.data import Dataset, DataLoader
os.makedirs("data", exist_ok=True)
for i in range(200):
    p = f"data/sample_{i:04d}.bin"
    if not os.path.exists(p):
        torch.randn(16).numpy().tofile(p)

class FileDataset(Dataset):
    def __init__(self):
        self.files = sorted(os.listdir("data")); self.handles = {}
    def __len__(self): return len(self.files)
    def __getitem__(self, i):
        if i not in self.handles:
            self.handles[i] = open(os.path.join("data", self.files[i]), "rb")
        f = self.handles[i]; f.seek(0)
        import numpy as np
        return torch.from_numpy(np.frombuffer(f.read(), dtype=np.float32).copy())

model = torch.nn.Linear(16, 1); opt = torch.optim.SGD(model.parameters(), 0.01)
for epoch in range(3):
    for step, xb in enumerate(DataLoader(FileDataset(), batch_size=8, shuffle=True)):
        loss = model(xb).pow(2).mean(); loss.backward(); opt.step(); opt.zero_grad()
        if step % 5 == 0:
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")
"""
    return run(w, prog, shell_prefix="ulimit -n 64")


@scenario(
    "gen-storage-too-many-open-files-workers",
    "storage.too_many_open_files",
    "DataLoader with 2 workers and the file_descriptor sharing strategy returning many small tensors per "
    "sample, under ulimit -n 128 set by the script; the workers' queue feeder threads fail with Too many "
    "open files (Errno 24 / unable to open shared memory object ... (24)) and the main process then hangs "
    "waiting for batches; the script kills the hung job after 60 s as a user would.",
)
def emfile_workers(w):
    """DataLoader workers passing many tensors via fds under a low ulimit."""
    prog = r"""
import torch
import torch.multiprocessing as mp
from torch.utils.data import Dataset, DataLoader
mp.set_sharing_strategy("file_descriptor")

class ManyTensors(Dataset):
    def __len__(self): return 4096
    def __getitem__(self, i):
        return [torch.full((4,), float(i)) for _ in range(64)]

if __name__ == "__main__":
    model = torch.nn.Linear(4, 1)
    loader = DataLoader(ManyTensors(), batch_size=4, num_workers=2, collate_fn=lambda b: b, prefetch_factor=8)
    for step, batch in enumerate(loader):
        x = torch.stack([t for sample in batch for t in sample])
        loss = model(x).pow(2).mean()
        if step % 20 == 0:
            print(f"step {step} loss {loss.item():.4f}")
"""
    return run(w, prog, shell_prefix="ulimit -n 128", timeout=60)


# ---------------------------------------------------------------- pickling


@scenario(
    "gen-serial-lambda-collate-spawn",
    "serialization.not_picklable",
    "DataLoader(num_workers=2, multiprocessing_context='spawn') with a lambda collate_fn defined in main; "
    "spawn must pickle the collate_fn to start the workers and the lambda cannot be pickled.",
)
def pickle_lambda_spawn(w):
    """A lambda collate_fn with spawn-started DataLoader workers."""
    prog = r"""
import torch
from torch.utils.data import DataLoader, TensorDataset

def main():
    ds = TensorDataset(torch.randn(256, 8), torch.randint(0, 2, (256,)))
    model = torch.nn.Linear(8, 2); opt = torch.optim.SGD(model.parameters(), 0.1)
    print("warmup on a few batches in the main process")
    for xb, yb in DataLoader(ds, batch_size=32):
        loss = torch.nn.functional.cross_entropy(model(xb), yb); loss.backward(); opt.step(); opt.zero_grad()
        print(f"loss {loss.item():.4f}")
    loader = DataLoader(ds, batch_size=32, num_workers=2, multiprocessing_context="spawn",
                        collate_fn=lambda batch: torch.utils.data.default_collate(batch))
    for epoch in range(2):
        for xb, yb in loader:
            loss = torch.nn.functional.cross_entropy(model(xb), yb); loss.backward(); opt.step(); opt.zero_grad()
        print(f"epoch {epoch} loss {loss.item():.4f}")

if __name__ == "__main__":
    main()
"""
    return run(w, prog)


@scenario(
    "gen-serial-lock-in-module-save",
    "serialization.not_picklable",
    "The model object holds a threading.Lock (a metrics buffer guarded by a lock); torch.save(model) of the "
    "whole module tries to pickle it: cannot pickle '_thread.lock' object.",
)
def pickle_lock(w):
    """torch.save of a module holding a threading.Lock."""
    prog = (
        PRELUDE
        + r"""
import threading
class TrackedNet(Net):
    def __init__(self):
        super().__init__()
        self._stats_lock = threading.Lock()
        self.n_seen = 0
    def forward(self, x):
        with self._stats_lock:
            self.n_seen += len(x)
        return super().forward(x)
x, y = make_data(); model = TrackedNet(); opt = torch.optim.AdamW(model.parameters(), 1e-3)
for epoch in range(2):
    train_epoch(model, opt, x, y, epoch, log_every=8)
    torch.save(model, f"model_epoch{epoch}.pt")
"""
    )
    return run(w, prog)


@scenario(
    "gen-serial-local-fn-mp-pool",
    "serialization.not_picklable",
    "Preprocessing with multiprocessing.Pool.map over a function defined inside main() (a local closure); "
    "the pool cannot pickle the local function (Can't pickle local object).",
)
def pickle_local_fn(w):
    """Pool.map over a nested function."""
    prog = r"""
import multiprocessing as mp
import numpy as np

def main():
    scale = 0.5
    def normalize(arr):
        return (arr - arr.mean()) / (arr.std() + 1e-6) * scale
    samples = [np.random.randn(1000) for _ in range(64)]
    print(f"normalizing {len(samples)} samples with 2 processes")
    with mp.Pool(2) as pool:
        out = pool.map(normalize, samples)
    print("done", len(out))

if __name__ == "__main__":
    main()
"""
    return run(w, prog)


@scenario(
    "gen-serial-generator-in-state",
    "serialization.not_picklable",
    "The script puts a live generator (the data iterator) into the dict passed to torch.save to resume data "
    "position; pickling fails: cannot pickle 'generator' object.",
)
def pickle_generator(w):
    """torch.save of a state containing a generator."""
    prog = (
        PRELUDE
        + r"""
def batches(x, y, bs=32):
    while True:
        perm = torch.randperm(len(x))
        for s in range(0, len(x), bs):
            idx = perm[s:s + bs]
            yield x[idx], y[idx]
x, y = make_data(); model = Net(); opt = torch.optim.AdamW(model.parameters(), 1e-3)
it = batches(x, y)
for step in range(1, 201):
    xb, yb = next(it)
    loss = F.cross_entropy(model(xb), yb); opt.zero_grad(); loss.backward(); opt.step()
    if step % 25 == 0:
        print(f"step {step} loss {loss.item():.4f}")
    if step % 100 == 0:
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step, "data_iter": it}, "ckpt.pt")
        print(f"saved ckpt.pt at step {step}")
"""
    )
    return run(w, prog)


# ---------------------------------------------------------------- msgpack


@scenario(
    "gen-serial-msgpack-tensor",
    "serialization.msgpack",
    "A worker sends training metrics to a queue with msgpack.packb; one value is a torch.Tensor (loss not "
    "converted with .item()), which msgpack cannot serialize.",
)
def msgpack_tensor(w):
    """msgpack.packb of a dict holding a tensor."""
    prog = (
        PRELUDE
        + r"""
import msgpack
x, y = make_data(); model = Net(); opt = torch.optim.AdamW(model.parameters(), 1e-3)
outbox = []
for step in range(40):
    s = (step * 32) % 512
    loss = F.cross_entropy(model(x[s:s + 32]), y[s:s + 32]); opt.zero_grad(); loss.backward(); opt.step()
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.4f}")
    if step == 30:
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        outbox.append(msgpack.packb({"step": step, "loss": loss.item(), "grad_norm": grad_norm}))
"""
    )
    return run(w, prog)


@scenario(
    "gen-serial-msgpack-numpy",
    "serialization.msgpack",
    "An inference service packs its response with msgpack.packb({'embedding': np.ndarray}) without an ext "
    "hook / msgpack-numpy; msgpack cannot serialize the numpy array.",
)
def msgpack_numpy(w):
    """msgpack.packb of a numpy array."""
    prog = r"""
import msgpack, numpy as np, logging
logging.basicConfig(level=logging.INFO, format="%(asctime)s [%(levelname)s] %(name)s: %(message)s")
log = logging.getLogger("embed-worker")
rng = np.random.default_rng(0)
W = rng.normal(size=(64, 16)).astype(np.float32)
for req_id in range(3):
    x = rng.normal(size=(64,)).astype(np.float32)
    emb = x @ W
    log.info("request %d: embedded, norm=%.3f", req_id, float(np.linalg.norm(emb)))
    payload = msgpack.packb({"id": req_id, "embedding": emb})
    log.info("sent %d bytes", len(payload))
"""
    return run(w, prog)


@scenario(
    "gen-serial-msgpack-extradata",
    "serialization.msgpack",
    "Two msgpack messages were appended to one file (a log of records) and read back with a single "
    "msgpack.unpackb, which raises ExtraData.",
)
def msgpack_extradata(w):
    """msgpack.unpackb on concatenated messages."""
    prog = r"""
import msgpack, os
if os.path.exists("metrics.msgpack"):
    os.remove("metrics.msgpack")
for step in range(0, 300, 100):
    with open("metrics.msgpack", "ab") as f:
        f.write(msgpack.packb({"step": step, "loss": 2.0 / (1 + step / 100)}))
    print(f"logged metrics for step {step}")
with open("metrics.msgpack", "rb") as f:
    records = msgpack.unpackb(f.read())
print(records)
"""
    return run(w, prog)


@scenario(
    "gen-serial-msgpack-truncated",
    "serialization.msgpack",
    "A msgpack-encoded batch cache is cut to 70% (the script truncates it, as an interrupted write would) "
    "and msgpack.unpackb reports incomplete input.",
    also_ok=("checkpoint.truncated",),
)
def msgpack_truncated(w):
    """msgpack.unpackb on a truncated buffer."""
    prog = r"""
import msgpack, sys, random
random.seed(0)
if sys.argv[1:] == ["write"]:
    batches = [{"ids": [random.randrange(30000) for _ in range(128)], "label": i % 3} for i in range(200)]
    with open("batches.msgpack", "wb") as f:
        f.write(msgpack.packb(batches))
    print("wrote 200 batches")
else:
    with open("batches.msgpack", "rb") as f:
        batches = msgpack.unpackb(f.read())
    print(len(batches))
"""
    run(w, prog, args=["write"])
    p = w / "batches.msgpack"
    d = p.read_bytes()
    p.write_bytes(d[: int(len(d) * 0.7)])
    return run(w, prog, args=["read"])


# ---------------------------------------------------------------- redis


def _port_in_use(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


class RedisServer:
    """A private redis-server on a loopback port (never the shared :6379)."""

    def __init__(self, port, *extra):
        self.port = port
        self.dir = WORK / f"redis-{port}"
        self.dir.mkdir(parents=True, exist_ok=True)
        if _port_in_use(port):  # never talk to somebody else's server
            raise RuntimeError(f"port {port} is already in use")
        self.proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--dir",
                str(self.dir),
                "--daemonize",
                "no",
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(100):
            if self.proc.poll() is not None:
                raise RuntimeError(f"server on port {port} exited")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("redis did not start")

    def cli(self, *args):
        return subprocess.run(["redis-cli", "-p", str(self.port), *args], capture_output=True, text=True).stdout

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:  # refuses to exit when its final save fails
                self.proc.kill()
                self.proc.wait(5)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.stop()


REDIS_PRELUDE = r"""
import redis, pickle, io, sys, time, os
import numpy as np
PORT = int(os.environ["REDIS_PORT"])
"""


@scenario(
    "gen-redis-binary-decode",
    "redis.binary_decode",
    "A feature cache pickles numpy arrays into Redis; the reader's client was created with "
    "decode_responses=True, so redis-py tries to decode the pickled bytes as UTF-8 and fails.",
)
def redis_binary(w):
    """Pickled arrays read back with decode_responses=True."""
    with RedisServer(6341):
        prog = (
            REDIS_PRELUDE
            + r"""
writer = redis.Redis(port=PORT)
for i in range(50):
    writer.set(f"feat:{i}", pickle.dumps(np.random.randn(64).astype(np.float32)))
print("cached 50 feature vectors")
r = redis.Redis(port=PORT, decode_responses=True)
print("config keys:", r.dbsize())
feats = [pickle.loads(r.get(f"feat:{i}")) for i in range(50)]
"""
        )
        return run(w, prog, env={"REDIS_PORT": "6341"})


@scenario(
    "gen-redis-wrongtype",
    "redis.wrong_type",
    "The job stores sample ids in a Redis list under 'dataset:train', but another component wrote a string "
    "under that key first; LRANGE fails with WRONGTYPE.",
)
def redis_wrongtype(w):
    """LRANGE on a key that holds a string."""
    with RedisServer(6342):
        prog = (
            REDIS_PRELUDE
            + r"""
import logging
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
r = redis.Redis(port=PORT)
r.set("dataset:train", "s3://bucket/train-v3/")   # written by the indexing job (v1 schema)
logging.info("connected to redis at 127.0.0.1:%d", PORT)
for epoch in range(2):
    logging.info("epoch %d: fetching shard list", epoch)
    shards = r.lrange("dataset:train", 0, -1)
"""
        )
        return run(w, prog, env={"REDIS_PORT": "6342"})


@scenario(
    "gen-redis-maxmemory",
    "redis.maxmemory",
    "The script's redis-server runs with maxmemory 2mb and maxmemory-policy noeviction; a job caching "
    "embeddings fills it and SET is refused with OOM command not allowed.",
)
def redis_maxmem(w):
    """Caching into a Redis with maxmemory and noeviction."""
    with RedisServer(6343, "--maxmemory", "2mb", "--maxmemory-policy", "noeviction"):
        prog = (
            REDIS_PRELUDE
            + r"""
from tqdm import tqdm
r = redis.Redis(port=PORT)
for i in tqdm(range(500), desc="caching embeddings"):
    r.set(f"emb:{i}", np.random.randn(4096).astype(np.float32).tobytes())
print("done")
"""
        )
        return run(w, prog, env={"REDIS_PORT": "6343"})


@scenario(
    "gen-redis-misconf",
    "redis.persistence_failed",
    "The script starts redis-server with --dir pointing at a data directory and then deletes that directory "
    "(a volume that went away), enables a save rule and triggers BGSAVE; the snapshot cannot be written and, "
    "with the default stop-writes-on-bgsave-error yes, Redis refuses the training job's HSET with MISCONF.",
)
def redis_misconf(w):
    """Writes refused with MISCONF after a failed background save."""
    d = WORK / "redis-6344-data"
    d.mkdir(parents=True, exist_ok=True)
    with RedisServer(6344, "--dir", str(d)) as srv:
        shutil.rmtree(d)  # the data directory vanishes under the server (unmounted volume)
        srv.cli("CONFIG", "SET", "save", "1 1")
        srv.cli("BGSAVE")
        time.sleep(1.5)
        prog = (
            REDIS_PRELUDE
            + r"""
r = redis.Redis(port=PORT)
for step in range(0, 500, 50):
    loss = 2.5 * np.exp(-step / 200)
    print(f"step {step} loss {loss:.4f}")
    r.hset("run:42:metrics", mapping={"step": step, "loss": loss})
"""
        )
        return run(w, prog, env={"REDIS_PORT": "6344"})


@scenario(
    "gen-redis-xadd-id",
    "redis.stream_id",
    "A producer XADDs training events with explicit ids from its step counter; after a restart it resumes "
    "at a lower step and XADD is refused: ID equal or smaller than the target stream top item.",
)
def redis_xadd(w):
    """XADD with an explicit id lower than the stream's top id."""
    with RedisServer(6345):
        prog = (
            REDIS_PRELUDE
            + r"""
r = redis.Redis(port=PORT)
start = int(sys.argv[1])
for step in range(start, start + 300, 100):
    r.xadd("train:events", {"step": step, "loss": 1.0 / (1 + step)}, id=f"{step}-0")
    print(f"published step {step}")
"""
        )
        a = run(w, prog, args=["1000"], env={"REDIS_PORT": "6345"})
        return a + run(w, prog, args=["800"], env={"REDIS_PORT": "6345"})


@scenario(
    "gen-redis-proto-max-bulk-len",
    "redis.value_too_large",
    "The script's redis-server runs with proto-max-bulk-len 1mb; a job stores a 4 MB serialized state_dict "
    "in one SET and the server rejects the bulk length, closing the connection.",
)
def redis_bulk(w):
    """SET of a value larger than proto-max-bulk-len."""
    with RedisServer(6346, "--proto-max-bulk-len", "1mb"):
        prog = (
            REDIS_PRELUDE
            + PRELUDE
            + r"""
r = redis.Redis(port=PORT)
x, y = make_data(); model = Net(hidden=512); opt = torch.optim.AdamW(model.parameters(), 1e-3)
for epoch in range(2):
    train_epoch(model, opt, x, y, epoch, log_every=8)
    buf = io.BytesIO(); torch.save(model.state_dict(), buf)
    print(f"publishing weights ({len(buf.getvalue()) / 1e6:.1f} MB) to redis")
    r.set("weights:latest", buf.getvalue())
"""
        )
        return run(w, prog, env={"REDIS_PORT": "6346"})


@scenario(
    "gen-redis-connection-refused",
    "redis.connection",
    "The job expects a Redis cache on 127.0.0.1:6347 but no server is running there; the first command "
    "fails with Connection refused.",
)
def redis_refused(w):
    """No Redis server listening."""
    assert not _port_in_use(6347)
    prog = (
        REDIS_PRELUDE
        + r"""
import logging
logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(name)s | %(message)s")
logger = logging.getLogger("data")
logger.info("initialising sample cache at redis://127.0.0.1:%d/0", PORT)
cache = redis.Redis(host="127.0.0.1", port=PORT, db=0, socket_connect_timeout=2)
if cache.exists("index:built"):
    logger.info("index already cached")
"""
    )
    return run(w, prog, env={"REDIS_PORT": "6347"})


@scenario(
    "gen-redis-server-killed-midrun",
    "redis.connection",
    "The script's redis-server is killed (SIGKILL) while a training loop is reading cached batches from it; "
    "the next GET fails (connection closed / refused on reconnect).",
)
def redis_killed(w):
    """The Redis server dies while a loop is using it."""
    srv = RedisServer(6348)
    try:
        prog = (
            REDIS_PRELUDE
            + PRELUDE
            + r"""
r = redis.Redis(port=PORT)
x, y = make_data()
for i in range(16):
    buf = io.BytesIO(); torch.save((x[i * 32:(i + 1) * 32], y[i * 32:(i + 1) * 32]), buf); r.set(f"batch:{i}", buf.getvalue())
model = Net(); opt = torch.optim.AdamW(model.parameters(), 1e-3)
for epoch in range(50):
    for i in range(16):
        xb, yb = torch.load(io.BytesIO(r.get(f"batch:{i}")))
        loss = F.cross_entropy(model(xb), yb); opt.zero_grad(); loss.backward(); opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f}", flush=True)
    time.sleep(0.3)
"""
        )
        (w).mkdir(parents=True, exist_ok=True)
        (w / "train.py").write_text(prog)
        e = {
            "PATH": os.path.dirname(PY) + ":/usr/bin:/bin",
            "HOME": "/root",
            "PYTHONUNBUFFERED": "1",
            "REDIS_PORT": "6348",
            "OMP_NUM_THREADS": "1",
        }
        p = subprocess.Popen([PY, "train.py"], cwd=w, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        time.sleep(11)
        srv.proc.kill()
        out, _ = p.communicate(timeout=120)
        return out
    finally:
        srv.stop()


@scenario(
    "gen-storage-ancdata-workers",
    "storage.too_many_open_files",
    "DataLoader(num_workers=4) with the file_descriptor sharing strategy while the training loop keeps every "
    "batch alive in a list (a 'replay buffer'); under ulimit -n 256 set by the script the main process runs "
    "out of descriptors when receiving tensors from the workers.",
)
def emfile_ancdata(w):
    """Main process holds on to worker-shared tensors until it runs out of fds."""
    prog = r"""
import torch
import torch.multiprocessing as mp
from torch.utils.data import Dataset, DataLoader
mp.set_sharing_strategy("file_descriptor")

class Frames(Dataset):
    def __len__(self): return 100000
    def __getitem__(self, i):
        return torch.randn(3, 16, 16), i % 10

if __name__ == "__main__":
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(768, 10))
    opt = torch.optim.SGD(model.parameters(), 0.01)
    replay = []
    loader = DataLoader(Frames(), batch_size=1, num_workers=4)
    for step, (x, y) in enumerate(loader):
        replay.append((x, y))
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        if step % 50 == 0:
            print(f"step {step} loss {loss.item():.4f} replay={len(replay)}")
"""
    return run(w, prog, shell_prefix="ulimit -n 256", timeout=120)


@scenario(
    "gen-redis-incr-not-integer",
    "redis.wrong_type",
    "A global-step counter key in Redis was overwritten with a float string ('1200.0') by another process; "
    "the training job's INCR on it is refused: value is not an integer or out of range.",
)
def redis_incr(w):
    """INCR on a key holding a non-integer string."""
    with RedisServer(6350):
        prog = (
            REDIS_PRELUDE
            + r"""
r = redis.Redis(port=PORT)
r.set("train:global_step", 1190)
for i in range(20):
    step = r.incr("train:global_step")
    if step % 5 == 0:
        print(f"global step {step}")
    if i == 9:
        r.set("train:global_step", "1200.0")  # an evaluator process writes the step back as a float string
"""
        )
        return run(w, prog, env={"REDIS_PORT": "6350"})


@scenario(
    "gen-redis-socket-timeout",
    "redis.connection",
    "The job's Redis client uses socket_timeout=1; the script's redis-server is blocked for 12 s (DEBUG SLEEP "
    "from another client, as a long blocking command or a fork would) while the job fetches a batch, so the "
    "GET times out (Timeout reading from socket); the helper thread that sent DEBUG "
    "SLEEP also reports a read timeout (its own client's default timeout) as an unhandled thread exception.",
)
def redis_timeout(w):
    """A Redis read that exceeds socket_timeout while the server is blocked."""
    with RedisServer(6351, "--enable-debug-command", "yes"):
        prog = (
            REDIS_PRELUDE
            + r"""
import threading, subprocess
r = redis.Redis(port=PORT, socket_timeout=1)
for i in range(8):
    r.set(f"batch:{i}", np.random.randn(1024).astype(np.float32).tobytes())
for epoch in range(3):
    for i in range(8):
        arr = np.frombuffer(r.get(f"batch:{i}"), dtype=np.float32)
    print(f"epoch {epoch}: read 8 batches, mean {arr.mean():.4f}")
    if epoch == 1:
        threading.Thread(target=lambda: redis.Redis(port=PORT).execute_command("DEBUG", "SLEEP", "12")).start()
        time.sleep(1)
"""
        )
        return run(w, prog, env={"REDIS_PORT": "6351"})


# ---------------------------------------------------------------- object store (moto)


class MotoServer:
    def __init__(self, port):
        self.port = port
        if _port_in_use(port):
            raise RuntimeError(f"port {port} is already in use")
        self.proc = subprocess.Popen(
            [os.path.join(os.path.dirname(PY), "moto_server"), "-p", str(port), "-H", "127.0.0.1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(100):
            if self.proc.poll() is not None:
                raise RuntimeError(f"server on port {port} exited")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("moto did not start")

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.proc.terminate()
        self.proc.wait(10)


S3_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
S3_PRELUDE = r"""
import boto3, os, io, sys
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{os.environ['S3_PORT']}")
"""


@scenario(
    "gen-storage-s3-nosuchkey",
    "checkpoint.not_found",
    "Resume downloads run7/checkpoints/step_3000.pt from an S3 bucket (a local moto server); that checkpoint "
    "was never uploaded (only step_2000 exists), so get_object raises NoSuchKey: the checkpoint to resume "
    "from does not exist.",
    also_ok=("storage.object_store_error",),
)
def s3_nosuchkey(w):
    """S3 get_object of a missing checkpoint key."""
    with MotoServer(5071):
        prog = (
            S3_PRELUDE
            + PRELUDE
            + r"""
s3.create_bucket(Bucket="ml-ckpts")
buf = io.BytesIO(); torch.save(Net().state_dict(), buf)
s3.put_object(Bucket="ml-ckpts", Key="run7/checkpoints/step_2000.pt", Body=buf.getvalue())
print("resuming run7 from s3://ml-ckpts/run7/checkpoints/step_3000.pt")
obj = s3.get_object(Bucket="ml-ckpts", Key="run7/checkpoints/step_3000.pt")
state = torch.load(io.BytesIO(obj["Body"].read()))
"""
        )
        return run(w, prog, env={**S3_ENV, "S3_PORT": "5071"})


@scenario(
    "gen-storage-s3-nosuchbucket-upload",
    "storage.object_store_error",
    "After training, the script uploads the checkpoint with s3.upload_file to a bucket name that does not "
    "exist on the (local moto) S3 endpoint; boto3 raises S3UploadFailedError NoSuchBucket.",
    also_ok=("checkpoint.write_failed",),
)
def s3_nobucket(w):
    """upload_file into a missing bucket."""
    with MotoServer(5072):
        prog = (
            S3_PRELUDE
            + PRELUDE
            + r"""
x, y = make_data(); model = Net(); opt = torch.optim.AdamW(model.parameters(), 1e-3)
for epoch in range(3):
    train_epoch(model, opt, x, y, epoch, log_every=8)
torch.save(model.state_dict(), "final.pt")
print("uploading final.pt to s3://ml-checkpoints-prod/run7/final.pt")
s3.upload_file("final.pt", "ml-checkpoints-prod", "run7/final.pt")
"""
        )
        return run(w, prog, env={**S3_ENV, "S3_PORT": "5072"})


@scenario(
    "gen-storage-s3-head-404",
    "data.file_not_found",
    "A data-preparation step calls head_object on a dataset manifest key (v2) that does not exist on the "
    "(local moto) S3 endpoint (only v1 was uploaded); botocore raises ClientError 404 Not Found: the dataset "
    "file is missing.",
    also_ok=("storage.object_store_error",),
)
def s3_head404(w):
    """head_object on a missing key: ClientError (404)."""
    with MotoServer(5073):
        prog = (
            S3_PRELUDE
            + r"""
import logging
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
log = logging.getLogger("prepare_data")
s3.create_bucket(Bucket="datasets")
s3.put_object(Bucket="datasets", Key="imagenet-subset/v1/manifest.json", Body=b"{}")
key = "imagenet-subset/v2/manifest.json"
log.info("checking s3://datasets/%s", key)
meta = s3.head_object(Bucket="datasets", Key=key)
log.info("manifest size %d", meta["ContentLength"])
"""
        )
        return run(w, prog, env={**S3_ENV, "S3_PORT": "5073"})


# ---------------------------------------------------------------- healthy runs


@scenario(
    "gen-ckpt-healthy-resume-tqdm",
    "none",
    "Healthy: a run trains 2 epochs with tqdm bars, saves checkpoints, and a second run resumes from the "
    "last checkpoint and finishes (exit 0). The log has both runs.",
    tags=(),
)
def healthy_resume(w):
    """Save, then resume and finish, with tqdm progress bars."""
    prog = (
        PRELUDE
        + r"""
from tqdm import tqdm
x, y = make_data(n=2048)
model = Net(); opt = torch.optim.AdamW(model.parameters(), 1e-3)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4 * 64)
start = 0
if os.path.exists("checkpoints/last.pt"):
    ckpt = torch.load("checkpoints/last.pt")
    model.load_state_dict(ckpt["model"]); opt.load_state_dict(ckpt["optimizer"]); sched.load_state_dict(ckpt["scheduler"])
    start = ckpt["epoch"] + 1
    print(f"Resumed from checkpoints/last.pt (epoch {ckpt['epoch']})")
os.makedirs("checkpoints", exist_ok=True)
end = min(start + 2, 4)
for epoch in range(start, end):
    bar = tqdm(range(0, len(x), 32), desc=f"Epoch {epoch}")
    for s in bar:
        loss = F.cross_entropy(model(x[s:s + 32]), y[s:s + 32]); opt.zero_grad(); loss.backward(); opt.step(); sched.step()
        bar.set_postfix(loss=f"{loss.item():.4f}")
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(), "epoch": epoch},
               "checkpoints/last.pt")
    print(f"Saved checkpoint for epoch {epoch}")
print("Training complete" if end == 4 else "Stopping (time budget), resume later")
"""
    )
    return run(w, prog) + run(w, prog)


@scenario(
    "gen-ckpt-healthy-no-checkpoint-start-fresh",
    "none",
    "Healthy: the script looks for a checkpoint to resume, logs that none was found and trains from scratch "
    "to completion (exit 0); the 'No checkpoint found' line is expected on a first run.",
)
def healthy_fresh(w):
    """First run: no checkpoint found, start from scratch."""
    prog = (
        PRELUDE
        + r"""
import logging, glob
logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(levelname)s - %(name)s - %(message)s")
log = logging.getLogger("train")
ckpts = sorted(glob.glob("checkpoints/*.pt"))
model = Net(); opt = torch.optim.AdamW(model.parameters(), 1e-3)
if ckpts:
    model.load_state_dict(torch.load(ckpts[-1])["model"])
else:
    log.warning("No checkpoint found in checkpoints/, training from scratch")
x, y = make_data()
os.makedirs("checkpoints", exist_ok=True)
for epoch in range(3):
    train_epoch(model, opt, x, y, epoch, log=log.info)
    torch.save({"model": model.state_dict()}, f"checkpoints/epoch_{epoch:02d}.pt")
    log.info("saved checkpoints/epoch_%02d.pt", epoch)
log.info("finished")
"""
    )
    return run(w, prog)


@scenario(
    "gen-ckpt-healthy-hf-newly-initialized",
    "none",
    "Healthy: a tiny BERT is pretrained and saved, then loaded with BertForSequenceClassification."
    "from_pretrained; transformers warns that the classifier weights are newly initialized (expected when "
    "fine-tuning) and fine-tuning completes.",
)
def healthy_hf_newinit(w):
    """from_pretrained into a model with a new head: the 'newly initialized' warning."""
    prog = r"""
import sys, torch
from transformers import BertConfig, BertModel, BertForSequenceClassification
cfg = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128)
if sys.argv[1:] == ["pre"]:
    BertModel(cfg).save_pretrained("bert-base-local")
else:
    model = BertForSequenceClassification.from_pretrained("bert-base-local", num_labels=3)
    opt = torch.optim.AdamW(model.parameters(), 5e-4)
    ids = torch.randint(0, 1000, (16, 24)); labels = torch.randint(0, 3, (16,))
    for step in range(10):
        out = model(input_ids=ids, labels=labels)
        out.loss.backward(); opt.step(); opt.zero_grad()
        print(f"step {step} loss {out.loss.item():.4f}")
    model.save_pretrained("finetuned")
    print("saved finetuned model")
"""
    return run(w, prog, args=["pre"]) + run(w, prog, args=["ft"])


@scenario(
    "gen-ckpt-healthy-nonstrict-load-new-head",
    "none",
    "Healthy: a backbone checkpoint is loaded with load_state_dict(strict=False) into a model with a new head "
    "on purpose; the printed _IncompatibleKeys lists the missing head keys, and training then completes.",
)
def healthy_nonstrict(w):
    """strict=False load that reports missing keys by design."""
    prog = (
        PRELUDE
        + r"""
if sys.argv[1:] == ["pre"]:
    x, y = make_data(); m = Net(); opt = torch.optim.AdamW(m.parameters(), 1e-3)
    train_epoch(m, opt, x, y, 0)
    torch.save({k: v for k, v in m.state_dict().items() if k.startswith("encoder.")}, "backbone.pt")
else:
    model = Net(n_classes=4)
    result = model.load_state_dict(torch.load("backbone.pt"), strict=False)
    print("load_state_dict:", result)
    x, y = make_data(n_classes=4); opt = torch.optim.AdamW(model.parameters(), 1e-3)
    for epoch in range(3):
        train_epoch(model, opt, x, y, epoch, log_every=8)
    print("fine-tuning finished")
"""
    )
    return run(w, prog, args=["pre"]) + run(w, prog, args=["ft"])


@scenario(
    "gen-redis-healthy-retry-then-ok",
    "none",
    "Healthy: the data loader's Redis cache is not up yet when the job starts; the script's retry loop logs "
    "the real 'Connection refused' error twice, the script's redis-server then comes up, and the run "
    "completes (exit 0).",
)
def healthy_redis_retry(w):
    """Redis connect retried until the server is up."""
    assert not _port_in_use(6349)
    prog = (
        REDIS_PRELUDE
        + PRELUDE
        + r"""
import logging
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
log = logging.getLogger("cache")
r = redis.Redis(port=PORT, socket_connect_timeout=1)
for attempt in range(1, 11):
    try:
        r.ping(); log.info("redis is up"); break
    except redis.exceptions.ConnectionError as e:
        log.warning("redis not ready (attempt %d/10): %s; retrying in 1s", attempt, e)
        time.sleep(1)
x, y = make_data(); model = Net(); opt = torch.optim.AdamW(model.parameters(), 1e-3)
for epoch in range(3):
    loss = train_epoch(model, opt, x, y, epoch, log_every=8, log=log.info)
    r.hset("run:1", mapping={"epoch": epoch, "loss": loss})
log.info("done; metrics in redis: %s", r.hgetall("run:1"))
"""
    )
    (w).mkdir(parents=True, exist_ok=True)
    (w / "train.py").write_text(prog)
    e = {
        "PATH": os.path.dirname(PY) + ":/usr/bin:/bin",
        "HOME": "/root",
        "PYTHONUNBUFFERED": "1",
        "REDIS_PORT": "6349",
        "OMP_NUM_THREADS": "1",
    }
    p = subprocess.Popen([PY, "train.py"], cwd=w, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    time.sleep(9)
    with RedisServer(6349):
        out, _ = p.communicate(timeout=120)
    return out


@scenario(
    "gen-storage-healthy-s3-upload",
    "none",
    "Healthy: the job checks S3 (local moto server) for an existing checkpoint, gets the real 404 "
    "ClientError from head_object, logs it and starts fresh, then trains and uploads checkpoints "
    "successfully (exit 0).",
)
def healthy_s3(w):
    """S3 checkpointing where the first lookup 404s by design."""
    with MotoServer(5075):
        prog = (
            S3_PRELUDE
            + PRELUDE
            + r"""
from botocore.exceptions import ClientError
s3.create_bucket(Bucket="ml-ckpts")
key = "run11/last.pt"
model = Net(); opt = torch.optim.AdamW(model.parameters(), 1e-3)
try:
    s3.head_object(Bucket="ml-ckpts", Key=key)
    print("found existing checkpoint, resuming")
except ClientError as e:
    print(f"no checkpoint at s3://ml-ckpts/{key} ({e}); starting fresh")
x, y = make_data()
for epoch in range(3):
    train_epoch(model, opt, x, y, epoch, log_every=8)
    buf = io.BytesIO(); torch.save({"model": model.state_dict(), "epoch": epoch}, buf)
    s3.put_object(Bucket="ml-ckpts", Key=key, Body=buf.getvalue())
    print(f"uploaded s3://ml-ckpts/{key} ({len(buf.getvalue())} bytes)")
print("training finished")
"""
        )
        return run(w, prog, env={**S3_ENV, "S3_PORT": "5075"})


@scenario(
    "gen-ckpt-healthy-weights-only-allowlisted",
    "none",
    "Healthy: the checkpoint includes a numpy scalar; the load uses torch.serialization.safe_globals to "
    "allow it (the documented fix) and training resumes and completes.",
)
def healthy_safe_globals(w):
    """weights_only load with the numpy globals allow-listed."""
    prog = (
        PRELUDE
        + r"""
import numpy as np
x, y = make_data(); model = Net(); opt = torch.optim.AdamW(model.parameters(), 1e-3)
if not os.path.exists("ckpt.pt"):
    for epoch in range(2):
        train_epoch(model, opt, x, y, epoch, log_every=8)
    torch.save({"model": model.state_dict(), "best_acc": np.float64(0.41)}, "ckpt.pt")
    print("saved ckpt.pt")
else:
    print("loading ckpt.pt with weights_only=True (numpy scalar allow-listed)")
    with torch.serialization.safe_globals([np._core.multiarray.scalar, np.dtype, np.dtypes.Float64DType]):
        ckpt = torch.load("ckpt.pt")
    model.load_state_dict(ckpt["model"])
    print(f"best_acc so far {ckpt['best_acc']:.3f}")
    for epoch in range(2, 4):
        train_epoch(model, opt, x, y, epoch, log_every=8)
    print("done")
"""
    )
    return run(w, prog) + run(w, prog)


@scenario(
    "gen-ckpt-healthy-trainer-save-resume",
    "none",
    "Healthy: transformers Trainer trains a tiny GPT-2 (built from a config) for one epoch with checkpoints, "
    "then a second run resumes from the saved checkpoint-8 and finishes (exit 0).",
)
def healthy_trainer(w):
    """HF Trainer with save_steps and resume_from_checkpoint that works."""
    prog = r"""
import torch, sys
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

class RandomLM(Dataset):
    def __len__(self): return 64
    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(0, 500, (32,), generator=g)
        return {"input_ids": ids, "labels": ids}

cfg = GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=500, n_positions=64)
model = GPT2LMHeadModel(cfg)
args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, num_train_epochs=int(sys.argv[1]),
                         logging_steps=2, save_steps=8, report_to=[], use_cpu=True)
trainer = Trainer(model=model, args=args, train_dataset=RandomLM())
trainer.train(resume_from_checkpoint=len(sys.argv) > 2)
"""
    return run(w, prog, args=["1"]) + run(w, prog, args=["2", "resume"])


# ----------------------------------------------------------------


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    out = Path(sys.argv[1])
    wanted = sys.argv[2:] or list(SCENARIOS)
    for case in wanted:
        sc = SCENARIOS[case]
        wd = WORK / case
        shutil.rmtree(wd, ignore_errors=True)
        wd.mkdir(parents=True)
        t = time.time()
        log = sc["fn"](wd)
        d = out / case
        d.mkdir(parents=True, exist_ok=True)
        (d / "log.txt").write_bytes(log)
        meta = {k: v for k, v in sc.items() if k != "fn"}
        meta["doc"] = (sc["fn"].__doc__ or "").strip()
        (d / "meta.json").write_text(json.dumps(meta, indent=1))
        print(f"{case}: {len(log)} bytes in {time.time() - t:.1f}s", flush=True)


if __name__ == "__main__":
    main()
