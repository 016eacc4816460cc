// Disentangled attention's relative positions; see disentangled.h.
#include "model/disentangled.h"

#include <torch/torch.h>

#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "model/absolute.h"
#include "model/layers.h"
#include "model/options.h"
#include "model/position.h"

namespace roformer::model {
namespace F = torch::nn::functional;

int64_t relative_span(const config::ModelConfig& m) {
  return m.position_buckets > 0 ? m.position_buckets : effective_max_relative_positions(m);
}

torch::Tensor log_bucket_positions(const torch::Tensor& distance, int64_t buckets, int64_t max_relative) {
  const int64_t mid = buckets / 2;
  auto sign = torch::sign(distance);
  // Distances inside (-mid, mid) get a placeholder (their log is never used).
  auto abs_pos = torch::where((distance < mid) & (distance > -mid), torch::full({}, mid - 1, distance.options()),
                              distance.abs());
  // abs_pos / mid is a true division to float32, and the denominator a float32 scalar: HF's dtypes.
  auto denominator = torch::log(torch::tensor(static_cast<double>(max_relative - 1) / static_cast<double>(mid),
                                              torch::kFloat));
  auto log_pos = torch::ceil(torch::log(abs_pos / mid) / denominator * (mid - 1)) + mid;
  return torch::where(abs_pos <= mid, distance.to(log_pos.scalar_type()), log_pos * sign).to(torch::kLong);
}

namespace {

// delta(i, j) for the 2T - 1 distances i - j = -(T - 1) .. T - 1: S + bucket(i - j), clamped to [0, 2S).
torch::Tensor relative_rows_by_distance(int64_t seq_len, const config::ModelConfig& m) {
  const int64_t T = seq_len, S = relative_span(m);
  auto distance = torch::arange(-(T - 1), T, torch::kLong);  // (2T - 1): i - j
  auto bucket = m.position_buckets > 0
                    ? log_bucket_positions(distance, m.position_buckets, effective_max_relative_positions(m))
                    : distance;
  return torch::clamp(bucket + S, 0, 2 * S - 1);  // delta, HF's c2p_pos
}

RelativeIndex rows_read(const torch::Tensor& row) {
  RelativeIndex r;
  r.first_row = row.min().item<int64_t>();
  r.rows = row.max().item<int64_t>() - r.first_row + 1;
  return r;
}

}  // namespace

RelativeIndex relative_rows(int64_t seq_len, const config::ModelConfig& m) {
  return rows_read(relative_rows_by_distance(seq_len, m));
}

RelativeIndex relative_index(int64_t seq_len, const config::ModelConfig& m, const torch::Device& device) {
  const int64_t T = seq_len;
  RelativeIndex r = relative_rows(T, m);  // on the host: the row range, no device read-back
  // The index itself on `device` from device ops alone (as HF builds it): no host-to-device copy, so
  // it may be built inside a CUDA graph capture. The bucketing's float log runs on the device there,
  // as in HF's build_relative_position.
  const auto on = torch::TensorOptions().dtype(torch::kLong).device(device);
  auto distance = torch::arange(T, on).unsqueeze(1) - torch::arange(T, on).unsqueeze(0);  // (T, T): i - j
  const int64_t S = relative_span(m);
  auto bucket = m.position_buckets > 0
                    ? log_bucket_positions(distance, m.position_buckets, effective_max_relative_positions(m))
                    : distance;
  r.index = torch::clamp(bucket + S, 0, 2 * S - 1) - r.first_row;  // (T, T) delta(i, j) - first_row
  return r;
}

torch::Tensor disentangled_scores(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& pos_key,
                                  const torch::Tensor& pos_query, const torch::Tensor& index, double scale) {
  const int64_t B = q.size(0), N = q.size(1), T = q.size(2);
  torch::Tensor scores;  // (B, N, T, T)
  if (pos_key.defined()) {
    auto c2p = torch::matmul(q, pos_key.transpose(-1, -2));  // (B, N, T, R): q_i against every row
    scores = c2p.gather(-1, index.expand({B, N, T, T}));     // [i][j] = row index[i][j]
  }
  if (pos_query.defined()) {
    auto p2c = torch::matmul(k, pos_query.transpose(-1, -2));  // (B, N, T, R): k_j against every row
    // Gathered at [j][i] = row index[i][j] of k_j's scores, then transposed to [i][j]. HF gathers at
    // clamp(S - bucket(j - i)), which is index[i][j]: the buckets are odd in the distance.
    auto term = p2c.gather(-1, index.t().expand({B, N, T, T})).transpose(-1, -2);
    scores = scores.defined() ? scores + term : term;
  }
  return scores * scale;
}

namespace {

constexpr size_t kRel = 0;    // PositionInputs::trainable: the LayerNorm'd rows (R, H) the length reads
constexpr size_t kIndex = 0;  // PositionInputs::fixed: RelativeIndex::index (T, T)

// One layer's c2p and p2c terms, and its projections of the relative rows when they are its own.
class DisentangledAttention final : public AttentionPositions {
 public:
  DisentangledAttention(torch::nn::Module& attention, const torch::nn::Linear& query, const torch::nn::Linear& key,
                        const RoFormerOptions& o)
      : m_(o.model()), query_(query), key_(key) {
    const int64_t H = m_.hidden_size;
    if (!m_.share_att_key) {  // HF DisentangledSelfAttention registers them in this order, after q, k, v
      if (m_.pos_att_type != config::RelativeTerms::kP2C)
        pos_key_proj_ = attention.register_module("pos_key_proj", make_linear(m_, H, H));
      if (m_.pos_att_type != config::RelativeTerms::kC2P)
        pos_query_proj_ = attention.register_module("pos_query_proj", make_linear(m_, H, H));
    }
  }

