"""Residual + dropout + LayerNorm, forward and backward, as Triton kernels (issue 38).

Rows of H features, M rows (M = B*T), one row per program forward; statistics in fp32 whatever the
storage dtype (bf16 or fp32). For a row x (the sublayer's output), r (the residual stream), gamma,
beta (H,):

    keep_j = u_j >= p,  u_j in [0, 1) from Philox(seed) at offset + row*H + j  (_dropout_keep)
    z      = r + keep * x / (1 - p)                    stored in x's dtype, (M, H)
    mean   = sum_j z_j / H,   rstd = 1 / sqrt(sum_j (z_j - mean)^2 / H + eps)    fp32, (M,)
    y      = (z - mean) * rstd * gamma + beta          (M, H)

(the post-LayerNorm block's LN(u + drop(f(u))); pre-LayerNorm reads z as the residual stream and y
as the normed input of the next sublayer). Statistics are taken of z as stored (rounded to its
dtype), so the backward, which reads the stored z, differentiates exactly the forward's function.

Backward, with xhat = (z - mean) * rstd and g = gamma * dy (per row):

    dz     = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat)) + dz_in   (dz_in: z's own gradient)
    dr     = dz,   dx = keep * dz / (1 - p)                              (dropout_at = 1)
    dgamma = sum_rows dy * xhat,   dbeta = sum_rows dy                    (per-program partials)

The same backward serves y = dropout(LayerNorm(z)) (the embeddings' order, embedding.py) with
dropout_at = 2: dy is first multiplied by keep / (1 - p); dr = dz is then z's gradient.

The backward's programs each take a contiguous block of rows and write their dgamma/dbeta partial
sums, (G, H) fp32; the caller sums the G rows (one small reduction), so the parameter gradients
come out of the same pass over the activations.

The mask is a pure function of (seed, offset, element index): the backward regenerates it rather
than storing M*H bytes. seed and offset are read from device memory (SEED, OFFSET: int64 scalars,
e.g. the CUDA generator's graph-safe philox state) plus offset_add, so a captured CUDA graph draws
a new mask on every replay; the forward's first program records the (seed, offset) it used into
RNG_USED (2,) int64 for the backward. dropout_keep_mask writes the same mask as uint8 for tests.

Shapes: X, R, Z, Y, DY, DZ, DX, DR (M, H) with a row stride each (unit stride along H); W, B (H,);
MEAN, RSTD (M,) fp32; DW, DB (G, H) fp32. BLOCK_H: a power of two >= H.
Flags are runtime int32 arguments (0/1), not constexpr, so one compiled kernel serves every case.
"""
import triton
import triton.language as tl


@triton.jit
def _dropout_keep(seed, offset, idx, p):
    """keep_j = u_j >= p, u_j uniform in [0, 1): kept with probability 1 - p.

    Element j of a call is 32-bit output (offset + j) % 4 of Philox-4x32-10 at the counter
    (offset + j) / 4 in subsequence 0: the numbers curand_init(seed, 0, offset) would give one thread
    of PyTorch's own kernels, so the call draws exactly from the range [offset, offset + n) that
    reserving n values (philox_cuda_state(n)) set aside, and no other draw reads them.
    """
    c = offset + idx
    r0, r1, r2, r3 = tl.randint4x(seed, c >> 2)
    lane = c & 3
    r = tl.where(lane == 0, r0, tl.where(lane == 1, r1, tl.where(lane == 2, r2, r3)))
    return tl.random.uint_to_uniform_float(r) >= p


@triton.jit
def _store_and_normalize(z, Z_ROW, W, B, MEAN_AT, RSTD_AT, cols, in_row, H, eps):
    """Stores the row z (fp32) at Z_ROW in Z's dtype and returns LayerNorm of the stored values,
    (z - mean) rstd gamma + beta in fp32, storing mean and rstd at MEAN_AT and RSTD_AT."""
    zs = z.to(Z_ROW.dtype.element_ty)
    tl.store(Z_ROW + cols, zs, mask=in_row)
    z = zs.to(tl.float32)
    mean = tl.sum(z, axis=0) / H
    diff = tl.where(in_row, z - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(diff * diff, axis=0) / H + eps)
    w = tl.load(W + cols, mask=in_row, other=0.0).to(tl.float32)
    b = tl.load(B + cols, mask=in_row, other=0.0).to(tl.float32)
    tl.store(MEAN_AT, mean)
    tl.store(RSTD_AT, rstd)
    return diff * rstd * w + b


@triton.jit
def dropout_keep_mask(SEED, OFFSET, offset_add, KEEP, n, p, BLOCK: tl.constexpr):
    """KEEP (n,) uint8: the keep mask the kernels below draw for elements 0..n-1."""
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    seed = tl.load(SEED)
    offset = tl.load(OFFSET) + offset_add
    keep = _dropout_keep(seed, offset, idx, p)
    tl.store(KEEP + idx, keep.to(tl.uint8), mask=idx < n)


