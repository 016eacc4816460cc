// Which Hugging Face class a model's weights map to, and the names of its parameters there.
//
// Our parameters carry Hugging Face RoFormerForMaskedLM's names (RoFormerForMaskedLMImpl::
// hf_named_parameters); the other families rename a few of them:
//   BertForMaskedLM       roformer. -> bert.                     (position absolute)
//   DebertaV2ForMaskedLM  roformer. -> deberta., and in attention.self query/key/value ->
//                         query_proj/key_proj/value_proj          (position disentangled)
// The disentangled parts (pos_key_proj, pos_query_proj, encoder.rel_embeddings, encoder.LayerNorm)
// and the MLM head (cls.predictions.*, DebertaV2's legacy head) keep their names.
#pragma once

#include <optional>
#include <string>

#include "core/config.h"

namespace roformer::model {

enum class HfFamily { kRoFormer, kBert, kDebertaV2 };

// The family for a model's position scheme: rotary RoFormer, absolute BERT, disentangled
// DebertaV2; none has no Hugging Face counterpart (nullopt). Whether the rest of the model fits
// (norm, attention, embedding size, ...) is the exporter's to check.
std::optional<HfFamily> hf_family(const config::ModelConfig& m);

// Our name (RoFormer's) as `family` spells it, and back. Names outside the renamed parts pass unchanged.
std::string to_hf_name(const std::string& name, HfFamily family);
std::string from_hf_name(const std::string& name, HfFamily family);

}  // namespace roformer::model
