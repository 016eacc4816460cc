// The position scheme's defaults (model.position: none) and the lookup; see position.h. Also what each
// scheme lets --init-from change (model/init_change.h).
#include "model/position.h"

#include <torch/torch.h>

#include "model/absolute.h"
#include "model/disentangled.h"
#include "model/init_change.h"
#include "model/options.h"
#include "model/rotary.h"

namespace roformer::model {

void AttentionPositions::transform(torch::Tensor&, torch::Tensor&, torch::Tensor&, const PositionInputs&) const {}

std::array<torch::Tensor, 3> AttentionPositions::transform_packed(const torch::Tensor& qkv,
                                                                  const PositionInputs& inputs) const {
  // Unbind rather than select: its backward is one stack, not a zero-filled buffer per part.
  auto parts = qkv.unbind(2);  // 3 x (B, T, N, D)
  auto q = parts[0].transpose(1, 2), k = parts[1].transpose(1, 2), v = parts[2].transpose(1, 2);
  transform(q, k, v, inputs);
  return {q, k, v};
}

torch::Tensor AttentionPositions::transform_features(const torch::Tensor& features, const PositionInputs&) const {
  return features;
}

torch::Tensor AttentionPositions::score_bias(const torch::Tensor&, const torch::Tensor&, const PositionInputs&,
                                             bool) const {
  return {};
}

void PositionScheme::register_embeddings(torch::nn::Module&) {}

std::shared_ptr<AttentionPositions> PositionScheme::register_attention(torch::nn::Module&, const torch::nn::Linear&,
                                                                       const torch::nn::Linear&) {
  return std::make_shared<AttentionPositions>();
}

void PositionScheme::register_encoder_front(torch::nn::Module&) {}

void PositionScheme::register_encoder_back(torch::nn::Module&) {}

torch::Tensor PositionScheme::add_input_positions(const torch::Tensor& x, EmbeddingStage, int64_t) const { return x; }

torch::Tensor PositionScheme::input_position_table() const { return {}; }

PositionInputs PositionScheme::prepare(const torch::Tensor&) { return {}; }

torch::Tensor PositionScheme::decoder_positions(int64_t) const { return {}; }

double PositionScheme::flops_per_layer(int64_t, int64_t) const { return 0.0; }

double PositionScheme::activations_per_token(int64_t) const { return 0.0; }

std::shared_ptr<PositionScheme> make_position_scheme(const RoFormerOptions& options) {
  switch (options.model().position) {
    case config::Position::kRotary: return make_rotary_positions(options);
    case config::Position::kAbsolute: return make_absolute_positions(options);
    case config::Position::kDisentangled: return make_disentangled_positions(options);
    case config::Position::kNone: break;
  }
  return std::make_shared<PositionScheme>();  // none: nothing enters
}

InitChange init_change(const config::ModelConfig& m, const std::string& key) {
  const bool length = key == "model.max_position_embeddings";
  switch (m.position) {
    case config::Position::kRotary:  // the sin/cos table is computed from the base, to any length
      return length || key == "model.rotary_base" ? InitChange::kComputed : InitChange::kRefused;
    case config::Position::kAbsolute:  // learned rows: grown by copies only
      return length ? InitChange::kCopiedRows : InitChange::kRefused;
    case config::Position::kDisentangled:  // its buckets (and any absolute table) are laid out for the length
      return InitChange::kRefused;
    case config::Position::kNone: break;
  }
  return length ? InitChange::kComputed : InitChange::kRefused;  // none: the length bounds nothing learned
}

}  // namespace roformer::model
