"""Residual + dropout + LayerNorm (src/kernels/triton/layer_norm.py) under Triton's interpreter,
against PyTorch: the forward's z, y, mean and rstd, and every gradient (x, residual, gamma, beta, z's
own), in fp32 and bf16, at odd sizes (H not a power of two, a last program with fewer rows), with
and without dropout; the dropout mask's rate, determinism and offset arithmetic.

The reference runs in float64 on the same input values with the kernel's own keep mask
(dropout_keep_mask): z = r + keep x / (1 - p) against the stored z, then torch's layer_norm and
autograd from the stored z (the kernel normalizes z as stored, rounded to its dtype). Tolerances: fp32
1e-5 absolute + 1e-5 relative (the kernel sums in fp32); bf16 2e-2 + 2e-2 (one bf16 rounding of
each output, at most 2^-7 relative as the interpreter truncates, amplified by rstd a few times).
"""
import unittest

import torch
import torch.nn.functional as F

from kernel_test_util import assert_close, rng_state

import triton  # noqa: E402  (after kernel_test_util: the interpreter is on)
import layer_norm as ln  # noqa: E402

TOL = {torch.float32: (1e-5, 1e-5), torch.bfloat16: (2e-2, 2e-2)}


def keep_mask(n, p, seed, offset, offset_add=0):
    keep = torch.empty(n, dtype=torch.uint8)
    s, o = rng_state(seed, offset)
    ln.dropout_keep_mask[(triton.cdiv(n, 4096),)](s, o, offset_add, keep, n, p, BLOCK=4096)
    return keep.bool()


def fused_forward(x, r, w, b, p, eps, seed, offset):
    M, H = x.shape
    z, y = torch.empty_like(x), torch.empty_like(x)
    mean, rstd = torch.empty(M), torch.empty(M)
    used = torch.zeros(2, dtype=torch.int64)
    s, o = rng_state(seed, offset)
    rr = r if r is not None else x
    ln.residual_dropout_layer_norm_fwd[(M,)](
        x, rr, w, b, z, y, mean, rstd, s, o, used, 0, H, x.stride(0), rr.stride(0), z.stride(0), y.stride(0),
        p, eps, int(r is not None), int(p > 0), BLOCK_H=triton.next_power_of_2(H))
    return z, y, mean, rstd, used


def fused_backward(dy, dz_in, z, w, mean, rstd, used, p, programs):
    M, H = z.shape
    dr, dx = torch.empty_like(z), torch.empty_like(z)
    dw, db = torch.empty(programs, H), torch.empty(programs, H)
    rows = triton.cdiv(M, programs)
    dzi = dz_in if dz_in is not None else dy
    ln.residual_dropout_layer_norm_bwd[(programs,)](
        dy, dzi, z, w, mean, rstd, used, dr, dx, dw, db, M, H, rows, dy.stride(0), dzi.stride(0), z.stride(0),
        dr.stride(0), dx.stride(0), p, int(dz_in is not None), int(p > 0), 1, BLOCK_H=triton.next_power_of_2(H))
    return dr, (dx if p > 0 else dr), dw.sum(0), db.sum(0)


def reference(x, r, w, b, p, eps, keep, dy, dz_in, z_stored):
    """In float64: z = r + keep x / (1 - p); then, from the kernel's stored z (the kernel normalizes
    z as stored, which the first check compares with z), y, mean, rstd and the gradients of
    sum(y dy) + sum(z dz_in) for x, r (through z), gamma and beta."""
    scale = keep.double() / (1 - p) if p > 0 else 1.0
    z = x.double() * scale + (r.double() if r is not None else 0.0)
    zs = z_stored.detach().double().requires_grad_()
    wd, bd = (t.detach().double().requires_grad_() for t in (w, b))
    y = F.layer_norm(zs, (x.shape[1],), wd, bd, eps)
    loss = (y * dy.double()).sum() + ((zs * dz_in.double()).sum() if dz_in is not None else 0)
    loss.backward()
    var, mean = torch.var_mean(zs.detach(), dim=1, unbiased=False)
    return dict(z=z, y=y.detach(), mean=mean, rstd=(var + eps).rsqrt(), dx=zs.grad * scale, dr=zs.grad,
                dw=wd.grad, db=bd.grad)


