"""Generate real multi-rank failure logs with torchrun / mp.spawn and the gloo backend.

Usage:  python tests/corpus/generators/distributed.py OUTDIR [scenario ...]

Each scenario writes OUTDIR/<case-id>/log.txt (the launcher's merged stdout+stderr,
captured byte for byte as `torchrun ... 2>&1 | tee train.log` would) or, for the
per-rank scenarios, OUTDIR/<case-id>/rankN.log (torchrun's own --log-dir/--redirects
files; the flight recorder scenarios add fr_trace.log, torchfrtrace's analysis of the ranks'
traces). Nothing in a log is written by hand: the script writes a small real training
program (train_ddp.py, below), runs it under the real launcher and captures the output.
The failure is caused on purpose (each scenario's docstring says how), so the label
is known. Needs a Python with torch (the CPU build is enough): run the script with it, or set GEN_PYTHON.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

PY = os.environ.get("GEN_PYTHON", sys.executable)
BIN = Path(PY).parent
TORCHRUN = str(BIN / "torchrun")

# The training program every scenario runs. A tiny model on random data, printing its
# loss each step like a real training script; --scenario selects the user-code bug.
TRAIN = r"""
import argparse, datetime, logging, math, os, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

p = argparse.ArgumentParser()
p.add_argument("--scenario", default="healthy")
p.add_argument("--steps", type=int, default=30)
p.add_argument("--fail-rank", type=int, default=1)
p.add_argument("--fail-step", type=int, default=12)
p.add_argument("--timeout", type=int, default=20)
p.add_argument("--style", default="print")   # print | logging | tqdm
p.add_argument("--backend", default="gloo")
p.add_argument("--model", default="emb")      # emb | mlp
p.add_argument("--data-dir", default="data")
p.add_argument("--ckpt", default="")
p.add_argument("--find-unused", action="store_true")
p.add_argument("--no-ddp", action="store_true")   # average gradients by hand instead of DDP
p.add_argument("--sleep", type=float, default=0.05)
p.add_argument("--pidfile", default="")
p.add_argument("--all-ranks-log", action="store_true")   # every rank logs its steps, not only rank 0
p.add_argument("--log-failures", action="store_true")    # logger.exception() before the error propagates
p.add_argument("--local-rank", "--local_rank", type=int, default=0)  # torch.distributed.launch passes it
args = p.parse_args()

VOCAB, DIM, CLASSES, FEAT = 100, 16, 4, 32

class EmbNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.fc1 = nn.Linear(DIM, 32)
        self.fc2 = nn.Linear(32, CLASSES)
        if args.scenario in ("unused_params", "aux_head"):
            self.aux = nn.Linear(32, CLASSES)   # auxiliary head, only used by some configs
    def forward(self, x, use_aux=False):
        h = F.relu(self.fc1(self.emb(x).mean(1)))
        out = self.fc2(h)
        if use_aux:
            out = out + self.aux(h)
        return out

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(FEAT, 64)
        self.fc2 = nn.Linear(64, 64)
        self.head = nn.Linear(64, CLASSES)
    def forward(self, x, use_aux=False):
        return self.head(F.relu(self.fc2(F.relu(self.fc1(x)))))

def get_logger(rank):
    if args.style == "logging":
        logging.basicConfig(level=logging.INFO,
            format="%(asctime)s - %(levelname)s - %(name)s - [rank%(rank)s] %(message)s".replace("%(rank)s", str(rank)))
        return logging.getLogger("train").info
    return lambda msg: print(msg, flush=True)

def batch(gen, step, rank):
    if args.model == "emb":
        x = torch.randint(0, VOCAB, (16, 12), generator=gen)
        if args.scenario == "index_error" and rank == args.fail_rank and step == args.fail_step:
            # this shard was tokenized with a bigger vocabulary than the model's
            x = torch.randint(0, VOCAB + 28, (16, 12), generator=gen)
    else:
        x = torch.randn(16, FEAT, generator=gen)
        if args.scenario == "shape_error" and rank == args.fail_rank and step == args.fail_step:
            # one sample file has an extra feature column
            x = torch.randn(16, FEAT + 1, generator=gen)
        if args.scenario == "nan_loss" and rank == args.fail_rank and step >= args.fail_step:
            x[3, 5] = float("inf")   # corrupted sample in this rank's shard
        if args.scenario == "loss_spike" and step == args.fail_step:
            x = x * 30   # an outlier batch (unnormalized features) on every rank
        if args.scenario == "dtype_error" and rank == args.fail_rank and step == args.fail_step:
            x = x.double()
    y = torch.randint(0, CLASSES, (16,), generator=gen)
    if args.scenario == "label_mismatch" and rank == args.fail_rank and step == args.fail_step:
        y = y[:15]
    return x, y

def main():
    if args.scenario == "pg_not_initialized":
        rank = dist.get_rank()
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if args.pidfile:
        with open(f"{args.pidfile}.{rank}", "w") as f:
            f.write(str(os.getpid()))
    log = get_logger(rank)
    if args.scenario == "wandb_rank0" and rank == 0:
        import wandb   # experiment tracking only on rank 0; not installed on this host
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = EmbNet() if args.model == "emb" else MLP()
    start_step = 0
    if args.ckpt:
        # resume: rank 0 reads the checkpoint, then broadcasts the weights to the others
        if rank == 0:
            log(f"Resuming from {args.ckpt}")
            state = torch.load(args.ckpt, map_location="cpu")
            model.load_state_dict(state["model"])
            start_step = state["step"]
        for prm in model.parameters():
            dist.broadcast(prm.data, src=0)
    ddp = model if args.no_ddp else DDP(model, find_unused_parameters=args.find_unused)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
    if args.scenario == "sched_warning":
        sched.step()   # common mistake: scheduler stepped before the first optimizer step
    scaler = torch.amp.GradScaler("cuda") if args.scenario == "amp_cpu" else None
    gen = torch.Generator().manual_seed(1234 + rank)
    if rank == 0:
        log(f"world_size={world} backend={args.backend} params={sum(p.numel() for p in model.parameters())}")
    it = range(start_step, args.steps)
    if args.style == "tqdm" and rank == 0:
        from tqdm import tqdm
        it = tqdm(it, desc="train", dynamic_ncols=False, ncols=100)
    cache = []
    for step in it:
        if args.scenario == "restart_once" and rank == args.fail_rank and step == args.fail_step \
                and os.environ.get("TORCHELASTIC_RESTART_COUNT") == "0":
            x = torch.load(os.path.join(args.data_dir, "train-extra.pt"))  # not written yet
        if args.scenario == "missing_shard" and rank == args.fail_rank and step == args.fail_step:
            shard = os.path.join(args.data_dir, f"train-{rank:05d}-of-{world:05d}.pt")
            x = torch.load(shard)
        if args.scenario == "hang" and rank == args.fail_rank and step == args.fail_step:
            time.sleep(3600)   # stuck (e.g. on a dead NFS read); never comes back
        if args.scenario == "slow_eval" and rank == 0 and step == args.fail_step:
            log(f"step {step}: running evaluation on rank 0 ...")
            time.sleep(args.timeout + 25)  # evaluation far longer than the PG timeout
        if args.scenario == "oom_leak" and rank == args.fail_rank:
            cache.append(torch.ones(64 * 1024 * 1024 // 4 * 2))  # keeps 128 MB per step "for debugging"
        x, y = batch(gen, step, rank)
        if args.scenario == "anomaly" and step == 0:
            torch.autograd.set_detect_anomaly(True)
        out = ddp(x, use_aux=False)
        if args.scenario == "inplace" and rank == args.fail_rank and step == args.fail_step:
            out = torch.sigmoid(out)
            out.mul_(2)   # in-place rescale of a tensor sigmoid saved for backward
        loss = F.cross_entropy(out, y)
        if args.scenario == "anomaly" and rank == args.fail_rank and step == args.fail_step:
            loss = loss * torch.log(torch.tensor(0.0)) * 0  # 0 * -inf in the loss weighting: nan
        if args.scenario == "nan_loss" and not torch.isfinite(loss):
            raise RuntimeError(f"Loss is {loss.item()}, stopping training")
        opt.zero_grad()
        loss.backward()
        if args.no_ddp:
            for prm in model.parameters():
                dist.all_reduce(prm.grad)
                prm.grad /= world
        if args.scenario == "backward_twice" and rank == args.fail_rank and step == args.fail_step:
            loss.backward()   # second backward to log grad norms of the "second pass"
        opt.step()
        sched.step()
        if args.scenario == "metric_mismatch" and step == args.fail_step:
            # per-class counts over the labels this rank saw (unique() drops absent classes)
            if rank == 0:
                counts = torch.bincount(y, minlength=CLASSES).float()
            else:   # the other ranks count only the classes present in their last 2 samples
                counts = torch.unique(y[:2], return_counts=True)[1].float()
            dist.all_reduce(counts)
        if args.scenario == "collective_order" and step == args.fail_step:
            if rank == 0:
                dist.broadcast(torch.zeros(4), src=0)   # rank 0 broadcasts its best metric...
            dist.all_reduce(loss.detach().clone())     # ...everyone averages the loss
        lval = loss.detach().clone()
        dist.all_reduce(lval)
        lval /= world
        if rank == 0 or args.all_ranks_log:
            if args.style == "tqdm":
                it.set_postfix(loss=f"{lval.item():.4f}")
            else:
                log(f"step {step:4d} | loss {lval.item():.4f} | lr {opt.param_groups[0]['lr']:.3g}")
        if args.scenario == "save_ckpt" and step == args.fail_step:
            if rank == 0:
                path = os.path.join(os.environ.get("CKPT_DIR", "checkpoints"), f"step_{step}.pt")
                log(f"step {step}: saving checkpoint to {path}")
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                            "history": torch.randn(2_000_000), "step": step}, path)
            dist.barrier()
        if args.scenario == "gather_config" and step == args.fail_step:
            # collect each rank's run config for the experiment report
            cfg = {"rank": rank, "lr": opt.param_groups[0]["lr"], "loss_fn": lambda o, t: F.cross_entropy(o, t)}
            allcfg = [None] * world
            dist.all_gather_object(allcfg, cfg)
        if args.scenario == "sleep_after_start" and rank == args.fail_rank and step == args.fail_step:
            time.sleep(3600)
        time.sleep(args.sleep)
    if rank == 0:
        log("training finished")
    dist.barrier()
    dist.destroy_process_group()

