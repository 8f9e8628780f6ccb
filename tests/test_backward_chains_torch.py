"""NG003 through chains of calls (projects/backward_through_calls/train/chains.py): each function runs
one backward (the others are helpers they call); `check` reports exactly those that raise under torch."""
from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from lint_nograd import cli  # noqa: E402

PROJECT = Path(__file__).parent / "fixtures" / "projects" / "backward_through_calls"


def test_reported_exactly_where_backward_raises(capsys, monkeypatch):
    monkeypatch.chdir(PROJECT)
    cli.main(["check", "--no-cache", "--output-format", "json", "train/chains.py"])
    rows = {finding["location"]["row"] for finding in json.loads(capsys.readouterr().out)
            if finding["code"] == "NG003"}
    functions = [node for node in ast.parse((PROJECT / "train" / "chains.py").read_text()).body  # (not its helpers)
                 if isinstance(node, ast.FunctionDef) and [a.arg for a in node.args.args[:2]] == ["model", "batch"]]
    reported = {node.name for node in functions if any(node.lineno <= row <= node.end_lineno for row in rows)}
    monkeypatch.syspath_prepend(str(PROJECT))
    from train import chains
    try:
        raised = set()
        for node in functions:
            try:
                getattr(chains, node.name)(torch.nn.Linear(3, 1), torch.ones(2, 3, requires_grad=True))
            except RuntimeError as error:
                assert "does not require grad" in str(error)
                raised.add(node.name)
    finally:
        for name in [name for name in sys.modules if name == "train" or name.startswith("train.")]:
            del sys.modules[name]
    assert reported == raised == {"direct", "through_a_call", "through_a_name", "through_a_method", "arithmetic_on_a_name",
                                  "arithmetic_in_a_return", "torch_function_of_it", "computed_in_the_region",
                                  "saliency_under_no_grad", "saliency_under_inference", "averaged_in_a_list",
                                  "through_a_held_object", "with_labels_made_here", "unpacked_from_a_tuple",
                                  "through_a_method_given_made_values", "saliency_unless_training", "top_score",
                                  "first_output", "top_values", "through_a_plain_helper", "through_the_call_form",
                                  "with_labels_given", "through_a_helper_with_a_region", "first_of_a_pair", "after_a_loop"}