  // c2p + p2c (B, N, T, T), scaled by 1/sqrt(D (1 + terms)); the relative rows take hidden dropout
  // first (HF pos_dropout).
  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k, const PositionInputs& inputs,
                           bool training) const override {
    const int64_t N = m_.num_heads, D = m_.hidden_size / N, R = inputs.trainable[kRel].size(0);
    auto rel = F::dropout(inputs.trainable[kRel], F::DropoutFuncOptions().p(m_.hidden_dropout).training(training));
    auto heads = [&](const torch::Tensor& t) { return t.view({R, N, D}).transpose(0, 1); };  // (N, R, D)
    torch::Tensor pos_key, pos_query;  // (N, R, D); undefined for a term pos_att_type leaves out
    if (m_.pos_att_type != config::RelativeTerms::kP2C)
      pos_key = heads(linear(m_.share_att_key ? key_ : pos_key_proj_, rel));
    if (m_.pos_att_type != config::RelativeTerms::kC2P)
      pos_query = heads(linear(m_.share_att_key ? query_ : pos_query_proj_, rel));
    return disentangled_scores(q, k, pos_key, pos_query, inputs.fixed[kIndex], *score_scale());
  }

  ScoreBias bias_kind() const override { return ScoreBias::kTrained; }

  // DeBERTa's 1/sqrt(3D) with both relative terms (HF scale_factor), 1/sqrt(2D) with one.
  std::optional<double> score_scale() const override {
    const double D = static_cast<double>(m_.hidden_size / m_.num_heads);
    return 1.0 / std::sqrt(D * (m_.pos_att_type == config::RelativeTerms::kBoth ? 3.0 : 2.0));
  }

 private:
  config::ModelConfig m_;
  torch::nn::Linear query_, key_;  // the layer's own (share_att_key)
  torch::nn::Linear pos_key_proj_{nullptr}, pos_query_proj_{nullptr};  // (H, H); null when shared or left out
};

class DisentangledPositions final : public PositionScheme {
 public:
  explicit DisentangledPositions(const RoFormerOptions& o) : options_(o) {
    const auto& m = o.model();
    if (m.position_biased_input || m.enhanced_mask_decoder) absolute_.emplace(m.max_position_embeddings, o.embedding_size());
  }

  void register_embeddings(torch::nn::Module& embeddings) override {
    if (absolute_) absolute_->register_in(embeddings);
  }

  std::shared_ptr<AttentionPositions> register_attention(torch::nn::Module& attention, const torch::nn::Linear& query,
                                                         const torch::nn::Linear& key, bool) override {
    return std::make_shared<DisentangledAttention>(attention, query, key, options_);
  }

