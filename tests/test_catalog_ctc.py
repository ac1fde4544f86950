"""ctc_loss against a float64 NumPy CTC (alpha recursion written here), its gradient with
respect to log_probs by central differences, and the logits gradient through log_softmax
against torch (whose ctc backward folds in log_softmax's Jacobian; the logits gradients
agree)."""
import numpy as np
import pytest

import torchlean as tl
import torchlean.nn.functional as F
from catalog_check import check, rand, torch

T_, N_, C_ = 6, 3, 4
LOGITS = rand(T_, N_, C_)
TARGETS = np.array([[1, 2, 2], [3, 1, 0], [2, 0, 0]])
IN_LEN = np.array([6, 5, 4])
TGT_LEN = np.array([3, 2, 1])


def _log_softmax(a):
    m = a.max(-1, keepdims=True)
    return a - m - np.log(np.exp(a - m).sum(-1, keepdims=True))


def np_ctc(lp, targets, in_len, tgt_len, blank=0):
    """Per-sample negative log-likelihood (float64, log space, -inf for unreachable)."""
    out = []
    for i in range(lp.shape[1]):
        lab = [blank]
        for v in targets[i][:tgt_len[i]]:
            lab += [int(v), blank]
        alpha = np.full(len(lab), -np.inf)
        alpha[0] = lp[0, i, lab[0]]
        if len(lab) > 1:
            alpha[1] = lp[0, i, lab[1]]
        for t in range(1, in_len[i]):
            new = np.full(len(lab), -np.inf)
            for k in range(len(lab)):
                cands = [alpha[k]] + ([alpha[k - 1]] if k >= 1 else []) + \
                    ([alpha[k - 2]] if k >= 2 and lab[k] != blank and lab[k] != lab[k - 2]
                     else [])
                new[k] = np.logaddexp.reduce(cands) + lp[t, i, lab[k]]
            alpha = new
        ends = alpha[-1:] if len(lab) == 1 else alpha[-2:]
        out.append(-np.logaddexp.reduce(ends))
    return np.array(out)


LP = _log_softmax(LOGITS.astype(np.float64)).astype(np.float32)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
def test_loss_and_log_prob_gradient(reduction):
    def ref(lp):
        loss = np_ctc(lp, TARGETS, IN_LEN, TGT_LEN)
        if reduction == "none":
            return loss
        return loss.sum() if reduction == "sum" else (loss / TGT_LEN).mean()
    check(lambda lp: F.ctc_loss(lp, TARGETS, IN_LEN, TGT_LEN, reduction=reduction), ref, LP,
          rtol=2e-5, atol=2e-5, grad_tol=(3e-3, 3e-4))


def test_concatenated_targets_unbatched_and_blank():
    flat = np.concatenate([TARGETS[i, :k] for i, k in enumerate(TGT_LEN)])
    a = F.ctc_loss(tl.tensor(LP), flat, IN_LEN, TGT_LEN, reduction="none").numpy()
    np.testing.assert_allclose(a, np_ctc(LP.astype(np.float64), TARGETS, IN_LEN, TGT_LEN),
                               rtol=2e-5)
    one = F.ctc_loss(tl.tensor(LP[:, 0]), TARGETS[0], 6, 3, reduction="none")
    assert one.shape == ()
    np.testing.assert_allclose(one.item(), a[0], rtol=1e-6)
    shifted = np.where(TARGETS == 3, 0, TARGETS)        # labels 0..2 with blank 3
    b = F.ctc_loss(tl.tensor(LP), shifted, IN_LEN, TGT_LEN, blank=3, reduction="none").numpy()
    np.testing.assert_allclose(b, np_ctc(LP.astype(np.float64), shifted, IN_LEN, TGT_LEN, 3),
                               rtol=2e-5)


def test_impossible_alignment_is_inf_or_zero():
    lp = tl.tensor(LP[:2])
    args = (np.array([[1, 1, 1]] * 3), np.array([2, 2, 2]), np.array([3, 3, 3]))
    assert np.isinf(F.ctc_loss(lp, *args, reduction="none").numpy()).all()
    assert F.ctc_loss(lp, *args, reduction="sum", zero_infinity=True).item() == 0.0


@pytest.mark.skipif(torch is None, reason="torch is an extra reference")
def test_logits_gradient_matches_torch():
    x = tl.tensor(LOGITS, requires_grad=True)
    F.ctc_loss(x.log_softmax(-1), TARGETS, IN_LEN, TGT_LEN).backward()
    tx = torch.tensor(LOGITS, requires_grad=True)
    torch.nn.functional.ctc_loss(tx.log_softmax(-1), torch.tensor(TARGETS), torch.tensor(IN_LEN),
                                 torch.tensor(TGT_LEN)).backward()
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-4, atol=1e-6)


BAD = [
    (lambda: F.ctc_loss(tl.zeros(2, 3, 4, 5), TARGETS, IN_LEN, TGT_LEN), RuntimeError, "ctc_loss"),
    (lambda: F.ctc_loss(tl.tensor(LP), TARGETS, np.array([7, 1, 1]), TGT_LEN), RuntimeError,
     "ctc_loss"),
    (lambda: F.ctc_loss(tl.tensor(LP), TARGETS, IN_LEN, np.array([1, 1])), RuntimeError,
     "ctc_loss"),
    (lambda: F.ctc_loss(tl.tensor(LP), TARGETS, IN_LEN, TGT_LEN, blank=4), RuntimeError,
     "ctc_loss"),
    (lambda: F.ctc_loss(tl.tensor(LP), np.array([[0, 1, 1]] * 3), IN_LEN, TGT_LEN), RuntimeError,
     "ctc_loss"),
    (lambda: F.ctc_loss(tl.tensor(LP), TARGETS.astype(np.float32), IN_LEN, TGT_LEN), TypeError,
     "ctc_loss"),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_bad_input_names_the_op(i):
    fn, kind, name = BAD[i]
    with pytest.raises(kind, match=name):
        fn()
