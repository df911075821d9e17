"""A torchrun-style program, unmodified: everything comes from the environment.

Used by launch_test: checks an all_reduce across every rank, then trains a
small DDP model and prints its loss. FAIL_RANK makes that rank exit 3 at
step 5 (on the first try only with FAIL_FIRST_TRY_ONLY); PID_DIR gets one file per rank holding its pid; SLEEP_FOREVER keeps
every rank alive (for the signal test).
"""
import os
import sys
import time

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
if os.environ.get("PID_DIR"):
    with open(os.path.join(os.environ["PID_DIR"], f"rank{rank}.pid"), "w") as f:
        f.write(str(os.getpid()))

print(
    "env RANK={RANK} LOCAL_RANK={LOCAL_RANK} WORLD_SIZE={WORLD_SIZE} "
    "LOCAL_WORLD_SIZE={LOCAL_WORLD_SIZE} NODE_RANK={NODE_RANK} GROUP_RANK={GROUP_RANK} "
    "MASTER_ADDR={MASTER_ADDR} MASTER_PORT={MASTER_PORT}".format(**os.environ),
    flush=True,
)

dist.init_process_group("gloo")  # env:// with no arguments, as under torchrun
world = dist.get_world_size()
assert dist.get_rank() == rank, (dist.get_rank(), rank)

t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"allreduce rank={rank} sum={t.item():g}", flush=True)

if os.environ.get("SLEEP_FOREVER"):
    print(f"rank {rank} sleeping", flush=True)
    while True:
        time.sleep(1)

torch.manual_seed(0)  # same initial weights on every rank
model = torch.nn.Linear(4, 1)
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
gen = torch.Generator().manual_seed(1000 + rank)  # different data per rank
w_true = torch.tensor([[1.0, -2.0, 3.0, 0.5]])
fail_rank = int(os.environ.get("FAIL_RANK", "-1"))
if os.environ.get("FAIL_FIRST_TRY_ONLY") and os.environ["TORCHELASTIC_RESTART_COUNT"] != "0":
    fail_rank = -1
losses = []
for step in range(40):
    if rank == fail_rank and step == 5:
        print(f"rank {rank} failing at step {step}", flush=True)
        sys.exit(3)
    x = torch.randn(64, 4, generator=gen)
    y = x @ w_true.T
    loss = ((ddp(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())

params = torch.cat([p.detach().flatten() for p in model.parameters()])
gathered = [torch.zeros_like(params) for _ in range(world)]
dist.all_gather(gathered, params)
same = all(torch.allclose(gathered[0], g) for g in gathered)
print(f"loss rank={rank} first={losses[0]:.6f} last={losses[-1]:.6f} same_weights={same}",
      flush=True)
dist.destroy_process_group()
