"""Rotary of q and k on the packed QKV projection (src/kernels/triton/rotary.py) under Triton's
interpreter, against Hugging Face RoFormer's element-wise form (x cos_pos + rotate_half(x) sin_pos,
src/model/rotary.h) in float64: fp32 within 1e-6, bf16 within one bf16 rounding (2^-7 relative:
the interpreter truncates fp32 -> bf16 where the GPU rounds to nearest); the inverse rotation is
the backward (the gradient of the reference through autograd); odd sizes (3 heads of D = 6, 5
positions of a 9-row table, the v third of each packed row skipped).
"""
import math
import unittest

import torch

from kernel_test_util import assert_close

import triton  # noqa: E402
import rotary  # noqa: E402


def rotary_table(P, D, base=10000.0):
    """(P, D) float32: sin(t theta_i) in [0, D/2), cos in [D/2, D); theta_i = base^(-2i/D)."""
    pos = torch.arange(P, dtype=torch.float64)[:, None]
    angle = pos / torch.pow(base, 2.0 * torch.arange(D // 2, dtype=torch.float64) / D)
    return torch.cat([angle.sin(), angle.cos()], 1).float()


def hf_rotate(x, table):
    """x: (B, T, N, D) in float64; HF: x * cos_pos + rotate_half(x) * sin_pos."""
    T, D = x.shape[1], x.shape[-1]
    sin, cos = table[:T, : D // 2].double(), table[:T, D // 2:].double()
    sin_pos = torch.stack([sin, sin], -1).reshape(T, D)[None, :, None, :]
    cos_pos = torch.stack([cos, cos], -1).reshape(T, D)[None, :, None, :]
    rotate_half = torch.stack([-x[..., 1::2], x[..., 0::2]], -1).reshape_as(x)
    return x * cos_pos + rotate_half * sin_pos


def kernel_rotate(x, table, T, n_pairs, half_d, inverse, out_dtype):
    """x: (rows, row_stride) whose first 2 n_pairs features are q and k; returns (rows, 2 n_pairs)."""
    rows = x.shape[0]
    out = torch.empty(rows, 2 * n_pairs, dtype=out_dtype)
    rotary.rotary_qk[(rows,)](x, out, table, T, x.stride(0), n_pairs, half_d, table.stride(0), int(inverse),
                              BLOCK=triton.next_power_of_2(n_pairs))
    return out


class RotaryQK(unittest.TestCase):
    B, T, N, D, P = 2, 5, 3, 6, 9

    def packed(self, dtype):
        torch.manual_seed(1)
        return torch.randn(self.B, self.T, 3, self.N, self.D).to(dtype)  # the projection output

    def check(self, dtype, atol, rtol):
        B, T, N, D = self.B, self.T, self.N, self.D
        table = rotary_table(self.P, D)
        qkv = self.packed(dtype)
        out = kernel_rotate(qkv.view(B * T, 3 * N * D), table, T, N * D, D // 2, False, dtype).view(B, T, 2, N, D)
        for s, name in ((0, "q"), (1, "k")):
            assert_close(self, f"{dtype} {name}", out[:, :, s], hf_rotate(qkv[:, :, s].double(), table), atol, rtol)

    def test_fp32_matches_hugging_face_rotation(self):
        self.check(torch.float32, 1e-6, 1e-6)

    def test_bf16_is_one_rounding_of_the_exact_rotation(self):
        self.check(torch.bfloat16, 1e-6, 2 ** -7)

    def test_inverse_is_the_backward(self):
        """The gradient of sum(rot(x) g) is R^T g = rotation by -t theta: the inverse applied to g."""
        B, T, N, D = self.B, self.T, self.N, self.D
        table = rotary_table(self.P, D)
        x = self.packed(torch.float32)[:, :, :2].double().requires_grad_()  # (B, T, 2, N, D)
        g = torch.randn(B, T, 2, N, D)
        out = torch.stack([hf_rotate(x[:, :, 0], table), hf_rotate(x[:, :, 1], table)], 2)
        (out * g.double()).sum().backward()
        grad = kernel_rotate(g.view(B * T, 2 * N * D), table, T, N * D, D // 2, True, torch.float32)
        assert_close(self, "dx", grad.view(B, T, 2, N, D), x.grad, 1e-6, 1e-6)

    def test_inverse_undoes_the_rotation(self):
        B, T, N, D = self.B, self.T, self.N, self.D
        table = rotary_table(self.P, D)
        qk = self.packed(torch.float32)[:, :, :2].contiguous().view(B * T, 2 * N * D)
        there = kernel_rotate(qk, table, T, N * D, D // 2, False, torch.float32)
        back = kernel_rotate(there, table, T, N * D, D // 2, True, torch.float32)
        assert_close(self, "R^T R x", back, qk, 1e-6, 1e-6)

    def test_position_zero_is_the_identity_and_norms_are_kept(self):
        B, T, N, D = self.B, self.T, self.N, self.D
        table = rotary_table(self.P, D)
        qkv = self.packed(torch.float32)
        out = kernel_rotate(qkv.view(B * T, 3 * N * D), table, T, N * D, D // 2, False, torch.float32)
        out = out.view(B, T, 2, N, D)
        self.assertTrue(torch.equal(out[:, 0], qkv[:, 0, :2]), "t = 0: cos 1, sin 0")
        pair_norm = lambda v: v.double().unflatten(-1, (D // 2, 2)).norm(dim=-1)  # noqa: E731
        assert_close(self, "pair norms", pair_norm(out), pair_norm(qkv[:, :, :2]), 1e-6, 1e-6)
        self.assertGreater(math.fsum(abs(float(v)) for v in (out[:, 1:] - qkv[:, 1:, :2]).flatten()), 1.0)


if __name__ == "__main__":
    unittest.main(verbosity=1)