if __name__ == "__main__":
    if args.log_failures:
        try:
            main()
        except Exception:
            logging.getLogger("train").exception("training failed")
            raise
    else:
        main()
"""


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _env(**extra) -> dict:
    env = dict(os.environ)
    env.pop("TORCHELASTIC_RUN_ID", None)
    env["PYTHONUNBUFFERED"] = "1"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _run(cmd, cwd, env=None, timeout=120, during=None) -> bytes:
    """Run cmd with stdout+stderr merged into one pipe (like `2>&1 | tee`); return bytes."""
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env or _env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    if during is not None:
        during(proc)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    return out


def _workdir() -> Path:
    d = Path(tempfile.mkdtemp(prefix="tl-dist-"))
    (d / "train_ddp.py").write_text(TRAIN)
    (d / "data").mkdir()
    return d


def torchrun(
    nproc: int,
    *train_args: str,
    launcher: tuple = (),
    env=None,
    timeout=120,
    during=None,
    script="train_ddp.py",
    wd: Path | None = None,
) -> bytes:
    wd = wd or _workdir()
    cmd = [
        TORCHRUN,
        "--nnodes",
        "1",
        "--nproc-per-node",
        str(nproc),
        "--master-port",
        str(_free_port()),
        *launcher,
        script,
        *train_args,
    ]
    return _run(cmd, wd, env=env, timeout=timeout, during=during)


def save(outdir: Path, case: str, data: bytes) -> None:
    d = outdir / case
    d.mkdir(parents=True, exist_ok=True)
    (d / "log.txt").write_bytes(data)
    print(f"{case}: {len(data)} bytes", flush=True)


SCENARIOS = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


# --------------------------------------------------------------------------- failures
# One rank hits a real bug in user code; the other ranks are left in a collective.


@scenario
def index_error_tee(out: Path):
    """Rank 1 gets a batch tokenized with a larger vocabulary than the model's embedding
    (real IndexError 'index out of range in self'); rank 0 then loses its gloo peer;
    torchrun --tee 3 prefixes every line with [defaultN]:."""
    save(
        out,
        "gen-dist-index-error-tee",
        torchrun(2, "--scenario", "index_error", "--fail-step", "9", launcher=("--tee", "3")),
    )


@scenario
def index_error_plain_4(out: Path):
    """Same vocabulary bug on rank 2 of 4, launched without --tee (only the [rankN]:
    prefixes torch adds to uncaught exceptions)."""
    save(
        out,
        "gen-dist-index-error-4ranks",
        torchrun(4, "--scenario", "index_error", "--fail-rank", "2", "--fail-step", "6"),
    )


@scenario
def shape_error_logging(out: Path):
    """Rank 1 reads a sample with one extra feature column: real 'mat1 and mat2 shapes
    cannot be multiplied' in the first Linear; Python logging format on rank 0."""
    save(
        out,
        "gen-dist-shape-error-logging",
        torchrun(
            2,
            "--scenario",
            "shape_error",
            "--model",
            "mlp",
            "--style",
            "logging",
            "--fail-step",
            "11",
            launcher=("--tee", "3"),
        ),
    )


@scenario
def label_mismatch_3(out: Path):
    """Rank 0 of 3 gets 15 labels for 16 inputs: cross_entropy raises 'Expected input
    batch_size (16) to match target batch_size (15)'."""
    save(
        out,
        "gen-dist-label-batch-mismatch-3ranks",
        torchrun(3, "--scenario", "label_mismatch", "--fail-rank", "0", "--fail-step", "7"),
    )


@scenario
def dtype_error(out: Path):
    """Rank 1 gets a float64 batch (np.float64 array converted with torch.from_numpy):
    real 'mat1 and mat2 must have the same dtype'."""
    save(
        out,
        "gen-dist-dtype-error",
        torchrun(2, "--scenario", "dtype_error", "--model", "mlp", "--fail-step", "5", launcher=("--tee", "3")),
    )


@scenario
def nan_loss(out: Path):
    """A corrupted sample with an inf feature on rank 1 makes the loss NaN; the
    training loop's own isfinite check raises 'Loss is nan, stopping training'."""
    save(out, "gen-dist-nan-loss-check", torchrun(2, "--scenario", "nan_loss", "--model", "mlp", "--fail-step", "14"))


@scenario
def missing_shard(out: Path):
    """Rank 1 opens its data shard train-00001-of-00002.pt, which does not exist:
    FileNotFoundError from torch.load."""
    save(
        out,
        "gen-dist-missing-shard",
        torchrun(2, "--scenario", "missing_shard", "--fail-step", "4", launcher=("--tee", "3")),
    )


