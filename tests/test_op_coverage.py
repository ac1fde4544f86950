"""docs/op-coverage.md is what `python -m codegen.op_coverage` writes for this tree, and the
present count never drops below the committed one."""
import re

from codegen import op_coverage

import torchlean


def test_committed_coverage_file_is_current():
    text, _ = op_coverage.render(torchlean)
    committed = op_coverage.OUTPUT.read_text()
    assert committed == text, "docs/op-coverage.md is stale: run `make op-coverage`"


def test_present_count_does_not_drop():
    committed = op_coverage.OUTPUT.read_text()
    old = int(re.search(r"^(\d+) of (\d+) present", committed, re.M).group(1))
    _, now = op_coverage.render(torchlean)
    assert now >= old
    assert len(op_coverage.op_names()) == 614


def test_family_of_names():
    assert op_coverage.family("nn.functional.glu") == "nn.functional"
    assert op_coverage.family("signal.windows.hann") == "signal.windows"
    assert op_coverage.family("linalg.vector_norm") == "linalg"
    assert op_coverage.family("masked_fill") == "core"
    assert op_coverage.is_present(torchlean, "nn.functional.relu")
    assert op_coverage.is_present(torchlean, "mT")
    assert not op_coverage.is_present(torchlean, "torch.ops.aten._safe_softmax.default")


def test_inplace_only_names_count_through_their_method():
    """uniform, exponential, ... exist in PyTorch only as Tensor.uniform_, ...: present through
    that method, and only for the listed names (no blanket name + '_' rule)."""
    assert op_coverage.INPLACE_ONLY == {"uniform", "exponential", "cauchy", "log_normal",
                                        "geometric"}
    for name in op_coverage.INPLACE_ONLY:
        assert name in op_coverage.op_names()
        assert op_coverage.is_present(torchlean, name)
        assert not hasattr(torchlean, name) and not hasattr(torchlean.Tensor, name)

    class Bare:        # without the method the name is missing; other names need no '_'
        class Tensor:
            def exponential(self):
                pass

            def frobnicate_(self):
                pass
    assert not op_coverage.is_present(Bare, "exponential")
    assert not op_coverage.is_present(Bare, "frobnicate")
