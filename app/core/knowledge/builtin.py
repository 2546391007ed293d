"""Patterns the engine itself needs, next to the signatures' own.

* ``error``: generic error markers; a matching line that no signature explains is
  reported as unexplained, so the library can grow from real traffic.
* ``progress``: training progress (steps, metric dicts, progress bars); an error
  followed by much progress is earlier trouble the run survived.
* ``version``: the job's environment as the log prints it (versions, GPUs, topology),
  for the environment panel and `applies_to`.
"""

from __future__ import annotations

from typing import Literal

# The kinds of pattern the engine owns (a subset of the library's pattern kinds).
BuiltinKind = Literal["error", "progress", "version"]

# Named groups are facts: environment.py maps each group name to the fact it gives.
_V = r"\d{1,3}\.\d{1,3}(?:\.\d{1,3})?(?:(?:a|b|rc|\.dev|\.post)\d{0,9})?(?:\+[A-Za-z0-9.]{1,40})?"
# After a bare space only a full X.Y.Z counts: "datasets 1.25 GB" is not a version.
_V3 = r"\d{1,3}\.\d{1,3}\.\d{1,3}(?:(?:a|b|rc|\.dev|\.post)\d{0,9})?(?:\+[A-Za-z0-9.]{1,40})?"

# (name, regex) of the environment lines. Wordings, from the tools that print them:
# torch.utils.collect_env ("PyTorch version: 2.1.0+cu121", "CUDA used to build PyTorch: 12.1",
# "Nvidia driver version: 535.104.05", "GPU 0: NVIDIA A100-SXM4-80GB", "[pip3] numpy==1.26.4"),
# `transformers-cli env` ("- `Accelerate` version: 0.33.0", "- PyTorch version (GPU?): 2.4.0+cu121"),
# DeepSpeed's ds_report ("torch version .... 2.3.0+cu121", "deepspeed info .... 0.15.5, unknown")
# and log_dist banner ("DeepSpeed info: version=0.3.13"), NCCL ("NCCL version 2.21.5+cuda12.4";
# with NCCL_DEBUG=INFO "NCCL INFO cudaDriverVersion 12000", the driver's CUDA as CUDA encodes it),
# the nvidia-smi table, vLLM ("Initializing a V1 LLM engine (v0.8.3) with config"), the CUDA
# out-of-memory message, torchrun, DeepSpeed's launcher, Lightning, Slurm and Open MPI.
ENVIRONMENT: tuple[tuple[str, str], ...] = (
    (
        "torch",
        r"\b(?:torch|pytorch|PyTorch|Torch)(?: version)?(?: \(GPU\?\))?"
        r"(?:(?:==|:\s?|\s\.{2,}\s)(?P<torch>" + _V + r")|\s(?P<torch_release>" + _V3 + r"))(?:\W|$)",
    ),
    ("torch_cuda", r"\b(?:CUDA used to build PyTorch|torch cuda version)(?::|\s\.{2,})\s(?P<cuda>\d{1,2}\.\d{1,2})\b"),
    (
        "nvidia_smi",
        r"Driver Version: (?P<driver>\d{2,3}\.\d{1,3}(?:\.\d{1,3})?)\s+CUDA Version: (?P<cuda_driver>\d{1,2}\.\d{1,2})",
    ),
    ("driver", r"\b(?:Nvidia|NVIDIA) driver version: (?P<driver>\d{2,3}\.\d{1,3}(?:\.\d{1,3})?)\b"),
    ("driver_too_old", r"driver on your system is too old \(found version (?P<cuda_driver_code>\d{4,6})\)"),
    ("nccl_driver", r"\bNCCL INFO cudaDriverVersion (?P<cuda_driver_code>\d{4,6})\b"),
    ("nccl", r"\bNCCL version (?P<nccl>\d{1,2}\.\d{1,3}\.\d{1,3})\b"),
    # The rank a process is in its communicator, from NCCL_DEBUG=INFO lines (not facts of their own:
    # app/core/engine/nccl_ranks.py lends it to the process's other NCCL lines). init.cc:
    # "comm 0x55fb6f3ce680 rank 0 nranks 4 cudaDev 0 ... - Init COMPLETE"; a send connection
    # (transport/shm.cc, p2p.cc, net.cc): "Channel 00/0 : 0[1020] -> 2[1040] [send] via NET/IB/0",
    # this rank first (a "[receive]" line names the peer first).
    ("nccl_comm_rank", r"\bcomm 0x[0-9a-f]{1,16} rank (?P<nccl_rank>\d{1,6}) nranks \d{1,6}\b"),
    (
        "nccl_send_rank",
        r"\bChannel \d{1,3}(?:/\d{1,3})? : (?P<nccl_rank>\d{1,6})\[[0-9a-fx]{1,16}\] -> \d{1,6}\[[0-9a-fx]{1,16}\]"
        r"(?: \[send\])? via ",
    ),
    ("cudnn", r"\bcu[dD][nN][nN] version:? (?P<cudnn>\d{1,2}\.\d{1,2}\.\d{1,2})\b"),
    ("python", r"\bPython (?:version:? )?(?P<python>3\.\d{1,2}\.\d{1,2})\b"),
    ("python_path", r"/python(?P<python_path>3\.\d{1,2})/(?:site|dist)-packages/"),
    (
        "package",
        r"(?:\b|`)(?P<pkg>(?i:transformers|accelerate|deepspeed|vllm|numpy|pytorch[_-]lightning|lightning|datasets"
        r"|peft|trl|flash[_-]attn|triton|megatron[_-]core|protobuf|jax|jaxlib|tensorflow(?:[_-](?:gpu|cpu|macos))?"
        r"|keras|tf[_-]keras|flax|optax|paddlepaddle(?:[_-]gpu)?|mlx|horovod|torch[_-]npu|bitsandbytes|xformers))`?"
        r"(?:(?:==| version:? )(?P<pkg_version>" + _V + r")| (?P<pkg_release>" + _V3 + r"))(?:\W|$)",
    ),
    ("deepspeed", r"\b(?i:deepspeed) info(?::\s?version=|\s\.{2,}\s)(?P<deepspeed>" + _V + r")"),
    # jax.print_environment_info(): "jax:    0.4.25", "jaxlib: 0.4.25"; TensorFlow: "tf.version.VERSION = 2.4.1",
    # "TensorFlow version: 2.15.0"; ROCm builds of PyTorch (collect_env):
    # "ROCM used to build PyTorch: 6.0.32830-d62f6a171", "HIP runtime version: 6.0.32830";
    # macOS (collect_env, where MPS runs): "OS: macOS 14.2.1 (arm64)".
    ("jax_info", r"^(?:jax:\s{1,10}(?P<jax>" + _V + r")|jaxlib:\s{1,10}(?P<jaxlib>" + _V + r"))\s*$"),
    (
        "tensorflow",
        r"\b(?:tf\.version\.VERSION\s?=\s?|tf\.__version__\s?=\s?|TensorFlow version:? |Tensorflow version:? )"
        r"'?(?P<tensorflow>" + _V + r")",
    ),
    ("rocm", r"\b(?:ROCM used to build PyTorch|HIP runtime version):? (?P<rocm>\d{1,2}\.\d{1,2}(?:\.\d{1,6})?)"),
    ("macos", r"\bOS: macOS (?P<macos>\d{1,2}\.\d{1,2}(?:\.\d{1,2})?) \((?:arm64|x86_64)\)"),
    ("vllm_engine", r"Initializing an? (?:V[01] )?LLM engine \(v(?P<vllm>" + _V + r")\)"),
    ("vllm_server", r"\bvLLM API server version (?P<vllm>" + _V + r")"),
    ("numpy2", r"^NumPy (?P<numpy>\d{1,2}\.\d{1,3}\.\d{1,3}) as it may crash"),
    (
        "gpu",
        r"\bGPU(?: (?P<gpu_index>\d{1,3}))?: "
        r"(?P<gpu>(?:NVIDIA|Tesla|Quadro|GeForce|AMD Instinct|Radeon)\b[^,;()|\[]{1,60})",
    ),
    ("gpu_device", r"\bUsing device:? cuda(?::\d{1,3})? \((?P<gpu>[^()]{2,60})\)"),
    ("gpu_capability", r"\b(?P<gpu>NVIDIA [^,;()]{2,60}?) with CUDA capability (?P<gpu_arch>sm_\d{2,3})\b"),
    (
        "gpu_found",
        r"\bFound GPU(?P<gpu_index>\d{1,3}) (?P<gpu>[^,;()]{2,60}?) "
        r"which is of cuda capability (?P<gpu_arch>\d{1,2}\.\d)",
    ),
    ("smi_gpu", r"^\|\s{1,4}(?P<smi_index>\d{1,3})\s{1,4}(?P<smi_gpu>[A-Z][\w .-]{1,40}?)\s+(?:On|Off)\s*\|"),
    ("smi_memory", r"^\|.{0,60}\|\s+\d{1,7}MiB /\s{0,8}(?P<gpu_memory_mib>\d{3,7})MiB \|"),
    (
        "oom_capacity",
        r"\bGPU (?P<gpu_index>\d{1,3})(?: has a total capacity of |; )(?P<gpu_memory>\d{1,4}(?:\.\d{1,2})? [GM]iB)",
    ),
    ("world_size", r"\b(?:world[_ ]size|WORLD_SIZE|dist_world_size)(?: is|\s?[=:])\s?(?P<world_size>\d{1,6})\b"),
    (
        "world_size_lightning",
        r"\bInitializing distributed: GLOBAL_RANK: \d{1,6}, MEMBER: \d{1,6}/(?P<world_size>\d{1,6})\b",
    ),
    ("world_size_elastic", r"\bglobal_world_sizes=\[(?P<world_size>\d{1,6})"),
    (
        "nodes",
        r"(?:--nnodes[= ]|\bSLURM_NNODES=|\bSLURM_JOB_NUM_NODES=|\bmax_nodes\s{0,20}: |\bgroup_world_size=)"
        r"(?P<nodes>\d{1,6})\b",
    ),
    ("ranks_per_node", r"(?:--nproc[_-]per[_-]node[= ]|\bnproc_per_node\s{0,20}: )(?P<ranks_per_node>\d{1,4})\b"),
    (
        "launcher",
        r"(?P<launcher>/bin/torchrun\b|^\s*torchrun |-m torch\.distributed\.(?:launch|run)\b"
        r"|torch/distributed/launch\.py|\btorch\.distributed\.elastic\.|^srun: |\bmpirun noticed\b"
        r"|^Primary job\s+terminated normally"
        r"|\bdeepspeed\.launcher\.(?:launch|runner)\b|\bdeepspeed/launcher/|/bin/accelerate\b|\baccelerate/commands/launch\.py)",
    ),
    # What fix steps are chosen by (app/core/engine/advice.py): the frameworks a traceback's frames run
    # in, a Python program (its traceback header), the operating system its paths or errors name, and
    # where a checkpoint or blob was read from (a file path quoted to a loader, or Redis).
    (
        "framework_frame",
        r"[\\/](?:site|dist)-packages[\\/](?P<framework>transformers|accelerate|deepspeed|lightning|pytorch_lightning"
        r"|jax|tensorflow|keras|tf_keras|vllm)[\\/]",
    ),
    ("torch_frame", r"[\\/](?:site|dist)-packages[\\/](?P<framework_pytorch>torch)[\\/]"),
    ("python_traceback", r"(?:^|[\s:\]|])(?P<program_python>Traceback) \(most recent call last\):\s*$"),
    (
        "os",
        r"(?P<os_windows>\b[A-Za-z]:\\(?:Users|Program Files|ProgramData|Windows|Python\d{0,3}|anaconda3|miniconda3)\\"
        r"|\[WinError \d{1,6}\])"
        r"|(?P<os_linux>\b(?:x86_64|aarch64)-linux-gnu\b|\bmanylinux|/dist-packages/|(?:^|[\s\"'(=])/(?:home|root)/"
        r"|\bLinux version \d)"
        r"|(?P<os_macos>(?:^|[\s\"'(=])/Users/[^/\s]{1,64}/|-darwin\.so\b|/Library/Frameworks/Python\.framework/"
        r"|/opt/homebrew/)",
    ),
    (
        "storage",
        r"(?P<storage_redis>\bredis(?:://|\.exceptions\.|[\\/](?:client|connection|commands)[\\/.]|-py\b|-server\b)"
        r"|\bRedis version=|\b(?:redis\.)?(?:Strict)?Redis\((?:host|connection_pool|unix_socket_path)=)"
        r"|(?P<storage_file>\btorch\.load\(\s*f?[\"'][^\"']{1,300}[\"']"
        r"|[\"'][^\"'\s]{0,300}\.(?:pt|pth|ckpt|bin|safetensors|pkl|pickle|h5|hdf5|npz|msgpack)[\"']"
        r"|\b(?i:from|loading|load|resuming|restoring)\s[^\s\"']{0,300}\.(?:pt|pth|ckpt|bin|safetensors|pkl|pickle|h5|hdf5)\b)",
    ),
    (
        "slurm_job",
        r"(?:\*\*\* (?:JOB|STEP) |\bStepId=|\bin step |\bSLURM_JOB_ID=|\bSubmitted batch job )(?P<job_id>\d{1,12})\b",
    ),
)

