"""rayx.train.torch: TorchTrainer and prepare_model (Ray Train's names).

torch is imported inside the ranks and by these functions, never by
`import rayx.train`.
"""

import datetime
import os

from rayx.train._trainer import DataParallelTrainer


class _TorchBackend:
    """Before the loop runs: torch.distributed initialised from the group's
    environment (env://): gloo on CPU, nccl with use_gpu; afterwards destroyed."""

    def __init__(self, use_gpu):
        self.use_gpu = use_gpu

    def on_start(self, setup, timeout_s):
        import torch
        import torch.distributed as dist
        if self.use_gpu:
            if not torch.cuda.is_available():
                raise RuntimeError(f"rank {setup['rank']} on {setup['node_ip']} holds GPUs "
                                   f"{setup['gpu_ids']} but torch sees no CUDA device: install a "
                                   "CUDA build of torch there, or run with use_gpu=False")
            torch.cuda.set_device(get_device())  # the rank's own GPU, before NCCL starts
        dist.init_process_group("nccl" if self.use_gpu else "gloo", init_method="env://",
                                rank=setup["rank"], world_size=setup["world_size"],
                                timeout=datetime.timedelta(seconds=timeout_s))

        def teardown():
            if dist.is_initialized():
                dist.destroy_process_group()
        return teardown


class TorchTrainer(DataParallelTrainer):
    """Runs `train_loop_per_worker` on every rank with torch.distributed
    initialised (gloo on CPU, nccl with ScalingConfig(use_gpu=True))."""

    def __init__(self, train_loop_per_worker, *, train_loop_config=None, scaling_config=None,
                 run_config=None, failure_config=None, torch_config=None):
        del torch_config
        super().__init__(train_loop_per_worker, train_loop_config=train_loop_config,
                         scaling_config=scaling_config, run_config=run_config,
                         failure_config=failure_config)
        self._backend = _TorchBackend(self._scaling.use_gpu)


def get_device():
    """The rank's torch device: its own GPU when it holds one, else cpu.

    A GPU rank of a trainer sees every GPU its group holds on the node
    (CUDA_VISIBLE_DEVICES), and RAYX_LOCAL_RANK, set by the node agent, is the
    position of its own there. Elsewhere a process that sees one GPU uses it,
    and one that sees several uses LOCAL_RANK (torchrun's convention)."""
    import torch
    if not torch.cuda.is_available() or os.environ.get("CUDA_VISIBLE_DEVICES", "") == "":
        return torch.device("cpu")
    own = os.environ.get("RAYX_LOCAL_RANK", "")
    if own != "":
        return torch.device("cuda", int(own))
    if torch.cuda.device_count() == 1:
        return torch.device("cuda", 0)
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))


def prepare_model(model, move_to_device=True):
    """Moves `model` to the rank's device and wraps it in
    DistributedDataParallel (on CPU without device_ids) when there is more
    than one rank."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    device = get_device()
    if move_to_device:
        model = model.to(device)
    if not dist.is_initialized() or dist.get_world_size() < 2:
        return model
    if device.type == "cuda":
        return DistributedDataParallel(model, device_ids=[device.index], output_device=device.index)
    return DistributedDataParallel(model)
