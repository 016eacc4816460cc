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
                                                                       const torch::nn::Linear&, bool) {
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

namespace {

// One scheme: its model.position, how it is built, and its keys' rules and resolved sizes (nullptr:
// it has no keys of its own). model.position: none is the base class.
struct SchemeRow {
  config::Position position;
  std::shared_ptr<PositionScheme> (*make)(const RoFormerOptions& options);
  void (*validate_keys)(const config::ModelConfig& model, bool chosen);  // chosen: model.position is this one
  void (*resolve_sizes)(config::ModelConfig& model);
};

std::shared_ptr<PositionScheme> make_no_positions(const RoFormerOptions&) { return std::make_shared<PositionScheme>(); }

const std::vector<SchemeRow> kSchemes = {
    {config::Position::kRotary, make_rotary_positions, validate_rotary_keys, nullptr},
    {config::Position::kAbsolute, make_absolute_positions, nullptr, nullptr},
    {config::Position::kDisentangled, make_disentangled_positions, validate_disentangled_keys,
     resolve_disentangled_sizes},
    {config::Position::kNone, make_no_positions, nullptr, nullptr},
};

const SchemeRow& scheme_row(config::Position position) {
  for (const auto& row : kSchemes)
    if (row.position == position) return row;
  return kSchemes.back();  // unreachable: every model.position has its row
}

}  // namespace

std::shared_ptr<PositionScheme> make_position_scheme(const RoFormerOptions& options) {
  return scheme_row(options.model().position).make(options);
}

void validate_position_keys(const config::ModelConfig& model) {
  for (const auto& row : kSchemes)
    if (row.validate_keys) row.validate_keys(model, row.position == model.position);
}

config::ModelConfig with_effective_sizes(config::ModelConfig model) {
  model.embedding_size = config::effective_embedding_size(model);
  if (const auto resolve = scheme_row(model.position).resolve_sizes) resolve(model);
  return model;
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
