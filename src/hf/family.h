// The Hugging Face model families roformer exports to (`roformer export --format hf`) and starts
// from (`train --init-from`), one file each, holding all we know of the family: which of our models
// it is, what it calls our parameters (and how its tensors are laid out), its config.json both ways,
// and the models it cannot express.
//   hf/roformer.cpp    RoFormerForMaskedLM     rotary positions, post-LN, MLP feed-forward
//   hf/bert.cpp        BertForMaskedLM         learned absolute positions
//   hf/deberta_v2.cpp  DebertaV2ForMaskedLM    disentangled attention over relative positions
//   hf/roberta.cpp     RobertaForMaskedLM      learned absolute positions from padding_idx + 1
//   hf/modernbert.cpp  ModernBertForMaskedLM   rotary positions, pre-LN, GeGLU, local/global layers
// A family is chosen by what the model is, not by one of its parts: each family claims the models
// of its architecture (claims(): the position scheme and the feed-forward; RoFormer and ModernBERT
// are both rotary), an export takes the family model.family names or else (auto) the one chosen by
// architecture that claims the model, and --init-from the family of config.json's model_type. RoBERTa
// computes what BERT does (its position rows offset, laid out at export and import): it is chosen by
// name only (model.family: roberta, which `config from-hf` writes for a RoBERTa directory). A model no family claims (no positions, linear attention) is refused
// by export with the reason. Adding a family: its file, a line in families() (family.cpp) and its
// accessor below.
#pragma once

#include <torch/types.h>

#include <nlohmann/json_fwd.hpp>

#include <map>
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

// Whether `name` (a tensor's) begins with `prefix`: the families' name mappings.
inline bool starts_with(const std::string& name, const std::string& prefix) { return name.rfind(prefix, 0) == 0; }

// Tensors by name, in the order a state dict lists them.
using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

class Family {
 public:
  virtual ~Family() = default;

  virtual const char* model_type() const = 0;    // config.json "model_type"
  virtual const char* architecture() const = 0;  // config.json "architectures": the MLM class
  virtual const char* title() const = 0;         // its name in messages and the model card's title
  virtual const char* description() const = 0;   // the model card's first words
  // What its models are, for messages listing the families ("rotary positions, post-LayerNorm").
  virtual const char* what() const = 0;
  // The position scheme its models compute (two families may share one).
  virtual config::Position position() const = 0;

  // Whether `m` is of this family's architecture (its position scheme and feed-forward): at most
  // one family claims a model. An export of a model the family claims goes to it or is refused by
  // check_expressible.
  virtual bool claims(const config::ModelConfig& m) const = 0;
  // Whether model.family: auto may choose it among those that claim a model (false: by name only).
  virtual bool chosen_by_architecture() const { return true; }
  // Throws roformer::Error saying why, for a model the family claims but would load and compute
  // something else with (pre-LN where it is post-LN only, a rotary base it hard-codes otherwise).
  virtual void check_expressible(const model::RoFormerOptions& options) const = 0;

  // config.json's keys for the family (model_type and architectures are there already).
  virtual void write_config(const model::RoFormerOptions& options, nlohmann::json& config) const = 0;
  // The model a config.json describes (its dropout and initializer left at their defaults); a
  // setting roformer does not compute is refused by name.
  virtual config::ModelConfig read_config(const core::JsonReader& config) const = 0;
  // Whether its models always have biases (BERT's do: an export of a model without writes zero
  // ones, which --init-from drops again) or say in config.json that they have none (ModernBERT).
  virtual bool biases_always() const { return true; }
  // Whether its models always have a token-type table: an export of a model without token types
  // then writes one all-zero row (which adds nothing), and --init-from drops it again.
  virtual bool token_types_always() const { return true; }
  // The parts a released checkpoint of the family may carry that masked-language-model training does
  // not compute (BERT's pooler and next-sentence head, in BertForPreTraining checkpoints): (prefix of
  // their tensors' names, what they are). --init-from leaves them out and says so.
  virtual std::vector<std::pair<std::string, std::string>> unused_parts() const { return {}; }

