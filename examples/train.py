"""Data-parallel training with PyTorch DDP, as AetherGrid runs it.

Every task of the gang runs this script. AetherGrid tells each one who it is through
the environment: AG_TASK_INDEX (its rank), AG_WORKER_NUM (the world size) and
AG_MASTER_ADDR / AG_MASTER_PORT (where rank 0 listens). The torchrun names RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT are set too, so torchrun-style scripts run
unchanged. On GPUs the ranks talk over NCCL; on CPUs over gloo. Each task uses GPU
LOCAL_RANK: the tasks on a node see all the GPUs the job holds there, each one's own
at index LOCAL_RANK (one GPU per task), as under torchrun.

    ag submit --num-workers 2 -- python examples/train.py
"""
import argparse
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=int(os.environ.get("EPOCHS", "5")))
    parser.add_argument("--steps-per-epoch", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    return parser.parse_args()


def wait_for_master(addr, port, timeout_s=300.0):
    """Waits until rank 0's rendezvous store accepts connections.

    The ranks start at the same moment, and torch's store client sleeps a whole second
    after a refused connection; a rank that arrives before rank 0 listens would lose
    that second. Polling every 10 ms costs nothing.
    """
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            with socket.create_connection((addr, port), timeout=1.0):
                return
        except OSError:
            time.sleep(0.01)


def main():
    args = parse_args()
    rank = int(os.environ["AG_TASK_INDEX"])
    world_size = int(os.environ["AG_WORKER_NUM"])
    master = f"tcp://{os.environ['AG_MASTER_ADDR']}:{os.environ['AG_MASTER_PORT']}"
    use_cuda = torch.cuda.is_available() and os.environ.get("CUDA_VISIBLE_DEVICES", "") != ""
    backend = "nccl" if use_cuda else "gloo"

    print(f"[Rank {rank}] Starting training (world size {world_size}, backend {backend}, master {master})",
          flush=True)
    if rank != 0:
        wait_for_master(os.environ["AG_MASTER_ADDR"], int(os.environ["AG_MASTER_PORT"]))
    dist.init_process_group(backend=backend, init_method=master, rank=rank, world_size=world_size)
    # GPU LOCAL_RANK, or the only one a task sees under --gpu-isolation.
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    gpu = local_rank if use_cuda and torch.cuda.device_count() > local_rank else 0
    if use_cuda:
        torch.cuda.set_device(gpu)
    device = torch.device("cuda", gpu) if use_cuda else torch.device("cpu")

    # A small regression problem: learn y = 3x + 2 with noise. Each rank sees its own
    # shard of the data; DDP averages the gradients.
    torch.manual_seed(1234 + rank)
    model = DDP(nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 1)).to(device),
                device_ids=[gpu] if use_cuda else None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.MSELoss()

    start = time.time()
    for epoch in range(args.epochs):
        total = 0.0
        for _ in range(args.steps_per_epoch):
            x = torch.randn(args.batch_size, 1, device=device)
            y = 3 * x + 2 + 0.1 * torch.randn_like(x)
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            total += loss.item()
        mean = torch.tensor([total / args.steps_per_epoch], device=device)
        dist.all_reduce(mean)
        if rank == 0:
            print(f"Epoch {epoch}, Loss: {mean.item() / world_size:.4f}", flush=True)

    dist.barrier()
    print(f"[Rank {rank}] Training finished. ({time.time() - start:.2f}s)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
