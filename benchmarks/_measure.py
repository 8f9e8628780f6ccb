"""Run whole commands side by side, interleaved, and report wall time and the peak memory of the
whole process tree (the sum of the resident memory of a command and its children, sampled)."""
from __future__ import annotations

import os
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Figures:
    walls: list[float] = field(default_factory=list)
    peaks_mib: list[float] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    @property
    def wall(self) -> float:
        return statistics.median(self.walls)

    @property
    def peak_mib(self) -> float:
        return statistics.median(self.peaks_mib)


def _tree_rss_kib(root: int) -> int:
    """The resident memory of `root` and every process below it, from /proc (Linux)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        pid, parent = int(entry), int(fields.get("PPid", "0"))
        children.setdefault(parent, []).append(pid)
        rss[pid] = int(fields.get("VmRSS", "0 kB").split()[0])
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack += children.get(pid, [])
    return total


def run(command: list[str], cwd: Path | None = None, sample_memory: bool = True) -> tuple[float, float, str]:
    """Wall seconds, peak MiB of the process tree, and standard output of one run."""
    # Python may cache bytecode, as it does for an installed package (some shells turn that off)
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    start = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=environment, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    peak = 0
    done = threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss_kib(process.pid))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    if sample_memory:
        sampler.start()
    output, _ = process.communicate()
    wall = time.perf_counter() - start
    done.set()
    if sample_memory:
        sampler.join()
    return wall, peak / 1024, output


def side_by_side(commands: dict[str, list[str]], rounds: int, cwd: Path | None = None,
                 sample_memory: bool = True, before: dict | None = None) -> dict[str, Figures]:
    """Each command once per round, in turn (A B C A B C ...), after one warm-up round;
    `before[name]()`, untimed, before each run of the command `name`."""
    figures = {name: Figures() for name in commands}
    for round_number in range(rounds + 1):
        for name, command in commands.items():
            if before and name in before:
                before[name]()
            wall, peak, output = run(command, cwd, sample_memory)
            if round_number:  # the first round warms the file cache and the interpreters
                figures[name].walls.append(wall)
                figures[name].peaks_mib.append(peak)
                figures[name].outputs.append(output)
    return figures


def ratio_line(label: str, a: float, b: float, target: str, unit: str = "s") -> str:
    return f"{label:<52} {a / b:6.2f}x   ({a:.3f} {unit} vs {b:.3f} {unit})   target {target}"
