"""Embeddings + LayerNorm + dropout (src/kernels/triton/embedding.py) under Triton's interpreter,
with its backward (layer_norm.py's, dropout_at = 2), against PyTorch in float64 on the same values:
z = word[id] + type[c] + pos[offset + t] within one rounding of the dtype, y = dropout(LayerNorm(z))
from the stored z, and z's, gamma's and beta's gradients through autograd; each type mode (none,
per token, row 0), with and without absolute positions, fp32 and bf16, E = 40 (a block of 64).
Tolerances as test_layer_norm.py.
"""
import unittest

import torch
import torch.nn.functional as F

from kernel_test_util import assert_close, rng_state
from test_layer_norm import TOL, keep_mask

import triton  # noqa: E402
import embedding as emb  # noqa: E402
import layer_norm as ln  # noqa: E402


def fused(ids, word, type_ids, types, type_mode, pos, pos_offset, T, w, b, p, eps, dy, seed=11, offset=40):
    M, E = ids.numel(), word.shape[1]
    z, y = torch.empty(M, E, dtype=word.dtype), torch.empty(M, E, dtype=word.dtype)
    mean, rstd, used = torch.empty(M), torch.empty(M), torch.zeros(2, dtype=torch.int64)
    s, o = rng_state(seed, offset)
    block = triton.next_power_of_2(E)
    emb.embedding_layer_norm_fwd[(M,)](
        ids, word, type_ids if type_ids is not None else ids, types, pos if pos is not None else word, w, b, z, y,
        mean, rstd, s, o, used, 0, E, T, pos_offset, word.stride(0), types.stride(0),
        pos.stride(0) if pos is not None else 0, p, eps, type_mode, int(pos is not None), int(p > 0), BLOCK_H=block)
    dz, dw, db = torch.empty_like(z), torch.empty(2, E), torch.empty(2, E)
    ln.residual_dropout_layer_norm_bwd[(2,)](
        dy, dy, z, w, mean, rstd, used, dz, dz, dw, db, M, E, triton.cdiv(M, 2), E, E, E, E, E,
        p, 0, 2 if p > 0 else 0, 1, BLOCK_H=block)
    return z, y, dz, dw.sum(0), db.sum(0)


class EmbeddingLayerNorm(unittest.TestCase):
    B, T, E, V, C, P = 2, 5, 40, 30, 3, 12

    def check(self, dtype, type_mode, with_pos, p):
        torch.manual_seed(4)
        B, T, E = self.B, self.T, self.E
        word = torch.randn(self.V, E).to(dtype)
        types = torch.randn(self.C, E).to(dtype)
        pos = torch.randn(self.P, E).to(dtype) if with_pos else None
        w, b = (1 + 0.5 * torch.randn(E)).to(dtype), (0.1 * torch.randn(E)).to(dtype)
        ids = torch.randint(0, self.V, (B * T,))
        type_ids = torch.randint(0, self.C, (B * T,)) if type_mode == 1 else None
        dy = torch.randn(B * T, E).to(dtype)
        eps, offset = 1e-5, 3
        z, y, dz, dw, db = fused(ids, word, type_ids, types, type_mode, pos, offset, T, w, b, p, eps, dy)

        want_z = word[ids].double()
        if type_mode == 1:
            want_z = want_z + types[type_ids].double()
        if type_mode == 2:
            want_z = want_z + types[0].double()
        if with_pos:
            want_z = want_z + pos[offset + torch.arange(B * T) % T].double()
        atol, rtol = TOL[dtype]
        tag = f"{dtype} type_mode={type_mode} pos={with_pos} p={p}"
        assert_close(self, f"{tag} z", z, want_z, 1e-6 if dtype == torch.float32 else 0, 1e-6 if dtype == torch.float32 else 2 ** -7)
        zs = z.double().requires_grad_()
        wd, bd = w.double().requires_grad_(), b.double().requires_grad_()
        keep = keep_mask(B * T * E, p, 11, 40).view(B * T, E).double() / (1 - p) if p > 0 else 1.0
        want_y = F.layer_norm(zs, (E,), wd, bd, eps) * keep
        (want_y * dy.double()).sum().backward()
        assert_close(self, f"{tag} y", y, want_y.detach(), atol, rtol)
        assert_close(self, f"{tag} dz", dz, zs.grad, atol, rtol)
        assert_close(self, f"{tag} dgamma", dw, wd.grad, 1e-4 * B * T, 1e-4)
        assert_close(self, f"{tag} dbeta", db, bd.grad, 1e-4 * B * T, 1e-4)
        if p > 0:  # dropped exactly where the mask says
            self.assertTrue(torch.equal(y == 0, keep_mask(B * T * E, p, 11, 40).view(B * T, E) == 0))

    def test_fp32_word_only(self):
        self.check(torch.float32, 0, False, 0.0)

    def test_fp32_types_per_token_positions_dropout(self):
        self.check(torch.float32, 1, True, 0.1)

    def test_bf16_type_row_zero_dropout(self):  # RoFormer: word + type row 0, rotary positions elsewhere
        self.check(torch.bfloat16, 2, False, 0.1)

    def test_bf16_types_and_positions(self):
        self.check(torch.bfloat16, 1, True, 0.0)


if __name__ == "__main__":
    unittest.main(verbosity=1)
