"""Cross-entropy from (P, V) logits (src/kernels/triton/cross_entropy.py) under Triton's interpreter,
against PyTorch in float64 on the same values: the loss sum (torch's cross_entropy, reduction sum,
ignore_index -100), the correct count (argmax == label, ties to the first index as torch.argmax)
and the logits' gradient times the upstream g (autograd), for fp32 and bf16 logits, with V not a
multiple of the block (several blocks per row, the last partial), ignored rows, ties across and
within blocks. Tolerances: the loss within 1e-5 relative (fp32 sums of exp in either dtype, the
bf16 values read exactly); the gradient in fp32 within 1e-6, in bf16 within one bf16 rounding.
"""
import unittest

import torch
import torch.nn.functional as F

from kernel_test_util import assert_close

import cross_entropy as ce  # noqa: E402

BLOCK_V = 256  # four blocks for V = 1000 (the build compiles 4096)


def fused(logits, labels, g):
    P, V = logits.shape
    loss, correct, lse = torch.empty(P), torch.empty(P), torch.empty(P)
    ce.cross_entropy_fwd[(P,)](logits, labels, loss, correct, lse, V, logits.stride(0), BLOCK_V=BLOCK_V)
    dx = torch.empty_like(logits)
    ce.cross_entropy_bwd[(P,)](logits, labels, lse, torch.tensor([g], dtype=torch.float32), dx, V,
                               logits.stride(0), dx.stride(0), BLOCK_V=BLOCK_V)
    return loss.sum(), correct.sum(), dx, loss, lse


def reference(logits, labels, g):
    x = logits.double().requires_grad_()
    loss = F.cross_entropy(x, labels, reduction="sum", ignore_index=-100)
    (loss * g).backward()
    valid = labels >= 0
    correct = ((x.detach().argmax(-1) == labels) & valid).sum()
    return loss.detach(), correct, x.grad


class CrossEntropy(unittest.TestCase):
    def logits(self, P, V, dtype):
        torch.manual_seed(2)
        return (3 * torch.randn(P, V)).to(dtype)

    def check(self, dtype, grad_rtol):
        P, V, g = 7, 1000, 0.37
        x = self.logits(P, V, dtype)
        labels = torch.randint(0, V, (P,))
        labels[3] = -100  # ignored
        labels[5] = int(x[5].float().argmax())  # certainly correct
        loss, correct, dx, _, _ = fused(x, labels, g)
        want_loss, want_correct, want_dx = reference(x, labels, g)
        assert_close(self, f"{dtype} loss sum", loss, want_loss, 0, 1e-5)
        self.assertEqual(int(correct), int(want_correct))
        self.assertGreaterEqual(int(correct), 1)
        self.assertTrue(torch.equal(dx[3], torch.zeros(V, dtype=dtype)), "an ignored row has no gradient")
        assert_close(self, f"{dtype} dlogits", dx, want_dx, 1e-7, grad_rtol)

    def test_fp32(self):
        self.check(torch.float32, 1e-5)

    def test_bf16(self):
        self.check(torch.bfloat16, 2 ** -7)

    def test_ties_go_to_the_first_index_as_torch_argmax(self):
        P, V = 4, 1000
        x = torch.zeros(P, V)
        x[0, 600] = x[0, 10] = 5.0   # across blocks (10 in the first, 600 in the third)
        x[1, 30] = x[1, 20] = 5.0    # within a block
        x[2, 999] = 5.0              # the last, partial block
        x[3, 700] = x[3, 900] = 5.0
        labels = torch.tensor([10, 30, 999, 700])
        _, correct, _, loss, _ = fused(x, labels, 1.0)
        self.assertEqual(x.argmax(-1).tolist(), [10, 20, 999, 700])
        self.assertEqual(int(correct), 3)  # row 1's label is the later of two maxima: wrong, as for torch
        want = F.cross_entropy(x.double(), labels, reduction="none")
        assert_close(self, "per-row loss", loss, want, 0, 1e-6)

    def test_large_logits_do_not_overflow(self):  # the online maximum keeps exp() <= 1
        x = torch.tensor([[1000.0, 999.0, -1000.0] + [0.0] * 300])
        labels = torch.tensor([1])
        _, _, _, loss, lse = fused(x, labels, 1.0)
        assert_close(self, "loss", loss, F.cross_entropy(x.double(), labels, reduction="none"), 0, 1e-6)
        assert_close(self, "lse", lse, torch.logsumexp(x.double(), -1), 0, 1e-7)


if __name__ == "__main__":
    unittest.main(verbosity=1)
