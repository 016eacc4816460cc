"""Cross-entropy at the predicted positions from the (P, V) logits, without fp32 logits (issue 38).

For row r (one predicted position) with logits x (V,) in their storage dtype (bf16 or fp32) and
label y (an index into V; y < 0: ignored, as ignore_index = -100):

    lse_r     = m + log sum_v exp(x_v - m),  m = max_v x_v     (online over BLOCK_V chunks, fp32)
    loss_r    = (m - x_y) + log sum_v exp(x_v - m) = lse_r - x_y   (0 when ignored)
    correct_r = [argmax_v x_v == y]   the first index of the maximum, as torch.argmax
    dx_rv     = g (exp(x_v - lse_r) - [v == y])                (0 when ignored)

Forward: one pass reading the logits, writing loss_r, correct_r and lse_r (P,) fp32; the caller sums
the rows (one small deterministic reduction, no atomics). Backward: one pass reading the logits and
writing dx in their dtype, with g, the gradient of the loss sum, read from device memory (G, a
scalar fp32 tensor): no host read, so it runs inside a CUDA graph. Against ATen's path (logits cast
to fp32, log_softmax, nll, argmax, and their backwards: about six passes over P x V, two of them
fp32) this reads the logits twice and writes their gradient once.

Shapes: X, DX (P, V) with row stride stride_x (unit stride along V); Y (P,) int64.
"""
import triton
import triton.language as tl


@triton.jit
def cross_entropy_fwd(X, Y, LOSS, CORRECT, LSE, V, stride_x, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    label = tl.load(Y + row)
    m = tl.full((), float("-inf"), tl.float32)   # running maximum
    s = tl.full((), 0.0, tl.float32)             # running sum of exp(x - m)
    best_idx = tl.full((), 0, tl.int64)          # first index of the maximum so far
    for start in range(0, V, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V).to(tl.int64)
        x = tl.load(X + row * stride_x + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        block_max = tl.max(x, axis=0)
        block_idx = tl.min(tl.where(x == block_max, cols, V), axis=0)  # its first index in the block
        best_idx = tl.where(block_max > m, block_idx, best_idx)  # an equal later maximum keeps the first
        m_new = tl.maximum(m, block_max)
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    valid = label >= 0
    target = tl.load(X + row * stride_x + label, mask=valid, other=0.0).to(tl.float32)
    # (m - x_y) + log s rather than lse - x_y: no cancellation between two large numbers
    tl.store(LOSS + row, tl.where(valid, (m - target) + tl.log(s), 0.0))
    lse = m + tl.log(s)
    tl.store(CORRECT + row, tl.where(valid & (best_idx == label), 1.0, 0.0))
    tl.store(LSE + row, lse)


@triton.jit
def cross_entropy_bwd(X, Y, LSE, G, DX, V, stride_x, stride_dx, BLOCK_V: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    label = tl.load(Y + row)
    lse = tl.load(LSE + row)
    g = tl.where(label >= 0, tl.load(G), 0.0)  # an ignored row's gradient is 0
    for start in range(0, V, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V).to(tl.int64)
        live = cols < V
        x = tl.load(X + row * stride_x + cols, mask=live, other=0.0).to(tl.float32)
        dx = g * (tl.exp(x - lse) - tl.where(cols == label, 1.0, 0.0))
        tl.store(DX + row * stride_dx + cols, dx.to(DX.dtype.element_ty), mask=live)


# ---- What aot.py compiles ----------------------------------------------------------------------
def aot_variants():
    out = []
    for t in ("bf16", "fp32"):
        T, F = f"*{t}:16", "*fp32:16"
        out.append((cross_entropy_fwd, t, [T, "*i64:16", F, F, F, "i32", "i32:16"], {"BLOCK_V": 4096}, 8))
        out.append((cross_entropy_bwd, t, [T, "*i64:16", F, "*fp32", T, "i32", "i32:16", "i32:16"],
                    {"BLOCK_V": 4096}, 8))
    return out
