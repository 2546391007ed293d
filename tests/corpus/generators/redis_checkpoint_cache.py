"""Generate the "Redis as a checkpoint cache" incident with real software, byte for byte.

Usage:  python tests/corpus/generators/redis_checkpoint_cache.py OUTDIR [CASE ...]

Needs root (it mounts a 512 KiB tmpfs as the Redis data directory), redis-server 7.0 on
PATH, and an interpreter with torch and redis-py (the committed cases used torch 2.13.0+cpu,
redis-py 8.1.0, Python 3.11.7, redis-server 7.0.15).

The incident: a training job caches its state (model and optimizer state_dicts and the
iteration number, each pickled) in Redis between iterations.  The writes are not atomic:
each blob is streamed in chunks with APPEND after its size is recorded.  Redis persists
to a data directory on a tiny volume.  What happens, for real:

1. iteration 1 is cached; during iteration 2's chunked write a background save (BGSAVE,
   as a periodic backup would issue) snapshots the half-appended model blob: it succeeds;
2. after iteration 2 the next BGSAVE needs room for a second snapshot next to the first
   one: the volume is full, the save fails with ENOSPC (stop-writes-on-bgsave-error is on);
3. the "pod restarts": the trainer and redis-server get SIGTERM; Redis's final save fails
   again so it refuses to exit and is killed after the grace period; it comes back and
   loads its last good snapshot, the one with the torn model blob;
4. the trainer resumes from the cache: the model pickle ends early, the optimizer blob is
   read through the job's text client (decode_responses=True) and then handed to
   torch.load (it is a plain pickle), and INCR on the iteration key hits a pickled blob.

Each process's output is captured as it is printed; the combined log is what
`docker compose logs` shows for the two services (prefix `<service>-1`, padded, then
" | "), lines merged in time order.  OUTDIR/<case-id>/log.txt is the log and
OUTDIR/<case-id>/meta.json its label, for `tracelore corpus add`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import redis  # the generator's own checks; the trainer uses its own copy

PY = os.environ.get("TL_GEN_PYTHON", sys.executable)
WORK = Path(os.environ.get("TL_GEN_WORK", "/tmp/tlgen-redis-cache"))
PORT = 6399  # private: never the shared 6379
GRACE = 2.0  # seconds between SIGTERM and SIGKILL at the "pod restart"
SAVE_RULES = "3600 1 300 100 60 10000"  # redis 7.0's default save points
VERSIONS = "redis 7.0.15, torch 2.13.0, redis-py 8.1.0, Python 3.11"

TRAINER = r"""
import io, logging, os, pickle, sys, time
import redis
import torch
import torch.nn as nn
import torch.nn.functional as F

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
log = logging.getLogger("trainer")
torch.manual_seed(0)

RUN = os.environ.get("RUN_ID", "run42")
HOST, PORT = os.environ["REDIS_HOST"], int(os.environ["REDIS_PORT"])
CHUNK = 16 * 1024  # stream big values in pieces: keeps Redis latency low for the data loaders

raw = redis.Redis(host=HOST, port=PORT)  # blobs
meta = redis.Redis(host=HOST, port=PORT, decode_responses=True)  # counters, config, bookkeeping


def K(name):
    return f"ckpt:{RUN}:{name}"


class Net(nn.Module):
    def __init__(self, d_in=64, hidden=160, n_classes=10):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, x):
        return self.head(self.encoder(x))


def cache_blob(name, blob):
    key = K(name)
    pipe = raw.pipeline(transaction=False)
    pipe.delete(key)
    pipe.set(key + ":nbytes", len(blob))
    pipe.execute()
    for off in range(0, len(blob), CHUNK):
        raw.append(key, blob[off:off + CHUNK])
        time.sleep(0.08)
    log.info("cached %s (%d bytes)", key, len(blob))


def cache_state(state):
    for name, obj in state.items():
        cache_blob(name, pickle.dumps(obj))


