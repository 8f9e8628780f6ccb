"""What the watcher costs a training loop with 10 grad-disabling regions a step, measured in one run.

    python benchmarks/bench_watch.py [--rounds 30] [--steps 20] [--processes 5] [--widths 256,32]

A step of the loop: forward and backward of a 3-layer tanh MLP (256 wide, and 32 wide where the
regions weigh most; batch 64, one thread, SGD with momentum), then 10 regions: the EMA of each of
the 6 parameters under `no_grad`, an accuracy in a `@torch.no_grad()` function, an evaluation
under `inference_mode`, the gradient norm under `set_grad_enabled(False)`, the running loss under
`no_grad` (the optimizer's own `set_grad_enabled` comes on top).

1. In one process, the loop runs `--steps` steps with the watcher's hooks and as many without,
   alternately, round after round (the order flips every round); the ratio is of the medians of
   the processor time. This is the figure the target (at most 1.10x) is for: other work on the
   machine reaches both sides alike.
2. Whole processes side by side (benchmarks/_measure.py): `python train.py` and
   `python -m lint_nograd.watch train.py`, alternately; the script prints the processor time of
   its loop (torch's import is not counted). Noisier on a busy machine.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _measure import ratio_line, side_by_side  # noqa: E402

TRAIN = """\
    import statistics, sys, time
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    steps, W = int(sys.argv[1]), int(sys.argv[2])
    net = torch.nn.Sequential(torch.nn.Linear(W, W), torch.nn.Tanh(), torch.nn.Linear(W, W),
                              torch.nn.Tanh(), torch.nn.Linear(W, 10))
    ema = [p.detach().clone() for p in net.parameters()]
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(64, W), torch.randint(0, 10, (64,))
    held_out = torch.randn(64, W)
    running = torch.zeros(())

    @torch.no_grad()
    def accuracy(logits, labels):
        return (logits.argmax(1) == labels).float().mean()

    def train(steps):
        global running
        start = time.process_time()
        for step in range(steps):
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
                torch.stack([p.grad.norm() for p in net.parameters()]).norm()
            with torch.no_grad():  # 1
                running = running * 0.9 + loss * 0.1
        return time.process_time() - start

    if len(sys.argv) > 3:  # interleaved: the hooks on, then off, in one process
        from lint_nograd.watch import hooks
        watcher = hooks.install()
        rounds = int(sys.argv[3])
        times = {True: [], False: []}
        train(steps)
        for round_number in range(rounds):
            for watched in ((True, False) if round_number % 2 else (False, True)):
                watcher.install() if watched else watcher.uninstall()
                times[watched].append(train(steps))
        watcher.uninstall()
        print(statistics.median(times[True]), statistics.median(times[False]))
    else:
        print(f"{train(steps):.6f}")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="interleaved rounds in one process")
    parser.add_argument("--steps", type=int, default=20, help="steps per round")
    parser.add_argument("--processes", type=int, default=5, help="rounds of whole processes (0: none)")
    parser.add_argument("--widths", default="256,32", help="MLP widths, one measurement each")
    options = parser.parse_args()
    print(f"training loop, 10 regions a step, one thread, medians of processor time; "
          f"1: {options.rounds} interleaved rounds of {options.steps} steps in one process; "
          f"2: {options.processes} rounds of whole processes, {options.steps * 10} steps each")
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "train.py"
        script.write_text(textwrap.dedent(TRAIN))
        for width in options.widths.split(","):
            done = subprocess.run([sys.executable, str(script), str(options.steps), width, str(options.rounds)],
                                  capture_output=True, text=True, check=True)
            watched, plain = map(float, done.stdout.split())
            print(ratio_line(f"1. width {width}: watched / not", watched, plain, "<= 1.10x"))
            print(f"{f'1. width {width}: cost per region':<52} {(watched - plain) / (options.steps * 10) * 1e6:6.2f} us")
            if options.processes:
                arguments = [str(script), str(options.steps * 10), width]
                figures = side_by_side({
                    "watched": [sys.executable, "-m", "lint_nograd.watch", *arguments],
                    "python": [sys.executable, *arguments],
                }, options.processes, cwd=Path(folder), sample_memory=False)
                loop = {name: statistics.median(map(float, f.outputs)) for name, f in figures.items()}
                print(ratio_line(f"2. width {width}: watched / python, loop", loop["watched"], loop["python"],
                                 "<= 1.10x"))
                print(ratio_line(f"2. width {width}: watched / python, process", figures["watched"].wall,
                                 figures["python"].wall, "(import of torch included)"))


if __name__ == "__main__":
    main()
