"""K seeds' NatureCNN convolutions: one grouped ``conv2d`` over ``K * C`` channels against a per-seed loop of
``conv2d`` (what :class:`lit_sb3.policies.seed_stack.SeedConv2d` does), forward + backward, one torch thread.

Run: ``PYTHONPATH=. nice -n 5 python benchmarks/bench_seed_conv2d.py --seeds 3 --batch-size 32 --repeats 5``
(interleaved repeats; prints the median ms per forward + backward of each and the repeats).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch as th
from torch.nn import functional as F

# NatureCNN's layers: (in channels, out channels, kernel, stride)
LAYERS = [(3, 32, 8, 4), (32, 64, 4, 2), (64, 64, 3, 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--size", type=int, default=36, help="image height and width (NatureCNN needs >= 36)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()
    th.set_num_threads(1)
    k = args.seeds
    weights = [(th.randn(k, o, i, s, s) * 0.05).requires_grad_() for i, o, s, _ in LAYERS]
    biases = [th.zeros(k, o, requires_grad=True) for _, o, _, _ in LAYERS]
    x0 = th.rand(k, args.batch_size, 3, args.size, args.size)

    def grouped(x: th.Tensor) -> th.Tensor:
        for (i, o, size, stride), w, b in zip(LAYERS, weights, biases):
            batch = x.shape[1]
            y = F.conv2d(x.transpose(0, 1).reshape(batch, k * i, *x.shape[3:]), w.reshape(k * o, i, size, size),
                         b.reshape(-1), stride=stride, groups=k)  # fmt: skip
            x = th.relu(y.view(batch, k, o, *y.shape[2:]).transpose(0, 1))
        return x

    def loop(x: th.Tensor) -> th.Tensor:
        for (_, _, _, stride), w, b in zip(LAYERS, weights, biases):
            x = th.relu(th.stack([F.conv2d(x[j], w[j], b[j], stride=stride) for j in range(k)]))
        return x

    th.testing.assert_close(grouped(x0), loop(x0))
    times: dict[str, list[float]] = {"grouped": [], "loop": []}
    for _ in range(args.repeats):
        for name, fn in (("grouped", grouped), ("loop", loop)):
            start = time.perf_counter()
            for _ in range(args.iters):
                fn(x0).sum().backward()
            times[name].append((time.perf_counter() - start) / args.iters * 1e3)
    for name, values in times.items():
        print(f"{name}: {statistics.median(values):.1f} ms per forward+backward "
              f"(K={k}, batch {args.batch_size}, 3x{args.size}x{args.size}); repeats {[round(v, 1) for v in values]}")  # fmt: skip


if __name__ == "__main__":
    main()
