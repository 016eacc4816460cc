"""Embeddings + LayerNorm + dropout in one pass over each token (issue 38).

The encoder's input, as RoFormerEmbeddings computes it (src/model/layers.cpp): for token row
b*T + t with id w, token type c and position t,

    z = word[w] + type[c] + pos[pos_offset + t]     (E,) summed in fp32, stored in the dtype
    y = dropout(LayerNorm(z; gamma, beta, eps), p)  statistics in fp32, the mask as layer_norm.py's

type: type_mode 0 none, 1 a row per token (TYPE_IDS), 2 row 0 for every token (undefined ids: HF's
default of zeros); pos: has_pos (absolute positions; rotary models add none). One program per token.
Z, MEAN, RSTD and RNG_USED are saved for the backward, which is layer_norm.py's backward with
dropout_at = 2 (dropout after the normalization); z's gradient then scatters into the tables'
rows (ATen's embedding backward: a deterministic sorted reduction, not this kernel's job).

Shapes: IDS, TYPE_IDS (M,) int64; WORD (V, E), TYPE (C, E), POS (P, E) with row strides;
W, B (E,); Z, Y (M, E) contiguous; MEAN, RSTD (M,) fp32. BLOCK_H: a power of two >= E; the compiled
variants take E a multiple of 16 (aligned rows).
"""
import triton
import triton.language as tl

from layer_norm import _dropout_keep, _store_and_normalize


@triton.jit
def embedding_layer_norm_fwd(
        IDS, WORD, TYPE_IDS, TYPE, POS, W, B, Z, Y, MEAN, RSTD, SEED, OFFSET, RNG_USED,
        offset_add, E, T, pos_offset, stride_word, stride_type, stride_pos,
        p, eps, type_mode, has_pos, has_dropout,
        BLOCK_H: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_H)
    in_row = cols < E
    token = tl.load(IDS + row)
    z = tl.load(WORD + token * stride_word + cols, mask=in_row, other=0.0).to(tl.float32)
    if type_mode == 1:
        kind = tl.load(TYPE_IDS + row)
        z += tl.load(TYPE + kind * stride_type + cols, mask=in_row, other=0.0).to(tl.float32)
    if type_mode == 2:
        z += tl.load(TYPE + cols, mask=in_row, other=0.0).to(tl.float32)
    if has_pos != 0:
        z += tl.load(POS + (pos_offset + row % T) * stride_pos + cols, mask=in_row, other=0.0).to(tl.float32)
    y = _store_and_normalize(z, Z + row * E, W, B, MEAN + row, RSTD + row, cols, in_row, E, eps)
    if has_dropout != 0:
        seed = tl.load(SEED)
        offset = tl.load(OFFSET) + offset_add
        y = tl.where(_dropout_keep(seed, offset, row * E + cols, p), y * (1.0 / (1.0 - p)), 0.0)
        if tl.program_id(0) == 0:
            tl.store(RNG_USED, seed)
            tl.store(RNG_USED + 1, offset)
    tl.store(Y + row * E + cols, y.to(Y.dtype.element_ty), mask=in_row)


# ---- What aot.py compiles ----------------------------------------------------------------------
def aot_variants():
    out = []
    for t in ("bf16", "fp32"):
        T, F = f"*{t}:16", "*fp32:16"
        for block, warps in ((256, 2), (1024, 4), (4096, 8)):
            out.append((embedding_layer_norm_fwd, f"{t}_{block}",
                        ["*i64", T, "*i64", T, T, T, T, T, T, F, F, "*i64", "*i64", "*i64",
                         "i64", "i32:16", "i32", "i32", "i32:16", "i32:16", "i32:16", "fp32", "fp32", "i32", "i32", "i32"],
                        {"BLOCK_H": block}, warps))
    return out
