#!/usr/bin/env python3
"""Generate real failure logs (runtime, data, numerics, memory, process, compile, HF).

Usage:  python tests/corpus/generators/runtime_data.py OUTDIR [SCENARIO ...]

Each scenario is one small function with a docstring naming the real-world failure it
reproduces. It writes a small, ordinary training/test program into OUTDIR/<case-id>/,
runs it in a subprocess with real software (PyTorch, PIL, datasets, transformers, peft,
accelerate, ...) and stores the merged stdout+stderr, byte for byte, as
OUTDIR/<case-id>/log.txt (as `python train.py 2>&1 | tee train.log` would).
Nothing in a log is written by this script: only the program that produced it.

The programs need a Python with torch (CPU build), transformers, peft, accelerate,
datasets and pillow; set GEN_VENV to its virtualenv (default: the one running this script).
Some scenarios need root: the OOM ones create a cgroup-v1 memory cgroup under
/sys/fs/cgroup/memory/, the shm one runs in `unshare -m` with a small tmpfs on /dev/shm.
hf-ok-tokenizers-fork-warning needs GEN_TOK_VENV, a virtualenv with tokenizers==0.21.1 and
tqdm (tokenizers 0.23 no longer prints the fork warning). proc-cpp-abort needs g++ and ninja.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

VENV = os.environ.get("GEN_VENV", sys.prefix)
SCENARIOS = {}


def scenario(fn):
    SCENARIOS["gen-" + fn.__name__.replace("_", "-")] = fn
    return fn


def _env(extra=None):
    env = dict(os.environ)
    env["PATH"] = os.path.join(VENV, "bin") + os.pathsep + env.get("PATH", "")
    env["PYTHONUNBUFFERED"] = "1"
    env.pop("PYTHONWARNINGS", None)
    env["HF_HUB_OFFLINE"] = "1"
    env.update(extra or {})
    return env


def write_program(d, program, name="train.py"):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "w") as f:
        f.write(textwrap.dedent(program).lstrip())


def run(d, program, cmd="python train.py", env=None, timeout=900, files=None):
    """Write the program, run `cmd` in bash in its directory, save merged output."""
    write_program(d, program)
    for name, text in (files or {}).items():
        write_program(d, text, name)
    p = subprocess.run(
        ["bash", "-c", cmd + " 2>&1"],
        cwd=d,
        env=_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=timeout,
    )
    with open(os.path.join(d, "log.txt"), "wb") as f:
        f.write(p.stdout)
    return p.returncode


# A tiny classifier on random data, the start of most programs below.
MLP = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
X = torch.randn(2048, 32)
Y = torch.randint(0, 10, (2048,))
"""

# ----------------------------------------------------------------------------- tensors


@scenario
def rt_shape_mat1_mat2(d):
    """Validation images resized to 32x32 while the model was built for 28x28: the first
    Linear after Flatten gets 1024 features instead of 784 (mat1 and mat2 shapes)."""
    return run(
        d,
        """
    import logging
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s",
                        level=logging.INFO)
    logger = logging.getLogger("train")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    train_x, train_y = torch.randn(1024, 1, 28, 28), torch.randint(0, 10, (1024,))
    val_x, val_y = torch.randn(256, 1, 32, 32), torch.randint(0, 10, (256,))
    logger.info("train samples: %d, val samples: %d", len(train_x), len(val_x))
    for epoch in range(2):
        model.train()
        for step, i in enumerate(range(0, len(train_x), 64)):
            loss = F.cross_entropy(model(train_x[i:i + 64]), train_y[i:i + 64])
            opt.zero_grad(); loss.backward(); opt.step()
            if step % 4 == 0:
                logger.info("epoch %d step %d loss %.4f", epoch, step, loss.item())
        logger.info("running validation")
        model.eval()
        with torch.no_grad():
            correct = 0
            for i in range(0, len(val_x), 64):
                correct += (model(val_x[i:i + 64]).argmax(1) == val_y[i:i + 64]).sum().item()
        logger.info("val acc %.3f", correct / len(val_x))
    """,
    )


@scenario
def rt_shape_last_batch_torchrun(d):
    """torchrun, 2 ranks (gloo): a target tensor built with the configured batch size
    does not match the smaller last batch of the epoch (size of tensor a must match b)."""
    return run(
        d,
        """
    import os
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, TensorDataset, DistributedSampler

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    BATCH = 32
    ds = TensorDataset(torch.randn(1000, 16), torch.randn(1000, 1))
    loader = DataLoader(ds, batch_size=BATCH, sampler=DistributedSampler(ds))
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    weights = torch.ones(BATCH, 1)
    for step, (x, y) in enumerate(loader):
        out = model(x)
        loss = ((out - y) ** 2 * weights).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        if rank == 0 and step % 3 == 0:
            print(f"step {step:3d} | loss {loss.item():.5f}")
    dist.destroy_process_group()
    """,
        cmd="torchrun --nproc_per_node 2 train.py",
    )


@scenario
def rt_shape_view_stride(d):
    """Multi-head attention that calls .view() on a transposed tensor: view size is not
    compatible with input tensor's size and stride."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn
    from tqdm import tqdm

    class Attention(nn.Module):
        def __init__(self, dim=64, heads=4):
            super().__init__()
            self.h, self.qkv, self.out = heads, nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(x).view(b, t, 3, self.h, c // self.h).permute(2, 0, 3, 1, 4)
            att = (q @ k.transpose(-2, -1) / (c // self.h) ** 0.5).softmax(-1)
            y = (att @ v).transpose(1, 2)
            return self.out(y.view(b, t, c))

    model = nn.Sequential(nn.Embedding(100, 64), Attention(), nn.Linear(64, 100))
    opt = torch.optim.Adam(model.parameters(), 3e-4)
    print(f"model parameters: {sum(p.numel() for p in model.parameters())}")
    for step in tqdm(range(50), desc="train"):
        x = torch.randint(0, 100, (8, 16))
        loss = nn.functional.cross_entropy(model(x).flatten(0, 1), x.flatten())
        opt.zero_grad(); loss.backward(); opt.step()
    """,
    )


@scenario
def rt_shape_conv_channels(d):
    """A CNN for RGB images is evaluated on a grayscale test set (1 channel): conv2d
    expected input to have 3 channels, but got 1."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Linear(16, 10))
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    for epoch in range(1, 4):
        running = 0.0
        for i in range(20):
            x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
            loss = F.cross_entropy(net(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
            running += loss.item()
            if i % 10 == 9:
                print('[%d, %5d] loss: %.3f' % (epoch, i + 1, running / 10))
                running = 0.0
    print('Finished Training')
    test_images = torch.randn(16, 1, 32, 32)
    outputs = net(test_images)
    print(outputs.argmax(1))
    """,
    )


@scenario
def rt_dtype_double_features(d):
    """Features read with numpy (float64) and wrapped with torch.from_numpy go into a
    float32 Linear: mat1 and mat2 must have the same dtype (Double vs Float)."""
    return run(
        d,
        """
    import numpy as np
    import torch
    import torch.nn as nn

    rng = np.random.default_rng(0)
    features = rng.normal(size=(500, 12))
    labels = (features[:, 0] > 0).astype(np.int64)
    print("Loaded dataset:", features.shape, features.dtype)
    mean, std = features.mean(0), features.std(0)
    features = (features - mean) / std
    model = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.Adam(model.parameters())
    x = torch.from_numpy(features)
    y = torch.from_numpy(labels)
    for epoch in range(20):
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")
    """,
    )


@scenario
def rt_dtype_float_targets(d):
    """Class labels stored as floats in a CSV-like array: cross_entropy expects target
    dtype Long (expected target dtype to be Long or Byte, but got Float)."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset

    data = torch.randn(256, 9)
    x, y = data[:, :8], (data[:, 8] > 0).float()
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model = nn.Linear(8, 2)
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    print("Starting training...")
    for epoch in range(5):
        for xb, yb in loader:
            loss = criterion(model(xb), yb)
            opt.zero_grad(); loss.backward(); opt.step()
        print(f"Epoch {epoch + 1}/5 - loss: {loss.item():.4f}")
    """,
    )


@scenario
def rt_dtype_embedding_float_ids(d):
    """Token ids padded with a float pad value become a FloatTensor: embedding expects
    indices of type Long or Int."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn
    from torch.nn.utils.rnn import pad_sequence

    seqs = [torch.randint(1, 50, (n,)) for n in (5, 9, 7, 3)]
    batch = pad_sequence(seqs, batch_first=True, padding_value=0.0).float()
    batch = batch * (batch != 0)
    print("batch shape:", tuple(batch.shape))
    model = nn.Sequential(nn.Embedding(50, 16), nn.GRU(16, 16, batch_first=True))
    out, h = model(batch)
    print(out.shape)
    """,
    )


@scenario
def rt_dtype_bce_long_labels(d):
    """Binary labels kept as int64 with BCEWithLogitsLoss: result type Float can't be cast
    to the desired output type Long."""
    return run(
        d,
        """
    import logging
    import torch
    import torch.nn as nn

    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(levelname)s: %(message)s")
    log = logging.getLogger(__name__)
    model = nn.Sequential(nn.Linear(20, 1))
    crit = nn.BCEWithLogitsLoss()
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    x = torch.randn(128, 20)
    y = torch.randint(0, 2, (128,))
    log.info("positives: %d / %d", int(y.sum()), len(y))
    log.info("start training")
    for it in range(100):
        loss = crit(model(x).squeeze(1), y)
        opt.zero_grad(); loss.backward(); opt.step()
    """,
    )


@scenario
def rt_device_meta_tensor(d):
    """A module built under torch.device('meta') keeps a meta buffer after the weights are
    loaded: the forward mixes meta and cpu tensors."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    class Scaler(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.proj = nn.Linear(dim, dim)
            self.register_buffer("scale", torch.ones(dim), persistent=False)
        def forward(self, x):
            return self.proj(x) * self.scale

    with torch.device("meta"):
        model = Scaler(8)
    print("built model on", next(model.parameters()).device)
    sd = {"proj.weight": torch.randn(8, 8), "proj.bias": torch.zeros(8)}
    model.load_state_dict(sd, assign=True)
    print("loaded state dict; weight device:", model.proj.weight.device)
    print(model(torch.randn(2, 8)))
    """,
    )


@scenario
def rt_cuda_not_compiled(d):
    """A script with device='cuda' hard-coded runs on a CPU-only PyTorch build:
    Torch not compiled with CUDA enabled."""
    return run(
        d,
        """
    import argparse
    import torch
    import torch.nn as nn

    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--epochs", type=int, default=3)
    args = p.parse_args()
    print(f"torch {torch.__version__}, cuda available: {torch.cuda.is_available()}")
    print("Building model...")
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    print(f"Moving model to {args.device}")
    model = model.to(args.device)
    """,
    )