  // Our tensors (RoFormerForMaskedLMImpl::hf_named_parameters' names, tied aliases left out) as the
  // family's state dict holds them, and back. The default renames each (to_hf_name); a family whose
  // tensors are laid out otherwise (ModernBERT's one Wqkv) overrides both. from_hf takes the
  // family's whole state dict and leaves what it does not know under its own name, for the caller
  // to report as unexpected.
  virtual NamedTensors to_hf(const NamedTensors& ours, const config::ModelConfig& m) const;
  virtual std::map<std::string, torch::Tensor> from_hf(std::map<std::string, torch::Tensor> theirs,
                                                       const config::ModelConfig& m) const;

  // One of our parameter names (Hugging Face RoFormer's) as the family spells it, and back: an
  // outer name (outer_names) as listed, an encoder name with the family's prefix and renamed parts.
  // Other names (the parts named as the family names them) pass unchanged.
  virtual std::string to_hf_name(const std::string& ours) const;
  virtual std::string from_hf_name(const std::string& theirs) const;

 protected:
  virtual const char* prefix() const { return "roformer."; }  // of the encoder's names: "bert.", "deberta."
  // Parts of an encoder name the family spells otherwise: (ours, theirs), each replaced once, in order.
  virtual std::vector<std::pair<std::string, std::string>> renamed_parts() const { return {}; }
  // Whole-name prefixes the family spells otherwise, outside the encoder's prefix (the MLM head:
  // BERT's cls.predictions.* is RoBERTa's lm_head.*): the first that matches is replaced. A
  // read-only one maps theirs to ours only: a second spelling the family's checkpoints may carry
  // (DeBERTa's legacy: false head), never written.
  struct NamePrefix {
    std::string ours, theirs;
    bool read_only = false;
  };
  virtual std::vector<NamePrefix> outer_names() const { return {}; }
  // `name` (ours when to_theirs, else theirs) with its outer prefix mapped; empty when none matches.
  std::string outer_mapped(const std::string& name, bool to_theirs) const;
};

const Family& roformer_family();    // hf/roformer.cpp
const Family& bert_family();        // hf/bert.cpp
const Family& deberta_v2_family();  // hf/deberta_v2.cpp
const Family& modernbert_family();  // hf/modernbert.cpp
const Family& roberta_family();     // hf/roberta.cpp

// Every family, in the order messages list them.
const std::vector<const Family*>& families();

// The family of an export of this model (model.family's, or the one chosen by architecture that
// claims it), or the refusal naming the setting it cannot express (linear attention, a model no
// family claims, a model.family that does not claim it, the family's own).
const Family& export_family(const model::RoFormerOptions& options);

// config.json for the family: model_type, architectures, then the family's keys.
nlohmann::json config_json(const Family& family, const model::RoFormerOptions& options);

// config.json of a model directory (read from `file`, which messages name after `command`: "--init-from",
// "config from-hf") -> its family and the model its
// weights belong to (dropout and the initializer left at their defaults). A key of the wrong type, a
// family we do not know and a setting roformer does not compute are errors naming the key.
struct ExportedModel {
  const Family* family = nullptr;
  config::ModelConfig model;
};
ExportedModel read_config_json(const nlohmann::json& config, const std::string& file,
                               const std::string& command = "--init-from");

// ---- What the BERT-like families (RoFormer, BERT, DeBERTa-v2) share, for their files.
// Throws the refusal of a pre-LayerNorm model, local attention or a GeGLU feed-forward, which
// `title`'s post-LN layers of one kind cannot compute.
void check_bert_layers(const model::RoFormerOptions& options, const char* title);
// Their common config.json keys (BertConfig's names), and back into a model section with
// post-LN softmax attention and `position`.
void write_bert_config(const model::RoFormerOptions& options, nlohmann::json& config);
config::ModelConfig read_bert_config(const core::JsonReader& config, config::Position position);
// config.json's activation name of ours, and ours of config.json's `key` ("hidden_act").
const char* hf_activation(config::Activation act);
config::Activation activation_from_hf(const core::JsonReader& config, const std::string& key);

}  // namespace roformer::hf
