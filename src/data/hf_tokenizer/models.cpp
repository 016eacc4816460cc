// The vocabulary map and the choice of model (models.h).
#include "data/hf_tokenizer/models.h"

#include <algorithm>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "data/hf_tokenizer/components.h"

namespace roformer::data::hf {

void VocabMap::insert(std::string token, int32_t id) {
  const auto it = ids_.find(token);
  if (it != ids_.end()) {
    it->second = id;
    return;
  }
  tokens_.push_back(std::move(token));
  ids_.emplace(tokens_.back(), id);
}

std::vector<const std::string*> VocabMap::by_id() const {
  int32_t end = 0;
  for (const auto& [token, id] : ids_) end = std::max(end, id + 1);
  std::vector<const std::string*> out(static_cast<size_t>(end), nullptr);
  for (const std::string& token : tokens_) out[static_cast<size_t>(ids_.at(token))] = &token;
  return out;
}

void Model::read_vocab_object(const core::JsonReader& j) {
  const nlohmann::json& vocab = j.at("vocab");
  if (!vocab.is_object()) j.wrong("vocab", "an object of token: id");
  for (const auto& [token, id] : vocab.items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() > INT32_MAX) j.wrong("vocab", id, "ids from 0 to 2^31-1");
    vocab_.insert(token, id.get<int32_t>());
  }
  finish_vocab();
}

std::unique_ptr<Model> parse_model(const core::JsonReader& j) {
  switch (one_of(j, "type", {"WordPiece", "BPE", "Unigram"})) {
    case 0: return make_wordpiece(j);
    case 1: return make_bpe(j);
    default: return make_unigram(j);
  }
}

}  // namespace roformer::data::hf