@scenario
def rt_cuda_batch_to_cuda(d):
    """A training loop that calls x.cuda() on each batch on a CPU-only build (the model
    was left on CPU by a device check): Torch not compiled with CUDA enabled."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset
    from tqdm import tqdm

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = nn.Linear(32, 10).to(device)
    loader = DataLoader(TensorDataset(torch.randn(512, 32), torch.randint(0, 10, (512,))),
                        batch_size=64, num_workers=2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in tqdm(loader, desc=f"Epoch {epoch}"):
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
    """,
    )


@scenario
def rt_nccl_backend_cpu_build(d):
    """torchrun with init_process_group('nccl') on a CPU-only build (2 ranks):
    Distributed package doesn't have NCCL built in."""
    return run(
        d,
        """
    import os
    import torch
    import torch.distributed as dist

    local_rank = int(os.environ["LOCAL_RANK"])
    print(f"[init] local_rank={local_rank} world_size={os.environ['WORLD_SIZE']}")
    dist.init_process_group(backend="nccl")
    x = torch.ones(1) * dist.get_rank()
    dist.all_reduce(x)
    print(x)
    """,
        cmd="torchrun --nproc_per_node 2 --master_port 29611 train.py",
    )


# ----------------------------------------------------------------------------- autograd


@scenario
def rt_backward_twice_rnn_hidden(d):
    """Truncated-BPTT language model that carries the LSTM hidden state across batches
    without detach(): Trying to backward through the graph a second time."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    vocab, bptt = 60, 20
    data = torch.randint(0, vocab, (20 * bptt * 8 + 1,))
    emb, lstm, head = nn.Embedding(vocab, 32), nn.LSTM(32, 64), nn.Linear(64, vocab)
    params = list(emb.parameters()) + list(lstm.parameters()) + list(head.parameters())
    opt = torch.optim.Adam(params, lr=2e-3)
    hidden = None
    print("| epoch   1 | starting")
    for batch, i in enumerate(range(0, len(data) - 1 - bptt * 8, bptt * 8)):
        x = data[i:i + bptt * 8].view(bptt, 8)
        y = data[i + 1:i + 1 + bptt * 8].view(bptt, 8)
        out, hidden = lstm(emb(x), hidden)
        loss = nn.functional.cross_entropy(head(out).view(-1, vocab), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"| epoch   1 | {batch:5d} batches | loss {loss.item():5.2f}")
    """,
    )


@scenario
def rt_backward_twice_multitask(d):
    """Two task heads on a shared encoder, each loss backpropagated separately without
    retain_graph: the second backward hits the freed encoder graph."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    enc = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU())
    cls_head, reg_head = nn.Linear(64, 5), nn.Linear(64, 1)
    opt = torch.optim.Adam([*enc.parameters(), *cls_head.parameters(), *reg_head.parameters()])
    for step in range(10):
        x = torch.randn(32, 16)
        feats = enc(x)
        loss_cls = nn.functional.cross_entropy(cls_head(feats), torch.randint(0, 5, (32,)))
        loss_reg = nn.functional.mse_loss(reg_head(feats).squeeze(-1), torch.randn(32))
        opt.zero_grad()
        loss_cls.backward()
        loss_reg.backward()
        opt.step()
        print(f"step={step} cls={loss_cls.item():.4f} reg={loss_reg.item():.4f}")
    """,
    )


@scenario
def rt_inplace_sigmoid(d):
    """A gating layer adds a bias in place to a sigmoid output that autograd saved:
    one of the variables needed for gradient computation has been modified by an
    inplace operation."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    class Gate(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.lin = nn.Linear(d, d)
            self.bias = nn.Parameter(torch.zeros(d))
        def forward(self, x):
            g = torch.sigmoid(self.lin(x))
            g += 0.1
            return x * g

    model = nn.Sequential(nn.Linear(16, 32), Gate(32), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    print("training gate model")
    for step in range(5):
        loss = model(torch.randn(64, 16)).pow(2).mean()
        print(f"step {step} forward ok, loss={loss.item():.4f}")
        loss.backward()
        opt.step(); opt.zero_grad()
    """,
    )


@scenario
def rt_inplace_anomaly_detection(d):
    """Same in-place bug (ReLU(inplace=True) on a tensor saved by the next op) with
    torch.autograd.set_detect_anomaly(True): the warning shows the forward traceback."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    torch.autograd.set_detect_anomaly(True)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(32, 32), nn.Linear(32, 32)
            self.act = nn.ReLU(inplace=True)
        def forward(self, x):
            h = torch.tanh(self.fc1(x))
            out = self.fc2(h)
            self.act(h)
            return out + h

    model = Block()
    opt = torch.optim.Adam(model.parameters())
    for it in range(3):
        loss = model(torch.randn(8, 32)).sum()
        print("iteration", it, "loss", round(loss.item(), 4))
        loss.backward()
        opt.step()
    """,
    )


@scenario
def rt_no_grad_fn_frozen(d):
    """Fine-tuning that freezes the whole backbone and forgets to unfreeze the new head
    (requires_grad_(False) after replacing it): element 0 of tensors does not require grad."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    backbone = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
    model = nn.Sequential(backbone, nn.Linear(64, 3))
    model[1] = nn.Linear(64, 5)   # new head for the new task
    model.requires_grad_(False)   # freeze
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"trainable params: {trainable}")
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(3):
        loss = nn.functional.cross_entropy(model(torch.randn(16, 32)), torch.randint(0, 5, (16,)))
        loss.backward()
        opt.step()
    """,
    )


@scenario
def rt_no_grad_fn_eval_context(d):
    """The training step is run inside a torch.no_grad() block copied from the eval code:
    element 0 of tensors does not require grad and does not have a grad_fn."""
    return run(
        d,
        """
    import logging
    import torch
    import torch.nn as nn

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logger = logging.getLogger("trainer")
    model = nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 1))
    opt = torch.optim.Adam(model.parameters())

    def evaluate():
        model.eval()
        with torch.no_grad():
            return nn.functional.mse_loss(model(torch.randn(64, 10)), torch.randn(64, 1)).item()

    def train_step(x, y):
        model.train()
        with torch.no_grad():
            pred = model(x)
        loss = nn.functional.mse_loss(pred, y)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss.item()

    logger.info("initial eval loss %.4f", evaluate())
    for step in range(100):
        logger.info("step %d loss %.4f", step, train_step(torch.randn(32, 10), torch.randn(32, 1)))
    """,
    )


@scenario
def rt_leaf_inplace_manual_sgd(d):
    """Hand-written SGD update `w -= lr * w.grad` outside torch.no_grad(): a leaf Variable
    that requires grad is being used in an in-place operation."""
    return run(
        d,
        """
    import torch

    torch.manual_seed(0)
    X = torch.randn(100, 3)
    true_w = torch.tensor([[2.0], [-1.0], [0.5]])
    y = X @ true_w + 0.1 * torch.randn(100, 1)
    w = torch.zeros(3, 1, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    lr = 0.1
    for epoch in range(50):
        loss = ((X @ w + b - y) ** 2).mean()
        loss.backward()
        print(f"epoch {epoch}: loss = {loss.item():.6f}")
        w -= lr * w.grad
        b -= lr * b.grad
        w.grad.zero_(); b.grad.zero_()
    """,
    )


@scenario
def rt_leaf_inplace_weight_init(d):
    """Custom weight init calling normal_() on a parameter outside torch.no_grad() after a
    tensor ops rewrite (param.data removed): in-place operation on a leaf Variable."""
    return run(
        d,
        """
    import math
    import torch
    import torch.nn as nn

    class MyLinear(nn.Module):
        def __init__(self, i, o):
            super().__init__()
            self.weight = nn.Parameter(torch.empty(o, i))
            self.bias = nn.Parameter(torch.empty(o))
            self.reset_parameters()
        def reset_parameters(self):
            self.weight.uniform_(-1 / math.sqrt(self.weight.size(1)), 1 / math.sqrt(self.weight.size(1)))
            self.bias.zero_()
        def forward(self, x):
            return x @ self.weight.t() + self.bias

    print("Initializing model")
    model = nn.Sequential(MyLinear(8, 16), nn.ReLU(), MyLinear(16, 1))
    print(model)
    """,
    )


@scenario
def rt_not_implemented_half_cdist(d):
    """A prototype/kNN classifier (L1 distance) cast to fp16 to save memory and run on CPU:
    "cdist" not implemented for 'Half'."""
    return run(
        d,
        """
    import time
    import torch

    torch.manual_seed(0)
    support = torch.randn(500, 128)
    labels = torch.randint(0, 20, (500,))
    protos = torch.stack([support[labels == c].mean(0) for c in range(20)])
    print(f"built {len(protos)} prototypes")
    protos, queries = protos.half(), torch.randn(64, 128).half()
    t0 = time.time()
    dist = torch.cdist(queries, protos, p=1)
    pred = dist.argmin(1)
    print(pred, time.time() - t0)
    """,
    )


@scenario
def rt_not_implemented_long_logits(d):
    """Logits rounded to integers by a quantize-for-export helper and passed to
    cross_entropy: "log_softmax_lastdim_kernel_impl" not implemented for 'Long'."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    model = nn.Linear(16, 4)
    x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
    with torch.no_grad():
        ref = model(x)
    print("reference loss", nn.functional.cross_entropy(ref, y).item())
    q = (ref * 127).round().long()
    print("int8-range logits:", q.min().item(), q.max().item())
    print("quantized loss", nn.functional.cross_entropy(q, y).item())
    """,
    )


@scenario
def rt_not_implemented_bool_matmul(d):
    """A graph layer multiplies a boolean adjacency matrix with a boolean mask:
    "addmm_impl_cpu_" not implemented for 'Bool'."""
    return run(
        d,
        """
    import torch

    n = 50
    edges = torch.randint(0, n, (2, 200))
    adj = torch.zeros(n, n, dtype=torch.bool)
    adj[edges[0], edges[1]] = True
    print(f"graph: {n} nodes, {int(adj.sum())} edges")
    two_hop = adj @ adj
    print("two-hop pairs:", int(two_hop.sum()))
    """,
    )


