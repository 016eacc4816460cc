// The model section's rules; see options.h. A position scheme's keys are its own file's
// (validate_position_keys, model/position.cpp).
#include "model/options.h"

#include <fmt/format.h>

#include "model/position.h"

namespace roformer::model {

namespace {

// The keys that shape layers differently (ModernBERT's): settings that would be silently ignored, or
// that the attention cannot take.
void validate_layer_kinds(const config::ModelConfig& m) {
  if (!m.first_attention_norm && m.norm != config::Norm::kPre)
    config::invalid("model.first_attention_norm: false applies to model.norm: pre only (post-LN normalizes after "
                    "the attention); remove it or set model.norm: pre");
  const config::ModelConfig defaults;
  if (m.local_attention == 0) {
    if (m.global_attention_every != defaults.global_attention_every)
      config::invalid(fmt::format("model.global_attention_every = {} applies with model.local_attention > 0 only; "
                                  "remove it or set model.local_attention (ModernBERT: 128)",
                                  m.global_attention_every));
    if (m.local_rotary_base != defaults.local_rotary_base)
      config::invalid(fmt::format("model.local_rotary_base = {} applies with model.local_attention > 0 only; remove "
                                  "it or set model.local_attention (ModernBERT: 128)", m.local_rotary_base));
    return;
  }
  if (m.local_attention % 2 != 0)
    config::invalid(fmt::format("model.local_attention ({}) must be even: a token attends to local_attention/2 on "
                                "each side (ModernBERT: 128)", m.local_attention));
  if (m.attention == config::Attention::kLinear)
    config::invalid("model.local_attention needs model.attention: softmax (linear attention has no score matrix to "
                    "band); set model.local_attention: 0");
}

}  // namespace

void validate_model_config(const config::ModelConfig& m) {
  config::Config c;
  c.model = m;
  config::check_table(c, "model");
  if (m.hidden_size % m.num_heads != 0)
    config::invalid(fmt::format("model.hidden_size ({}) must be divisible by model.num_heads ({})", m.hidden_size,
                                m.num_heads));
  if (config::head_dim(m) % 2 != 0)
    config::invalid(fmt::format("the head dimension model.hidden_size / model.num_heads = {} must be even (rotary "
                                "embeddings rotate pairs of dimensions); change model.num_heads or model.hidden_size",
                                config::head_dim(m)));
  if (m.embedding_size > m.hidden_size)
    config::invalid(fmt::format("model.embedding_size ({}) must be <= model.hidden_size ({}), or 0 to use hidden_size",
                                m.embedding_size, m.hidden_size));
  if (m.vocab_size != 0 && m.vocab_size < 6)
    config::invalid(fmt::format("model.vocab_size ({}) must leave room for the 5 special tokens; use 0 to take it "
                                "from the tokenizer", m.vocab_size));
  validate_position_keys(m);
  validate_layer_kinds(m);
}

}  // namespace roformer::model
