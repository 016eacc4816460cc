"""Rotary position embedding of q and k in one pass over the packed QKV projection (issue 38).

RoFormer's rotation (Su et al. 2021, eq. 13/34) in Hugging Face RoFormer's layout, as
src/model/rotary.h: pairs of adjacent features (2i, 2i+1) of each head, theta_i = base^(-2i/D),
position t of the token:

    out_2i   = x_2i cos(t theta_i) - x_2i+1 sin(t theta_i)
    out_2i+1 = x_2i+1 cos(t theta_i) + x_2i sin(t theta_i)

computed in fp32 and rounded once to the storage dtype (what apply_rotary_fused does with ATen in
three kernels plus an fp32 round trip; here one kernel, no fp32 tensor). TABLE is the model's (P, D)
fp32 table: sin(t theta_i) in columns [0, D/2), cos in [D/2, D) (HF's
RoFormerSinusoidalPositionalEmbedding).

Layout: the projection output viewed (B, T, 3, N, D) with q and k the first 2H = 2 N D features of
each token's row (H = N D); X's rows are row_stride elements apart (3H for the packed projection,
2H for a gradient), OUT is (B, T, 2, N, D) contiguous, i.e. q and k each (B, T, N, D)-strided as
SDPA takes them. One program per token (B*T programs), H pairs per program: pair j is head
j // (D/2) of the 2N (q heads then k heads), index i = j % (D/2).

The backward is the same kernel with inverse = 1: the rotation by -t theta_i, R^T (R is orthogonal),
applied to the gradient of OUT.
"""
import triton
import triton.language as tl


@triton.jit
def rotary_qk(X, OUT, TABLE, T, row_stride, n_pairs, half_d, table_stride, inverse, BLOCK: tl.constexpr):
    """X: (B*T rows, row_stride) holding 2 n_pairs features per token; OUT: (B*T, 2 n_pairs)."""
    row = tl.program_id(0).to(tl.int64)  # token b*T + t
    t = row % T                          # its position
    e = tl.arange(0, 2 * BLOCK)          # feature 2j + {0, 1} of pair j: one contiguous load
    live = e < 2 * n_pairs
    x = tl.load(X + row * row_stride + e, mask=live, other=0.0).to(tl.float32)
    x_even, x_odd = tl.split(tl.reshape(x, (BLOCK, 2)))
    j = tl.arange(0, BLOCK)
    i = j % half_d                       # the pair's index within its head
    pair_live = j < n_pairs
    sin = tl.load(TABLE + t * table_stride + i, mask=pair_live, other=0.0)
    cos = tl.load(TABLE + t * table_stride + half_d + i, mask=pair_live, other=0.0)
    if inverse != 0:
        sin = -sin
    out_even = x_even * cos - x_odd * sin
    out_odd = x_odd * cos + x_even * sin
    out = tl.reshape(tl.join(out_even, out_odd), (2 * BLOCK,))
    tl.store(OUT + row * (2 * n_pairs) + e, out.to(OUT.dtype.element_ty), mask=live)


# ---- What aot.py compiles ----------------------------------------------------------------------
# BLOCK: the power of two the caller rounds H = n_pairs up to (H <= 256, <= 1024, <= 4096).
def aot_variants():
    out = []
    for t in ("bf16", "fp32"):
        for block, warps in ((256, 2), (1024, 4), (4096, 8)):
            # X's rows: 16-byte aligned starts when row_stride is (3H or 2H, H a multiple of 16)
            out.append((rotary_qk, f"{t}_{block}", [f"*{t}:16", f"*{t}:16", "*fp32:16", "i32", "i32:16", "i32", "i32",
                                                     "i32", "i32"], {"BLOCK": block}, warps))
    return out