@scenario
def rt_meta_copy_device_context(d):
    """A model built under `with torch.device('meta')` for fast init and then moved with
    .to('cpu') without loading weights: Cannot copy out of meta tensor; no data!"""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    def build(dim=256, layers=4):
        return nn.Sequential(*[nn.Sequential(nn.Linear(dim, dim), nn.GELU()) for _ in range(layers)])

    with torch.device("meta"):
        model = build()
    n = sum(p.numel() for p in model.parameters())
    print(f"instantiated {n/1e6:.2f}M params on meta")
    model = model.to("cpu")
    print(model(torch.randn(1, 256)).shape)
    """,
    )


@scenario
def rt_meta_copy_init_empty_weights(d):
    """transformers model created from a config inside accelerate.init_empty_weights()
    and moved with .to('cpu'), the checkpoint never loaded: Cannot copy out of meta tensor."""
    return run(
        d,
        """
    import torch
    from accelerate import init_empty_weights
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=500, n_positions=128)
    with init_empty_weights():
        model = GPT2LMHeadModel(config)
    print("model created with empty weights:", model.num_parameters())
    model.to("cpu")
    ids = torch.randint(0, 500, (1, 16))
    print(model(ids).logits.shape)
    """,
    )


@scenario
def rt_op_missing_quantized(d):
    """Post-training static quantization without a QuantStub: the converted model gets a
    float input; quantized::linear has no kernel for the 'CPU' backend."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn
    import torch.ao.quantization as tq

    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).eval()
    model.qconfig = tq.get_default_qconfig("x86")
    prepared = tq.prepare(model)
    for _ in range(16):
        prepared(torch.randn(8, 32))
    print("calibration done")
    qmodel = tq.convert(prepared)
    print(qmodel)
    print(qmodel(torch.randn(4, 32)))
    """,
    )


@scenario
def rt_op_missing_sparse(d):
    """A sparse COO feature matrix reshaped with .view() like a dense tensor: Could not run
    'aten::view' with arguments from the 'SparseCPU' backend."""
    return run(
        d,
        """
    import torch

    rows = torch.randint(0, 1000, (5000,))
    cols = torch.randint(0, 300, (5000,))
    feats = torch.sparse_coo_tensor(torch.stack([rows, cols]), torch.ones(5000), (1000, 300))
    print("nnz:", feats._nnz())
    batch = feats.view(10, 100, 300)
    print(batch.shape)
    """,
    )


# ----------------------------------------------------------------------------- numerics


@scenario
def num_nan_high_lr(d):
    """Linear regression on unnormalized features with too high an SGD learning rate: the
    loss explodes, overflows to inf and prints nan for the rest of the run (exit 0)."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    X = torch.rand(200, 4) * 100
    y = X @ torch.tensor([1.5, -2.0, 0.3, 4.0]) + 3.0
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(40):
        loss = nn.functional.mse_loss(model(X).squeeze(1), y)
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"Epoch [{epoch + 1}/40], Loss: {loss.item():.4f}")
    print("Training finished. Saving model to model.pt")
    torch.save(model.state_dict(), "model.pt")
    """,
    )


@scenario
def num_nan_entropy_log0(d):
    """An entropy regularizer p*log(p) hits p == 0 after softmax saturates: the loss turns
    nan at once; the loop prints nan losses (no exception)."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    opt = torch.optim.Adam(model.parameters(), lr=5e-2)
    for step in range(60):
        x = torch.randn(64, 16) * (1 + step) ** 2
        logits = model(x)
        p = logits.softmax(-1)
        entropy = -(p * torch.log(p)).sum(-1).mean()
        ce = nn.functional.cross_entropy(logits, torch.randint(0, 8, (64,)))
        loss = ce - 0.01 * entropy
        opt.zero_grad(); loss.backward(); opt.step()
        if step % 5 == 0:
            print(f"step {step:03d} ce {ce.item():.4f} entropy {entropy.item():.4f} loss {loss.item():.4f}")
    """,
    )


@scenario
def num_nan_anomaly_sqrt(d):
    """A distance loss uses sqrt(sum of squares) which is 0 for identical pairs; with
    set_detect_anomaly(True) the backward raises "returned nan values"."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    torch.autograd.set_detect_anomaly(True)
    torch.manual_seed(0)
    enc = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    opt = torch.optim.SGD(enc.parameters(), lr=0.01)
    data = torch.randn(40, 8)
    for step in range(20):
        a = data[torch.randint(0, 40, (16,))]
        b = data[torch.randint(0, 40, (16,))]
        za, zb = enc(a), enc(b)
        dist = torch.sqrt(((za - zb) ** 2).sum(-1))
        loss = torch.relu(1.0 - dist).mean()
        print(f"[step {step}] contrastive loss: {loss.item():.5f}")
        opt.zero_grad()
        loss.backward()
        opt.step()
    """,
    )


@scenario
def num_nan_clip_nonfinite(d):
    """A regression run where one record carries a sentinel value (1e25, an unparsed 'missing'
    marker): the squared error overflows to inf, the gradients are non-finite, and
    clip_grad_norm_(error_if_nonfinite=True) raises: total norm ... is non-finite."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    X = torch.randn(4096, 10)
    y = X.sum(1, keepdim=True)
    X[2601, 4] = 1e25          # sentinel for a missing sensor value
    model = nn.Sequential(nn.Linear(10, 64), nn.ReLU(), nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for it in range(64):
        xb, yb = X[it * 64:(it + 1) * 64], y[it * 64:(it + 1) * 64]
        loss = nn.functional.mse_loss(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, error_if_nonfinite=True)
        opt.step()
        print(f"iter {it} loss {loss.item():.3e} grad_norm {gn.item():.3e}")
    """,
    )


@scenario
def num_diverged_no_nan(d):
    """A plain SGD run with a too-large step on unscaled inputs: the loss grows by orders
    of magnitude every epoch (1e3 -> 1e30s) until the epoch budget ends; still finite."""
    return run(
        d,
        """
    import torch

    torch.manual_seed(1)
    X = torch.randn(500, 3) * 10
    y = X @ torch.tensor([3.0, -1.0, 2.0])
    w = torch.zeros(3, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.02)
    for epoch in range(25):
        loss = ((X @ w - y) ** 2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"epoch {epoch:2d}  train_loss={loss.item():.6g}")
    print("done")
    """,
    )


@scenario
def num_amp_unscale_twice(d):
    """AMP loop (torch.amp.GradScaler on CPU) calling scaler.unscale_ in a grad-norm logging
    helper and again before clipping: unscale_() has already been called on this optimizer
    since the last update()."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")

    def grad_norm():
        scaler.unscale_(opt)
        return torch.norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()

    for step in range(10):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(torch.randn(16, 32)), torch.randint(0, 10, (16,)))
        scaler.scale(loss).backward()
        if step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f} grad_norm {grad_norm():.4f}")
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    """,
    )


@scenario
def num_amp_fp16_params(d):
    """Model cast with .half() and trained with GradScaler: the gradients are fp16 and the
    scaler refuses: Attempting to unscale FP16 gradients."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).half()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    scaler = torch.amp.GradScaler("cpu")
    print("model dtype:", next(model.parameters()).dtype)
    for step in range(10):
        x = torch.randn(16, 32).half()
        loss = nn.functional.cross_entropy(model(x).float(), torch.randint(0, 10, (16,)))
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        print(f"step {step} loss {loss.item():.4f}")
    """,
    )


# ----------------------------------------------------------------------------- data


@scenario
def data_collate_size_workers(d):
    """Variable-length token sequences returned without padding, DataLoader with 2 workers:
    Caught RuntimeError in DataLoader worker process 0 ... stack expects each tensor to be
    equal size."""
    return run(
        d,
        """
    import torch
    from torch.utils.data import DataLoader, Dataset
    from tqdm import tqdm

    class TextDataset(Dataset):
        def __init__(self, n=400):
            g = torch.Generator().manual_seed(0)
            self.lengths = torch.randint(20, 40, (n,), generator=g).tolist()
        def __len__(self):
            return len(self.lengths)
        def __getitem__(self, i):
            return torch.randint(0, 1000, (self.lengths[i],))

    loader = DataLoader(TextDataset(), batch_size=16, shuffle=True, num_workers=2)
    emb = torch.nn.Embedding(1000, 32)
    for epoch in range(2):
        for batch in tqdm(loader, desc=f"epoch {epoch}"):
            loss = emb(batch).mean()
    """,
    )


@scenario
def data_collate_size_images(d):
    """Images of different sizes with only ToTensor (the resize left out of the
    transform), DataLoader in the main process: stack expects each tensor to be equal size."""
    prepare(
        d,
        """
    import os
    from PIL import Image
    os.makedirs("images", exist_ok=True)
    for i in range(40):
        size = (64, 64) if i != 21 else (80, 60)
        Image.new("RGB", size, (i * 5, 100, 200)).save(f"images/{i:04d}.png")
    """,
    )
    return run(
        d,
        """
    import os
    import numpy as np
    import torch
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset

    class Folder(Dataset):
        def __init__(self, root):
            self.files = sorted(os.path.join(root, f) for f in os.listdir(root))
        def __len__(self):
            return len(self.files)
        def __getitem__(self, i):
            img = Image.open(self.files[i]).convert("RGB")
            return torch.from_numpy(np.asarray(img)).permute(2, 0, 1).float() / 255, i % 3

    ds = Folder("images")
    print(f"Found {len(ds)} images")
    loader = DataLoader(ds, batch_size=8, shuffle=False)
    for step, (x, y) in enumerate(loader):
        print(f"batch {step}: {tuple(x.shape)}")
    """,
    )


def prepare(d, program):
    """Run a data-preparation program whose output is not part of the log."""
    write_program(d, program, "prep.py")
    subprocess.run(["bash", "-c", "python prep.py"], cwd=d, env=_env(), check=True, stdout=subprocess.DEVNULL)


@scenario
def data_index_dataset_len(d):
    """A Dataset whose __len__ counts the label file while one image entry is missing from
    the file list: IndexError: list index out of range raised in a DataLoader worker."""
    return run(
        d,
        """
    import torch
    from torch.utils.data import DataLoader, Dataset

    class PairDataset(Dataset):
        def __init__(self):
            self.labels = list(range(1000))
            self.samples = [torch.randn(8) for _ in range(998)]
        def __len__(self):
            return len(self.labels)
        def __getitem__(self, idx):
            return self.samples[idx], self.labels[idx] % 4

    loader = DataLoader(PairDataset(), batch_size=50, num_workers=2)
    model = torch.nn.Linear(8, 4)
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        print(f"step {step} loss {loss.item():.4f}")
    """,
    )


@scenario
def data_index_embedding_vocab(d):
    """Token ids from a tokenizer with added special tokens exceed the model's embedding
    size: IndexError: index out of range in self (CPU embedding)."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    VOCAB = 5000
    ADDED = ["<pad>", "<cls>", "<sep>", "<mask>"]
    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, 64)
            self.rnn = nn.GRU(64, 64, batch_first=True)
            self.head = nn.Linear(64, VOCAB)
        def forward(self, ids):
            return self.head(self.rnn(self.emb(ids))[0])

    model = TinyLM()
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    g = torch.Generator().manual_seed(0)
    for step in range(30):
        ids = torch.randint(0, VOCAB, (4, 32), generator=g)
        if step == 12:
            ids[:, 0] = VOCAB + ADDED.index("<cls>")
        logits = model(ids[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1) % VOCAB)
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"step {step} | loss {loss.item():.3f}")
    """,
    )


@scenario
def data_index_target_out_of_bounds(d):
    """Labels numbered 1..10 for a 10-class head (off by one): IndexError: Target 10 is out
    of bounds, raised by cross_entropy on CPU."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader, TensorDataset
    from tqdm import tqdm

    NUM_CLASSES = 10
    x = torch.randn(640, 20)
    y = torch.randint(1, NUM_CLASSES + 1, (640,))
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    model = nn.Linear(20, NUM_CLASSES)
    for epoch in range(3):
        for xb, yb in tqdm(loader):
            loss = nn.functional.cross_entropy(model(xb), yb)
    """,
    )


@scenario
def data_corrupt_truncated_jpeg(d):
    """One JPEG of the dataset cut short (an interrupted copy); PIL decodes it in a
    DataLoader worker: OSError: image file is truncated."""
    prepare(
        d,
        """
    import os
    import numpy as np
    from PIL import Image
    os.makedirs("data/train", exist_ok=True)
    rng = np.random.default_rng(0)
    for i in range(64):
        Image.fromarray(rng.integers(0, 255, (96, 96, 3), dtype=np.uint8)).save(f"data/train/{i:05d}.jpg", quality=90)
    p = "data/train/00037.jpg"
    raw = open(p, "rb").read()
    open(p, "wb").write(raw[: len(raw) // 2])
    """,
    )
    return run(
        d,
        """
    import glob
    import numpy as np
    import torch
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset

    class Images(Dataset):
        def __init__(self, pattern):
            self.files = sorted(glob.glob(pattern))
        def __len__(self):
            return len(self.files)
        def __getitem__(self, i):
            img = Image.open(self.files[i]).convert("RGB").resize((64, 64))
            return torch.from_numpy(np.array(img)).permute(2, 0, 1).float().div(255)

    ds = Images("data/train/*.jpg")
    print("num train images:", len(ds))
    loader = DataLoader(ds, batch_size=8, num_workers=2)
    conv = torch.nn.Conv2d(3, 8, 3)
    for it, x in enumerate(loader):
        print(f"it {it}: mean activation {conv(x).mean().item():.4f}")
    """,
    )


@scenario
def data_corrupt_unidentified(d):
    """An image URL that returned an HTML error page was saved as .jpg; PIL cannot identify
    it: PIL.UnidentifiedImageError in the main process."""
    prepare(
        d,
        """
    import os
    from PIL import Image
    os.makedirs("imgs", exist_ok=True)
    for i in range(30):
        Image.new("RGB", (48, 48), (i * 8, 50, 90)).save(f"imgs/{i:03d}.jpg")
    open("imgs/017.jpg", "w").write("<html><head><title>404 Not Found</title></head><body>Not Found</body></html>")
    """,
    )
    return run(
        d,
        """
    import os
    from PIL import Image
    from tqdm import tqdm

    files = sorted(os.listdir("imgs"))
    feats = []
    for f in tqdm(files, desc="extracting"):
        with Image.open(os.path.join("imgs", f)) as im:
            feats.append(im.convert("L").resize((8, 8)).tobytes())
    print("done", len(feats))
    """,
    )


@scenario
def data_image_too_large(d):
    """A valid but huge scanned map (200 Mpx PNG) exceeds PIL's MAX_IMAGE_PIXELS:
    PIL.Image.DecompressionBombError."""
    prepare(
        d,
        """
    import os
    from PIL import Image
    os.makedirs("tiles", exist_ok=True)
    for i in range(5):
        Image.new("RGB", (256, 256), (30 * i, 120, 60)).save(f"tiles/tile_{i}.png")
    Image.new("1", (20000, 10000), 1).save("tiles/tile_5.png")
    """,
    )
    return run(
        d,
        """
    import os
    from PIL import Image

    for name in sorted(os.listdir("tiles")):
        with Image.open(os.path.join("tiles", name)) as im:
            print(f"{name}: {im.size} {im.mode}")
            thumb = im.convert("RGB").resize((32, 32))
    """,
    )


@scenario
def data_file_not_found_csv(d):
    """The training CSV path in the config points to a directory that was never mounted:
    FileNotFoundError from pandas.read_csv."""
    return run(
        d,
        """
    import logging
    import pandas as pd

    logging.basicConfig(level=logging.INFO, format="%(asctime)s | %(levelname)s | %(message)s")
    CONFIG = {"train_csv": "/mnt/datasets/reviews/train.csv", "text_col": "review", "label_col": "stars"}
    logging.info("config: %s", CONFIG)
    df = pd.read_csv(CONFIG["train_csv"])
    logging.info("loaded %d rows", len(df))
    """,
    )


@scenario
def data_file_not_found_worker(d):
    """An image index file lists files that were deleted: FileNotFoundError caught in a
    DataLoader worker process and re-raised in the main process."""
    prepare(
        d,
        """
    import os
    from PIL import Image
    os.makedirs("photos", exist_ok=True)
    with open("index.txt", "w") as f:
        for i in range(100):
            Image.new("RGB", (32, 32), (i, i, i)).save(f"photos/p{i:03d}.png")
            f.write(f"photos/p{i:03d}.png\\n")
    for i in (63, 64):
        os.remove(f"photos/p{i:03d}.png")
    """,
    )
    return run(
        d,
        """
    import numpy as np
    import torch
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset

    class IndexDataset(Dataset):
        def __init__(self, index):
            self.paths = open(index).read().split()
        def __len__(self):
            return len(self.paths)
        def __getitem__(self, i):
            return torch.tensor(np.array(Image.open(self.paths[i]))).float().mean()

    loader = DataLoader(IndexDataset("index.txt"), batch_size=16, num_workers=2)
    for epoch in range(2):
        total = 0.0
        for i, x in enumerate(loader):
            total += x.sum().item()
            print(f"epoch {epoch} batch {i} running {total:.1f}")
    """,
    )


TOKENIZER = """
import random
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

def build_tokenizer(max_len=128):
    random.seed(0)
    words = "the a model train loss data batch token layer gradient step of to and in".split()
    corpus = [" ".join(random.choice(words) for _ in range(30)) for _ in range(300)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>",
                                   eos_token="<|endoftext|>", model_max_length=max_len)
"""


@scenario
def data_tokenizer_length(d):
    """Documents tokenized without truncation for a GPT-2 style model with 64 positions:
    the tokenizer warns that the sequence is longer than the maximum, then the position
    embedding lookup fails (index out of range)."""
    return run(
        d,
        TOKENIZER
        + """
import torch
from transformers import GPT2Config, GPT2LMHeadModel

tokenizer = build_tokenizer(max_len=64)
model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_embd=64, n_layer=2, n_head=2))
opt = torch.optim.AdamW(model.parameters(), lr=5e-4)
random.seed(1)
docs = [" ".join(random.choice(["the", "model", "loss", "data"]) for _ in range(random.choice([20, 30, 40, 200]))) for _ in range(12)]
for i, doc in enumerate(docs):
    ids = torch.tensor([tokenizer(doc)["input_ids"]])
    out = model(ids, labels=ids)
    out.loss.backward(); opt.step(); opt.zero_grad()
    print(f"doc {i} tokens {ids.shape[1]} loss {out.loss.item():.4f}")