@scenario
def truncated_checkpoint(out: Path):
    """A real torch.save checkpoint is cut to half its size (as a save killed mid-write
    leaves it); rank 0 resumes from it and torch.load fails while rank 1 waits in the
    weight broadcast."""
    wd = _workdir()
    subprocess.run(
        [
            PY,
            "-c",
            textwrap.dedent("""
        import sys, torch
        sys.argv = ['x', '--scenario', 'healthy']
        exec(open('train_ddp.py').read().split('def get_logger')[0])
        torch.save({'model': EmbNet().state_dict(), 'step': 10}, 'last.pt')
    """),
        ],
        cwd=wd,
        check=True,
    )
    data = (wd / "last.pt").read_bytes()
    (wd / "last.pt").write_bytes(data[: len(data) // 2])
    save(out, "gen-dist-truncated-checkpoint", torchrun(2, "--ckpt", "last.pt", launcher=("--tee", "3"), wd=wd))


PREP_CKPT = """
import sys, numpy as np, torch, torch.nn as nn
sys.argv = ['x']
exec(open('train_ddp.py').read().split('def get_logger')[0])
kind = {kind!r}
m = EmbNet()
if kind == 'arch':          # saved by the previous config: hidden size 64 instead of 32
    m.fc1, m.fc2 = nn.Linear(DIM, 64), nn.Linear(64, CLASSES)
    torch.save({{'model': m.state_dict(), 'step': 10}}, 'last.pt')
elif kind == 'numpy':       # the step counter was a numpy integer when saved
    torch.save({{'model': m.state_dict(), 'step': np.int64(10)}}, 'last.pt')
"""


def _resume_run(kind: str) -> bytes:
    wd = _workdir()
    subprocess.run([PY, "-c", PREP_CKPT.format(kind=kind)], cwd=wd, check=True)
    return torchrun(2, "--ckpt", "last.pt", launcher=("--tee", "3"), wd=wd)


@scenario
def resume_errors(out: Path):
    """Resuming a 2-rank run from a checkpoint on rank 0 (then broadcast): a checkpoint of
    an older config with another hidden size (size mismatch in load_state_dict); one
    whose step counter is a numpy int64 (torch.load's default weights_only=True refuses
    it); and a --ckpt path that does not exist. Rank 1 waits in the broadcast each time."""
    save(out, "gen-dist-resume-size-mismatch", _resume_run("arch"))
    save(out, "gen-dist-resume-weights-only-numpy", _resume_run("numpy"))
    save(
        out, "gen-dist-resume-checkpoint-missing", torchrun(2, "--ckpt", "checkpoints/last.pt", launcher=("--tee", "3"))
    )


def _launch(nproc: int, *targs: str) -> bytes:
    """The deprecated `python -m torch.distributed.launch` (still used by old scripts)."""
    wd = _workdir()
    cmd = [
        PY,
        "-m",
        "torch.distributed.launch",
        "--nproc-per-node",
        str(nproc),
        "--master-port",
        str(_free_port()),
        "train_ddp.py",
        *targs,
    ]
    return _run(cmd, wd)


@scenario
def deprecated_launch(out: Path):
    """torch.distributed.launch (FutureWarning: deprecated): a healthy run, and a run in
    which rank 1 gets 33 features instead of 32 (shape error)."""
    save(out, "gen-dist-healthy-deprecated-launch", _launch(2, "--steps", "15"))
    save(
        out,
        "gen-dist-launch-shape-error",
        _launch(2, "--scenario", "shape_error", "--model", "mlp", "--fail-step", "6"),
    )


# --------------------------------------------------------------------------- hangs
@scenario
def hang_rank1(out: Path):
    """Rank 1 blocks forever at step 10 (a time.sleep standing in for a stuck read);
    rank 0 waits in the loss all_reduce until the 20 s process-group timeout fires
    (gloo 'Timed out waiting ... for recv'), then torchrun SIGTERMs the stuck rank."""
    save(
        out,
        "gen-dist-hang-rank1-gloo-timeout",
        torchrun(2, "--scenario", "hang", "--fail-step", "10", "--timeout", "15", launcher=("--tee", "3")),
    )


@scenario
def hang_rank3_of_4(out: Path):
    """Rank 3 of 4 stops participating after its step-8 all_reduce; the other three
    ranks time out in the next collective (gloo, 15 s)."""
    save(
        out,
        "gen-dist-hang-rank3-of-4",
        torchrun(
            4,
            "--scenario",
            "sleep_after_start",
            "--fail-rank",
            "3",
            "--fail-step",
            "8",
            "--timeout",
            "15",
            "--steps",
            "20",
        ),
    )


@scenario
def slow_eval_rank0(out: Path):
    """Rank 0 runs an 'evaluation' longer than the 15 s process-group timeout while
    rank 1 goes on to the next step's all_reduce and times out (the DEIMv2 pattern)."""
    save(
        out,
        "gen-dist-slow-eval-rank0",
        torchrun(2, "--scenario", "slow_eval", "--fail-step", "6", "--timeout", "15", launcher=("--tee", "3")),
    )


MONITORED = r"""
import datetime, os, time, torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
rank = dist.get_rank()
for epoch in range(3):
    t = torch.tensor([float(rank + epoch)])
    dist.all_reduce(t)
    print(f"[rank {rank}] epoch {epoch} done, sum={t.item()}", flush=True)
    if rank == 1 and epoch == 2:
        print(f"[rank {rank}] writing predictions to disk...", flush=True)
        time.sleep(120)
    # make sure every rank finished the epoch before checkpointing
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=10))
dist.destroy_process_group()
"""


@scenario
def monitored_barrier(out: Path):
    """Rank 1 is stuck writing predictions; rank 0's dist.monitored_barrier (gloo only)
    reports 'Rank 1 failed to pass monitoredBarrier in 10000 ms'."""
    wd = _workdir()
    (wd / "epoch_sync.py").write_text(MONITORED)
    save(out, "gen-dist-monitored-barrier", torchrun(2, wd=wd, script="epoch_sync.py"))


GATHER = r"""
import datetime, logging, os, time, torch, torch.distributed as dist
logging.basicConfig(level=logging.INFO, format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s")
log = logging.getLogger("eval")
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=15))
rank, world = dist.get_rank(), dist.get_world_size()
for epoch in range(4):
    time.sleep(0.5)
    metrics = {"rank": rank, "acc": 0.5 + 0.1 * epoch, "n": 128}
    if rank == 2 and epoch == 2:
        log.info("rank 2: decoding 4096 samples for BLEU ...")
        time.sleep(90)            # very slow generation on one rank
    gathered = [None] * world
    dist.all_gather_object(gathered, metrics)
    if rank == 0:
        acc = sum(m["acc"] * m["n"] for m in gathered) / sum(m["n"] for m in gathered)
        log.info(f"epoch {epoch}: val_acc={acc:.4f}")
dist.destroy_process_group()
"""


@scenario
def all_gather_object_straggler(out: Path):
    """Rank 2 of 3 spends 90 s in a slow evaluation while ranks 0-1 wait in
    dist.all_gather_object (15 s timeout, gloo): a straggler surfacing as gloo timeouts."""
    wd = _workdir()
    (wd / "eval_gather.py").write_text(GATHER)
    save(out, "gen-dist-all-gather-object-straggler", torchrun(3, wd=wd, script="eval_gather.py"))


TWO_NODE = r"""
import datetime, os, time, torch, torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
rank = dist.get_rank()
print(f"[node {os.environ['NODE']}] rank {rank} up, restart={os.environ['TORCHELASTIC_RESTART_COUNT']}", flush=True)
for step in range(100):
    t = torch.ones(1) * step
    dist.all_reduce(t)
    if step % 2 == 0:
        print(f"[node {os.environ['NODE']}] step {step} sum={t.item():.0f}", flush=True)
    if step == 5:
        # switch to the second data split; it was only copied to node B
        data = torch.load(os.path.join(os.environ["DATA_ROOT"], "split2.pt"))
    time.sleep(0.2)
"""


@scenario
def two_node_store_host_dies(out: Path):
    """Two torchrun agents (one worker each) joined through the c10d rendezvous on
    127.0.0.1. Node A hosts the store; at step 5 its worker torch.load()s a data split
    that was only copied to node B (FileNotFoundError), node A's agent exits (no restarts)
    and takes the store with it; node B's worker loses its gloo peer and node B's agent
    (max-restarts 3) cannot reach the C10d store. Saved as rank0.log (node A's console)
    and rank1.log (node B's console)."""
    wd = _workdir()
    (wd / "two_node.py").write_text(TWO_NODE)
    (wd / "nodeB").mkdir()
    subprocess.run([PY, "-c", "import torch; torch.save(torch.zeros(4), 'nodeB/split2.pt')"], cwd=wd, check=True)
    port = _free_port()
    common = [
        "--nnodes",
        "2",
        "--nproc-per-node",
        "1",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"127.0.0.1:{port}",
        "--rdzv-id",
        "exp7",
        "two_node.py",
    ]
    a = subprocess.Popen(
        [TORCHRUN, "--max-restarts", "0", *common],
        cwd=wd,
        env=_env(NODE="A", DATA_ROOT="nodeA"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    time.sleep(1.5)
    b = _run([TORCHRUN, "--max-restarts", "3", *common], wd, env=_env(NODE="B", DATA_ROOT="nodeB"))
    a_out, _ = a.communicate(timeout=120)
    d = out / "gen-dist-two-node-store-host-dies"
    d.mkdir(parents=True, exist_ok=True)
    (d / "rank0.log").write_bytes(a_out)
    (d / "rank1.log").write_bytes(b)
    print("gen-dist-two-node-store-host-dies: 2 node files", flush=True)


@scenario
def module_missing_rank0(out: Path):
    """Only rank 0 imports wandb (logging on rank 0 only) and it is not installed:
    ModuleNotFoundError on rank 0 before init_process_group; rank 1 waits in init."""
    save(
        out,
        "gen-dist-module-missing-rank0",
        torchrun(2, "--scenario", "wandb_rank0", "--timeout", "15", launcher=("--tee", "3")),
    )


@scenario
def not_picklable_gather(out: Path):
    """At step 6 every rank all_gather_object()s its run config, which holds a lambda:
    pickling fails on every rank ('Can't pickle <function <lambda>>')."""
    save(out, "gen-dist-all-gather-object-lambda", torchrun(2, "--scenario", "gather_config", "--fail-step", "6"))


@scenario
def disk_full_checkpoint(out: Path):
    """Rank 0 saves a ~9 MB checkpoint at step 8 to a 4 MB tmpfs (a full disk; mounted
    here for the run), torch.save fails with ENOSPC while rank 1 waits in the barrier."""
    mnt = Path(tempfile.mkdtemp(prefix="tl-g3-small-"))
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)]).returncode:
        print("disk_full_checkpoint: cannot mount a small tmpfs, skipped")
        return
    try:
        save(
            out,
            "gen-dist-checkpoint-disk-full",
            torchrun(
                2,
                "--scenario",
                "save_ckpt",
                "--fail-step",
                "8",
                "--timeout",
                "15",
                launcher=("--tee", "3"),
                env=_env(CKPT_DIR=str(mnt)),
            ),
        )
    finally:
        subprocess.run(["umount", str(mnt)])
        mnt.rmdir()


@scenario
def autograd_errors(out: Path):
    """Real autograd errors on one rank of a DDP run: NaN caught by anomaly detection
    (0 * -inf in a loss weighting), an in-place op on a tensor saved for backward, and a
    second backward through a freed graph. The other rank loses its gloo peer."""
    save(
        out,
        "gen-dist-anomaly-nan-backward",
        torchrun(2, "--scenario", "anomaly", "--model", "mlp", "--fail-step", "6", launcher=("--tee", "3")),
    )
    save(out, "gen-dist-inplace-modified", torchrun(2, "--scenario", "inplace", "--fail-step", "4", "--fail-rank", "0"))
    save(
        out,
        "gen-dist-backward-twice",
        torchrun(3, "--scenario", "backward_twice", "--fail-step", "5", "--fail-rank", "2", launcher=("--tee", "3")),
    )


@scenario
def second_job_same_port(out: Path):
    """Two jobs launched on one host with the same --master-port (the second copied the
    first's launch command): while job 1 trains, job 2's torchrun cannot bind the port."""
    port = _free_port()
    wd1 = _workdir()
    job1 = subprocess.Popen(
        [
            TORCHRUN,
            "--nnodes",
            "1",
            "--nproc-per-node",
            "2",
            "--master-port",
            str(port),
            "train_ddp.py",
            "--steps",
            "150",
            "--sleep",
            "0.1",
        ],
        cwd=wd1,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        time.sleep(8)
        wd2 = _workdir()
        cmd = [
            TORCHRUN,
            "--nnodes",
            "1",
            "--nproc-per-node",
            "2",
            "--master-port",
            str(port),
            "train_ddp.py",
            "--steps",
            "20",
        ]
        save(out, "gen-dist-address-in-use-second-job", _run(cmd, wd2))
    finally:
        os.killpg(job1.pid, signal.SIGTERM)
        job1.wait()


DL_TRAIN = r"""
import datetime, io, os, sys, time
import numpy as np, torch, torch.nn as nn, torch.nn.functional as F
import torch.distributed as dist
from PIL import Image
from torch.utils.data import Dataset, DataLoader, DistributedSampler
from torch.nn.parallel import DistributedDataParallel as DDP

WHAT = sys.argv[1]

class ImageFolderLike(Dataset):
    def __init__(self, root):
        self.files = sorted(os.path.join(root, f) for f in os.listdir(root))
        self.keep = []
    def __len__(self):
        return len(self.files)
    def __getitem__(self, i):
        if WHAT == "worker_stuck" and i == 37:
            time.sleep(600)            # a read that never returns (dead network mount)
        img = Image.open(self.files[i]).convert("RGB").resize((16, 16))
        if WHAT == "worker_leak":
            self.keep.append(np.ones((64, 1024, 1024), dtype=np.uint8))  # cache decoded data
        x = torch.from_numpy(np.asarray(img, dtype=np.float32) / 255.).permute(2, 0, 1)
        return x, i % 5

def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
    rank, world = dist.get_rank(), dist.get_world_size()
    with open(f"pid.{rank}", "w") as f:
        f.write(str(os.getpid()))
    ds = ImageFolderLike("images")
    dl = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds, shuffle=False),
                    num_workers=2, timeout=10 if WHAT == "worker_stuck" else 0)
    model = DDP(nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                              nn.Flatten(), nn.Linear(8, 5)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(3):
        for it, (x, y) in enumerate(dl):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
            if rank == 0:
                print(f"epoch {epoch} iter {it:3d} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()

if __name__ == "__main__":
    main()
"""


def _images(wd: Path, n: int = 96, corrupt: tuple = ()):
    """Write n small real PNGs; the indices in `corrupt` are cut short (a partial copy)."""
    code = textwrap.dedent(f"""
        import os, numpy as np
        from PIL import Image
        os.makedirs('images', exist_ok=True)
        rng = np.random.default_rng(0)
        for i in range({n}):
            p = f'images/img_{{i:04d}}.png'
            Image.fromarray(rng.integers(0, 255, (24, 24, 3), dtype=np.uint8)).save(p)
            if i in {tuple(corrupt)!r}:
                data = open(p, 'rb').read()
                open(p, 'wb').write(data[:20])
    """)
    subprocess.run([PY, "-c", code], cwd=wd, check=True)


@scenario
def dataloader_corrupt_image(out: Path):
    """Image dataset with num_workers=2 under DDP; one PNG was cut to 20 bytes (an
    interrupted copy). Rank 1's DataLoader worker fails in PIL (here 'OSError: Truncated
    File Read'), re-raised in the main process as 'Caught OSError in DataLoader worker'."""
    wd = _workdir()
    (wd / "train_images.py").write_text(DL_TRAIN)
    _images(wd, corrupt=(53,))
    save(
        out,
        "gen-dist-dataloader-corrupt-image",
        torchrun(2, "corrupt", wd=wd, script="train_images.py", launcher=("--tee", "3")),
    )


@scenario
def dataloader_worker_stuck(out: Path):
    """DataLoader(timeout=10): the worker that loads sample 37 (in rank 1's shard of the
    DistributedSampler) blocks forever; rank 1 raises 'DataLoader timed out after 10
    seconds', rank 0 loses its gloo peer."""
    wd = _workdir()
    (wd / "train_images.py").write_text(DL_TRAIN)
    _images(wd)
    save(out, "gen-dist-dataloader-timeout", torchrun(2, "worker_stuck", wd=wd, script="train_images.py"))


@scenario
def dataloader_worker_oom(out: Path):
    """Rank 1 (and so its DataLoader workers) runs in a 900 MB memory cgroup; the dataset
    caches 64 MB of decoded data per sample in each worker, the kernel OOM-kills a worker
    and rank 1's main process raises 'DataLoader worker (pid(s) ...) exited unexpectedly'."""
    cg = _memory_cgroup("tl-g3-oom3", 900 * 1024 * 1024)
    if cg is None:
        print("dataloader_worker_oom: no writable memory cgroup, skipped")
        return
    wd = _workdir()
    (wd / "train_images.py").write_text(DL_TRAIN)
    _images(wd)

    def during(proc):
        t0 = time.time()
        while not (wd / "pid.1").exists() and time.time() - t0 < 60:
            time.sleep(0.02)
        (cg / "cgroup.procs").write_text((wd / "pid.1").read_text())

    try:
        save(
            out,
            "gen-dist-dataloader-worker-oom-killed",
            torchrun(2, "worker_leak", wd=wd, script="train_images.py", launcher=("--tee", "3"), during=during),
        )
        print((cg / "memory.oom_control").read_text())
    finally:
        time.sleep(1)
        try:
            cg.rmdir()
        except OSError as e:
            print("cgroup cleanup:", e)


STORE = r"""
import datetime, sys, time, torch.distributed as dist
store = dist.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=True, wait_for_workers=False,
                      timeout=datetime.timedelta(seconds=300))
time.sleep(int(sys.argv[2]))
"""


@scenario
def two_node_rendezvous_closed(out: Path):
    """Like two_node_store_host_dies, but the c10d rendezvous store runs in its own
    long-lived process (both agents use --rdzv-conf is_host=false, as with a dedicated
    rendezvous host). Node A's worker hits the FileNotFoundError, node A's agent (no
    restarts) shuts the rendezvous down; node B's agent (max-restarts 3) tries to
    re-rendezvous and gets RendezvousClosedError. rank0.log = node A, rank1.log = node B."""
    wd = _workdir()
    (wd / "two_node.py").write_text(TWO_NODE)
    (wd / "store.py").write_text(STORE)
    (wd / "nodeB").mkdir()
    subprocess.run([PY, "-c", "import torch; torch.save(torch.zeros(4), 'nodeB/split2.pt')"], cwd=wd, check=True)
    port = _free_port()
    store = subprocess.Popen([PY, "store.py", str(port), "120"], cwd=wd)
    try:
        time.sleep(3)
        common = [
            "--nnodes",
            "2",
            "--nproc-per-node",
            "1",
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            f"127.0.0.1:{port}",
            "--rdzv-id",
            "exp8",
            "--rdzv-conf",
            "is_host=false",
            "two_node.py",
        ]
        a = subprocess.Popen(
            [TORCHRUN, "--max-restarts", "0", *common],
            cwd=wd,
            env=_env(NODE="A", DATA_ROOT="nodeA"),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        time.sleep(1.5)
        b = _run([TORCHRUN, "--max-restarts", "3", *common], wd, env=_env(NODE="B", DATA_ROOT="nodeB"))
        a_out, _ = a.communicate(timeout=120)
    finally:
        store.kill()
        store.wait()
    d = out / "gen-dist-two-node-rendezvous-closed"
    d.mkdir(parents=True, exist_ok=True)
    (d / "rank0.log").write_bytes(a_out)
    (d / "rank1.log").write_bytes(b)
    print("gen-dist-two-node-rendezvous-closed: 2 node files", flush=True)


# --------------------------------------------------------------------------- kills
def _kill_rank_later(wd: Path, rank: int, sig: int, after: float):
    def during(proc):
        pidfile = wd / f"pid.{rank}"
        t0 = time.time()
        while not pidfile.exists() and time.time() - t0 < 60:
            time.sleep(0.2)
        time.sleep(after)
        os.kill(int(pidfile.read_text()), sig)

    return during


@scenario
def sigkill_rank1(out: Path):
    """Someone (here: this script, like an operator's `kill -9` or a node agent)
    SIGKILLs rank 1 mid-training; rank 0 loses its gloo peer; torchrun reports
    exitcode -9. Not an OOM: no memory pressure at all."""
    wd = _workdir()
    save(
        out,
        "gen-dist-sigkill-rank1",
        torchrun(
            2,
            "--pidfile",
            "pid",
            "--steps",
            "200",
            "--sleep",
            "0.1",
            launcher=("--tee", "3"),
            wd=wd,
            during=_kill_rank_later(wd, 1, signal.SIGKILL, 4),
        ),
    )


@scenario
def sigterm_agent(out: Path):
    """The scheduler preempts the job: SIGTERM to the torchrun agent (as Slurm/k8s
    send to the launcher) mid-training; torchrun forwards it and exits with a
    SignalException."""
    wd = _workdir()

    def during(proc):
        t0 = time.time()
        while not (wd / "pid.0").exists() and time.time() - t0 < 60:
            time.sleep(0.2)
        time.sleep(4)
        os.kill(proc.pid, signal.SIGTERM)

    save(
        out,
        "gen-dist-preempted-sigterm",
        torchrun(2, "--pidfile", "pid", "--steps", "300", "--sleep", "0.1", wd=wd, during=during),
    )


def _memory_cgroup(name: str, limit: int) -> Path | None:
    base = Path("/sys/fs/cgroup/memory")
    own = [
        entry.split(":", 2)[2]
        for entry in Path("/proc/self/cgroup").read_text().splitlines()
        if entry.split(":")[1] == "memory"
    ]
    cg = base / own[0].lstrip("/") / name if own else base / name
    try:
        cg.mkdir(exist_ok=True)
        (cg / "memory.limit_in_bytes").write_text(str(limit))
        return cg
    except OSError:
        return None


@scenario
def oom_killed_cgroup(out: Path):
    """Rank 1 is moved into a memory cgroup limited to 600 MB (like a container or
    Slurm memory limit) and leaks 128 MB per step (keeps a tensor each step); the
    kernel OOM killer kills it and torchrun reports exitcode -9 (SIGKILL)."""
    cg = _memory_cgroup("tl-g3-oom", 600 * 1024 * 1024)
    if cg is None:
        print("oom_killed_cgroup: no writable memory cgroup, skipped")
        return
    wd = _workdir()

    def during(proc):
        pidfile = wd / "pid.1"
        t0 = time.time()
        while not pidfile.exists() and time.time() - t0 < 60:
            time.sleep(0.05)
        (cg / "cgroup.procs").write_text(pidfile.read_text())

    try:
        save(
            out,
            "gen-dist-oom-killed-cgroup",
            torchrun(
                2,
                "--scenario",
                "oom_leak",
                "--pidfile",
                "pid",
                "--steps",
                "60",
                "--sleep",
                "0.3",
                launcher=("--tee", "3"),
                wd=wd,
                during=during,
            ),
        )
        print((cg / "memory.oom_control").read_text())
    finally:
        time.sleep(1)
        try:
            cg.rmdir()
        except OSError as e:
            print("cgroup cleanup:", e)


# --------------------------------------------------------------------------- collective mismatch
@scenario
def metric_shape_mismatch_detail(out: Path):
    """At step 8 each rank all_reduces per-class label counts; rank 1 computes them with
    torch.unique(return_counts=True), which drops absent classes, so its tensor is shorter. TORCH_DISTRIBUTED_DEBUG=DETAIL
    makes gloo check collective fingerprints: 'Detected mismatch between collectives'."""
    save(
        out,
        "gen-dist-collective-shape-mismatch-detail",
        torchrun(
            2,
            "--scenario",
            "metric_mismatch",
            "--fail-step",
            "8",
            "--no-ddp",
            launcher=("--tee", "3"),
            env=_env(TORCH_DISTRIBUTED_DEBUG="DETAIL"),
        ),
    )


@scenario
def collective_order_detail(out: Path):
    """Rank 0 alone calls dist.broadcast (best-metric sync inside `if rank == 0`) while
    rank 1 calls all_reduce; TORCH_DISTRIBUTED_DEBUG=DETAIL reports the mismatch."""
    save(
        out,
        "gen-dist-collective-order-mismatch-detail",
        torchrun(
            2,
            "--scenario",
            "collective_order",
            "--fail-step",
            "5",
            "--no-ddp",
            env=_env(TORCH_DISTRIBUTED_DEBUG="DETAIL"),
        ),
    )


@scenario
def ddp_detail_segfault(out: Path):
    """DDP with TORCH_DISTRIBUTED_DEBUG=DETAIL on this CPU build and gloo: both ranks die
    with SIGSEGV right after start (found while writing the scenario above; a native
    crash inside torch, no Python traceback)."""
    save(
        out,
        "gen-dist-ddp-detail-segfault",
        torchrun(
            2,
            "--scenario",
            "metric_mismatch",
            "--fail-step",
            "8",
            launcher=("--tee", "3"),
            env=_env(TORCH_DISTRIBUTED_DEBUG="DETAIL"),
        ),
    )


@scenario
def metric_shape_mismatch_nodebug(out: Path):
    """The same per-class-count bug as above without TORCH_DISTRIBUTED_DEBUG: gloo sees
    all_reduce buffers of different sizes on the two ranks."""
    save(
        out,
        "gen-dist-collective-shape-mismatch-nodebug",
        torchrun(2, "--scenario", "metric_mismatch", "--fail-step", "8", "--timeout", "15", launcher=("--tee", "3")),
    )


@scenario
def collective_order_3ranks_nodebug(out: Path):
    """Rank 0 of 3 broadcasts while ranks 1-2 all_reduce, no debug mode: the mismatch
    surfaces as whatever gloo does with mismatched ops (here with a 15 s timeout)."""
    save(
        out,
        "gen-dist-collective-order-3ranks-nodebug",
        torchrun(3, "--scenario", "collective_order", "--fail-step", "5", "--timeout", "15"),
    )


# --------------------------------------------------------------------------- setup errors
@scenario
def address_in_use_torchrun(out: Path):
    """MASTER_PORT is already taken by another process (a leftover job's listening
    socket): torchrun's c10d store cannot bind it."""
    port = _free_port()
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("0.0.0.0", port))
    holder.listen()
    try:
        wd = _workdir()
        cmd = [TORCHRUN, "--nnodes", "1", "--nproc-per-node", "2", "--master-port", str(port), "train_ddp.py"]
        save(out, "gen-dist-address-in-use-torchrun", _run(cmd, wd))
    finally:
        holder.close()


SPAWN = r"""
import datetime, os, sys, time
import torch, torch.nn as nn, torch.nn.functional as F
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

WHAT = sys.argv[1] if len(sys.argv) > 1 else "healthy"
WORLD = int(sys.argv[2]) if len(sys.argv) > 2 else 2

def worker(rank, world):
    if WHAT == "oom_leak":
        with open(f"pid.{rank}", "w") as f:
            f.write(str(os.getpid()))
        time.sleep(1)
    dist.init_process_group("gloo", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=20))
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    keep = []
    for epoch in range(2):
        for step in range(15):
            x, y = torch.randn(32, 20), torch.randint(0, 2, (32,))
            if WHAT == "shape" and rank == 1 and epoch == 1 and step == 3:
                x = torch.randn(32, 24)
            if WHAT == "oom_leak" and rank == 1:
                keep.append(torch.ones(32 * 1024 * 1024))
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
            if rank == 0 and step % 5 == 0:
                print(f"Epoch {epoch} [{step * 32}/480] loss: {loss.item():.6f}", flush=True)
            time.sleep(0.1)
    if rank == 0:
        print("Done.", flush=True)
    dist.destroy_process_group()

if __name__ == "__main__":
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    mp.spawn(worker, args=(WORLD,), nprocs=WORLD, join=True)
"""


def spawn_run(
    what: str, world: int = 2, port: int | None = None, during=None, wd=None, env_extra: dict | None = None
) -> bytes:
    wd = wd or _workdir()
    (wd / "spawn_train.py").write_text(SPAWN)
    env = _env(MASTER_ADDR="127.0.0.1", MASTER_PORT=port or _free_port(), **(env_extra or {}))
    return _run([PY, "spawn_train.py", what, str(world)], wd, env=env, during=during)


@scenario
def address_in_use_spawn(out: Path):
    """mp.spawn job whose MASTER_PORT is held by another process: rank 0's TCPStore
    cannot bind (EADDRINUSE) inside init_process_group."""
    port = _free_port()
    holder = socket.socket()
    holder.bind(("127.0.0.1", port))
    holder.listen()
    try:
        save(out, "gen-dist-address-in-use-spawn", spawn_run("healthy", port=port))
    finally:
        holder.close()


@scenario
def spawn_shape_error(out: Path):
    """mp.spawn DDP job: rank 1 gets a batch with 24 features instead of 20 in epoch 1;
    mp.spawn re-raises it as ProcessRaisedException."""
    save(out, "gen-dist-spawn-shape-error", spawn_run("shape"))


@scenario
def spawn_oom_killed(out: Path):
    """mp.spawn DDP job: rank 1 (inside a 700 MB memory cgroup) keeps a 128 MB tensor
    per step; the kernel OOM killer kills it: 'process 1 terminated with signal SIGKILL'."""
    cg = _memory_cgroup("tl-g3-oom2", 700 * 1024 * 1024)
    if cg is None:
        print("spawn_oom_killed: no writable memory cgroup, skipped")
        return
    wd = _workdir()

    def during(proc):
        t0 = time.time()
        while not (wd / "pid.1").exists() and time.time() - t0 < 60:
            time.sleep(0.05)
        time.sleep(0.1)
        (cg / "cgroup.procs").write_text((wd / "pid.1").read_text())

    try:
        save(out, "gen-dist-spawn-oom-killed", spawn_run("oom_leak", wd=wd, during=during))
        print((cg / "memory.oom_control").read_text())
    finally:
        time.sleep(1)
        try:
            cg.rmdir()
        except OSError as e:
            print("cgroup cleanup:", e)


@scenario
def rendezvous_timeout_c10d(out: Path):
    """torchrun --nnodes 2 with the c10d rendezvous, but the second node never starts
    (wrong host list): the first node's rendezvous times out after join_timeout=20."""
    wd = _workdir()
    port = _free_port()
    cmd = [
        TORCHRUN,
        "--nnodes",
        "2",
        "--nproc-per-node",
        "2",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"127.0.0.1:{port}",
        "--rdzv-id",
        "job42",
        "--rdzv-conf",
        "join_timeout=20",
        "train_ddp.py",
    ]
    save(out, "gen-dist-rendezvous-timeout-c10d", _run(cmd, wd, timeout=90))


@scenario
def wrong_master_port_worker_node(out: Path):
    """Node 1 of a 2-node static launch is given the wrong --master-port: nobody listens
    there, its agent's store client times out connecting."""
    wd = _workdir()
    cmd = [
        TORCHRUN,
        "--nnodes",
        "2",
        "--node-rank",
        "1",
        "--nproc-per-node",
        "2",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(_free_port()),
        "--rdzv-conf",
        "timeout=20",
        "train_ddp.py",
    ]
    save(out, "gen-dist-wrong-master-port-node1", _run(cmd, wd, timeout=200))


INIT_TCP = r"""
import datetime, os, torch.distributed as dist
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
print(f"rank {rank}/{world}: connecting to {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}", flush=True)
dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=15))
print("initialized", flush=True)
"""


@scenario
def init_wrong_port_client(out: Path):
    """A rank-1 process started by hand (RANK=1, WORLD_SIZE=2) with a MASTER_PORT on
    which no rank 0 listens: init_process_group's store client times out."""
    wd = _workdir()
    (wd / "init_only.py").write_text(INIT_TCP)
    save(
        out,
        "gen-dist-init-wrong-port-rank1",
        _run(
            [PY, "init_only.py"], wd, env=_env(RANK=1, WORLD_SIZE=2, MASTER_ADDR="127.0.0.1", MASTER_PORT=_free_port())
        ),
    )


@scenario
def init_missing_ranks_server(out: Path):
    """Rank 0 of a world of 3 started alone (the other two never launched): its TCPStore
    waits for clients until the 15 s timeout."""
    wd = _workdir()
    (wd / "init_only.py").write_text(INIT_TCP)
    save(
        out,
        "gen-dist-init-missing-ranks-rank0",
        _run(
            [PY, "init_only.py"], wd, env=_env(RANK=0, WORLD_SIZE=3, MASTER_ADDR="127.0.0.1", MASTER_PORT=_free_port())
        ),
    )


@scenario
def pg_not_initialized_torchrun(out: Path):
    """The training script calls dist.get_rank() (for its logger) before
    init_process_group: 'Default process group has not been initialized' on every rank."""
    save(
        out,
        "gen-dist-pg-not-initialized-torchrun",
        torchrun(2, "--scenario", "pg_not_initialized", launcher=("--tee", "3")),
    )


DDP_NO_INIT = r"""
import torch, torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
print("Building model...", flush=True)
model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
print(f"params: {sum(p.numel() for p in model.parameters())}", flush=True)
model = DDP(model)   # the config says distributed=True, but the script was started with python
"""


@scenario
def pg_not_initialized_ddp_single(out: Path):
    """The script wraps the model in DistributedDataParallel but was started with plain
    `python train.py` (no torchrun, no init_process_group)."""
    wd = _workdir()
    (wd / "train_single.py").write_text(DDP_NO_INIT)
    save(out, "gen-dist-pg-not-initialized-ddp-single", _run([PY, "train_single.py"], wd))


@scenario
def nccl_on_cpu_build(out: Path):
    """init_process_group('nccl') with the CPU-only torch build (a config written for
    GPUs run on a CPU box)."""
    save(out, "gen-dist-nccl-backend-cpu-build", torchrun(2, "--backend", "nccl"))


@scenario
def unused_params(out: Path):
    """The model has an auxiliary head that forward() never uses; DDP without
    find_unused_parameters fails on the second iteration on every rank."""
    save(out, "gen-dist-ddp-unused-parameters", torchrun(2, "--scenario", "unused_params", launcher=("--tee", "3")))


@scenario
def unused_params_debug_info(out: Path):
    """Same unused auxiliary head with TORCH_DISTRIBUTED_DEBUG=INFO (names the unused
    parameters), 3 ranks."""
    save(
        out,
        "gen-dist-ddp-unused-parameters-debug-info",
        torchrun(3, "--scenario", "unused_params", env=_env(TORCH_DISTRIBUTED_DEBUG="INFO")),
    )


CKPT_DDP = r"""
import datetime, os, torch, torch.nn as nn, torch.nn.functional as F
import torch.distributed as dist
from torch.utils.checkpoint import checkpoint
from torch.nn.parallel import DistributedDataParallel as DDP

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 32)
        self.block = nn.Sequential(nn.Linear(32, 32), nn.GELU())   # shared block, applied twice
        self.out = nn.Linear(32, 3)
    def forward(self, x):
        h = self.inp(x)
        for _ in range(2):
            h = checkpoint(self.block, h, use_reentrant=True)   # activation checkpointing
        return self.out(h)

dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=20))
rank = dist.get_rank()
torch.manual_seed(0)
model = DDP(Net(), find_unused_parameters=True)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(5):
    x = torch.randn(8, 16, requires_grad=True)
    y = torch.randint(0, 3, (8,))
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if rank == 0:
        print(f"step {step} loss {loss.item():.4f}", flush=True)
dist.destroy_process_group()
"""


@scenario
def marked_ready_twice(out: Path):
    """A block applied twice under reentrant activation checkpointing
    (checkpoint(..., use_reentrant=True)) in a DDP model with find_unused_parameters=True:
    'Expected to mark a variable ready only once'."""
    wd = _workdir()
    (wd / "train_ckpt.py").write_text(CKPT_DDP)
    save(out, "gen-dist-ddp-marked-ready-twice", torchrun(2, wd=wd, script="train_ckpt.py", launcher=("--tee", "3")))


# --------------------------------------------------------------------------- healthy runs
@scenario
def healthy(out: Path):
    """Healthy runs that complete, with the launcher's and torch's real warnings."""
    runs = {
        "gen-dist-healthy-2ranks-tee": (2, ("--steps", "25"), ("--tee", "3"), None),
        "gen-dist-healthy-4ranks-logging": (4, ("--steps", "20", "--style", "logging"), (), None),
        "gen-dist-healthy-3ranks-tqdm": (3, ("--steps", "40", "--style", "tqdm"), ("--tee", "3"), None),
        "gen-dist-healthy-find-unused-warning": (2, ("--find-unused", "--steps", "20"), ("--tee", "3"), None),
        "gen-dist-healthy-aux-head-find-unused": (
            2,
            ("--scenario", "aux_head", "--find-unused", "--steps", "20"),
            (),
            None,
        ),
        "gen-dist-healthy-loss-spike-recovers": (
            2,
            ("--scenario", "loss_spike", "--model", "mlp", "--fail-step", "12", "--steps", "35"),
            ("--tee", "3"),
            None,
        ),
        "gen-dist-healthy-local-ranks-filter": (
            4,
            ("--steps", "20"),
            ("--tee", "3", "--local-ranks-filter", "0"),
            None,
        ),
        "gen-dist-healthy-role-prefix": (
            2,
            ("--steps", "20", "--style", "logging"),
            ("--tee", "3", "--role", "trainer"),
            None,
        ),
        "gen-dist-healthy-debug-info": (2, ("--steps", "15"), (), {"TORCH_DISTRIBUTED_DEBUG": "INFO"}),
        "gen-dist-healthy-scheduler-warning": (
            2,
            ("--scenario", "sched_warning", "--steps", "20"),
            ("--tee", "3"),
            None,
        ),
        "gen-dist-healthy-gradscaler-cpu-warning": (
            2,
            ("--scenario", "amp_cpu", "--model", "mlp", "--steps", "20"),
            (),
            None,
        ),
        "gen-dist-healthy-master-addr-localhost": (2, ("--steps", "15"), ("--master-addr", "localhost"), None),
        "gen-dist-healthy-standalone": (3, ("--steps", "15"), ("--standalone",), None),
    }
    for case, (n, targs, launcher, env) in runs.items():
        if "--standalone" in launcher:
            cmd = [TORCHRUN, "--standalone", "--nproc-per-node", str(n), "train_ddp.py", *targs]
            save(out, case, _run(cmd, _workdir(), env=_env()))
            continue
        save(out, case, torchrun(n, *targs, launcher=launcher, env=_env(**(env or {}))))


@scenario
def healthy_spawn(out: Path):
    """Healthy mp.spawn DDP run (3 processes)."""
    save(out, "gen-dist-healthy-spawn-3procs", spawn_run("healthy", world=3))


@scenario
def restart_static_rdzv(out: Path):
    """torchrun --max-restarts 1 (static rendezvous): on the first attempt rank 1 reads an
    extra data file that a preparation job has not written yet (real FileNotFoundError);
    the agent restarts the group. The outcome varies between runs: the second attempt may
    complete (a healthy run, saved as gen-dist-elastic-restart-static) or the restarted
    ranks may fail to connect their gloo mesh ('Gloo connectFullMesh failed ...', saved as
    gen-dist-elastic-restart-static-fails)."""
    data = torchrun(
        2,
        "--scenario",
        "restart_once",
        "--fail-step",
        "3",
        "--steps",
        "15",
        launcher=("--tee", "3", "--max-restarts", "1"),
    )
    ok = b"training finished" in data
    save(out, "gen-dist-elastic-restart-static" + ("" if ok else "-fails"), data)


@scenario
def restart_standalone(out: Path):
    """torchrun --standalone --max-restarts 1: the same transient FileNotFoundError on the
    first attempt, then the agent restarts the group. The outcome varies between runs:
    the restarted group may complete (then the run is healthy: exit 0; saved as
    gen-dist-elastic-restart-standalone) or fail with 'Gloo connectFullMesh failed ...'
    (saved as gen-dist-elastic-restart-standalone-fails)."""
    wd = _workdir()
    cmd = [
        TORCHRUN,
        "--standalone",
        "--nproc-per-node",
        "2",
        "--max-restarts",
        "1",
        "--tee",
        "3",
        "train_ddp.py",
        "--scenario",
        "restart_once",
        "--fail-step",
        "3",
        "--steps",
        "15",
    ]
    data = _run(cmd, wd, timeout=200)
    ok = b"training finished" in data
    save(out, "gen-dist-elastic-restart-standalone" + ("" if ok else "-fails"), data)


@scenario
def cpp_log_info(out: Path):
    """TORCH_CPP_LOG_LEVEL=INFO (as users set it to debug c10d): a healthy 2-rank run and
    one where rank 1 hits the vocabulary IndexError, both full of c10d/gloo INFO lines."""
    env = _env(TORCH_CPP_LOG_LEVEL="INFO", TORCH_DISTRIBUTED_DEBUG="INFO")
    save(out, "gen-dist-healthy-cpp-log-info", torchrun(2, "--steps", "12", env=env))
    save(
        out, "gen-dist-index-error-cpp-log-info", torchrun(2, "--scenario", "index_error", "--fail-step", "7", env=env)
    )


# --------------------------------------------------------------------------- per-rank files
RUN_SH = '#!/bin/sh\nexec "{py}" -u train_ddp.py "$@" 2>&1\n'


def per_rank(out: Path, case: str, nproc: int, *targs: str, env=None):
    """torchrun --log-dir D --redirects 3: each worker's output lands in its own file
    (the worker's stderr is merged into stdout by a two-line sh wrapper); saved as rankN.log."""
    wd = _workdir()
    (wd / "run.sh").write_text(RUN_SH.format(py=PY))
    (wd / "run.sh").chmod(0o755)
    cmd = [
        TORCHRUN,
        "--nnodes",
        "1",
        "--nproc-per-node",
        str(nproc),
        "--master-port",
        str(_free_port()),
        "--log-dir",
        "logs",
        "--redirects",
        "3",
        "--no-python",
        "./run.sh",
        *targs,
    ]
    _run(cmd, wd, env=env)
    d = out / case
    d.mkdir(parents=True, exist_ok=True)
    for r in range(nproc):
        f = next((wd / "logs").glob(f"*/attempt_0/{r}/stdout.log"))
        (d / f"rank{r}.log").write_bytes(f.read_bytes())
    print(f"{case}: {nproc} rank files", flush=True)


@scenario
def per_rank_index_error(out: Path):
    """Per-rank files: rank 2 of 3 hits the vocabulary IndexError at step 7."""
    per_rank(
        out, "gen-dist-per-rank-index-error", 3, "--scenario", "index_error", "--fail-rank", "2", "--fail-step", "7"
    )


@scenario
def per_rank_hang(out: Path):
    """Per-rank files: rank 0 blocks forever at step 5; rank 1 times out (15 s)."""
    per_rank(
        out,
        "gen-dist-per-rank-hang",
        2,
        "--scenario",
        "hang",
        "--fail-rank",
        "0",
        "--fail-step",
        "5",
        "--timeout",
        "15",
    )


@scenario
def per_rank_hang_logged(out: Path):
    """Per-rank files of a script that logs on every rank (Python logging with times) and logs
    its failure before raising: rank 2 of 4 blocks forever at step 8; ranks 0, 1 and 3 wait in
    the step's gradient all_reduce, time out after 15 s (gloo) and log it; rank 2's file just
    stops. torchrun then SIGTERMs rank 2."""
    per_rank(
        out,
        "gen-dist-per-rank-hang-logged",
        4,
        "--scenario",
        "hang",
        "--fail-rank",
        "2",
        "--fail-step",
        "8",
        "--timeout",
        "15",
        "--style",
        "logging",
        "--all-ranks-log",
        "--log-failures",
        "--sleep",
        "0.3",
    )


@scenario
def per_rank_nan(out: Path):
    """Per-rank files: rank 1's corrupted sample makes the loss NaN; its check raises."""
    per_rank(out, "gen-dist-per-rank-nan-loss", 2, "--scenario", "nan_loss", "--model", "mlp", "--fail-step", "9")


@scenario
def per_rank_healthy(out: Path):
    """Per-rank files of a healthy 4-rank run."""
    per_rank(out, "gen-dist-per-rank-healthy-4ranks", 4, "--steps", "15")


@scenario
def per_rank_unused(out: Path):
    """Per-rank files: unused auxiliary head, DDP reduction error on both ranks."""
    per_rank(out, "gen-dist-per-rank-unused-parameters", 2, "--scenario", "unused_params")


# --------------------------------------------------------------------------- flight recorder
# A training program that keeps PyTorch's flight recorder (TORCH_FR_BUFFER_SIZE) and writes each
# rank's trace when it fails or is stopped, so that torchfrtrace can be run on the dumps.
FR_TRAIN = r"""
import datetime, logging, os, signal, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch._C._distributed_c10d import _dump_fr_trace
from torch.distributed import ProcessGroupGloo
from torch.nn.parallel import DistributedDataParallel as DDP

HANG_RANKS, HANG_STEP = {int(r) for r in sys.argv[1].split(",")}, int(sys.argv[2])
rank = int(os.environ["RANK"])
logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", level=logging.INFO)
log = logging.getLogger("train")

def gloo_named(opts, _pg_options):
    # ProcessGroupGloo records its group (name, ranks) in the flight recorder when it is built;
    # init_process_group("gloo") names it only afterwards, so the trace's group table and its
    # entries disagree and torchfrtrace stops with a KeyError. Built with its name, they agree.
    o = ProcessGroupGloo._Options()
    o._timeout = opts.timeout
    o._devices = [ProcessGroupGloo.create_default_device()]
    o._threads = 2
    o.group_name = opts.group_id
    o.global_ranks_in_group = opts.global_ranks_in_group
    return ProcessGroupGloo(opts.store, opts.group_rank, opts.group_size, o)

def dump_trace():
    path = os.environ["TORCH_FR_DUMP_TEMP_FILE"] + str(rank)
    with open(path, "wb") as f:
        f.write(_dump_fr_trace())
    log.info(f"[rank{rank}] flight recorder trace written to {path}")

def stopped(signum, frame):
    log.warning(f"[rank{rank}] received signal {signum}")
    dump_trace()
    sys.exit(128 + signum)

def main():
    dist.Backend.register_backend("gloo_fr", gloo_named, extended_api=True, devices=["cpu"])
    dist.init_process_group("gloo_fr", timeout=datetime.timedelta(seconds=15))
    world = dist.get_world_size()
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(1234 + rank)
    log.info(f"[rank{rank}] world_size={world} backend=gloo flight recorder buffer={os.environ['TORCH_FR_BUFFER_SIZE']}")
    for step in range(20):
        if rank in HANG_RANKS and step == HANG_STEP:
            time.sleep(3600)   # stuck (e.g. on a dead NFS read); never comes back
        x, y = torch.randn(16, 32, generator=gen), torch.randint(0, 4, (16,), generator=gen)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        lval = loss.detach().clone()
        dist.all_reduce(lval)
        log.info(f"[rank{rank}] step {step:4d} | loss {lval.item() / world:.4f}")
        time.sleep(0.3)
    dist.destroy_process_group()

signal.signal(signal.SIGTERM, stopped)
try:
    main()
except Exception:
    log.exception(f"[rank{rank}] training failed")
    dump_trace()
    raise
"""


def fr_per_rank(out: Path, case: str, nproc: int, hang_ranks: str, hang_step: int) -> None:
    """torchrun --log-dir D --redirects 3 runs FR_TRAIN (rankN.log as in per_rank); then
    torchfrtrace (torch.distributed.flight_recorder.fr_trace) is run on the ranks' flight
    recorder traces and its output is saved beside them as fr_trace.log."""
    wd = _workdir()
    (wd / "train_ddp.py").write_text(FR_TRAIN)
    (wd / "run.sh").write_text(RUN_SH.format(py=PY))
    (wd / "run.sh").chmod(0o755)
    (wd / "fr").mkdir()
    env = _env(TORCH_FR_BUFFER_SIZE=2000, TORCH_FR_DUMP_TEMP_FILE=str(wd / "fr" / "rank_"))
    cmd = [
        TORCHRUN,
        "--nnodes",
        "1",
        "--nproc-per-node",
        str(nproc),
        "--master-port",
        str(_free_port()),
        "--log-dir",
        "logs",
        "--redirects",
        "3",
        "--no-python",
        "./run.sh",
        hang_ranks,
        str(hang_step),
    ]
    _run(cmd, wd, env=env)
    d = out / case
    d.mkdir(parents=True, exist_ok=True)
    for r in range(nproc):
        f = next((wd / "logs").glob(f"*/attempt_0/{r}/stdout.log"))
        (d / f"rank{r}.log").write_bytes(f.read_bytes())
    analysis = _run([PY, "-m", "torch.distributed.flight_recorder.fr_trace", "fr", "-p", "rank_"], wd)
    (d / "fr_trace.log").write_bytes(analysis)
    print(f"{case}: {nproc} rank files and the flight recorder analysis", flush=True)


@scenario
def per_rank_fr_missing_rank(out: Path):
    """Per-rank files of a 3-rank DDP job with the flight recorder on: rank 1 blocks forever at
    step 6; ranks 0 and 2 wait in the step's gradient all_reduce and time out after 15 s (gloo),
    log it and write their flight recorder traces; torchrun then SIGTERMs rank 1, which writes
    its own. torchfrtrace reports rank 1 missing."""
    fr_per_rank(out, "gen-dist-per-rank-fr-missing-rank", 3, "1", 6)


@scenario
def per_rank_fr_missing_two_ranks(out: Path):
    """The same with 4 ranks of which two, 1 and 3, block at step 6: ranks 0 and 2 time out and
    torchfrtrace reports both hung ranks missing, so no one rank is the culprit."""
    fr_per_rank(out, "gen-dist-per-rank-fr-missing-two-ranks", 4, "1,3", 6)


@scenario
def fr_analysis_in_log(out: Path):
    """One console log: torchrun's merged output of a 2-rank DDP job with the flight recorder on,
    rank 1 blocked forever at step 6 and rank 0 timing out (gloo, 15 s), followed in the same
    shell by torchfrtrace's analysis of the two traces (`torchrun ...; python -m
    torch.distributed.flight_recorder.fr_trace fr -p rank_`), which reports rank 1 missing."""
    wd = _workdir()
    (wd / "train_ddp.py").write_text(FR_TRAIN)
    (wd / "fr").mkdir()
    env = _env(TORCH_FR_BUFFER_SIZE=2000, TORCH_FR_DUMP_TEMP_FILE=str(wd / "fr" / "rank_"))
    launch = torchrun(2, "1", "6", env=env, wd=wd)
    analysis = _run([PY, "-m", "torch.distributed.flight_recorder.fr_trace", "fr", "-p", "rank_"], wd)
    save(out, "gen-dist-fr-analysis-in-log", launch + analysis)


def main() -> None:
    out = Path(sys.argv[1])
    names = sys.argv[2:] or list(SCENARIOS)
    for name in names:
        SCENARIOS[name](out)


if __name__ == "__main__":
    main()