def restore(client, name):
    key = K(name)
    blob = client.get(key)
    log.info("restoring %s: read %d bytes, writer recorded %s bytes", key, len(blob), meta.get(key + ":nbytes"))
    return pickle.loads(blob)


model = Net()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(1024, 64)
y = (x @ torch.randn(64, 10)).argmax(1)
log.info("torch %s, redis-py %s, cache redis://%s:%d/0", torch.__version__, redis.__version__, HOST, PORT)

if sys.argv[1] == "train":
    meta.set(K("config"), "hidden=160 lr=1e-3 bs=32")
    for it in range(1, 100):
        for step in range(1, 31):
            s = (step * 32) % len(x)
            loss = F.cross_entropy(model(x[s:s + 32]), y[s:s + 32])
            opt.zero_grad()
            loss.backward()
            opt.step()
            if step % 10 == 0:
                log.info("iter %d step %d loss %.4f", it, step, loss.item())
            time.sleep(0.05)
        log.info("iter %d: caching state in redis", it)
        cache_state({"model": model.state_dict(), "optim": opt.state_dict(), "iter": it})
else:
    order = sys.argv[2:] or ["raw"]
    log.info("resuming %s from redis cache", RUN)
    try:
        for client in order:
            try:
                model.load_state_dict(restore(meta if client == "text" else raw, "model"))
                break
            except UnicodeDecodeError:
                log.warning("%s holds bytes, not text; reading it raw", K("model"), exc_info=True)
    except Exception:
        log.warning("model state in %s is unusable; starting from fresh weights", K("model"), exc_info=True)
    try:
        opt.load_state_dict(pickle.loads(meta.get(K("optim")).encode("latin-1")))
    except Exception:
        log.warning("could not read %s as text; trying it as a torch.save archive", K("optim"), exc_info=True)
        try:
            opt.load_state_dict(torch.load(io.BytesIO(raw.get(K("optim"))), weights_only=False))
        except Exception:
            log.warning("optimizer state in %s is unusable; starting with a fresh optimizer", K("optim"), exc_info=True)
    with meta.pipeline() as pipe:  # MULTI/EXEC
        pipe.incr(K("iter"))
        pipe.expire(K("iter"), 7 * 24 * 3600)
        it = pipe.execute()[0]
    log.info("resumed at iteration %d", it)
"""


class Capture:
    """A process whose output lines are kept with the time each one arrived."""

    def __init__(self, cmd: list[str], env: dict[str, str], cwd: Path) -> None:
        self.lines: list[tuple[float, bytes]] = []
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):
            self.lines.append((time.time(), line))

    def wait_for(self, needle: bytes, start: int = 0, timeout: float = 120) -> int:
        """Wait until a line from index `start` on holds `needle`; the index after that line."""
        end = time.time() + timeout
        while time.time() < end:
            for i in range(start, len(self.lines)):
                if needle in self.lines[i][1]:
                    return i + 1
            if self.proc.poll() is not None and not self.thread.is_alive():
                raise RuntimeError(f"trainer exited before printing {needle!r}")
            time.sleep(0.005)
        raise RuntimeError(f"timed out waiting for {needle!r}")

    def finish(self, timeout: float = 120) -> None:
        self.proc.wait(timeout)
        self.thread.join(5)


class Redis:
    """redis-server on a private port, data directory on the tiny volume, log to a file."""

    def __init__(self, data: Path, logfile: Path) -> None:
        self.data, self.logfile = data, logfile
        self.proc: subprocess.Popen | None = None
        self.client = redis.Redis(port=PORT)

    def start(self) -> None:
        cmd = ["redis-server", "--port", str(PORT), "--bind", "127.0.0.1", "--dir", str(self.data)]
        cmd += ["--dbfilename", "dump.rdb", "--save", SAVE_RULES, "--appendonly", "no"]
        cmd += ["--logfile", str(self.logfile), "--daemonize", "no"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                if self.client.ping():
                    return
            except redis.exceptions.ConnectionError:
                time.sleep(0.05)
            except redis.exceptions.BusyLoadingError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def bgsave(self) -> str:
        """BGSAVE and wait for it to end; the status Redis records ('ok' or 'err')."""
        self.client.bgsave()
        time.sleep(0.05)
        while self.client.info("persistence")["rdb_bgsave_in_progress"]:
            time.sleep(0.01)
        return self.client.info("persistence")["rdb_last_bgsave_status"]

    def terminate(self) -> None:
        """What a pod restart does: SIGTERM, then SIGKILL after the grace period."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(GRACE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}


