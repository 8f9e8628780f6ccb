"""How each torch release treats grad-disabling regions: one table, plain data, no torch import.

`behaviour("2.13.0+cpu")` gives the row for a release. Rows were measured on CPU, each on the
release its `measured_on` names (tests/torch_behaviour.py measures them, and the test suite
checks the row of the release it runs on); a release between two rows behaves as the older
row as far as is known. The test suite reads its expectations here, and so may the linter's
messages ("this release returns zeros for grad under inference_mode").
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import ClassVar, Literal, Mapping

__all__ = [
    "FUNCTIONAL", "Behaviour", "RELEASES", "SUPPORTED", "TESTED", "TRANSFORMS", "assumed_row", "behaviour",
    "default_target", "installed_torch", "parse_version", "target", "until",
]  # fmt: skip

TRANSFORMS = ("grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "linearize")
FORWARD_MODE = ("jvp", "jacfwd", "hessian", "linearize")
# torch.autograd.functional's entry points: reverse mode built on torch.autograd.grad, no level of their own
FUNCTIONAL = ("jacobian", "hessian", "vjp", "jvp", "vhp", "hvp")

Outcome = Literal["correct", "zeros", "raises"]
"""What a transform of x**3 gives when called inside a region: the derivative, zeros or an error."""


@dataclass(frozen=True)
class Behaviour:
    """What one torch release does with grad-disabling regions."""

    TRACERS: ClassVar[tuple[str, ...]] = (
        "symbolic_trace", "jit_trace", "make_fx", "make_fx_pre_dispatch", "export", "compile",
    )  # fmt: skip

    release: str
    """The first release of the row, "2.13"; it holds up to the next row."""
    measured_on: str
    """The release the row was measured on, "2.13.0"."""
    outer_no_grad: Mapping[str, Outcome]
    """transform -> what `torch.func.<transform>` gives when called inside `no_grad()`."""
    outer_inference_mode: Mapping[str, Outcome]
    """transform -> the same inside `inference_mode()` (pytorch issue 177318)."""
    inner_region_forward_mode: Literal["respected", "ignored"]
    """A `no_grad` region inside the function, under `jvp` / `jacfwd` (pytorch issue 78961)."""
    inner_region_reverse_mode: Literal["respected", "ignored"]
    """The same under `grad` / `vjp` / `jacrev`."""
    keeps_region: Mapping[str, bool]
    """tracer -> whether the traced function keeps a `no_grad` region inside it
    (`symbolic_trace`, `jit_trace` and `make_fx` drop it: pytorch issue 62043)."""
    make_fx_keeps_detach: bool
    """Whether `make_fx` (default arguments) keeps `.detach()` as a cut (pytorch PR 186845)."""
    compiles_func_transform: Mapping[str, bool] = field(default_factory=dict)
    """transform -> whether `torch.compile(torch.func.<transform>(f), fullgraph=True)` runs
    for an `f` holding a `no_grad` region."""
    functional_inference_mode: Mapping[str, Outcome] = field(default_factory=dict)
    """function -> what `torch.autograd.functional.<function>` gives inside `inference_mode()`, also
    with `enable_grad()` around the call: it opens no level and never leaves inference mode, so
    every input is an inference tensor that requires no grad and the derivative is zeros."""
    set_grad_enabled_decorator: Literal["function", "global"] = "function"
    """`@torch.set_grad_enabled(False)` on a def: grad off inside the function, or from the
    definition on, for the whole program."""


def _all(outcome: Outcome) -> Mapping[str, Outcome]:
    return MappingProxyType(dict.fromkeys(TRANSFORMS, outcome))


def _each(**values) -> Mapping:
    assert set(values) in (set(TRANSFORMS), set(Behaviour.TRACERS)), values
    return MappingProxyType(values)


_NO_GRAD = _all("correct")  # torch.func ignores an outer no_grad on every release
_DROP_REGIONS = _each(  # pytorch issue 62043
    symbolic_trace=False, jit_trace=False, make_fx=False, make_fx_pre_dispatch=True, export=True,
    compile=True,
)
_BEFORE_FIX = _each(  # inference_mode around the call, before torch 2.12.0 (pytorch issue 177318)
    grad="zeros", grad_and_value="zeros", vjp="zeros", jvp="zeros", jacrev="zeros",
    jacfwd="raises", hessian="raises", linearize="zeros",
)  # jacfwd / hessian: "Batching rule not implemented for aten::_make_dual"
_AFTER_FIX = _each(  # inference_mode is left on entry (2.12.0), but not by linearize
    grad="correct", grad_and_value="correct", vjp="correct", jvp="correct", jacrev="correct",
    jacfwd="correct", hessian="correct", linearize="zeros",
)


# measured on 2.5.1 and 2.13.0 (tests/torch_behaviour.py checks each release CI runs); the other rows share the implementation
_FUNCTIONAL_ZEROS = MappingProxyType(dict.fromkeys(FUNCTIONAL, "zeros"))


def _compiles(*failing: str) -> Mapping[str, bool]:
    # torch.func.linearize is never traced by Dynamo (disallow_in_graph)
    return MappingProxyType({t: t not in failing and t != "linearize" for t in TRANSFORMS})


_2_1 = Behaviour(
    release="2.1",
    measured_on="2.1.2",
    outer_no_grad=_NO_GRAD,
    # linearize: AttributeError "'GraphModule' object has no attribute 'submod_1'"
    outer_inference_mode=MappingProxyType({**_BEFORE_FIX, "linearize": "raises"}),
    inner_region_forward_mode="ignored",
    inner_region_reverse_mode="respected",
    keeps_region=MappingProxyType({**_DROP_REGIONS, "export": False}),
    make_fx_keeps_detach=True,
    compiles_func_transform=_compiles(*TRANSFORMS),  # capture of func transforms is off
    functional_inference_mode=_FUNCTIONAL_ZEROS,
    set_grad_enabled_decorator="global",
)
# each row below says what changed since the row above it
_2_4 = replace(
    _2_1,
    release="2.4",
    measured_on="2.4.1",
    keeps_region=_DROP_REGIONS,
    # AOTAutograd: "Cannot access storage of TensorWrapper"
    compiles_func_transform=_compiles("jacrev", "jacfwd", "hessian"),
    set_grad_enabled_decorator="function",
)
_2_5 = replace(
    _2_4,
    release="2.5",
    measured_on="2.5.1",
    outer_inference_mode=_BEFORE_FIX,
    compiles_func_transform=_compiles("jacfwd", "hessian"),
)
_2_11 = replace(_2_5, release="2.11", measured_on="2.11.0", compiles_func_transform=_compiles())
_2_12 = replace(_2_11, release="2.12", measured_on="2.12.1", outer_inference_mode=_AFTER_FIX)
_2_13 = replace(_2_12, release="2.13", measured_on="2.13.0")
# make_fx records detach as aten.alias (pytorch PR 186845)
_2_14 = replace(_2_13, release="2.14", measured_on="2.14.1", make_fx_keeps_detach=False)
_2_15 = replace(_2_14, release="2.15", measured_on="2.15.0")

RELEASES: tuple[Behaviour, ...] = (_2_1, _2_4, _2_5, _2_11, _2_12, _2_13, _2_14, _2_15)

SUPPORTED = "2.5.1"
"""The oldest release lint_nograd's runtime shim supports; pyproject.toml says the same. There is
no upper bound (a library that caps torch forces its users to downgrade): a newer release is
treated as the newest row."""
TESTED = ("2.5.1", "2.13.0", "2.15.0")
"""The releases CI runs the tests on."""


def parse_version(version: str) -> tuple[int, int, int]:
    """(major, minor, patch) of a torch version string: "2.13.0+cpu", "2.6.0rc1", "2.14"."""
    match = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", version)
    if match is None:
        raise ValueError(f"not a torch version: {version!r}")
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def behaviour(version: str) -> Behaviour:
    """The row of the table for a torch release: the newest row not newer than it."""
    wanted = parse_version(version)
    rows = [row for row in RELEASES if parse_version(row.release) <= wanted]
    if not rows:
        raise ValueError(f"torch {version} is older than the table, which starts at 2.1")
    return rows[-1]


def assumed_row(version: str) -> str | None:
    """For a release newer than the newest row ("2.16"), the release of that row, which stands for
    it ("2.15"); None for a release the table covers."""
    newest = RELEASES[-1]
    return newest.release if parse_version(version)[:2] > parse_version(newest.release)[:2] else None


# -- the release a run reports for: `torch-version`, else the torch installed, else the newest row --

_TARGET = re.compile(r"(\d+)\.(\d+)(?:\.\d+)?")


def target(text: object) -> str:
    """The release a user names ("2.4", "2.13.1") as "major.minor"; a ValueError says what is wrong."""
    if not isinstance(text, str):  # a TOML number: 2.10 would read as 2.1
        raise ValueError(f'must be a string, such as "2.4", not {text!r}')
    match = _TARGET.fullmatch(text.strip())
    if match is None:
        raise ValueError(f'must be a torch release such as "2.4", not {text!r}')
    release = f"{int(match.group(1))}.{int(match.group(2))}"
    if parse_version(release) < parse_version(RELEASES[0].release):
        raise ValueError(f"{text.strip()} is older than the releases lint-nograd knows, "
                         f"{RELEASES[0].release} and newer")
    return release


def installed_torch() -> str | None:
    """The version of the torch installed next to this package (never imported), from the name of
    its metadata folder, `torch-2.13.0+cpu.dist-info`, looked for along the import path as
    importlib.metadata looks (which costs more to import than the rest of a warm run)."""
    for folder in sys.path:
        try:
            names = sorted(os.listdir(folder or "."))
        except OSError:
            continue
        for name in names:
            if name.lower().startswith("torch-") and name.endswith((".dist-info", ".egg-info")):
                return name[len("torch-"):].rpartition(".")[0].partition("-")[0]
    return None


@functools.lru_cache(maxsize=None)
def default_target() -> str:
    """The release to report for when none is set: the torch installed, else the newest row."""
    installed = installed_torch()
    try:
        return target(".".join(map(str, parse_version(installed)[:2]))) if installed else RELEASES[-1].release
    except ValueError:  # an unreadable version, or one older than the table
        return RELEASES[-1].release


def until(version: str, outcome: Callable[[Behaviour], object]) -> tuple[object, str] | None:
    """What the rows before the release of `version` gave for `outcome`, and the release that
    changed it to what `version` gives: ("zeros", "2.12"); None when it never changed."""
    rows = [row for row in RELEASES if parse_version(row.release) <= parse_version(version)]
    for older, newer in zip(reversed(rows[:-1]), reversed(rows)):
        if outcome(older) != outcome(newer):
            return outcome(older), newer.release
    return None