""",
    )


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


@scenario
def data_worker_killed_externally(d):
    """A DataLoader worker is SIGKILLed from outside while the epoch runs (this generator
    sends SIGKILL to the worker's pid, as the kernel OOM killer or an operator would):
    DataLoader worker (pid N) is killed by signal: Killed."""
    write_program(
        d,
        """
    import time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __len__(self):
            return 4000
        def __getitem__(self, i):
            time.sleep(0.01)
            return torch.randn(16), i % 2

    model = torch.nn.Linear(16, 2)
    opt = torch.optim.SGD(model.parameters(), 0.1)
    loader = DataLoader(Slow(), batch_size=32, num_workers=2)
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        if step % 5 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
    """,
    )
    p = subprocess.Popen(["python", "train.py"], cwd=d, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = b""
    while True:
        line = p.stdout.readline()
        out += line
        if not line or b"step 20 " in line:
            break
    workers = _children(p.pid)
    if workers:
        os.kill(workers[0], signal.SIGKILL)
    out += p.stdout.read()
    p.wait()
    with open(os.path.join(d, "log.txt"), "wb") as f:
        f.write(out)
    return p.returncode


@scenario
def data_worker_segfault(d):
    """A dataset calls a native decoder through ctypes that reads an invalid address (16) in a
    DataLoader worker (python -X faulthandler): the worker segfaults; DataLoader's own worker
    signal handler prints 'Unexpected segmentation fault encountered in worker' and the main
    process reports the worker killed by signal: Segmentation fault."""
    return run(
        d,
        """
    import ctypes
    import torch
    from torch.utils.data import DataLoader, Dataset

    def native_decode(buf_addr, n):
        return ctypes.string_at(buf_addr, n)

    class Records(Dataset):
        def __init__(self):
            self.offsets = [1024 * i for i in range(300)]
            self.offsets[150] = None     # record whose mapping failed
            self.buf = ctypes.create_string_buffer(1024 * 300)
        def __len__(self):
            return len(self.offsets)
        def __getitem__(self, i):
            off = self.offsets[i]
            addr = ctypes.addressof(self.buf) + off if off is not None else 16
            raw = native_decode(addr, 16)
            return torch.frombuffer(bytearray(raw), dtype=torch.uint8).float()

    loader = DataLoader(Records(), batch_size=10, num_workers=2)
    for step, x in enumerate(loader):
        print(f"step {step}: batch mean {x.mean().item():.3f}")
    """,
        cmd="python -X faulthandler train.py",
    )


@scenario
def data_loader_timeout(d):
    """DataLoader(timeout=5) with a worker stuck on slow storage (a read that sleeps for
    minutes): DataLoader timed out after 5 seconds."""
    return run(
        d,
        """
    import time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class RemoteShards(Dataset):
        def __len__(self):
            return 512
        def __getitem__(self, i):
            if i == 200:
                time.sleep(120)   # a read from a hung network mount
            return torch.randn(32)

    loader = DataLoader(RemoteShards(), batch_size=32, num_workers=1, timeout=5)
    for step, x in enumerate(loader):
        print(f"step {step} batch {tuple(x.shape)}")
    """,
    )


@scenario
def data_shm_exhausted(d):
    """DataLoader workers return large batches while /dev/shm is a 16 MB tmpfs (as in a
    container without --shm-size; done here with `unshare -m` and a small tmpfs)."""
    return run(
        d,
        """
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Frames(Dataset):
        def __len__(self):
            return 256
        def __getitem__(self, i):
            return torch.randn(3, 256, 256)

    loader = DataLoader(Frames(), batch_size=16, num_workers=2)
    for step, x in enumerate(loader):
        print(f"step {step}: {tuple(x.shape)} {x.mean().item():+.4f}")
    """,
        cmd="unshare -m bash -c 'mount -t tmpfs -o size=16m tmpfs /dev/shm && python train.py'",
    )


@scenario
def data_hf_json_schema(d):
    """datasets.load_dataset('json') on shards where one shard stores the label as a
    string: the Arrow cast fails (DatasetGenerationError)."""
    prepare(
        d,
        """
    import json, os
    os.makedirs("jsonl", exist_ok=True)
    for s in range(3):
        with open(f"jsonl/part-{s}.jsonl", "w") as f:
            for i in range(200):
                label = i % 3 if s != 2 else ["neg", "neu", "pos"][i % 3]
                f.write(json.dumps({"text": f"sample {s}-{i}", "label": label}) + "\\n")
    """,
    )
    return run(
        d,
        """
    from datasets import load_dataset

    ds = load_dataset("json", data_files={"train": "jsonl/part-*.jsonl"}, cache_dir="hf_cache")
    print(ds)
    """,
        env={"HF_DATASETS_CACHE": "hf_cache"},
    )


@scenario
def data_hf_missing_split(d):
    """load_dataset('csv') on a single training file, then the script asks for the
    'validation' split: ValueError: Unknown split."""
    prepare(
        d,
        """
    with open("train.csv", "w") as f:
        f.write("text,label\\n")
        for i in range(300):
            f.write(f"review number {i},{i % 2}\\n")
    """,
    )
    return run(
        d,
        """
    from datasets import load_dataset

    train = load_dataset("csv", data_files="train.csv", split="train", cache_dir="hf_cache")
    print(train)
    val = load_dataset("csv", data_files="train.csv", split="validation", cache_dir="hf_cache")
    print(val)
    """,
        env={"HF_DATASETS_CACHE": "hf_cache"},
    )


# ----------------------------------------------------------------------------- memory


@scenario
def mem_cpu_alloc_similarity(d):
    """A full pairwise similarity matrix over 600k embeddings on CPU (~1.4 TB):
    DefaultCPUAllocator: can't allocate memory."""
    return run(
        d,
        """
    import torch
    import torch.nn.functional as F

    emb = F.normalize(torch.randn(600_000, 64), dim=1)
    print(f"embeddings: {tuple(emb.shape)}")
    sim = emb @ emb.T
    top = sim.topk(10, dim=1)
    print(top.indices[:3])
    """,
    )


@scenario
def mem_cpu_alloc_ulimit(d):
    """An eval loop that keeps every batch's logits for later metrics, run under a 4 GB
    address-space limit (`ulimit -v`, as on a shared login node): the allocator fails after
    a while: DefaultCPUAllocator: can't allocate memory."""
    return run(
        d,
        """
    import torch

    model = torch.nn.Linear(256, 32000)
    all_logits = []
    with torch.no_grad():
        for step in range(1000):
            logits = model(torch.randn(64, 256))
            all_logits.append(logits)
            if step % 50 == 0:
                print(f"eval step {step}, cached {sum(t.numel() for t in all_logits) * 4 / 2**20:.0f} MiB")
    preds = torch.cat(all_logits).argmax(-1)
    print(preds.shape)
    """,
        cmd="ulimit -v 4000000; python train.py",
    )


def _cgroup_run(d, name, limit, cmd):
    cg = f"/sys/fs/cgroup/memory/{name}"
    os.makedirs(cg, exist_ok=True)
    with open(os.path.join(cg, "memory.limit_in_bytes"), "w") as f:
        f.write(str(limit))
    try:
        p = subprocess.run(
            ["bash", "-c", f"echo $$ > {cg}/cgroup.procs; {cmd}"],
            cwd=d,
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=900,
        )
    finally:
        time.sleep(1)
        try:
            os.rmdir(cg)
        except OSError:
            pass
    with open(os.path.join(d, "log.txt"), "wb") as f:
        f.write(p.stdout)
    return p.returncode


@scenario
def mem_oom_killed_leak(d):
    """Training loop that appends the loss tensor (with its graph) to a list each step, run in
    a memory cgroup limited to 1.5 GB: the kernel OOM killer kills python; bash prints
    'Killed' (exit 137)."""
    write_program(
        d,
        """
    import torch
    import torch.nn as nn

    model = nn.Sequential(nn.Linear(512, 4096), nn.ReLU(), nn.Linear(4096, 512))
    opt = torch.optim.Adam(model.parameters(), 1e-4)
    history = []
    for step in range(10_000):
        x = torch.randn(256, 512)
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad()
        loss.backward(retain_graph=True)
        opt.step()
        history.append(loss)
        if step % 10 == 0:
            print(f"step {step:5d} loss {loss.item():.5f} avg {torch.stack(history).mean().item():.5f}")
    """,
    )
    with open(os.path.join(d, "run.sh"), "w") as f:
        f.write('#!/bin/bash\necho "starting training on $(hostname)"\npython train.py\necho "exit code: $?"\n')
    return _cgroup_run(d, "tl-gen-oom-leak", 1536 * 2**20, "bash run.sh")


@scenario
def mem_oom_killed_worker(d):
    """Each DataLoader worker builds an in-memory cache of decoded samples, in a 2 GB memory
    cgroup: the OOM killer kills a worker; the main process reports it killed by signal."""
    write_program(
        d,
        """
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Cached(Dataset):
        def __init__(self):
            self.cache = {}
        def __len__(self):
            return 100_000
        def __getitem__(self, i):
            if i not in self.cache:
                self.cache[i] = torch.randn(64 * 1024)   # 256 KiB decoded sample
            return self.cache[i][:128]

    loader = DataLoader(Cached(), batch_size=64, num_workers=2)
    for step, x in enumerate(loader):
        if step % 50 == 0:
            print(f"step {step} x.mean={x.mean().item():+.4f}", flush=True)
    """,
    )
    return _cgroup_run(d, "tl-gen-oom-worker", 2048 * 2**20, "python train.py")


# ----------------------------------------------------------------------------- process


@scenario
def proc_segfault_faulthandler(d):
    """A training script calls a native helper through ctypes that reads an invalid
    address at step 30, with faulthandler on (python -X faulthandler): Fatal Python error:
    Segmentation fault, then the shell's 'Segmentation fault (core dumped)'."""
    write_program(
        d,
        MLP
        + """
import ctypes

def native_checksum(t):
    ptr = t.data_ptr() if t.numel() < 100_000 else 16
    return sum(ctypes.string_at(ptr, 64))

for step in range(100):
    idx = torch.randint(0, 2048, (64,))
    loss = F.cross_entropy(model(X[idx]), Y[idx])
    opt.zero_grad(); loss.backward(); opt.step()
    if step % 10 == 0:
        print(f"step {step} loss {loss.item():.4f} checksum {native_checksum(model[0].weight.grad)}")
    if step == 30:
        native_checksum(torch.empty(200_000))
""",
    )
    with open(os.path.join(d, "run.sh"), "w") as f:
        f.write("#!/bin/bash\nset -x\npython -X faulthandler train.py\n")
    return run(d, open(os.path.join(d, "train.py")).read(), cmd="bash run.sh")


@scenario
def proc_segfault_bare(d):
    """Same kind of invalid native read (address 16) without faulthandler: the only trace is the shell's
    'Segmentation fault (core dumped)' line after the progress output."""
    write_program(
        d,
        MLP
        + """
import ctypes
for step in range(100):
    idx = torch.randint(0, 2048, (64,))
    loss = F.cross_entropy(model(X[idx]), Y[idx])
    opt.zero_grad(); loss.backward(); opt.step()
    print(f"step {step} loss {loss.item():.4f}")
    if step == 42:
        ctypes.string_at(16, 8)
""",
    )
    with open(os.path.join(d, "run.sh"), "w") as f:
        f.write('#!/bin/bash\nexport OMP_NUM_THREADS=2\npython train.py\necho "training exited with status $?"\n')
    return run(d, open(os.path.join(d, "train.py")).read(), cmd="bash run.sh")


@scenario
def proc_cpp_abort(d):
    """A small C++ extension (torch.utils.cpp_extension.load_inline) runs a background
    prefetch thread that throws std::runtime_error: terminate called after throwing an
    instance of 'std::runtime_error' ... Aborted (core dumped)."""
    return run(
        d,
        """
    import torch
    from torch.utils.cpp_extension import load_inline

    src = r'''
    #include <torch/extension.h>
    #include <thread>
    #include <stdexcept>
    #include <chrono>
    static std::thread* worker = nullptr;
    void start_prefetch(std::string path) {
        worker = new std::thread([path]() {
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
            throw std::runtime_error("prefetch: failed to open shard " + path);
        });
    }
    '''
    ext = load_inline("prefetch_ext", cpp_sources=src, functions=["start_prefetch"],
                      build_directory=".", verbose=False)
    print("extension loaded")
    ext.start_prefetch("/data/shards/shard-00017.bin")
    model = torch.nn.Linear(64, 64)
    for step in range(1000):
        loss = model(torch.randn(32, 64)).pow(2).mean()
        loss.backward()
        if step % 100 == 0:
            print(f"step {step} loss {loss.item():.4f}", flush=True)
        import time; time.sleep(0.005)
    """,
        cmd="bash -c 'python train.py'; true",
    )


# ----------------------------------------------------------------------------- compile


@scenario
def compile_fullgraph_graph_break(d):
    """torch.compile(fullgraph=True) over a forward that calls .item() for a data-dependent
    branch: Dynamo cannot trace it and raises Unsupported."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(16, 16), nn.Linear(16, 16)
        def forward(self, x):
            h = self.a(x)
            if h.abs().max().item() > 3.0:
                h = h / h.abs().max()
            return self.b(torch.relu(h))

    model = torch.compile(Net(), fullgraph=True)
    print("compiling...")
    out = model(torch.randn(4, 16))
    print(out.sum())
    """,
    )


