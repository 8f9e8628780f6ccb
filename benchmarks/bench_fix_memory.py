"""What `lint-nograd fix` costs at run time: a teacher model's forward in a `no_grad` block.

    python benchmarks/bench_fix_memory.py [--rounds 7] [--width 1024] [--depth 8] [--batch 1024]

The original function runs an MLP (parameters requiring grad, as during training) on a batch
inside `with torch.no_grad():`, as a distillation target. Three variants:
- original: `with torch.no_grad(): features = model(x)`;
- rewritten: what `lint-nograd fix --unsafe-fixes` writes by default (the call is into a model the
  analysis cannot see, hence unsafe): the region stays and its value is cut inside it,
  `with torch.no_grad(): features = stop_gradient(model(x))`. Target: peak tensor memory at most
  1.05x the original's;
- short form: the region removed, `features = stop_gradient(model(x))`, which the fix writes only
  for light tensor operations. Autograd then records the forward's graph and keeps the
  activations it saves for backward alive until the cut: same values, more peak memory.

Each variant runs in a fresh process of its own, so one cannot inherit the other's allocator
state, and reports:
- peak tensor memory: the largest sum of live CPU tensor bytes during one call, from the
  allocation and free events `torch.profiler` records with `profile_memory=True` (the CPU
  allocator reports every tensor allocation there). This is the tensor memory itself.
- peak RSS growth: how far `ru_maxrss` rises during the first call over what the process held
  before it (tensors plus allocator and one-time overheads; coarser, but measured by the OS).
- time per call: the median of `--rounds` calls after a warm-up, without the profiler.
One intra-op thread keeps the timings steady.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

ORIGINAL = '''\
import torch
from torch.func import grad


def embed(model, x):
    with torch.no_grad():
        features = model(x)
    return features


def loss(x, model):
    return embed(model, x).sum()


grad(loss)
'''


VARIANTS = ("original", "rewritten", "short form")


def variants() -> dict[str, str]:
    from lint_nograd.fix.rewrite import FixSettings, fix_source

    rewritten = fix_source(ORIGINAL.encode(), settings=FixSettings(unsafe_fixes=True)).text
    kept = "    with torch.no_grad():\n        features = stop_gradient(model(x))\n"
    assert kept in rewritten, rewritten
    short = rewritten.replace(kept, "    features = stop_gradient(model(x))\n")
    return {"original": ORIGINAL, "rewritten": rewritten, "short form": short}


def max_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # Linux reports KiB


def peak_tensor_bytes(call) -> int:
    """The highest total of live tensor bytes during `call()`, over what was live before it."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        call()
    events = sorted((event.start_ns(), event.nbytes()) for event in prof.profiler.kineto_results.events()
                    if event.name() == "[memory]")
    live = peak = 0
    for _, nbytes in events:
        live += nbytes
        peak = max(peak, live)
    return peak


def child(variant: str, options: argparse.Namespace) -> dict:
    import torch
    from torch import nn

    torch.set_num_threads(1)
    torch.manual_seed(0)
    layers = []
    for _ in range(options.depth):
        layers += [nn.Linear(options.width, options.width), nn.ReLU()]
    model = nn.Sequential(*layers)
    x = torch.randn(options.batch, options.width)
    namespace: dict = {}
    exec(compile(variants()[variant], f"<{variant}>", "exec"), namespace)
    embed = namespace["embed"]

    before = max_rss_bytes()
    features = embed(model, x)
    rss_growth = max_rss_bytes() - before
    del features

    tensor_peak = peak_tensor_bytes(lambda: embed(model, x))
    times = []
    for _ in range(options.rounds):
        start = time.perf_counter()
        embed(model, x)
        times.append(time.perf_counter() - start)
    check = float(embed(model, x).double().sum())
    return {"tensor_peak": tensor_peak, "rss_growth": rss_growth, "seconds": statistics.median(times),
            "checksum": check}


def run_child(variant: str, options: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, "--child", variant, "--rounds", str(options.rounds),
               "--width", str(options.width), "--depth", str(options.depth), "--batch", str(options.batch)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        print(json.dumps(child(options.child, options)))
        return

    import torch

    results = {variant: run_child(variant, options) for variant in VARIANTS}
    original = results["original"]
    assert all(result["checksum"] == original["checksum"] for result in results.values()), \
        "the variants computed different values"
    activation = options.batch * options.width * 4
    print(f"torch {torch.__version__}, 1 thread; MLP of {options.depth} x (Linear({options.width}, "
          f"{options.width}) + ReLU), parameters requiring grad, batch {options.batch} float32 "
          f"(one activation = {mib(activation)}); each variant in a fresh process")
    print("original:   with torch.no_grad(): features = model(x)")
    print("rewritten:  with torch.no_grad(): features = stop_gradient(model(x))   (the fix)")
    print("short form: features = stop_gradient(model(x))")
    print()
    rows = [
        ("peak tensor memory (torch.profiler)", "tensor_peak", mib),
        ("peak RSS growth, first call (ru_maxrss)", "rss_growth", mib),
        (f"time per call (median of {options.rounds})", "seconds", lambda seconds: f"{seconds * 1e3:.1f} ms"),
    ]
    print(f"{'':42}{'original':>12}{'rewritten':>12}{'ratio':>8}{'short form':>13}{'ratio':>8}")
    for name, key, show in rows:
        base = max(original[key], 1)
        cells = "".join(f"{show(results[v][key]):>{12 if v == 'rewritten' else 13}}{results[v][key] / base:>7.2f}x"
                        for v in ("rewritten", "short form"))
        print(f"{name:42}{show(original[key]):>12}{cells}")


if __name__ == "__main__":
    main()
