"""What the runtime shim costs per call, next to what it replaces, measured in one run.

    python benchmarks/bench_shim.py [--rounds 30]

`lint_nograd.func.{grad, jvp, jacrev}` against `torch.func`'s on a 3-layer 256-wide tanh MLP
(grad: parameters of a batch-64 loss; jvp: the batch-64 outputs along a tangent; jacrev: the
256x256 Jacobian of one input), and `stop_gradient(x)` on one tensor, imported and reached as
`lint_nograd.stop_gradient`, against `x.detach()`. The two sides of a pair are timed
alternately, round after round (the order flips every round), so noise from the machine reaches
both; each time printed is the median of the rounds, and the ratio is their quotient. Times
are the CPU time of this process, with one intra-op thread: other work on the machine slows both
sides' wall time unevenly, but barely their CPU time. Targets: grad and jacrev at most 1.02x,
jvp 1.05x (its forward-mode rule costs one Python call per torch operation), stop_gradient
1.5x.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
import warnings

import lint_nograd
import lint_nograd.func as shim_func
import torch
import torch.func
from lint_nograd import stop_gradient

WIDTH, DEPTH, BATCH = 256, 3, 64
TARGETS = {"grad": 1.02, "jvp": 1.05, "jacrev": 1.02}


def make_mlp():
    generator = torch.Generator().manual_seed(0)
    params = []
    for _ in range(DEPTH):
        params.append(torch.randn(WIDTH, WIDTH, generator=generator) / WIDTH**0.5)
        params.append(torch.zeros(WIDTH))
    return tuple(params)


def mlp(params, x):
    for weight, bias in zip(params[::2], params[1::2]):
        x = torch.tanh(torch.nn.functional.linear(x, weight, bias))
    return x


def loss(params, x):
    return mlp(params, x).sum()


def transform_cases():
    """name -> (call with lint_nograd.func, call with torch.func), each a complete user call."""
    params = make_mlp()
    x = torch.randn(BATCH, WIDTH)
    tangent = torch.randn(BATCH, WIDTH)
    one_input = torch.randn(WIDTH)

    def calls(func):
        return {
            "grad": lambda: func.grad(loss)(params, x),
            "jvp": lambda: func.jvp(lambda inputs: mlp(params, inputs), (x,), (tangent,)),
            "jacrev": lambda: func.jacrev(lambda inputs: mlp(params, inputs))(one_input),
        }

    shim, torch_func = calls(shim_func), calls(torch.func)
    return {name: (shim[name], torch_func[name]) for name in shim}


def seconds_per_call(call, calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        call()
    return (time.process_time() - start) / calls


def seconds_per_detach(tensor, calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        tensor.detach()
    return (time.process_time() - start) / calls


def seconds_per_imported_cut(tensor, calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        stop_gradient(tensor)
    return (time.process_time() - start) / calls


def seconds_per_attribute_cut(tensor, calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        lint_nograd.stop_gradient(tensor)
    return (time.process_time() - start) / calls


def interleaved_medians(measure_shim, measure_reference, rounds: int) -> tuple[float, float]:
    shim_times, reference_times = [], []
    for round_number in range(rounds):
        pair = [(measure_shim, shim_times), (measure_reference, reference_times)]
        for measure, times in pair if round_number % 2 == 0 else pair[::-1]:
            times.append(measure())
    return statistics.median(shim_times), statistics.median(reference_times)


def calls_for(call, budget: float = 0.05) -> int:
    """How many calls fill about `budget` seconds, so that one sample is not a single timer tick."""
    call()
    return max(1, round(budget / seconds_per_call(call, 3)))


def report(name: str, shim: float, reference: float, reference_name: str, target: float) -> None:
    ratio = shim / reference
    verdict = "ok" if ratio <= target else "OVER TARGET"
    print(
        f"{name:<24} {ratio:6.3f}x   shim {shim * 1e6:10.2f} us   "
        f"{reference_name} {reference * 1e6:10.2f} us"
        f"   target <= {target:.2f}x  {verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rounds", type=int, default=30, help="interleaved rounds per pair (default 30)"
    )
    rounds = parser.parse_args().rounds

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    print(
        f"torch {torch.__version__}, 1 thread, MLP {DEPTH}x{WIDTH} tanh, batch {BATCH}, "
        f"{rounds} rounds, medians"
    )
    print(f"{'per call':<24} {'ratio':>7}")

    for name, (shim_call, torch_call) in transform_cases().items():
        calls = calls_for(torch_call)
        for call in (shim_call, torch_call):  # warm up both sides
            seconds_per_call(call, calls)
        shim, reference = interleaved_medians(
            functools.partial(seconds_per_call, shim_call, calls),
            functools.partial(seconds_per_call, torch_call, calls),
            rounds,
        )
        report(f"func.{name}", shim, reference, "torch.func", target=TARGETS[name])

    tensor = torch.randn(WIDTH, requires_grad=True)
    calls = 20_000
    cuts = {
        "stop_gradient(x)": seconds_per_imported_cut,
        "lint_nograd.stop_gradient": seconds_per_attribute_cut,
    }
    for name, seconds_per_cut in cuts.items():
        shim, reference = interleaved_medians(
            functools.partial(seconds_per_cut, tensor, calls),
            functools.partial(seconds_per_detach, tensor, calls),
            rounds,
        )
        report(name, shim, reference, "x.detach()", target=1.5)


if __name__ == "__main__":
    main()