@triton.jit
def residual_dropout_layer_norm_fwd(
        X, R, W, B, Z, Y, MEAN, RSTD, SEED, OFFSET, RNG_USED,
        offset_add, H, stride_x, stride_r, stride_z, stride_y,
        p, eps, has_residual, has_dropout,
        BLOCK_H: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_H)
    in_row = cols < H
    x = tl.load(X + row * stride_x + cols, mask=in_row, other=0.0).to(tl.float32)
    if has_dropout != 0:
        seed = tl.load(SEED)
        offset = tl.load(OFFSET) + offset_add
        keep = _dropout_keep(seed, offset, row * H + cols, p)
        x = tl.where(keep, x * (1.0 / (1.0 - p)), 0.0)
        if tl.program_id(0) == 0:
            tl.store(RNG_USED, seed)
            tl.store(RNG_USED + 1, offset)
    if has_residual != 0:
        x += tl.load(R + row * stride_r + cols, mask=in_row, other=0.0).to(tl.float32)
    y = _store_and_normalize(x, Z + row * stride_z, W, B, MEAN + row, RSTD + row, cols, in_row, H, eps)
    tl.store(Y + row * stride_y + cols, y.to(Y.dtype.element_ty), mask=in_row)


@triton.jit
def residual_dropout_layer_norm_bwd(
        DY, DZ_IN, Z, W, MEAN, RSTD, RNG_USED, DR, DX, DW, DB,
        M, H, rows_per_program, stride_dy, stride_dz_in, stride_z, stride_dr, stride_dx,
        p, has_dz_in, dropout_at, store_dr,
        BLOCK_H: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_H)
    in_row = cols < H
    w = tl.load(W + cols, mask=in_row, other=0.0).to(tl.float32)
    dw = tl.zeros((BLOCK_H,), dtype=tl.float32)
    db = tl.zeros((BLOCK_H,), dtype=tl.float32)
    seed = tl.load(RNG_USED, mask=dropout_at != 0, other=0)  # never read (uninitialized) without dropout
    offset = tl.load(RNG_USED + 1, mask=dropout_at != 0, other=0)
    first = pid.to(tl.int64) * rows_per_program
    for i in range(0, rows_per_program):  # the last program's rows past M are masked out (dy = 0)
        row = first + i
        live = in_row & (row < M)
        z = tl.load(Z + row * stride_z + cols, mask=live, other=0.0).to(tl.float32)
        dy = tl.load(DY + row * stride_dy + cols, mask=live, other=0.0).to(tl.float32)
        if dropout_at == 2:  # y = dropout(LayerNorm(z)) (embeddings): dy through the dropout first
            dy = tl.where(_dropout_keep(seed, offset, row * H + cols, p), dy * (1.0 / (1.0 - p)), 0.0)
        mean = tl.load(MEAN + row, mask=row < M, other=0.0)
        rstd = tl.load(RSTD + row, mask=row < M, other=0.0)
        xhat = tl.where(live, (z - mean) * rstd, 0.0)
        g = dy * w
        c_xhat = tl.sum(g * xhat, axis=0) / H
        c_one = tl.sum(g, axis=0) / H
        dz = (g - c_one - xhat * c_xhat) * rstd
        if has_dz_in != 0:
            dz += tl.load(DZ_IN + row * stride_dz_in + cols, mask=live, other=0.0).to(tl.float32)
        dw += dy * xhat
        db += dy
        if store_dr != 0:
            tl.store(DR + row * stride_dr + cols, dz.to(DR.dtype.element_ty), mask=live)
        if dropout_at == 1:
            keep = _dropout_keep(seed, offset, row * H + cols, p)
            dx = tl.where(keep, dz * (1.0 / (1.0 - p)), 0.0)
            tl.store(DX + row * stride_dx + cols, dx.to(DX.dtype.element_ty), mask=live)
    tl.store(DW + pid * H + cols, dw, mask=in_row)
    tl.store(DB + pid * H + cols, db, mask=in_row)


# ---- What aot.py compiles ----------------------------------------------------------------------
# Storage dtypes and row widths: BLOCK_H is the power of two the caller rounds H up to (H <= 256,
# <= 1024, <= 4096), with warps to match. ":16" promises 16-byte aligned pointers and strides that
# are multiples of 16 elements (the launcher checks, and takes the ATen path otherwise).
DTYPES = ("bf16", "fp32")
BLOCKS = ((256, 2), (1024, 4), (4096, 8))


def aot_variants():
    out = []
    for t in DTYPES:
        T, F = f"*{t}:16", "*fp32:16"
        for block, warps in BLOCKS:
            stride = ["i32:16"] * 4
            out.append((residual_dropout_layer_norm_fwd, f"{t}_{block}",
                        [T, T, T, T, T, T, F, F, "*i64", "*i64", "*i64", "i64", "i32"] + stride +
                        ["fp32", "fp32", "i32", "i32"], {"BLOCK_H": block}, warps))
            out.append((residual_dropout_layer_norm_bwd, f"{t}_{block}",
                        [T, T, T, T, F, F, "*i64", T, T, F, F, "i32", "i32", "i32"] + ["i32:16"] * 5 +
                        ["fp32", "i32", "i32", "i32"], {"BLOCK_H": block}, warps))
    out.append((dropout_keep_mask, "u8", ["*i64", "*i64", "i64", "*u8", "i64", "fp32"], {"BLOCK": 1024}, 4))
    return out