  // After the layers, as in HF DebertaV2Encoder.
  void register_encoder_back(torch::nn::Module& encoder) override {
    const auto& m = options_.model();
    rel_embeddings_ = encoder.register_module("rel_embeddings",
                                              torch::nn::Embedding(2 * relative_span(m), m.hidden_size));  // (2S, H)
    rel_layer_norm_ = encoder.register_module(  // HF norm_rel_ebd "layer_norm"
        "LayerNorm", make_layer_norm(m, m.hidden_size));
  }

  torch::Tensor add_input_positions(const torch::Tensor& x, EmbeddingStage stage, int64_t offset) const override {
    // DeBERTa-v1's input table; the decoder's table does not enter the input.
    if (stage != EmbeddingStage::kBeforeTokenTypes || !options_.model().position_biased_input) return x;
    return x + absolute_->rows(offset, x.size(1));  // (T, E) over (B, T, E)
  }
  torch::Tensor input_position_table() const override {
    return options_.model().position_biased_input ? absolute_->weight() : torch::Tensor();
  }

  PositionInputs prepare(const torch::Tensor& x) override {
    const RelativeIndex& relative = relative_for(x.size(1), x.device());
    // LayerNorm acts row by row, so normalizing only the rows this length reads is exact.
    auto rel = rel_layer_norm_->forward(rel_embeddings_->weight.narrow(0, relative.first_row, relative.rows));
    return {{rel}, {relative.index}};  // (R, H), (T, T)
  }

  // The index of length T on `device`, built once and kept while the scheme lives: a CUDA graph
  // captured at one length replays reads of its index after other lengths ran (length phases, or a
  // graph per batch shape), so an index is never freed or replaced under it. Built by device ops
  // alone (relative_index), at the length's first forward, which the step runs eagerly before it
  // captures that shape (train/step_graphs.h); a build inside a capture would also be safe.
  const RelativeIndex& relative_for(int64_t T, const torch::Device& device) {
    const std::lock_guard<std::mutex> lock(relative_mutex_);
    auto key = std::make_pair(T, device.str());
    auto it = relative_.find(key);
    if (it == relative_.end()) it = relative_.emplace(key, relative_index(T, options_.model(), device)).first;
    return it->second;
  }

  // DeBERTa's z: the table's first T rows (no LayerNorm, no dropout).
  torch::Tensor decoder_positions(int64_t seq_len) const override {
    return options_.model().enhanced_mask_decoder ? absolute_->rows(0, seq_len) : torch::Tensor();
  }

  std::optional<int64_t> max_length() const override {
    return absolute_ ? std::optional<int64_t>(absolute_->size()) : std::nullopt;
  }

  // Per relative term (c2p, p2c): the R rows projected 2 R H^2, scored against every query (key) 2 B T R H.
  double flops_per_layer(int64_t batch, int64_t seq_len) const override {
    const auto& m = options_.model();
    const double tokens = static_cast<double>(batch) * static_cast<double>(seq_len);
    const double H = static_cast<double>(m.hidden_size), R = static_cast<double>(relative_rows(seq_len, m).rows);
    return terms() * (2.0 * R * H * H + 2.0 * tokens * R * H);
  }

  int64_t extra_layer_passes() const override { return options_.model().enhanced_mask_decoder ? 1 : 0; }

  // The float bias (B, N, T, T) SDPA keeps for its backward.
  double activations_per_token(int64_t seq_len) const override {
    return static_cast<double>(options_.model().num_heads) * static_cast<double>(seq_len);
  }

  std::vector<TableSize> tables() const override {
    const auto& m = options_.model();
    const double H = static_cast<double>(m.hidden_size), S = static_cast<double>(relative_span(m));
    // S is position_buckets, or without buckets max_relative_positions (0: max_position_embeddings).
    const char* span_key = m.position_buckets > 0         ? "model.position_buckets"
                           : m.max_relative_positions > 0 ? "model.max_relative_positions"
                                                          : "model.max_position_embeddings";
    const double b = m.bias ? 1.0 : 0.0;  // model.bias false: no biases in LayerNorms and projections
    std::vector<TableSize> out = {{span_key, 2 * S * H + (1 + b) * H, 0.0}};  // the table and its LayerNorm
    if (!m.share_att_key)
      out.push_back({"model.hidden_size", static_cast<double>(m.num_layers) * terms() * (H * H + b * H), 0.0});
    if (absolute_) out.push_back(absolute_->table());
    return out;
  }

