"""What the watcher costs a training loop with 10 grad-disabling regions a step, measured in one run.

    python benchmarks/bench_watch.py [--rounds 7] [--steps 300] [--widths 256,32]

The same training script runs as `python train.py` and as `python -m lint_nograd.watch train.py`,
alternately, round after round (benchmarks/_measure.py), after a warm-up round. A step of the
script: forward and backward of a 3-layer MLP (256 wide, and 32 wide where the regions weigh
most; batch 64, one thread, SGD with momentum), then 10 regions: the EMA of each of the 6 parameters under `no_grad`, an accuracy
under a `@torch.no_grad()` function, an evaluation under `inference_mode`, the gradient norm
under `set_grad_enabled(False)`, the running loss under `no_grad` (the optimizer's own
`set_grad_enabled` comes on top). The script prints the processor time of its loop, so torch's
import is not counted; the ratio is of the medians. Target: at most 1.10x.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import ratio_line, side_by_side

TRAIN = """\
    import sys, time
    import torch

    torch.set_num_threads(1)
    W = int(sys.argv[2])
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(W, W), torch.nn.Tanh(), torch.nn.Linear(W, W),
                              torch.nn.Tanh(), torch.nn.Linear(W, 10))
    ema = [p.detach().clone() for p in net.parameters()]
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(64, W), torch.randint(0, 10, (64,))
    held_out = torch.randn(64, W)

    @torch.no_grad()
    def accuracy(logits, labels):
        return (logits.argmax(1) == labels).float().mean()

    running = torch.zeros(())
    start = time.process_time()
    for step in range(int(sys.argv[1])):
        logits = net(x)
        loss = torch.nn.functional.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for average, p in zip(ema, net.parameters()):  # 6 regions
            with torch.no_grad():
                average.mul_(0.99).add_(p, alpha=0.01)
        accuracy(logits, y)  # 1
        with torch.inference_mode():  # 1
            net(held_out)
        with torch.set_grad_enabled(False):  # 1
            norm = torch.stack([p.grad.norm() for p in net.parameters()]).norm()
        with torch.no_grad():  # 1
            running = running * 0.9 + loss * 0.1
    print(f"{time.process_time() - start:.6f}")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--widths", default="256,32", help="MLP widths, one measurement each")
    options = parser.parse_args()
    print(f"training loop, {options.steps} steps x 10 regions, {options.rounds} rounds, medians "
          f"(processor time of the loop, then of the whole process)")
    for width in options.widths.split(","):
        with tempfile.TemporaryDirectory() as folder:
            script = Path(folder) / "train.py"
            script.write_text(textwrap.dedent(TRAIN))
            arguments = [str(script), str(options.steps), width]
            figures = side_by_side({
                "watched": [sys.executable, "-m", "lint_nograd.watch", *arguments],
                "python": [sys.executable, *arguments],
            }, options.rounds, cwd=Path(folder), sample_memory=False)
        loop = {name: statistics.median(float(output) for output in f.outputs) for name, f in figures.items()}
        print(ratio_line(f"width {width}: loop, watched / python", loop["watched"], loop["python"], "<= 1.10x"))
        per_region = (loop["watched"] - loop["python"]) / (options.steps * 10) * 1e6
        print(f"{f'width {width}: cost per region':<52} {per_region:6.2f} us")
        print(ratio_line(f"width {width}: whole process, watched / python", figures["watched"].wall,
                         figures["python"].wall, "(torch's import included)"))


if __name__ == "__main__":
    main()
