"""Data-parallel training on the CPU with torch.distributed (gloo), for `torchrun`:
    fennec record -o ddp.fnc -- torchrun --nproc_per_node 2 examples/torch_ddp.py
Each rank trains a small MLP on its own synthetic data and all-reduces the gradients every
step (DistributedDataParallel). --slow-rank R adds --slow-ms of extra work to rank R's
every step: the straggler `fennec analyze` should find (docs/ranks.md)."""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

try:
    import fennec
except ImportError:  # without the module: no steps or regions, samples only
    fennec = None


def busy(seconds):
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--slow-rank", type=int, default=1)
    ap.add_argument("--slow-ms", type=float, default=20.0)
    a = ap.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    torch.set_num_threads(1)
    model = DDP(nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
    if fennec:
        fennec.step()  # the loop starts here
    for _ in range(a.steps):
        if rank == a.slow_rank:
            busy(a.slow_ms / 1000.0)
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()  # the all-reduce: the other ranks wait here for the slow one
        opt.step()
        if fennec:
            fennec.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