class ResidualDropoutLayerNorm(unittest.TestCase):
    def check(self, M, H, dtype, p, residual=True, dz=False, programs=3, seed=1234, offset=77):
        x = torch.randn(M, H).to(dtype)
        r = torch.randn(M, H).to(dtype) if residual else None
        w = (1 + 0.5 * torch.randn(H)).to(dtype)
        b = (0.1 * torch.randn(H)).to(dtype)
        dy = torch.randn(M, H).to(dtype)
        dz_in = torch.randn(M, H).to(dtype) if dz else None
        eps = 1e-12 if dtype == torch.float32 else 1e-5
        keep = keep_mask(M * H, p, seed, offset).view(M, H) if p > 0 else None
        z, y, mean, rstd, used = fused_forward(x, r, w, b, p, eps, seed, offset)
        dr, dx, dw, db = fused_backward(dy, dz_in, z, w, mean, rstd, used, p, programs)
        want = reference(x, r, w, b, p, eps, keep, dy, dz_in, z)
        atol, rtol = TOL[dtype]
        tag = f"M={M} H={H} {dtype} p={p}"
        # z: r + keep x / (1 - p) rounded to the dtype: fp32 within a few fp32 roundings of inputs ~1;
        # bf16 within one bf16 ulp (2^-7 relative), as the interpreter rounds fp32 -> bf16 toward zero
        # where the GPU rounds to nearest even
        assert_close(self, f"{tag} z", z, want["z"], 1e-6 if dtype == torch.float32 else 0, 1e-6 if dtype == torch.float32 else 2 ** -7)
        assert_close(self, f"{tag} mean", mean, want["mean"], 1e-5, 1e-5)
        assert_close(self, f"{tag} rstd", rstd, want["rstd"], 1e-4, 1e-5)
        assert_close(self, f"{tag} y", y, want["y"], atol, rtol)
        assert_close(self, f"{tag} dx", dx, want["dx"], atol, rtol)
        if residual:
            assert_close(self, f"{tag} dr", dr, want["dr"], atol, rtol)
        # gamma/beta: sums over M rows of fp32 products of the same values
        assert_close(self, f"{tag} dgamma", dw, want["dw"], 1e-4 * M, 1e-4)
        assert_close(self, f"{tag} dbeta", db, want["db"], 1e-4 * M, 1e-4)
        if p > 0:
            self.assertEqual(used.tolist(), [seed, offset], "RNG_USED must hold the (seed, offset) drawn from")

    def test_fp32_no_dropout(self):
        self.check(7, 100, torch.float32, 0.0)

    def test_fp32_dropout(self):
        self.check(9, 100, torch.float32, 0.1)

    def test_fp32_dropout_with_z_gradient_and_one_row_per_program(self):  # pre-LN: z is the residual stream
        self.check(5, 64, torch.float32, 0.3, dz=True, programs=5)

    def test_fp32_no_residual_power_of_two(self):
        self.check(4, 128, torch.float32, 0.1, residual=False, programs=1)

    def test_bf16_no_dropout(self):
        self.check(7, 100, torch.bfloat16, 0.0)

    def test_bf16_dropout_with_z_gradient(self):
        self.check(11, 96, torch.bfloat16, 0.1, dz=True, programs=4)

    def test_single_feature_row_is_beta(self):  # H = 1: z - mean = 0, y = beta
        x = torch.randn(3, 1)
        w, b = torch.ones(1), torch.full((1,), 0.25)
        _, y, _, _, _ = fused_forward(x, None, w, b, 0.0, 1e-5, 0, 0)
        self.assertTrue(torch.equal(y, torch.full((3, 1), 0.25)))


class DropoutMask(unittest.TestCase):
    def test_rate_is_one_minus_p(self):
        n = 1 << 16
        for p in (0.1, 0.5):
            kept = keep_mask(n, p, seed=42, offset=0).double().mean().item()
            sigma = ((1 - p) * p / n) ** 0.5
            self.assertLess(abs(kept - (1 - p)), 5 * sigma, f"p={p}: kept fraction {kept}")

    def test_same_seed_and_offset_give_the_same_mask_others_do_not(self):
        a = keep_mask(4096, 0.5, seed=7, offset=100)
        self.assertTrue(torch.equal(a, keep_mask(4096, 0.5, seed=7, offset=100)))
        self.assertFalse(torch.equal(a, keep_mask(4096, 0.5, seed=8, offset=100)))
        self.assertFalse(torch.equal(a, keep_mask(4096, 0.5, seed=7, offset=4196)))

    def test_offset_add_shifts_the_stream(self):  # element i at offset o + k is element i + k at o
        whole = keep_mask(3000, 0.5, seed=3, offset=1000)
        self.assertTrue(torch.equal(keep_mask(2000, 0.5, seed=3, offset=1000, offset_add=1000), whole[1000:]))
        self.assertTrue(torch.equal(keep_mask(2000, 0.5, seed=3, offset=0, offset_add=2000), whole[1000:]))

    def test_offsets_past_two_to_the_32_are_their_own_stream(self):  # the generator's offset is 64-bit
        low = keep_mask(4096, 0.5, seed=5, offset=17)
        self.assertFalse(torch.equal(low, keep_mask(4096, 0.5, seed=5, offset=17 + (1 << 32))))

    def test_forward_drops_exactly_the_mask(self):  # residual 0, LayerNorm skipped: z = keep x / (1 - p)
        M, H, p = 6, 50, 0.25
        x = torch.randn(M, H)
        z, _, _, _, _ = fused_forward(x, None, torch.ones(H), torch.zeros(H), p, 1e-5, 9, 123)
        keep = keep_mask(M * H, p, 9, 123).view(M, H)
        self.assertTrue(torch.equal(z == 0, ~keep))
        assert_close(self, "kept values", z[keep], x[keep] / (1 - p), 0, 1e-6)


if __name__ == "__main__":
    unittest.main(verbosity=1)
