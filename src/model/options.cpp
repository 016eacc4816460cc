// The model section's rules; see options.h. A position scheme's keys are its own file's
// (validate_position_keys, model/position.cpp).
#include "model/options.h"

#include <fmt/format.h>

#include "model/position.h"

namespace roformer::model {

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
}

}  // namespace roformer::model
