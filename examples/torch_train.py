"""A small CNN trained on synthetic images with a DataLoader (Debian's python3-torch, CPU):
the example of docs/python.md. `fennec record -- python3 examples/torch_train.py`.
Options: --steps N (default 30), --batch N (32), --workers N (DataLoader workers, 0),
--images N (the dataset's size, default steps x batch: a smaller one is gone through again
until --steps, so a long run does not hold all its images),
--jitter (a slow pure-Python augmentation in the dataset), --leak (backward with
retain_graph=True, keeping every step's loss: its graph and saved activations live on), --torch-profile FILE (torch.profiler's key_averages() table as JSON, for
comparison)."""
import argparse
import json
import random
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    def __init__(self, n, jitter):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 3, 32, 32, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)
        self.jitter = jitter

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        x = self.x[i]
        if self.jitter:
            x = augment(x)
        return x, self.y[i]


def augment(x):
    # pure Python over a few hundred values: the slow kind of input code
    rng = random.Random(0)
    v = x[0].tolist()  # one 32 x 32 channel as nested lists
    v = [[a + rng.random() * 0.01 for a in row] for row in v]
    x = x.clone()
    x[0] = torch.tensor(v)
    return x


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 8 * 8, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.pool(torch.relu(self.conv1(x)))
        x = self.pool(torch.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        return self.fc2(torch.relu(self.fc1(x)))


def train(args):
    torch.manual_seed(0)
    torch.set_num_threads(1)
    images = args.images or args.batch * args.steps
    data = DataLoader(Images(images, args.jitter), batch_size=args.batch,
                      num_workers=args.workers, shuffle=False)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    kept = []
    t0 = time.perf_counter()
    steps = 0
    while steps < args.steps:
        for x, y in data:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            # --leak: the graph is kept for later (retain_graph) and so is the loss that
            # holds it, with the activations it saved: several MiB a step that live on
            loss.backward(retain_graph=args.leak)
            opt.step()
            if args.leak:
                kept.append(loss)
            steps += 1
            if steps == args.steps:
                break
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--images", type=int, default=0)
    ap.add_argument("--jitter", action="store_true")
    ap.add_argument("--leak", action="store_true")
    ap.add_argument("--torch-profile")
    args = ap.parse_args()
    if args.torch_profile:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            secs = train(args)
        total = sum(e.self_cpu_time_total for e in prof.key_averages())
        rows = [{"name": e.key, "self_us": e.self_cpu_time_total, "count": e.count,
                 "self_pct": 100.0 * e.self_cpu_time_total / total if total else 0.0}
                for e in prof.key_averages()]
        rows.sort(key=lambda r: -r["self_us"])
        with open(args.torch_profile, "w") as f:
            json.dump({"seconds": secs, "operators": rows}, f, indent=1)
    else:
        secs = train(args)
    print("trained %d steps in %.2f s" % (args.steps, secs))


if __name__ == "__main__":
    main()
