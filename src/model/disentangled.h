// Disentangled attention's relative positions (He et al. 2021, "DeBERTa: Decoding-enhanced BERT with
// Disentangled Attention", section 3.1; the v2/v3 form of Hugging Face's modeling_deberta_v2.py):
//   A_ij = q_i k_j^T + q_i (K_r)_{delta(i,j)}^T + k_j (Q_r)_{delta(i,j)}^T,  scaled by 1/sqrt(3D)
// (content-to-content, content-to-position c2p, position-to-content p2c; the scale counts the terms).
// The paper's eq. 4 writes delta(j, i) in the p2c term; the original code and Hugging Face gather p2c
// at S - bucket(j - i) = delta(i, j), and so do we (their weights are trained for it).
// K_r and Q_r project one table of 2S relative embeddings (S = position_buckets, or
// max_relative_positions without buckets), shared by every layer. delta(i,j) is the row of the
// distance i - j: S + bucket(i - j), clamped to [0, 2S). With buckets, distances up to S/2 are exact
// and longer ones log-spaced, reaching the outermost rows at max_relative_positions; every longer
// distance shares them.
// As a position scheme (model.position: disentangled, position.h): the table is the encoder's
// rel_embeddings (2S, H) with its LayerNorm, registered after the layers as in HF DebertaV2Encoder;
// each layer adds c2p + p2c as a float bias of its scores (projected by its own query/key weights,
// or with share_att_key false by pos_key_proj/pos_query_proj) and scales them by 1/sqrt(D (1 +
// terms)). DeBERTa-v1's position_biased_input adds a learned absolute table (model/absolute.h) to
// the input embeddings, before the token types as DebertaV2Embeddings does; the enhanced mask
// decoder (section 3.2) gives the MLM head the last layer re-run on queries plus that table's rows.
// Dimensions: B batch, N heads, T sequence, D head dim, R table rows a length-T sequence uses.
#pragma once

#include <torch/types.h>

#include <memory>

#include "core/config.h"

namespace roformer::model {

class PositionScheme;
struct RoFormerOptions;

// The distance from which relative distances share the outermost bucket: model.max_relative_positions,
// or (0) model.max_position_embeddings.
inline int64_t effective_max_relative_positions(const config::ModelConfig& m) {
  return m.max_relative_positions > 0 ? m.max_relative_positions : m.max_position_embeddings;
}
// S: the relative table holds 2S rows (Hugging Face's pos_ebd_size, att_span).
int64_t relative_span(const config::ModelConfig& m);

// Hugging Face's make_log_bucket_position, operation for operation in float32 (so the buckets are
// its buckets): distance (int64, any shape) -> bucket (int64). |d| <= buckets/2 stays d; longer
// distances become sign(d) * (ceil(log(|d| / mid) / log((max_relative - 1) / mid) * (mid - 1)) + mid),
// mid = buckets/2, which reaches buckets - 1 at |d| = max_relative - 1.
torch::Tensor log_bucket_positions(const torch::Tensor& distance, int64_t buckets, int64_t max_relative);

// The rows of the relative table a length-T sequence reads: rows first_row .. first_row + rows - 1
// (at most 2T - 1 of the 2S), and for query i and key j which of them holds distance i - j.
struct RelativeIndex {
  torch::Tensor index;  // (T, T) int64 in [0, rows): delta(i, j) - first_row
  int64_t first_row = 0;
  int64_t rows = 0;
};
// first_row and rows from the host, index built on `device` by device ops alone (no copy from the
// host, so it is safe inside a CUDA graph capture).
RelativeIndex relative_index(int64_t seq_len, const config::ModelConfig& m, const torch::Device& device);
// first_row and rows alone (index left undefined): no (T, T) tensor is built.
RelativeIndex relative_rows(int64_t seq_len, const config::ModelConfig& m);

// The c2p and p2c scores of one layer, scaled: (B, N, T, T)
//   c2p_ij = q_i . pos_key_{index[i][j]},  p2c_ij = k_j . pos_query_{index[i][j]}
// q, k: (B, N, T, D); pos_key, pos_query: (N, R, D), or undefined to leave that term out;
// index: (T, T) from relative_index; scale: 1/sqrt(D * (1 + number of terms)).
torch::Tensor disentangled_scores(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& pos_key,
                                  const torch::Tensor& pos_query, const torch::Tensor& index, double scale);

std::shared_ptr<PositionScheme> make_disentangled_positions(const RoFormerOptions& options);
// The rules of disentangled attention's keys (position_buckets, max_relative_positions, pos_att_type,
// share_att_key, position_biased_input, enhanced_mask_decoder), `chosen` when model.position is
// disentangled: elsewhere any of them set is refused (it would be silently ignored).
void validate_disentangled_keys(const config::ModelConfig& model, bool chosen);
// max_relative_positions 0 resolved to what it means (position.h with_effective_sizes).
void resolve_disentangled_sizes(config::ModelConfig& model);

}  // namespace roformer::model
