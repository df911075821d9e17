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


class TorchConfig:
    """Ray's torch settings: accepted; rayx picks gloo on CPU and nccl with
    use_gpu, initialised from the group's environment (env://)."""

    def __init__(self, backend=None, init_method="env", timeout_s=1800):
        if backend not in (None, "gloo", "nccl"):
            raise ValueError(f"TorchConfig: backend {backend!r}: use 'gloo' or 'nccl'")
        self.backend = backend
        self.init_method = init_method
        self.timeout_s = timeout_s


class TorchTrainer(DataParallelTrainer):
    """Runs `train_loop_per_worker` on every rank with torch.distributed
    initialised (gloo on CPU, nccl with ScalingConfig(use_gpu=True))."""

    def __init__(self, train_loop_per_worker, *, train_loop_config=None, scaling_config=None,
                 run_config=None, failure_config=None, torch_config=None, datasets=None,
                 dataset_config=None, metadata=None, resume_from_checkpoint=None):
        del torch_config
        super().__init__(train_loop_per_worker, train_loop_config=train_loop_config,
                         scaling_config=scaling_config, run_config=run_config,
                         failure_config=failure_config, datasets=datasets,
                         dataset_config=dataset_config, metadata=metadata,
                         resume_from_checkpoint=resume_from_checkpoint)
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


def get_devices():
    """[get_device()]: a rank holds one device here."""
    return [get_device()]


def prepare_model(model, move_to_device=True, parallel_strategy="ddp",
                  parallel_strategy_kwargs=None):
    """Moves `model` to the rank's device and wraps it in
    DistributedDataParallel (on CPU without device_ids) when there is more
    than one rank. parallel_strategy: "ddp" or None (no wrapping); FSDP is
    not supported here."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    if parallel_strategy not in ("ddp", None):
        raise ValueError(f"prepare_model: parallel_strategy {parallel_strategy!r}: rayx supports "
                         "'ddp' or None")
    device = get_device()
    if move_to_device:
        model = model.to(device)
    if parallel_strategy is None or not dist.is_initialized() or dist.get_world_size() < 2:
        return model
    kwargs = dict(parallel_strategy_kwargs or {})
    if device.type == "cuda":
        kwargs.setdefault("device_ids", [device.index])
        kwargs.setdefault("output_device", device.index)
    return DistributedDataParallel(model, **kwargs)


class _DeviceLoader:
    """Iterates a DataLoader, moving each batch's tensors to `device`."""

    def __init__(self, loader, device):
        self._loader = loader
        self._device = device
        self.dataset = loader.dataset
        self.batch_size = loader.batch_size
        self.sampler = loader.sampler

    def __len__(self):
        return len(self._loader)

    def _move(self, item):
        import torch
        if isinstance(item, torch.Tensor):
            return item.to(self._device, non_blocking=True)
        if isinstance(item, (list, tuple)):
            return type(item)(self._move(i) for i in item)
        if isinstance(item, dict):
            return {k: self._move(v) for k, v in item.items()}
        return item

    def __iter__(self):
        for batch in self._loader:
            yield self._move(batch)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def prepare_data_loader(data_loader, add_dist_sampler=True, move_to_device=True,
                        auto_transfer=True):
    """`data_loader` for this rank: with more than one rank (and
    add_dist_sampler), a copy that reads only this rank's share of the
    dataset (a DistributedSampler, shuffling when the original shuffled; call
    loader.sampler.set_epoch(epoch) each epoch to reshuffle); with
    move_to_device, its batches arrive on the rank's device."""
    del auto_transfer
    import torch.distributed as dist
    from torch.utils.data import DataLoader, DistributedSampler, RandomSampler
    loader = data_loader
    if add_dist_sampler and dist.is_initialized() and dist.get_world_size() > 1 and \
            not isinstance(loader.sampler, DistributedSampler):
        shuffle = isinstance(loader.sampler, RandomSampler)
        sampler = DistributedSampler(loader.dataset, shuffle=shuffle)
        loader = DataLoader(loader.dataset, batch_size=loader.batch_size, sampler=sampler,
                            num_workers=loader.num_workers, collate_fn=loader.collate_fn,
                            pin_memory=loader.pin_memory, drop_last=loader.drop_last,
                            timeout=loader.timeout, worker_init_fn=loader.worker_init_fn)
    device = get_device()
    if move_to_device and device.type != "cpu":
        return _DeviceLoader(loader, device)
    return loader