# (kind, name, regex) - the same dialect as signatures (RE2 and `regex`).
PATTERNS: tuple[tuple[BuiltinKind, str, str], ...] = (
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
    # Lower-case levels as C++ and Go loggers print them (spdlog's "[error]", logrus' "level=error"),
    # and a line that begins with "error:" as compilers, pip and command-line tools print it.
    ("error", "error_level_lower", r"(?:\[(?:error|fatal|critical)\]|\blevel=(?:error|fatal)\b)"),
    ("error", "error_prefix", r"(?:^|[\]>|]\s)\s{0,8}(?:error|Error)(?:\[[\w-]{1,20}\])?: \S"),
    # The dynamic linker's refusal, and the shell's report of a process killed by SIGKILL.
    ("error", "undefined_symbol", r"\bundefined symbol: \S"),
    ("error", "killed", r"^(?:\S{0,40}: line \d{1,6}: {1,2}\d{1,9} )?Killed(?: {2,}\S|\s*$)"),
    ("progress", "metric_dict", r"\{'(?:loss|train_loss|eval_loss)': "),
    ("progress", "step", r"(?i)\b(?:step|iteration|iter)[ :=]{1,8}\d{1,9}\b.{0,200}\bloss\b"),
    ("progress", "bar", r"\d%\|.{0,200}\| *\d{1,12}/\d{1,12} \["),
    # Environment facts (app/core/engine/environment.py reads their groups): versions, hardware,
    # topology, launcher and scheduler job, each as the log prints it.
    *(("version", name, pattern) for name, pattern in ENVIRONMENT),
)