@scenario
def compile_inductor_no_compiler(d):
    """torch.compile with the default inductor backend on a CPU host whose CXX points at a
    compiler that is not installed: the backend compile fails (InductorError)."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 10))
    cmodel = torch.compile(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    print("torch", torch.__version__)
    for step in range(5):
        loss = cmodel(torch.randn(8, 32)).logsumexp(-1).mean()
        loss.backward(); opt.step(); opt.zero_grad()
        print("step", step, "loss", loss.item())
    """,
        env={"CXX": "g++-14", "TORCHINDUCTOR_CACHE_DIR": os.path.join(d, "inductor_cache")},
    )


# ----------------------------------------------------------------------------- HF stack


@scenario
def hf_removed_evaluation_strategy(d):
    """A fine-tuning script written for transformers 4.x passes evaluation_strategy= to
    TrainingArguments; transformers 5 removed it (eval_strategy)."""
    return run(
        d,
        """
    import transformers
    from transformers import GPT2Config, GPT2LMHeadModel, TrainingArguments

    print("transformers", transformers.__version__)
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=400, n_positions=64))
    print(f"model params: {model.num_parameters():,}")
    args = TrainingArguments(
        output_dir="out",
        per_device_train_batch_size=8,
        evaluation_strategy="steps",
        eval_steps=50,
        save_strategy="steps",
        learning_rate=5e-4,
        num_train_epochs=1,
        report_to="none",
    )
    """,
    )