  std::string description() const override {
    const auto& m = options_.model();
    std::string out = "disentangled positions (" + config::to_string(m.pos_att_type) + ", ";
    out += m.position_buckets > 0 ? std::to_string(m.position_buckets) + " buckets"
                                  : "distances to " + std::to_string(effective_max_relative_positions(m));
    if (m.position_biased_input) out += ", absolute input positions";
    if (m.enhanced_mask_decoder) out += ", enhanced mask decoder";
    return out + ")";
  }

 private:
  double terms() const { return options_.model().pos_att_type == config::RelativeTerms::kBoth ? 2.0 : 1.0; }
  RoFormerOptions options_;
  std::optional<AbsoluteTable> absolute_;         // position_biased_input or the enhanced mask decoder
  torch::nn::Embedding rel_embeddings_{nullptr};  // (2S, H) every layer's relative embeddings
  torch::nn::LayerNorm rel_layer_norm_{nullptr};  // over rel_embeddings ("LayerNorm")
  // (T, device) -> the index of that length: never evicted (each is T^2 int64; a run uses a few lengths)
  std::map<std::pair<int64_t, std::string>, RelativeIndex> relative_;
  std::mutex relative_mutex_;
};

}  // namespace

std::shared_ptr<PositionScheme> make_disentangled_positions(const RoFormerOptions& options) {
  return std::make_shared<DisentangledPositions>(options);
}

namespace {

// This scheme's keys, in the config table's order: set to anything but their defaults, they need
// model.position: disentangled.
bool is_disentangled_key(const std::string& key) {
  for (const char* own : {"model.position_buckets", "model.max_relative_positions", "model.pos_att_type",
                          "model.share_att_key", "model.position_biased_input", "model.enhanced_mask_decoder"})
    if (key == own) return true;
  return false;
}

}  // namespace

void validate_disentangled_keys(const config::ModelConfig& m, bool chosen) {
  if (!chosen) {
    config::Config given;
    given.model = m;
    for (const auto& change : config::diff(config::Config(), given))
      if (is_disentangled_key(change.key))
        config::invalid(fmt::format("{} = {} applies to model.position: disentangled only (got {}); remove it or set "
                                    "model.position: disentangled", change.key, change.after,
                                    config::to_string(m.position)));
    return;
  }
  if (m.attention == config::Attention::kLinear)
    config::invalid("model.attention: linear has no disentangled form (the relative scores need the full score "
                    "matrix); use model.attention: softmax with model.position: disentangled");
  // DeBERTa's decoder brings in the absolute positions the input lacks; the original code
  // (EnhancedMaskDecoder) skips it when the input has them (position_biased_input).
  if (m.enhanced_mask_decoder && m.position_biased_input)
    config::invalid("model.enhanced_mask_decoder adds the absolute positions that the input embeddings lack, but "
                    "model.position_biased_input: true already adds them there (DeBERTa's decoder is skipped then); "
                    "set one of the two to false");
  // HF make_log_bucket_position: distances from buckets/2 on are log(d / mid) / log((max - 1) / mid), so
  // max_relative_positions - 1 must exceed mid = buckets/2.
  const int64_t buckets = m.position_buckets, max_relative = effective_max_relative_positions(m);
  if (buckets == 1) config::invalid("model.position_buckets must be 0 (exact distances) or at least 2 (got 1)");
  if (buckets > 0 && buckets / 2 >= max_relative - 1)
    config::invalid(fmt::format(
        "model.position_buckets ({}) needs model.max_relative_positions above {} (got {}{}): distances up to "
        "position_buckets/2 are exact and the log buckets reach from there to max_relative_positions; lower "
        "model.position_buckets (DeBERTa-v3 uses half of max_relative_positions) or set it to 0 for exact distances",
        buckets, buckets / 2 + 1, max_relative, m.max_relative_positions > 0 ? "" : ", from model.max_position_embeddings"));
}

void resolve_disentangled_sizes(config::ModelConfig& m) { m.max_relative_positions = effective_max_relative_positions(m); }

}  // namespace roformer::model