def redis_time(line: bytes, fallback: float) -> float:
    """The time redis-server wrote on a log line ("pid:X dd Mon yyyy hh:mm:ss.mmm ...").

    Its signal handler writes "pid:signal-handler (unixtime) ..." instead.
    """
    try:
        _, rest = line.split(b":", 1)
        if rest.startswith(b"signal-handler ("):
            return float(rest[len(b"signal-handler (") :].split(b")", 1)[0])
        day, mon, year, clock = rest[2:].split(b" ", 4)[:4]
        h, m, s = clock.decode().split(":")
        t = datetime(int(year), MONTHS[mon.decode()], int(day), int(h), int(m), int(float(s)))
        return t.timestamp() + float(s) % 1
    except (ValueError, KeyError, IndexError):
        return fallback


def compose_logs(streams: dict[str, list[tuple[float, bytes]]]) -> bytes:
    """`docker compose logs --no-color` of several services: padded name, " | ", line; by time."""
    width = max(len(name) for name in streams) + 1
    merged = []
    for order, (name, lines) in enumerate(streams.items()):
        last = 0.0
        for n, (t, line) in enumerate(lines):
            last = max(last, t)  # a service's own lines keep their order
            merged.append((last, order, n, name, line))
    merged.sort(key=lambda e: e[:3])
    return b"".join(f"{name:<{width}} | ".encode() + line.rstrip(b"\n") + b"\n" for *_, name, line in merged)


def incident(w: Path, *, misconf: bool, resume_order: list[str]) -> dict[str, list[tuple[float, bytes]]]:
    """Run the whole incident; the lines of each service, with their times."""
    data, logfile = w / "data", w / "redis.log"
    data.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(data)], check=True)
    srv = Redis(data, logfile)
    trainer_lines: list[tuple[float, bytes]] = []
    seen = 0
    try:
        srv.start()
        (w / "train.py").write_text(TRAINER)
        env = {
            "PATH": os.path.dirname(PY) + ":/usr/bin:/bin",
            "HOME": os.environ.get("HOME", "/root"),
            "PYTHONUNBUFFERED": "1",
            "OMP_NUM_THREADS": "1",
            "LANG": "C.UTF-8",
            "REDIS_HOST": "127.0.0.1",
            "REDIS_PORT": str(PORT),
        }
        job = Capture([PY, "train.py", "train"], env, w)
        # 1. a backup BGSAVE lands in the middle of iteration 2's chunked write of the model
        mark = job.wait_for(b"iter 2: caching state in redis")
        while True:
            nbytes = srv.client.get("ckpt:run42:model:nbytes")
            have = srv.client.strlen("ckpt:run42:model")
            if nbytes and 0 < have < int(nbytes) // 2:
                break
            time.sleep(0.002)
        if srv.bgsave() != "ok":
            raise RuntimeError("the first snapshot should have fitted on the volume")
        # 2. the next one, after iteration 2 is cached, does not fit next to it
        mark = job.wait_for(b"cached ckpt:run42:iter", mark)
        if srv.bgsave() != "err":
            raise RuntimeError("the second snapshot should have failed with ENOSPC")
        if misconf:
            job.finish()  # its next write is refused with MISCONF and it exits
        else:
            job.wait_for(b"iter 3 step 10 loss", mark)
            job.proc.send_signal(signal.SIGTERM)  # 3. pod restart
            job.finish()
        trainer_lines += job.lines
        srv.terminate()
        srv.start()
        resumed = Capture([PY, "train.py", "resume", *resume_order], env, w)
        resumed.finish()
        trainer_lines += resumed.lines
        seen = logfile.stat().st_size  # what the logs hold when the job has died; the cleanup is not part of it
    finally:
        srv.terminate()
        subprocess.run(["umount", str(data)], check=False)
    redis_lines = []
    for line in logfile.read_bytes()[:seen].splitlines(keepends=True):
        redis_lines.append((redis_time(line, redis_lines[-1][0] if redis_lines else 0.0), line))
    return {"redis-1": redis_lines, "trainer-1": trainer_lines}