@scenario
def hf_removed_trainer_tokenizer(d):
    """Trainer(tokenizer=...) from a transformers 4.x script on transformers 5, which only
    takes processing_class=: unexpected keyword argument 'tokenizer'."""
    return run(
        d,
        TOKENIZER
        + """
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

tokenizer = build_tokenizer()
tokenizer.pad_token = tokenizer.eos_token
model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=len(tokenizer), n_positions=128))
enc = tokenizer(["the model and the data"] * 32, padding="max_length", max_length=16)
train = [{"input_ids": i, "attention_mask": m, "labels": i} for i, m in zip(enc["input_ids"], enc["attention_mask"])]
args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, num_train_epochs=1, report_to="none", use_cpu=True)
trainer = Trainer(model=model, args=args, train_dataset=train, tokenizer=tokenizer)
trainer.train()
""",
    )


@scenario
def hf_pad_token_missing(d):
    """Batch tokenization with padding=True using a GPT-2 style (byte-level BPE) tokenizer
    that has no pad token: Asking to pad but the tokenizer does not have a padding token."""
    return run(
        d,
        TOKENIZER
        + """
import torch
from transformers import GPT2Config, GPT2LMHeadModel

tokenizer = build_tokenizer()
print("vocab size:", len(tokenizer), "eos:", tokenizer.eos_token, "pad:", tokenizer.pad_token)
model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=len(tokenizer)))
texts = ["the model and the loss", "data batch", "gradient step of the layer in train"]
batch = tokenizer(texts, padding=True, return_tensors="pt")
print(model(**batch).logits.shape)
""",
    )


@scenario
def hf_pad_token_collator(d):
    """Trainer with DataCollatorWithPadding and a GPT-2 style tokenizer without pad token:
    the collator raises inside the Trainer's DataLoader after training starts."""
    return run(
        d,
        TOKENIZER
        + """
import random
from transformers import (DataCollatorWithPadding, GPT2Config, GPT2ForSequenceClassification,
                          Trainer, TrainingArguments)

tokenizer = build_tokenizer()
model = GPT2ForSequenceClassification(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=len(tokenizer), num_labels=2))
random.seed(0)
words = "the model loss data batch".split()
rows = []
for i in range(64):
    enc = tokenizer(" ".join(random.choice(words) for _ in range(random.randint(3, 12))))
    rows.append({**enc, "labels": i % 2})
args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, num_train_epochs=1,
                         report_to="none", use_cpu=True, logging_steps=2)
trainer = Trainer(model=model, args=args, train_dataset=rows,
                  data_collator=DataCollatorWithPadding(tokenizer), processing_class=tokenizer)
trainer.train()
""",
    )


@scenario
def hf_chat_template_missing(d):
    """apply_chat_template on a base model's tokenizer that has no chat_template: ValueError:
    Cannot use chat template functions because tokenizer.chat_template is not set."""
    return run(
        d,
        TOKENIZER
        + """
tokenizer = build_tokenizer()
conversations = [
    [{"role": "user", "content": "What is a gradient?"}, {"role": "assistant", "content": "The slope of the loss."}],
    [{"role": "user", "content": "Define a batch."}, {"role": "assistant", "content": "A group of samples."}],
]
print(f"formatting {len(conversations)} conversations for SFT")
texts = [tokenizer.apply_chat_template(c, tokenize=False) for c in conversations]
print(texts[0])
""",
    )


@scenario
def hf_peft_target_modules_not_found(d):
    """LoraConfig with Llama module names (q_proj, v_proj) applied to a GPT-2 model built from
    a config (its attention is c_attn): Target modules not found in the base model."""
    return run(
        d,
        """
    from peft import LoraConfig, get_peft_model
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=500))
    print(f"base model: {model.num_parameters():,} parameters")
    cfg = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.05, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    model = get_peft_model(model, cfg)
    model.print_trainable_parameters()
    """,
    )


# ----------------------------------------------------------------------------- multi-rank and wrappers


@scenario
def data_index_torchrun_one_rank(d):
    """torchrun, 2 ranks (gloo DDP): only rank 1's shard contains a token id beyond the
    embedding size; rank 1 raises IndexError: index out of range in self while rank 0 waits
    in the gradient all-reduce, and the elastic agent tears the job down."""
    return run(
        d,
        """
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    VOCAB = 1000
    model = DDP(nn.Sequential(nn.Embedding(VOCAB, 32), nn.Flatten(), nn.Linear(32 * 16, 2)))
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    g = torch.Generator().manual_seed(rank)
    for step in range(100):
        ids = torch.randint(0, VOCAB, (8, 16), generator=g)
        if rank == 1 and step == 17:
            ids[3, 5] = VOCAB + 2     # id of a token added to the tokenizer after the model was built
        loss = nn.functional.cross_entropy(model(ids), torch.randint(0, 2, (8,), generator=g))
        opt.zero_grad(); loss.backward(); opt.step()
        if step % 5 == 0:
            print(f"rank {rank} step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()
    """,
        cmd="torchrun --nproc_per_node 2 --master_port 29613 train.py",
    )


@scenario
def mem_oom_killed_torchrun_rank(d):
    """torchrun, 2 ranks (gloo DDP) in a 3 GB memory cgroup; rank 1 keeps a growing
    in-memory cache of eval outputs; the kernel OOM killer kills it and torchrun reports
    Signal 9 (SIGKILL) for rank 1 and SIGTERMs rank 0."""
    write_program(
        d,
        """
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = DDP(nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 256)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    cache = []
    for step in range(100_000):
        x = torch.randn(64, 256)
        loss = (model(x) - x).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        if rank == 1:
            cache.append(torch.randn(64, 64 * 1024))   # "keep predictions for the epoch-end metric"
        if step % 20 == 0:
            print(f"[rank{rank}] step {step} loss {loss.item():.4f}", flush=True)
    """,
    )
    return _cgroup_run(
        d, "tl-gen-oom-torchrun", 3072 * 2**20, "torchrun --nproc_per_node 2 --master_port 29614 train.py"
    )


@scenario
def mem_oom_killed_dmesg(d):
    """A job script that, when training exits non-zero, appends the kernel's OOM lines
    (dmesg) to the log, as many cluster job scripts do; the training leaks memory in a
    1 GB memory cgroup and is killed by the OOM killer."""
    write_program(
        d,
        """
    import numpy as np

    features = []
    for shard in range(10_000):
        arr = np.random.rand(256, 1024).astype(np.float32)   # 1 MiB decoded shard
        features.append(arr)
        if shard % 100 == 0:
            print(f"loaded shard {shard}, total {len(features)} MiB", flush=True)
    print("all shards loaded")
    """,
    )
    with open(os.path.join(d, "job.sh"), "w") as f:
        f.write(
            "#!/bin/bash\n"
            "python train.py\n"
            "rc=$?\n"
            "if [ $rc -ne 0 ]; then\n"
            '  echo "train.py failed with exit code $rc; kernel log:"\n'
            "  dmesg | grep -iE 'out of memory|oom-kill' | tail -n 2\n"
            "fi\n"
            "exit $rc\n"
        )
    return _cgroup_run(d, "tl-gen-oom-dmesg", 1024 * 2**20, "bash job.sh")


@scenario
def hf_trainer_loss_nan(d):
    """transformers Trainer on a tiny GPT-2 with a far too high learning rate (and no
    clipping): the logged loss dicts go to nan and the run finishes (exit 0)."""
    return run(
        d,
        TOKENIZER
        + """
import random
from transformers import (DataCollatorForLanguageModeling, GPT2Config, GPT2LMHeadModel, Trainer,
                          TrainingArguments)

tokenizer = build_tokenizer()
tokenizer.pad_token = tokenizer.eos_token
model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=len(tokenizer), n_positions=64))
random.seed(0)
words = "the a model train loss data batch token layer gradient step".split()
rows = [tokenizer(" ".join(random.choice(words) for _ in range(24)), truncation=True, max_length=32) for _ in range(256)]
args = TrainingArguments(output_dir="out", per_device_train_batch_size=16, num_train_epochs=2,
                         logging_steps=2, save_strategy="no", report_to="none", use_cpu=True,
                         learning_rate=50.0, max_grad_norm=0.0, optim="sgd")
trainer = Trainer(model=model, args=args, train_dataset=rows, processing_class=tokenizer,
                  data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False))
trainer.train()
""",
    )


@scenario
def rt_dtype_accelerate_launch(d):
    """`accelerate launch --cpu --num_processes 2` of a script whose features are normalised
    with a numpy float64 scalar (upcasting them to float64): the float32 Linear fails with
    mat1 and mat2 must have the same dtype on both processes."""
    return run(
        d,
        """
    import numpy as np
    import torch
    from accelerate import Accelerator
    from torch.utils.data import DataLoader, TensorDataset

    accelerator = Accelerator(cpu=True)
    x = np.random.rand(512, 8).astype(np.float32)
    y = x.sum(1, keepdims=True).astype(np.float32)
    x = x / np.float64(x.max())                       # normalisation upcasts to float64
    ds = TensorDataset(torch.from_numpy(x), torch.from_numpy(y))
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.Adam(model.parameters(), 1e-2)
    model, opt, loader = accelerator.prepare(model, opt, DataLoader(ds, batch_size=32))
    accelerator.print(f"training on {accelerator.num_processes} processes")
    for epoch in range(3):
        for xb, yb in loader:
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            accelerator.backward(loss)
            opt.step(); opt.zero_grad()
        accelerator.print(f"epoch {epoch} loss {loss.item():.4f}")
    """,
        cmd="accelerate launch --cpu --num_processes 2 --main_process_port 29615 train.py",
    )


@scenario
def rt_shape_batch_size_target(d):
    """LeNet-style CNN whose flatten uses view(-1, 16 * 4 * 4) on 32x32 inputs (5x5 maps):
    16 samples become 25 rows and cross_entropy reports Expected input batch_size (25) to
    match target batch_size (16)."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class LeNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.conv2 = nn.Conv2d(3, 6, 5), nn.Conv2d(6, 16, 5)
            self.fc1, self.fc2 = nn.Linear(16 * 4 * 4, 120), nn.Linear(120, 10)
        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv1(x)), 2)
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = x.view(-1, 16 * 4 * 4)
            return self.fc2(F.relu(self.fc1(x)))

    net = LeNet()
    opt = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
    print(net)
    for epoch in range(2):
        inputs, labels = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
        outputs = net(inputs)
        loss = F.cross_entropy(outputs, labels)
        loss.backward(); opt.step()
    """,
    )


