"""PyTorch's Core ATen opset: enumerated from torch.ops.aten (not a hand list), and
every covered overload that PyTorch's own OpInfo samples reach matches eager on the
interpreter and the compiled path (minic.verify.opinfo)."""
from __future__ import annotations

from minic.frontend.core_aten import EXCLUDED, core_overloads, coverage
import torch

from minic.verify.opinfo import MAX_SAMPLES, Case, cases, run, run_batch, sweep, verdicts
from tests.cli_helpers import cli


def test_core_aten_is_enumerated_from_torch():
    ops = core_overloads()
    assert len(ops) == 193 and len({op.overloadpacket for op in ops}) == 164     # torch 2.13, every schema
    c = coverage()
    assert c.total == 193 and len(c.covered) >= 140
    assert set(c.excluded) <= {label for label, _, _ in EXCLUDED}
    assert "aten.rand.default" in c.excluded["random"]


def test_ops_torch_prints_covered_total_and_each_missing_overload(capsys):
    c = coverage()
    code, out, _ = cli(capsys, "ops", "--torch")
    assert code == 0
    assert f"{len(c.covered)}/{len(c.covered) + len(c.missing)} covered" in out
    assert all(f"  {name}\n" in out for name in c.missing)
    assert "left out: random" in out


def test_covered_ops_match_eager_on_opinfo_samples(tmp_path):
    c = coverage()
    torch.manual_seed(0)                        # the fixed subset: OpInfo draws its samples' values
    todo = cases({name.split(".")[1] for name in c.covered})
    # 16 OpInfos per module: one export and one compile each (a case alone costs about as much).
    outcomes = [o for k in range(0, len(todo), 16) for o in run_batch(todo[k:k + 16], set(c.covered) | set(c.missing),
                                                                      tmp_path)]
    assert len(outcomes) == len(todo)
    wrong = [f"{o.case}: {o.detail}" for o in outcomes if o.result == "mismatch"]
    assert not wrong, wrong
    tested = set().union(*(o.reached for o in outcomes if o.result == "ok"))
    assert len(tested) >= 105, sorted(set(c.covered) - tested)
    # A refusal is one line naming the op (or the output taken from it) and the source line.
    refusals = [o.detail for o in outcomes if o.result == "refused"]
    assert all(d.split(" ")[0] in ("unsupported", "getitem") or d.startswith("aten.") for d in refusals), refusals
    assert all(".py:" in d and "\n" not in d for d in refusals), refusals


def test_cat_of_only_empty_1d_tensors_is_empty(tmp_path):
    # OpInfo cat's sample 4 (the full sweep found it): every tensor is f32[0], which cat skips,
    # so none was left to concatenate (an IndexError in the converter).
    from torch.testing._internal.opinfo.core import SampleInput
    c = coverage()
    sample = SampleInput([torch.zeros(0), torch.zeros(0)], kwargs={"dim": 0})
    outcome = run(Case("cat", torch.float32, [(torch.cat, sample)]), set(c.covered), tmp_path)
    assert outcome.result == "ok", outcome.detail
    assert "aten.cat.default" in outcome.reached


def test_the_full_sweep_counts_every_sample_of_an_opinfo(tmp_path):
    c = coverage()
    names = {name.split(".")[1] for name in c.covered}
    [report] = sweep(names, set(c.covered), tmp_path, only={"cat"})
    assert report.samples == len(report.outcomes) + sum(report.skipped.values()) > MAX_SAMPLES
    assert report.count("mismatch") == 0, [o.detail for o in report.outcomes if o.result == "mismatch"]
    assert verdicts([report]) == {"aten.cat.default": True}


def test_squeeze_of_a_scalar_is_the_scalar(tmp_path):
    # OpInfo squeeze's sample 7 and squeeze.multiple's sample 5 (found by the full sweep): a 0-d
    # tensor squeezed at dim 0 or -1, as torch allows (an IndexError in the converter).
    from torch.testing._internal.opinfo.core import SampleInput
    c = coverage()
    samples = [(torch.squeeze, SampleInput(torch.tensor(2.5), args=(0,))),
               (torch.squeeze, SampleInput(torch.tensor(-1.5), args=((-1,),)))]
    outcome = run(Case("squeeze", torch.float32, samples), set(c.covered), tmp_path)
    assert outcome.result == "ok", outcome.detail


def test_bicubic_grid_sample_with_border_padding_matches_eager(tmp_path):
    # OpInfo grid_sampler_2d samples 14 and 15 (found by the full sweep) were up to 0.46 off eager,
    # then refused: cubic pads each tap, not the coordinate (compose.grid_sample).
    from torch.testing._internal.opinfo.core import SampleInput
    torch.manual_seed(0)
    grid = torch.rand(1, 3, 4, 2) * 2.4 - 1.2
    sample = SampleInput(torch.randn(1, 2, 5, 6), args=(grid, 2, 1, False))
    outcome = run(Case("grid", torch.float32, [(torch.grid_sampler_2d, sample)]), set(coverage().covered), tmp_path)
    assert outcome.result == "ok", outcome