SCENARIOS = {
    "gen-redis-cache-restart-compose": {
        "run": {"misconf": False, "resume_order": ["raw"]},
        "services": ("redis-1", "trainer-1"),
        "expected": "redis.persistence_failed",
        "collateral": ["checkpoint.truncated"],
        "notes": (
            "docker compose logs of redis-server 7.0 and a trainer that caches pickled state_dicts in Redis with "
            "chunked APPENDs. A BGSAVE snapshots the model blob half-written; the next BGSAVE fails with ENOSPC on "
            "the 512 KiB data volume (Write error saving DB on disk, Background saving error); at the pod restart "
            "the final save fails too and Redis reloads the torn snapshot. The resumed trainer gets a truncated "
            "pickle (echo of the lost snapshot), then its own latent bugs on the fallback path: the optimizer blob "
            "read through a decode_responses=True client (UnicodeDecodeError 0x80), then handed to torch.load "
            "although it is a plain pickle (Invalid magic number), and INCR in a MULTI/EXEC on a key that holds a "
            "pickled int (value is not an integer or out of range)."
        ),
    },
    "gen-redis-cache-misconf-trainer-only": {
        "run": {"misconf": True, "resume_order": ["raw"]},
        "services": ("trainer-1",),
        "expected": "redis.persistence_failed",
        "collateral": ["checkpoint.truncated"],
        "notes": (
            "Only the trainer's log (docker compose logs trainer) of the same incident, where the trainer keeps "
            "writing after the failed BGSAVE: Redis refuses its APPEND with MISCONF and it exits; after the restart "
            "Redis has reloaded its last good snapshot (with a half-appended model blob) and the resumed trainer "
            "gets a truncated pickle, then the UnicodeDecodeError, Invalid magic number and INCR errors of its "
            "fallback path."
        ),
    },
    "gen-redis-cache-restart-text-client-first": {
        "run": {"misconf": False, "resume_order": ["text", "raw"]},
        "services": ("redis-1", "trainer-1"),
        "expected": "redis.persistence_failed",
        "collateral": ["checkpoint.truncated"],
        "notes": (
            "The same incident as gen-redis-cache-restart-compose, but the resumed trainer first reads the model "
            "blob through its decode_responses=True client (UnicodeDecodeError on byte 0x80, the pickle PROTO "
            "opcode) and only then raw, which gives the truncated pickle Redis reloaded from its last good snapshot."
        ),
    },
}


def main() -> None:
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    out = Path(sys.argv[1])
    for case in sys.argv[2:] or list(SCENARIOS):
        sc = SCENARIOS[case]
        w = WORK / case
        shutil.rmtree(w, ignore_errors=True)
        w.mkdir(parents=True)
        t = time.time()
        streams = incident(w, **sc["run"])
        log = compose_logs({name: streams[name] for name in sc["services"]})
        d = out / case
        d.mkdir(parents=True, exist_ok=True)
        (d / "log.txt").write_bytes(log)
        meta = {k: v for k, v in sc.items() if k not in ("run", "services")}
        meta["source"] = f"generated by tests/corpus/generators/redis_checkpoint_cache.py ({VERSIONS})"
        (d / "meta.json").write_text(json.dumps(meta, indent=1))
        print(f"{case}: {len(log)} bytes in {time.time() - t:.1f}s", flush=True)


if __name__ == "__main__":
    main()