@scenario
def data_hf_map_length_mismatch(d):
    """datasets .map(batched=True) that splits each text into several chunks without
    remove_columns: Arrow refuses columns of different lengths (ArrowInvalid)."""
    return run(
        d,
        """
    from datasets import Dataset

    ds = Dataset.from_dict({"text": [("word " * 300).strip() for _ in range(1000)], "label": [i % 2 for i in range(1000)]})
    print(ds)

    def chunk(batch):
        out = {"chunk": []}
        for t in batch["text"]:
            words = t.split()
            out["chunk"].extend(" ".join(words[i:i + 128]) for i in range(0, len(words), 128))
        return out

    chunks = ds.map(chunk, batched=True)
    print(chunks)
    """,
        env={"HF_DATASETS_CACHE": "hf_cache"},
    )


@scenario
def data_hf_missing_data_files(d):
    """load_dataset('json') with a data_files glob that matches nothing (the data was
    synced to another directory): FileNotFoundError: Unable to find ..."""
    return run(
        d,
        """
    import logging
    from datasets import load_dataset

    logging.basicConfig(level=logging.INFO, format="%(asctime)s [%(levelname)s] %(message)s")
    files = {"train": "data/processed/train-*.jsonl", "validation": "data/processed/valid-*.jsonl"}
    logging.info("loading %s", files)
    raw = load_dataset("json", data_files=files, cache_dir="hf_cache")
    logging.info("%s", raw)
    """,
        env={"HF_DATASETS_CACHE": "hf_cache"},
    )


@scenario
def hf_removed_adamw_import(d):
    """An older fine-tuning script imports AdamW from transformers, which removed it
    (use torch.optim.AdamW): ImportError: cannot import name 'AdamW' from 'transformers'."""
    return run(
        d,
        """
    import torch
    print("torch", torch.__version__)
    from transformers import AdamW, GPT2Config, GPT2LMHeadModel, get_linear_schedule_with_warmup

    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=500))
    optimizer = AdamW(model.parameters(), lr=5e-5, correct_bias=False)
    """,
    )


@scenario
def mem_cpu_alloc_worker(d):
    """A Dataset that materialises a dense (vocab x vocab) co-occurrence matrix lazily in the
    DataLoader worker: DefaultCPUAllocator: can't allocate memory, caught in worker 0."""
    return run(
        d,
        """
    import torch
    from torch.utils.data import DataLoader, Dataset

    class CoocDataset(Dataset):
        def __init__(self, vocab=500_000):
            self.vocab, self.cooc = vocab, None
        def __len__(self):
            return 10_000
        def __getitem__(self, i):
            if self.cooc is None:
                self.cooc = torch.zeros(self.vocab, self.vocab)
            return torch.randint(0, self.vocab, (16,))

    loader = DataLoader(CoocDataset(), batch_size=32, num_workers=1)
    print("starting epoch 0")
    for step, ids in enumerate(loader):
        print(step, ids.shape)
    """,
    )


@scenario
def num_nan_tqdm_postfix(d):
    """A tqdm training loop that reports the loss only in the bar's postfix; an fp16-cast
    attention score overflows to inf and the loss turns nan, shown as loss=nan in the bar."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn
    from tqdm import tqdm

    torch.manual_seed(0)
    proj = nn.Linear(32, 32)
    head = nn.Linear(32, 4)
    opt = torch.optim.Adam([*proj.parameters(), *head.parameters()], lr=1e-2)
    bar = tqdm(range(200), desc="train", mininterval=0)
    for step in bar:
        x = torch.randn(16, 10, 32) * (1 + step)
        q = proj(x)
        scores = (q @ q.transpose(1, 2)).half().float()          # scores stored in fp16 to save memory
        att = (scores - scores.amax(-1, keepdim=True)).softmax(-1)
        loss = nn.functional.cross_entropy(head(att @ x).mean(1), torch.randint(0, 4, (16,)))
        opt.zero_grad(); loss.backward(); opt.step()
        bar.set_postfix(loss=f"{loss.item():.4f}")
    print("finished")
    """,
    )


@scenario
def rt_ok_cuda_amp_on_cpu(d):
    """A run that completes: a GPU script's torch.cuda.amp.GradScaler()/autocast on a CPU-only
    build print FutureWarnings and 'CUDA is not available. Disabling.' and train normally."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.cuda.amp.GradScaler()
    x, y = torch.randn(256, 32), torch.randint(0, 2, (256,))
    for epoch in range(5):
        with torch.cuda.amp.autocast():
            loss = nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        print(f"epoch {epoch} loss {loss.item():.4f}")
    print("done")
    """,
    )


@scenario
def rt_device_lstm_hidden_meta(d):
    """An LSTM tagger built under torch.device('meta') for fast init; load_state_dict(assign=True)
    moves the weights to CPU but the non-persistent initial-state buffer stays on meta, so the
    hidden state is on another device: Input and hidden tensors are not at the same device."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    class Tagger(nn.Module):
        def __init__(self, vocab=100, dim=32, tags=5):
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.lstm = nn.LSTM(dim, dim, batch_first=True)
            self.out = nn.Linear(dim, tags)
            self.register_buffer("h0", torch.zeros(1, 1, dim), persistent=False)
        def forward(self, ids):
            h = self.h0.expand(1, ids.size(0), -1).contiguous()
            y, _ = self.lstm(self.emb(ids), (h, h))
            return self.out(y)

    ref = Tagger()
    torch.save(ref.state_dict(), "tagger.pt")
    with torch.device("meta"):
        model = Tagger()
    model.load_state_dict(torch.load("tagger.pt"), assign=True)
    print("restored", sum(p.numel() for p in model.parameters()), "parameters from tagger.pt")
    print(model(torch.randint(0, 100, (4, 12))).argmax(-1))
    """,
    )


# ----------------------------------------------------------------------------- healthy runs


@scenario
def rt_ok_tqdm_user_warnings(d):
    """A run that completes: tqdm bars (CR updates) plus the real UserWarnings PyTorch prints
    for lr_scheduler.step() before optimizer.step() and torch.tensor(tensor)."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn
    from tqdm import tqdm

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.9)
    data = torch.randn(512, 20)
    labels = (data[:, 0] > 0).long()
    sched.step()
    for epoch in range(3):
        bar = tqdm(range(0, 512, 32), desc=f"Epoch {epoch}")
        for i in bar:
            x = torch.tensor(data[i:i + 32])
            loss = nn.functional.cross_entropy(model(x), labels[i:i + 32])
            opt.zero_grad(); loss.backward(); opt.step()
            bar.set_postfix(loss=f"{loss.item():.4f}")
        sched.step()
        acc = (model(data).argmax(1) == labels).float().mean().item()
        print(f"epoch {epoch}: acc={acc:.3f} lr={sched.get_last_lr()[0]:.4f}")
    print("training complete")
    """,
    )


@scenario
def num_ok_loss_spike_recovers(d):
    """A run that completes: one batch of outliers makes the loss jump ~100x for a step,
    then training recovers to its previous level."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    w_true = torch.randn(10, 1)
    model = nn.Linear(10, 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for step in range(1, 301):
        x = torch.randn(64, 10)
        y = x @ w_true
        if step == 150:
            y = y * 40          # a batch with corrupted targets
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        if step % 10 == 0 or 148 <= step <= 156:
            print(f"step {step:4d} | loss {loss.item():10.5f} | lr {opt.param_groups[0]['lr']:.3g}")
    print("final loss", round(loss.item(), 6))
    """,
    )


TOK_VENV = os.environ.get("GEN_TOK_VENV", "")  # tokenizers 0.21.1 + tqdm only


@scenario
def hf_ok_tokenizers_fork_warning(d):
    """A preprocessing run that completes: a fast tokenizer (tokenizers 0.21, which still
    prints the warning; 0.23 does not) encodes a batch in parallel, then a fork-based
    multiprocessing.Pool tokenizes shards: each forked worker prints 'huggingface/tokenizers:
    The current process just got forked, after parallelism has already been used'.
    Needs GEN_TOK_VENV: a virtualenv with tokenizers==0.21.1 and tqdm."""
    return run(
        d,
        """
    import multiprocessing as mp
    import random
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from tqdm import tqdm

    random.seed(0)
    words = "the a model train loss data batch token layer gradient step of to and in".split()
    docs = [" ".join(random.choice(words) for _ in range(200)) for _ in range(4000)]
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(docs[:500], trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]"], show_progress=False))
    sample = tok.encode_batch(docs[:1000])
    print(f"vocab {tok.get_vocab_size()}, mean length {sum(len(e.ids) for e in sample) / len(sample):.1f}")

    def count(shard):
        return sum(len(e.ids) for e in tok.encode_batch(shard))

    shards = [docs[i:i + 250] for i in range(0, len(docs), 250)]
    with mp.get_context("fork").Pool(2) as pool:
        total = sum(tqdm(pool.imap(count, shards), total=len(shards), desc="tokenizing"))
    print(f"total tokens: {total}")
    """,
        cmd=f"{TOK_VENV}/bin/python train.py",
    )


@scenario
def hf_ok_trainer(d):
    """A run that completes: transformers Trainer on a tiny GPT-2 built from a config,
    with its tqdm progress bars, loss dicts and the usual startup notices."""
    return run(
        d,
        TOKENIZER
        + """
import random
from transformers import (DataCollatorForLanguageModeling, GPT2Config, GPT2LMHeadModel, Trainer,
                          TrainingArguments)

tokenizer = build_tokenizer()
tokenizer.pad_token = tokenizer.eos_token
model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=len(tokenizer), n_positions=64))
random.seed(0)
words = "the a model train loss data batch token layer gradient step".split()
rows = [tokenizer(" ".join(random.choice(words) for _ in range(24)), truncation=True, max_length=32) for _ in range(256)]
args = TrainingArguments(output_dir="out", per_device_train_batch_size=16, num_train_epochs=2,
                         logging_steps=4, save_strategy="no", report_to="none", use_cpu=True,
                         learning_rate=1e-3, warmup_steps=4)
trainer = Trainer(model=model, args=args, train_dataset=rows, processing_class=tokenizer,
                  data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False))
trainer.train()
print("saved:", trainer.state.global_step, "steps")
""",
    )


@scenario
def rt_ok_ddp_find_unused_warning(d):
    """A 2-rank torchrun DDP run (gloo) that completes, with find_unused_parameters=True
    although every parameter is used: DDP prints its performance warning."""
    return run(
        d,
        """
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = DDP(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)), find_unused_parameters=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(30):
        x = torch.randn(32, 16)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        if rank == 0 and step % 5 == 0:
            print(f"[rank0] step {step} loss {loss.item():.4f}")
    dist.barrier()
    if rank == 0:
        print("training finished")
    dist.destroy_process_group()
    """,
        cmd="torchrun --nproc_per_node 2 --master_port 29612 train.py",
    )


