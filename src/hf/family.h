// The Hugging Face model families roformer exports to (`roformer export --format hf`) and starts
// from (`train --init-from`), one file each, holding all we know of the family: the position scheme
// it computes, what it calls our parameters, its config.json both ways, and the models it cannot
// express.
//   hf/roformer.cpp    RoFormerForMaskedLM    model.position rotary
//   hf/bert.cpp        BertForMaskedLM        model.position absolute
//   hf/deberta_v2.cpp  DebertaV2ForMaskedLM   model.position disentangled
// One table (families()) serves both ways: by position scheme for an export, by config.json's
// model_type for --init-from. A scheme no family computes (none, and any new one until it has a
// family file here) is refused by export with the reason. Adding a family: its file, a line in
// families() (family.cpp) and its accessor below.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <utility>
#include <vector>

#include "core/config.h"

namespace roformer::core {
class JsonReader;
}
namespace roformer::model {
struct RoFormerOptions;
}

namespace roformer::hf {

// config.json's key (ours) for a model trained without biases (model.bias false): "roformer_bias": false.
inline constexpr const char* kNoBiasKey = "roformer_bias";

class Family {
 public:
  virtual ~Family() = default;

  virtual const char* model_type() const = 0;    // config.json "model_type"
  virtual const char* architecture() const = 0;  // config.json "architectures": the MLM class
  virtual const char* title() const = 0;         // its name in messages and the model card's title
  virtual const char* description() const = 0;   // the model card's first words
  // The position scheme it computes (at most one family per scheme), and how messages call it.
  virtual config::Position position() const = 0;
  virtual const char* positions_phrase() const = 0;  // "rotary positions"

  // Throws roformer::Error saying why, for a model of position() that the family would load and
  // compute something else with (export_family refuses pre-LN and linear attention for all).
  virtual void check_expressible(const model::RoFormerOptions& options) const;
  // The family's own keys of config.json; `config` holds the common ones (config_json).
  virtual void write_config(const model::RoFormerOptions& options, nlohmann::json& config) const = 0;
  // Its own keys of a config.json into `m`, which holds the common ones (read_config_json); a
  // setting roformer does not compute is refused by name.
  virtual void read_config(const core::JsonReader& config, config::ModelConfig& m) const = 0;
  // Whether its models always have a token-type table: an export of a model without token types
  // then writes one all-zero row (which adds nothing), and --init-from drops it again.
  virtual bool token_types_always() const { return true; }
  // The parts a released checkpoint of the family may carry that masked-language-model training does
  // not compute (BERT's pooler and next-sentence head, in BertForPreTraining checkpoints): (prefix of
  // their tensors' names, what they are). --init-from leaves them out and says so.
  virtual std::vector<std::pair<std::string, std::string>> unused_parts() const { return {}; }

  // Our parameter names (Hugging Face RoFormer's) as the family spells them, and back. Names
  // outside the renamed parts (the MLM head, the parts named as the family names them) pass unchanged.
  std::string to_hf_name(const std::string& ours) const;
  std::string from_hf_name(const std::string& theirs) const;

 protected:
  virtual const char* prefix() const = 0;  // of the encoder's names: "roformer.", "bert.", "deberta."
  // Parts of a name the family spells otherwise: (ours, theirs), each replaced once.
  virtual std::vector<std::pair<std::string, std::string>> renamed_parts() const { return {}; }
};

const Family& roformer_family();    // hf/roformer.cpp
const Family& bert_family();        // hf/bert.cpp
const Family& deberta_v2_family();  // hf/deberta_v2.cpp

// Every family, in the order messages list them.
const std::vector<const Family*>& families();

// The family of an export of this model, or the refusal naming the setting it cannot express
// (pre-LayerNorm, linear attention, a position scheme no family computes, the family's own).
const Family& export_family(const model::RoFormerOptions& options);

// config.json for the family: the keys every family shares, then its own.
nlohmann::json config_json(const Family& family, const model::RoFormerOptions& options);

// config.json of an export (read from `file`, which messages name) -> its family and the model its
// weights belong to (dropout and the initializer left at their defaults). A key of the wrong type, a
// family we do not know and a setting roformer does not compute are errors naming the key.
struct ExportedModel {
  const Family* family = nullptr;
  config::ModelConfig model;
};
ExportedModel read_config_json(const nlohmann::json& config, const std::string& file);

}  // namespace roformer::hf