@scenario
def data_ok_many_workers(d):
    """A run that completes although DataLoader(num_workers=8) on a 2-CPU host makes
    PyTorch warn about the suggested max number of workers."""
    return run(
        d,
        """
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    ds = TensorDataset(torch.randn(2048, 8), torch.randint(0, 2, (2048,)))
    loader = DataLoader(ds, batch_size=128, shuffle=True, num_workers=8)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.Adam(model.parameters(), 1e-2)
    for epoch in range(3):
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(); loss.backward(); opt.step()
        print(f"Epoch {epoch}: loss={loss.item():.4f}")
    """,
    )


@scenario
def data_ok_decompression_bomb_warning(d):
    """A run that completes: a 100 Mpx image (above PIL's warning threshold, below its error
    threshold) makes PIL print DecompressionBombWarning; the tile is processed."""
    prepare(
        d,
        """
    from PIL import Image
    Image.new("1", (10000, 10000), 0).save("slide.png")
    """,
    )
    return run(
        d,
        """
    from PIL import Image

    print("opening slide")
    with Image.open("slide.png") as im:
        print("size", im.size)
        thumb = im.convert("L").reduce(50)
        print("thumbnail", thumb.size)
    print("ok")
    """,
    )


@scenario
def compile_ok_graph_breaks(d):
    """A run that completes: torch.compile (inductor, CPU) over a forward with a print()
    that causes graph breaks, with TORCH_LOGS=graph_breaks reporting them."""
    return run(
        d,
        """
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(16, 32), nn.Linear(32, 4)
        def forward(self, x):
            h = torch.relu(self.a(x))
            print("hidden norm", h.norm().item())
            return self.b(h)

    model = torch.compile(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        loss = model(torch.randn(8, 16)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        print("step", step, "loss", round(loss.item(), 4))
    """,
        env={"TORCH_LOGS": "graph_breaks"},
    )


@scenario
def hf_ok_new_head_weights_warning(d):
    """A run that completes: a classification model loaded from a saved causal-LM checkpoint
    (save_pretrained of a GPT-2 built from a config) prints 'Some weights ... were not
    initialized from the model checkpoint ... You should probably TRAIN this model', then is
    fine-tuned for a few steps."""
    return run(
        d,
        TOKENIZER
        + """
import torch
from transformers import GPT2Config, GPT2ForSequenceClassification, GPT2LMHeadModel

tokenizer = build_tokenizer()
tokenizer.pad_token = tokenizer.eos_token
cfg = GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=len(tokenizer),
                 bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
                 pad_token_id=tokenizer.eos_token_id)
GPT2LMHeadModel(cfg).save_pretrained("base-lm")
model = GPT2ForSequenceClassification.from_pretrained("base-lm", num_labels=2)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
texts = ["the model and the loss", "data batch token", "gradient step", "the layer of the model"] * 4
labels = torch.tensor([0, 1, 0, 1] * 4)
for step in range(10):
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    out = model(**batch, labels=labels)
    out.loss.backward(); opt.step(); opt.zero_grad()
    print(f"step {step} loss {out.loss.item():.4f}")
print("fine-tuning done")
""",
    )


@scenario
def hf_ok_peft_grad_checkpointing(d):
    """A run that completes: LoRA (peft) on a GPT-2 with reentrant gradient checkpointing
    enabled after get_peft_model (the setup that used to end in 'element 0 of tensors does
    not require grad'; transformers 5 makes the inputs require grad itself). It prints peft's
    fan_in_fan_out UserWarning and transformers' FutureWarnings, and trains normally."""
    return run(
        d,
        """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=500, bos_token_id=0, eos_token_id=0))
    model = get_peft_model(model, LoraConfig(r=4, target_modules=["c_attn"], task_type="CAUSAL_LM"))
    model.print_trainable_parameters()
    model.base_model.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    model.base_model.model.config.use_cache = False
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    for step in range(5):
        ids = torch.randint(0, 500, (4, 32))
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step(); opt.zero_grad()
        print(f"step {step} loss {loss.item():.4f}")
    """,
    )


@scenario
def rt_load_map_location_cuda(d):
    """An inference script written for a GPU box resumes a checkpoint with
    torch.load(..., map_location='cuda:0') on a CPU-only host: Attempting to deserialize
    object on a CUDA device but torch.cuda.is_available() is False."""
    return run(
        d,
        """
    import logging
    import torch
    import torch.nn as nn

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger("infer")
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 3))
    torch.save({"model": model.state_dict(), "epoch": 12}, "best.pt")
    log.info("loading checkpoint best.pt")
    ckpt = torch.load("best.pt", map_location="cuda:0")
    model.load_state_dict(ckpt["model"])
    log.info("resumed from epoch %d", ckpt["epoch"])
    """,
    )


@scenario
def proc_segfault_torchrun_rank(d):
    """torchrun, 2 ranks (gloo DDP), python -X faulthandler via PYTHONFAULTHANDLER=1: rank 1
    reads invalid address 16 through ctypes at step 12 and segfaults; faulthandler prints its
    frames, rank 0 loses its gloo peer, and torchrun reports Signal 11 (SIGSEGV)."""
    return run(
        d,
        """
    import ctypes
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = DDP(nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(50):
        x = torch.randn(16, 32)
        if rank == 1 and step == 12:
            header = ctypes.string_at(16, 8)      # bad pointer from a native reader
        loss = model(x).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        if step % 4 == 0:
            print(f"[rank {rank}] step {step} loss {loss.item():.4f}", flush=True)
    dist.destroy_process_group()
    """,
        cmd="torchrun --nproc_per_node 2 --master_port 29616 train.py",
        env={"PYTHONFAULTHANDLER": "1"},
    )


@scenario
def proc_cpp_abort_c10_error(d):
    """A C++ extension's background thread validates a tensor with TORCH_CHECK, which throws
    c10::Error off the Python thread: terminate called after throwing an instance of
    'c10::Error' with the c10 backtrace, then Aborted."""
    return run(
        d,
        """
    import time
    import torch
    from torch.utils.cpp_extension import load_inline

    src = '''
    #include <torch/extension.h>
    #include <thread>
    static std::thread* worker = nullptr;
    void start_stats(torch::Tensor t) {
        worker = new std::thread([t]() {
            TORCH_CHECK(t.dim() == 2, "stats worker expects a 2-D tensor, got ", t.dim(), "-D");
        });
    }
    '''
    ext = load_inline("stats_ext", cpp_sources=src, functions=["start_stats"],
                      build_directory=".", verbose=False)
    print("stats extension loaded")
    model = torch.nn.Conv1d(4, 8, 3)
    for step in range(100):
        out = model(torch.randn(2, 4, 32))
        if step == 20:
            ext.start_stats(out.detach())
        if step % 5 == 0:
            print(f"step {step} out.mean {out.mean().item():+.4f}", flush=True)
        time.sleep(0.02)
    """,
        cmd="bash -c 'python train.py'; true",
    )


@scenario
def data_image_too_large_worker(d):
    """A satellite-tile dataset where one tile is a full 15000x15000 scene: PIL raises
    DecompressionBombError inside a DataLoader worker (Caught DecompressionBombError)."""
    prepare(
        d,
        """
    import os
    from PIL import Image
    os.makedirs("scenes", exist_ok=True)
    for i in range(40):
        Image.new("L", (128, 128), i * 5).save(f"scenes/s{i:03d}.png")
    Image.new("1", (15000, 15000), 0).save("scenes/s040.png")
    """,
    )
    return run(
        d,
        """
    import os
    import numpy as np
    import torch
    from PIL import Image
    from torch.utils.data import DataLoader, Dataset

    class Scenes(Dataset):
        def __init__(self, root):
            self.files = sorted(os.path.join(root, f) for f in os.listdir(root))
        def __len__(self):
            return len(self.files)
        def __getitem__(self, i):
            with Image.open(self.files[i]) as im:
                return torch.from_numpy(np.array(im.convert("L").resize((64, 64)))).float()

    loader = DataLoader(Scenes("scenes"), batch_size=8, num_workers=2)
    for epoch in range(1):
        for step, x in enumerate(loader):
            print(f"epoch {epoch} step {step} mean {x.mean().item():.2f}")
    """,
    )


@scenario
def hf_chat_template_pipeline(d):
    """A text-generation pipeline over a base model built from a config is called with chat
    messages; the tokenizer has no chat template: ValueError from apply_chat_template."""
    return run(
        d,
        TOKENIZER
        + """
import torch
from transformers import GPT2Config, GPT2LMHeadModel, pipeline

tokenizer = build_tokenizer()
model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_head=2, n_embd=64, vocab_size=len(tokenizer),
                                   bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id))
gen = pipeline("text-generation", model=model, tokenizer=tokenizer, device="cpu")
print(gen("the model", max_new_tokens=8)[0]["generated_text"])
messages = [{"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Explain the loss."}]
print(gen(messages, max_new_tokens=16)[0]["generated_text"])
""",
    )


@scenario
def num_diverged_adam_lr(d):
    """A classifier trained with Adam at lr=3.0 (a config typo for 3e-4), logged with Python
    logging: the loss jumps from 1.4 to the thousands within a few steps, then sits on a
    chance-level plateau (~1.5, train accuracy 0.25 on 4 classes) for the rest of the run;
    finite throughout, exit 0."""
    return run(
        d,
        """
    import logging
    import torch
    import torch.nn as nn

    logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(name)s - %(levelname)s - %(message)s")
    logger = logging.getLogger("trainer")
    torch.manual_seed(0)
    X = torch.randn(2048, 20)
    Y = (X[:, :5].sum(1) > 0).long() + 2 * (X[:, 5:10].sum(1) > 0).long()
    model = nn.Sequential(nn.Linear(20, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 4))
    config = {"lr": 3.0, "batch_size": 64, "epochs": 6}
    logger.info("config: %s", config)
    opt = torch.optim.Adam(model.parameters(), lr=config["lr"])
    step = 0
    for epoch in range(config["epochs"]):
        for i in range(0, len(X), config["batch_size"]):
            loss = nn.functional.cross_entropy(model(X[i:i + 64]), Y[i:i + 64])
            opt.zero_grad(); loss.backward(); opt.step()
            if step % 8 == 0:
                logger.info("epoch %d step %d loss %.4f", epoch, step, loss.item())
            step += 1
        with torch.no_grad():
            acc = (model(X).argmax(1) == Y).float().mean().item()
        logger.info("epoch %d done, train acc %.3f", epoch, acc)
    """,
    )


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        print("scenarios:", " ".join(SCENARIOS))
        return 2
    out = os.path.abspath(sys.argv[1])
    wanted = sys.argv[2:] or list(SCENARIOS)
    for name in wanted:
        d = os.path.join(out, name)
        t0 = time.time()
        try:
            rc = SCENARIOS[name](d)
        except subprocess.TimeoutExpired:
            rc = "timeout"
        print(f"{name}: exit {rc} ({time.time() - t0:.0f}s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
