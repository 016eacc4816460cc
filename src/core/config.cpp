// YAML loading, overrides, validation and the printed reference for the run configuration.
//
// Everything is driven by one table of fields (build_fields below). Each entry knows its section,
// key, comment, how to read itself from a YAML node (with a type check), how to print itself, and
// its allowed range or choices. Unknown keys get a "did you mean" from edit distance.
#include "core/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <type_traits>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/spelling.h"

namespace roformer::config {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Allowed values of a field: a numeric interval (bounds open or closed) or a list of choices.
struct Constraint {
  double lo = -kInf;
  double hi = kInf;
  bool lo_open = false;
  bool hi_open = false;
  std::vector<std::string> choices;

  bool allows(double v) const {
    if (lo_open ? !(v > lo) : !(v >= lo)) return false;
    if (hi_open ? !(v < hi) : !(v <= hi)) return false;
    return true;
  }
  std::string describe() const {
    auto num = [](double x) { return fmt::format("{}", x); };
    if (lo > -kInf && hi < kInf)
      return fmt::format("{}{}, {}{}", lo_open ? "(" : "[", num(lo), num(hi), hi_open ? ")" : "]");
    if (lo > -kInf) return fmt::format("{} {}", lo_open ? ">" : ">=", num(lo));
    if (hi < kInf) return fmt::format("{} {}", hi_open ? "<" : "<=", num(hi));
    return "any";
  }
};

Constraint at_least(double lo) { return Constraint{lo, kInf, false, false, {}}; }
Constraint positive() { return Constraint{0, kInf, true, false, {}}; }
Constraint unit_interval() { return Constraint{0, 1, false, false, {}}; }
Constraint unit_interval_open_right() { return Constraint{0, 1, false, true, {}}; }
Constraint one_of(std::vector<std::string> c) {
  Constraint k;
  k.choices = std::move(c);
  return k;
}

struct Field {
  std::string section;
  std::string key;
  std::string comment;
  std::string type;  // for the reference: int, float, bool, string, list
  Constraint constraint;
  std::function<void(Config&, const YAML::Node&, const std::string& path)> set;  // parsed, checked, assigned
  std::function<void(const Config&)> check;       // throws when the value is out of range or choices
  std::function<std::string(const Config&)> get;  // YAML text of the value
  std::function<ConfigValue(const Config&)> value;
  std::string path() const { return section + "." + key; }
};

std::string scalar_text(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

std::string quote_if_needed(const std::string& s) {
  YAML::Emitter out;
  out << s;
  return out.c_str();
}

[[noreturn]] void type_error(const std::string& path, const YAML::Node& node, const char* expected) {
  throw Error(fmt::format("config key {}: expected {}, got '{}'", path, expected, scalar_text(node)));
}

// An integer scalar; integral floats in scientific notation (1e6) are accepted for step counts.
int64_t parse_integer(const YAML::Node& node, const std::string& path) {
  const std::string& s = node.Scalar();
  size_t used = 0;
  int64_t v = 0;
  auto too_large = [&] {
    throw Error(fmt::format("config key {} = {} is too large for a 64-bit integer (at most {}); give a smaller "
                            "value", path, s, std::numeric_limits<int64_t>::max()));
  };
  try {
    v = std::stoll(s, &used, 10);
  } catch (const std::out_of_range&) {
    too_large();
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != 0 && used == s.size()) return v;
  try {
    double d = std::stod(s, &used);
    if (used == s.size() && std::floor(d) == d) {
      if (std::fabs(d) >= 9.2e18) too_large();
      return static_cast<int64_t>(d);
    }
  } catch (const std::out_of_range&) {
    too_large();
  } catch (const std::invalid_argument&) {
  }
  type_error(path, node, "an integer");
}

double parse_number(const YAML::Node& node, const std::string& path) {
  const std::string& s = node.Scalar();
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != s.size() || !std::isfinite(v)) type_error(path, node, "a finite number");
  return v;
}

std::vector<std::string> parse_string_list(const YAML::Node& node, const std::string& path) {
  if (node.IsScalar()) return {node.Scalar()};
  if (!node.IsSequence()) type_error(path, node, "a list of strings");
  std::vector<std::string> out;
  for (const auto& item : node) {
    if (!item.IsScalar()) type_error(path, node, "a list of strings");
    out.push_back(item.Scalar());
  }
  return out;
}

// The keys of a train.phases entry, in the order they are printed.
const std::vector<std::string> kPhaseKeys = {"from_step", "max_seq_len", "batch_size"};

// train.phases: a list of mappings {from_step, max_seq_len, batch_size}; an unknown or repeated key
// is an error naming the entry.
std::vector<PhaseConfig> parse_phases(const YAML::Node& node, const std::string& path) {
  const char* expected = "a list of phases like [{from_step: 9000, max_seq_len: 512, batch_size: 64}]";
  if (!node.IsSequence()) type_error(path, node, expected);
  std::vector<PhaseConfig> out;
  for (size_t i = 0; i < node.size(); ++i) {
    const YAML::Node item = node[i];
    const std::string where = fmt::format("{}[{}]", path, i);
    if (!item.IsMap()) type_error(where, item, "a mapping {from_step: N, max_seq_len: T, batch_size: B}");
    PhaseConfig phase;
    std::map<std::string, bool> seen;
    for (const auto& kv : item) {
      const std::string key = scalar_text(kv.first);
      if (const auto colon = key.find(':'); colon != std::string::npos)  // {from_step:540} is one YAML scalar
        throw Error(fmt::format("config key {}: '{}' needs a space after its colon ('{}: {}'), or quoted keys "
                                "({{\"from_step\":540}}), for YAML to read a key and a value", where, key,
                                key.substr(0, colon), key.substr(colon + 1)));
      if (std::find(kPhaseKeys.begin(), kPhaseKeys.end(), key) == kPhaseKeys.end())
        throw Error(fmt::format("config key {} has no key '{}'; did you mean '{}'? A phase takes {}", where, key,
                                core::nearest(key, kPhaseKeys), fmt::join(kPhaseKeys, ", ")));
      if (!seen.emplace(key, true).second)
        throw Error(fmt::format("config key {}: '{}' appears twice; give it once", where, key));
      const YAML::Node& value = kv.second;
      if (!value.IsScalar()) type_error(where + "." + key, value, "an integer");
      const int64_t v = parse_integer(value, where + "." + key);
      (key == "from_step" ? phase.from_step : key == "max_seq_len" ? phase.max_seq_len : phase.batch_size) = v;
    }
    if (!seen.count("from_step"))
      throw Error(fmt::format("config key {} has no from_step: say from which step on the phase trains (e.g. "
                              "{{from_step: 9000, max_seq_len: 512}})", where));
    out.push_back(phase);
  }
  return out;
}

template <class T>
T parse_value(const YAML::Node& node, const std::string& path) {
  if (!node.IsDefined() || node.IsNull())
    throw Error(fmt::format("config key {} has no value; give one or remove the key to keep the default",
                            path));
  if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    return parse_string_list(node, path);
  } else if constexpr (std::is_same_v<T, std::vector<PhaseConfig>>) {
    return parse_phases(node, path);
  } else {
    if (!node.IsScalar()) {
      type_error(path, node,
                 std::is_same_v<T, bool>      ? "true or false"
                 : std::is_same_v<T, int64_t> ? "an integer"
                 : std::is_same_v<T, double>  ? "a number"
                                              : "a string");
    }
    if constexpr (std::is_same_v<T, std::string>) {
      return node.Scalar();
    } else if constexpr (std::is_same_v<T, bool>) {
      const std::string& s = node.Scalar();
      if (s == "true" || s == "True" || s == "TRUE") return true;
      if (s == "false" || s == "False" || s == "FALSE") return false;
      type_error(path, node, "true or false");
    } else if constexpr (std::is_same_v<T, int64_t>) {
      return parse_integer(node, path);
    } else {
      static_assert(std::is_same_v<T, double>);
      return parse_number(node, path);
    }
  }
}

template <class T>
std::string format_value(const T& v) {
  if constexpr (std::is_same_v<T, std::vector<PhaseConfig>>) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      out += fmt::format("{}{{from_step: {}", i ? ", " : "", v[i].from_step);
      if (v[i].max_seq_len != 0) out += fmt::format(", max_seq_len: {}", v[i].max_seq_len);
      if (v[i].batch_size != 0) out += fmt::format(", batch_size: {}", v[i].batch_size);
      out += "}";
    }
    return out + "]";
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + quote_if_needed(v[i]);
    return out + "]";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return v.empty() ? "\"\"" : quote_if_needed(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_same_v<T, double>) {
    std::string s = fmt::format("{}", v);
    // Keep floats recognizable as floats when printed back (1 -> 1.0).
    if (s.find_first_of(".eE") == std::string::npos) s += ".0";
    return s;
  } else {
    return fmt::format("{}", v);
  }
}

// The names of each enumerated setting, in the order `roformer config defaults` lists them: the
// one place a name is spelled.
template <class E>
const std::vector<std::pair<E, const char*>>& enum_names();
template <>
const std::vector<std::pair<Position, const char*>>& enum_names() {
  static const std::vector<std::pair<Position, const char*>> names = {
      {Position::kRotary, "rotary"},
      {Position::kAbsolute, "absolute"},
      {Position::kNone, "none"},
      {Position::kDisentangled, "disentangled"}};
  return names;
}
template <>
const std::vector<std::pair<RelativeTerms, const char*>>& enum_names() {
  static const std::vector<std::pair<RelativeTerms, const char*>> names = {
      {RelativeTerms::kBoth, "c2p+p2c"}, {RelativeTerms::kC2P, "c2p"}, {RelativeTerms::kP2C, "p2c"}};
  return names;
}
template <>
const std::vector<std::pair<Norm, const char*>>& enum_names() {
  static const std::vector<std::pair<Norm, const char*>> names = {{Norm::kPost, "post"}, {Norm::kPre, "pre"}};
  return names;
}
template <>
const std::vector<std::pair<Attention, const char*>>& enum_names() {
  static const std::vector<std::pair<Attention, const char*>> names = {{Attention::kSoftmax, "softmax"},
                                                                       {Attention::kLinear, "linear"}};
  return names;
}
template <>
const std::vector<std::pair<Activation, const char*>>& enum_names() {
  static const std::vector<std::pair<Activation, const char*>> names = {
      {Activation::kGelu, "gelu"}, {Activation::kGeluTanh, "gelu_tanh"}, {Activation::kRelu, "relu"}};
  return names;
}
template <>
const std::vector<std::pair<Precision, const char*>>& enum_names() {
  static const std::vector<std::pair<Precision, const char*>> names = {
      {Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"}, {Precision::kFp16, "fp16"}};
  return names;
}
template <>
const std::vector<std::pair<ParamDtype, const char*>>& enum_names() {
  static const std::vector<std::pair<ParamDtype, const char*>> names = {
      {ParamDtype::kAuto, "auto"}, {ParamDtype::kFp32, "fp32"}, {ParamDtype::kBf16, "bf16"}};
  return names;
}

template <class E>
std::string enum_name(E value) {
  for (const auto& [v, name] : enum_names<E>())
    if (v == value) return name;
  return "?";  // unreachable: every enumerator has a name
}

template <class E>
std::vector<std::string> enum_choices() {
  std::vector<std::string> out;
  for (const auto& [v, name] : enum_names<E>()) out.push_back(name);
  return out;
}

template <class T>
const char* type_name() {
  if constexpr (std::is_same_v<T, std::vector<std::string>>) return "list";
  else if constexpr (std::is_same_v<T, std::vector<PhaseConfig>>) return "phases";
  else if constexpr (std::is_same_v<T, std::string> || std::is_enum_v<T>) return "string";
  else if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_same_v<T, double>) return "float";
  else return "int";
}

// A value read from YAML: an enumerated setting is read as its name.
template <class T>
T parse_field(const YAML::Node& node, const std::string& path, const Constraint& constraint) {
  if constexpr (std::is_enum_v<T>) {
    const std::string name = parse_value<std::string>(node, path);
    for (const auto& [v, n] : enum_names<T>())
      if (name == n) return v;
    throw Error(fmt::format("config key {} = '{}' is not allowed: choose one of {}", path, name,
                            fmt::join(constraint.choices, ", ")));
  } else {
    return parse_value<T>(node, path);
  }
}

template <class T>
std::string format_field(const T& v) {
  if constexpr (std::is_enum_v<T>) return quote_if_needed(enum_name(v));
  else return format_value(v);
}

// Throws when `value` is outside the field's range or choices.
template <class T>
void check_allowed(const T& value, const Constraint& constraint, const std::string& path) {
  if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>) {
    if (!constraint.allows(static_cast<double>(value)))
      throw Error(fmt::format("config key {} = {} is out of range: allowed {}", path, format_value(value),
                              constraint.describe()));
  }
  if constexpr (std::is_same_v<T, std::string>) {
    const auto& ch = constraint.choices;
    if (!ch.empty() && std::find(ch.begin(), ch.end(), value) == ch.end())
      throw Error(fmt::format("config key {} = '{}' is not allowed: choose one of {}", path, value,
                              fmt::join(ch, ", ")));
  }
}

template <class Accessor>
void add(std::vector<Field>& fields, const char* section, const char* key, Accessor access,
         const char* comment, Constraint constraint = {}) {
  using T = std::decay_t<decltype(access(std::declval<Config&>()))>;
  if constexpr (std::is_enum_v<T>) constraint.choices = enum_choices<T>();
  Field f;
  f.section = section;
  f.key = key;
  f.comment = comment;
  f.type = type_name<T>();
  f.constraint = constraint;
  f.set = [access, constraint](Config& c, const YAML::Node& node, const std::string& path) {
    T value = parse_field<T>(node, path, constraint);
    check_allowed(value, constraint, path);
    access(c) = std::move(value);
  };
  f.check = [access, constraint, path = f.path()](const Config& c) {
    check_allowed(access(const_cast<Config&>(c)), constraint, path);
  };
  f.get = [access](const Config& c) { return format_field(access(const_cast<Config&>(c))); };
  f.value = [access](const Config& c) {
    const auto& v = access(const_cast<Config&>(c));
    if constexpr (std::is_enum_v<T>) return ConfigValue(enum_name(v));
    else if constexpr (std::is_same_v<T, std::vector<PhaseConfig>>) return ConfigValue(format_value(v));
    else return ConfigValue(v);
  };
  fields.push_back(std::move(f));
}

#define ROFORMER_FIELD(sec, key, comment, ...) \
  add(f, #sec, #key, [](Config& c) -> auto& { return c.sec.key; }, comment, ##__VA_ARGS__)

std::vector<Field> build_fields() {
  std::vector<Field> f;
  // model
  ROFORMER_FIELD(model, vocab_size, "Vocabulary size V; 0 takes it from the tokenizer", at_least(0));
  ROFORMER_FIELD(model, hidden_size, "Hidden size H", at_least(1));
  ROFORMER_FIELD(model, num_layers, "Number of encoder layers", at_least(1));
  ROFORMER_FIELD(model, num_heads, "Attention heads N; H must divide by N and H/N be even", at_least(1));
  ROFORMER_FIELD(model, intermediate_size, "Feed-forward inner size", at_least(1));
  ROFORMER_FIELD(model, embedding_size,
                 "Word-embedding size E; 0 means H; E < H adds an E->H projection (ALBERT-style)", at_least(0));
  ROFORMER_FIELD(model, max_position_embeddings,
                 "Rows of the rotary sin/cos table or of the learned absolute position table (longest sequence)",
                 at_least(1));
  ROFORMER_FIELD(model, position,
                 "rotary: RoPE in every attention layer; absolute: learned position embeddings added to the word "
                 "embeddings (BERT); none: no position information (a control); disentangled: DeBERTa's relative "
                 "attention (content-to-position and position-to-content scores from shared relative embeddings)");
  ROFORMER_FIELD(model, position_buckets,
                 "disentangled: relative distances up to half of this are kept, longer ones log-bucketed up to "
                 "max_relative_positions (DeBERTa-v2/v3); 0 keeps exact distances",
                 at_least(0));
  ROFORMER_FIELD(model, max_relative_positions,
                 "disentangled: distances from this on share the outermost bucket; 0 means max_position_embeddings",
                 at_least(0));
  ROFORMER_FIELD(model, pos_att_type,
                 "disentangled: the relative terms added to the content scores: content-to-position (c2p), "
                 "position-to-content (p2c) or both");
  ROFORMER_FIELD(model, share_att_key,
                 "disentangled: project the relative embeddings with the query/key weights (DeBERTa-v3); false adds "
                 "pos_key_proj / pos_query_proj");
  ROFORMER_FIELD(model, position_biased_input,
                 "disentangled: also add a learned absolute position table to the input embeddings (DeBERTa-v1; "
                 "limits sequences to max_position_embeddings)");
  ROFORMER_FIELD(model, enhanced_mask_decoder,
                 "disentangled: the MLM head reads the last layer re-run twice on queries plus learned absolute "
                 "positions (DeBERTa's EMD; pretraining head only; limits sequences to max_position_embeddings)");
  ROFORMER_FIELD(model, type_vocab_size, "Token-type embeddings (Hugging Face default 2); 0 disables",
                 at_least(0));
  ROFORMER_FIELD(model, hidden_dropout, "Dropout on embeddings and sublayer outputs", unit_interval_open_right());
  ROFORMER_FIELD(model, attention_dropout, "Dropout on attention probabilities", unit_interval_open_right());
  ROFORMER_FIELD(model, layer_norm_eps, "LayerNorm epsilon (Hugging Face default 1e-12)", positive());
  ROFORMER_FIELD(model, initializer_range, "Std of the normal weight initialization", positive());
  ROFORMER_FIELD(model, rotary_base, "Rotary base: theta_i = base^(-2i/D)", positive());
  ROFORMER_FIELD(model, rotary_value, "Also apply the rotary embedding to the values");
  ROFORMER_FIELD(model, norm, "post: LayerNorm after each residual (BERT, Hugging Face); pre: before, plus a final LayerNorm");
  ROFORMER_FIELD(model, attention, "softmax: scaled dot-product attention; linear: the paper's elu+1 linear attention");
  ROFORMER_FIELD(model, hidden_act, "Feed-forward activation (gelu_tanh: the tanh approximation, Hugging Face's gelu_pytorch_tanh)");
  ROFORMER_FIELD(model, bias,
                 "Additive biases in every linear layer and LayerNorm; false: none (ModernBERT; no bias adds and no "
                 "bias gradients), the MLM decoder's output bias kept. Exports write zero biases, so Hugging Face "
                 "loads them unchanged");
  ROFORMER_FIELD(model, gradient_checkpointing, "Recompute each layer in backward to save activation memory");
  // tokenizer
  ROFORMER_FIELD(tokenizer, model, "Existing SentencePiece .model to use; empty trains one into RUN_DIR/tokenizer");
  ROFORMER_FIELD(tokenizer, input, "Text files to train the tokenizer on; empty uses data.train_files");
  ROFORMER_FIELD(tokenizer, vocab_size, "Vocabulary size of a trained tokenizer, special tokens included", at_least(16));
  ROFORMER_FIELD(tokenizer, model_type, "SentencePiece algorithm", one_of({"unigram", "bpe"}));
  ROFORMER_FIELD(tokenizer, character_coverage, "Fraction of characters covered by the vocabulary (SentencePiece accepts 0.98 to 1)",
                 Constraint{0.98, 1, false, false, {}});
  ROFORMER_FIELD(tokenizer, input_sentence_size, "Lines sampled from large inputs (bounds memory and time)",
                 at_least(1));
  ROFORMER_FIELD(tokenizer, seed, "Seed of the sampling", at_least(0));
  // data
  ROFORMER_FIELD(data, train_files, "Training data: text, JSONL or Parquet files (.gz/.zst too), folders and glob patterns; or prepared directories");
  ROFORMER_FIELD(data, valid_files, "Validation data, as data.train_files; empty disables evaluation");
  ROFORMER_FIELD(data, prepared_dir, "Where prepared token shards are written; empty means RUN_DIR/data");
  ROFORMER_FIELD(data, max_seq_len, "Sequence length T, [CLS] and [SEP] included", at_least(8));
  ROFORMER_FIELD(data, packing, "full: pack documents into full sequences (no padding); document: one document per sequence, padded",
                 one_of({"full", "document"}));
  ROFORMER_FIELD(data, num_workers, "Background threads building batches", Constraint{0, 256, false, false, {}});
  ROFORMER_FIELD(data, prefetch, "Batches queued ahead of the training step", Constraint{1, 1024, false, false, {}});
  ROFORMER_FIELD(data, text_field, "JSONL field or Parquet column holding the text");
  // masking
  ROFORMER_FIELD(masking, mask_prob, "Fraction of positions chosen for prediction", Constraint{0, 1, true, true, {}});
  ROFORMER_FIELD(masking, mask_token_rate, "Of the chosen positions, fraction replaced by [MASK]", unit_interval());
  ROFORMER_FIELD(masking, random_token_rate, "Of the chosen positions, fraction replaced by a random token",
                 unit_interval());
  ROFORMER_FIELD(masking, whole_word, "Choose whole words (SentencePiece word-start pieces) instead of pieces");
  ROFORMER_FIELD(masking, exact_count, "Exactly round(p*n) positions per sequence (static shapes) instead of Bernoulli(p)");
  // optimizer
  ROFORMER_FIELD(optimizer, lr, "Peak learning rate", positive());
  ROFORMER_FIELD(optimizer, beta1, "AdamW beta1", unit_interval_open_right());
  ROFORMER_FIELD(optimizer, beta2, "AdamW beta2", unit_interval_open_right());
  ROFORMER_FIELD(optimizer, eps, "AdamW epsilon", positive());
  ROFORMER_FIELD(optimizer, weight_decay, "Decoupled weight decay for Linear weights", at_least(0));
  ROFORMER_FIELD(optimizer, decay_embeddings, "Also decay the embedding matrices");
  ROFORMER_FIELD(optimizer, grad_clip, "Clip the global gradient norm to this; 0 disables", at_least(0));
  ROFORMER_FIELD(optimizer, fused, "Use the fused AdamW kernel (at::_fused_adamw_, CUDA and CPU); false: torch::optim::AdamW's per-parameter loop");
  // schedule
  ROFORMER_FIELD(schedule, type, "Decay after warmup: linear or cosine to min_lr at the last step; wsd (warmup-stable-decay): the peak until the last decay_fraction of the steps, then linear to min_lr; constant",
                 one_of({"linear", "cosine", "wsd", "constant"}));
  ROFORMER_FIELD(schedule, warmup_steps, "Linear warmup steps from 0 to optimizer.lr", at_least(0));
  ROFORMER_FIELD(schedule, min_lr, "Learning rate reached at the last step", at_least(0));
  ROFORMER_FIELD(schedule, decay_fraction, "wsd: fraction of train.steps at the end that decays linearly to min_lr",
                 Constraint{0, 1, true, false, {}});
  // train
  ROFORMER_FIELD(train, steps, "Optimizer steps", at_least(1));
  ROFORMER_FIELD(train, batch_size, "Sequences per micro-batch", at_least(1));
  ROFORMER_FIELD(train, grad_accum, "Micro-batches per optimizer step", at_least(1));
  ROFORMER_FIELD(train, precision, "fp32, bf16 (autocast) or fp16 (autocast + dynamic loss scaling, CUDA only)");
  ROFORMER_FIELD(train, param_dtype,
                 "Dtype the step computes with: fp32 (parameters fp32; bf16 runs under autocast), or bf16 (with "
                 "precision bf16: parameters, activations and residual stream bf16 without autocast; the optimizer "
                 "keeps fp32 master weights, accumulates gradients in fp32, and checkpoints save the fp32 masters); "
                 "auto: bf16 on CUDA with precision bf16, fp32 otherwise (config.yaml records the choice)");
  ROFORMER_FIELD(train, device, "auto (CUDA when available), cpu, cuda or cuda:N");
  ROFORMER_FIELD(train, cuda_graph,
                 "CUDA: replay each micro-batch's forward + backward and the update between logging steps as "
                 "captured CUDA graphs (one per batch shape; the first of each runs eagerly); false: every step "
                 "eagerly. Single process, fused AdamW, bf16 or fp32, no gradient checkpointing; otherwise eager");
  ROFORMER_FIELD(train, seed, "Seed of initialization, data order, masking and dropout", at_least(0));
  ROFORMER_FIELD(train, run_dir, "Directory for logs, metrics, checkpoints and the resolved config");
  ROFORMER_FIELD(train, num_threads, "CPU intra-op threads; 0 keeps LibTorch's default", Constraint{0, 1024, false, false, {}});
  ROFORMER_FIELD(train, phases,
                 "Later sequence-length phases, e.g. [{from_step: 9000, max_seq_len: 512, batch_size: 64}]: from that "
                 "step (0-based) on, sequences of max_seq_len tokens, batch_size per micro-batch (either left out: "
                 "the previous phase's). The steps before the first are data.max_seq_len and train.batch_size. One "
                 "prepared corpus, one schedule over train.steps (docs/training.md)");
  // checkpoint
  ROFORMER_FIELD(checkpoint, every, "Save every N steps; 0 saves only at the end (and on SIGINT/SIGTERM)",
                 at_least(0));
  ROFORMER_FIELD(checkpoint, keep_last, "Complete checkpoints kept; older ones are deleted", at_least(1));
  // logging
  ROFORMER_FIELD(logging, every, "Log a progress line and a metrics record every N steps", at_least(1));
  ROFORMER_FIELD(logging, progress, "auto: a live bar on a terminal, plain lines otherwise",
                 one_of({"auto", "bar", "plain"}));
  ROFORMER_FIELD(logging, level, "Console log level", one_of({"trace", "debug", "info", "warn", "error"}));
  ROFORMER_FIELD(logging, tensorboard,
                 "Write TensorBoard event files to RUN_DIR/tensorboard (scalars at every logging step and evaluation, "
                 "the config, HParams); false writes none");
  // eval
  ROFORMER_FIELD(eval, every, "Evaluate on the validation set every N steps; 0 only at the end", at_least(0));
  ROFORMER_FIELD(eval, max_sequences, "Validation sequences evaluated (a fixed, deterministic set)", at_least(1));
  ROFORMER_FIELD(eval, batch_size, "Sequences per evaluation batch", at_least(1));
  ROFORMER_FIELD(eval, seed, "Seed of the evaluation masks (fixed so figures compare across runs)", at_least(0));
  ROFORMER_FIELD(eval, mask_prob, "Fraction of positions predicted at evaluation, 80/10/10 by piece whatever masking.* trains with, so accuracies compare across recipes",
                 Constraint{0, 1, true, false, {}});
  ROFORMER_FIELD(eval, max_seq_len,
                 "Sequence length of the validation sequences; 0: the length training ends with (train.phases' last, "
                 "else data.max_seq_len)",
                 at_least(0));
  // distributed
  ROFORMER_FIELD(distributed, backend, "Collectives when torchrun/SLURM start several processes: auto (nccl on CUDA, gloo on CPU), gloo or nccl",
                 one_of({"auto", "gloo", "nccl"}));
  ROFORMER_FIELD(distributed, timeout_s, "Seconds any rendezvous or collective may wait before the run stops naming the missing rank",
                 at_least(1));
  ROFORMER_FIELD(distributed, bucket_mb, "Gradient all-reduce bucket size in MiB (buckets start during backward)", positive());
  return f;
}
#undef ROFORMER_FIELD

const std::vector<Field>& fields() {
  static const std::vector<Field> table = build_fields();
  return table;
}

std::vector<std::string> section_names() {
  std::vector<std::string> out;
  for (const auto& f : fields())
    if (std::find(out.begin(), out.end(), f.section) == out.end()) out.push_back(f.section);
  return out;
}

// Keys renamed since configs (and checkpoints, which store theirs) were written: the old name
// still sets the new key.
const std::map<std::string, std::string> kRenamedKeys = {{"data.jsonl_field", "data.text_field"}};

const Field* find_field(const std::string& path) {
  for (const auto& f : fields())
    if (f.path() == path) return &f;
  if (const auto renamed = kRenamedKeys.find(path); renamed != kRenamedKeys.end()) {
    spdlog::info("config key {} is now {}; it sets that key", path, renamed->second);
    return find_field(renamed->second);
  }
  return nullptr;
}

[[noreturn]] void unknown_key(const std::string& path) {
  throw Error(fmt::format("unknown config key {}; did you mean {}? (`roformer config defaults` lists every key)",
                          path, core::nearest(path, all_keys())));
}

// yaml-cpp keeps both entries of a repeated key, and a later one would silently win (or, for a
// section, merge into the first): each name is accepted once per mapping, with both lines named.
void check_once(std::map<std::string, int>& seen, const YAML::Node& key, const std::string& what,
                const std::string& prefix, const std::string& origin) {
  const std::string name = scalar_text(key);
  const int line = key.Mark().line + 1;
  const auto [it, fresh] = seen.emplace(name, line);
  if (!fresh)
    throw Error(fmt::format("{}: line {}: {} '{}' appears twice (first at line {}); YAML keeps only one of them, "
                            "so remove or merge the duplicate", origin, line, what, prefix + name, it->second));
}

void apply_yaml(Config& config, const YAML::Node& root, const std::string& origin) {
  if (!root || root.IsNull()) return;  // an empty file keeps every default
  if (!root.IsMap())
    throw Error(fmt::format("{}: the config must be a mapping of sections (model:, train:, ...)", origin));
  const auto sections = section_names();
  std::map<std::string, int> seen_sections;
  for (const auto& sec : root) {
    check_once(seen_sections, sec.first, "section", "", origin);
    const std::string name = scalar_text(sec.first);
    if (std::find(sections.begin(), sections.end(), name) == sections.end())
      throw Error(fmt::format("{}: unknown config section '{}'; did you mean '{}'? Sections: {}", origin, name,
                              core::nearest(name, sections), fmt::join(sections, ", ")));
    if (sec.second.IsNull()) continue;
    if (!sec.second.IsMap())
      throw Error(fmt::format("{}: section '{}' must be a mapping of keys", origin, name));
    std::map<std::string, int> seen_keys;
    for (const auto& kv : sec.second) {
      check_once(seen_keys, kv.first, "key", name + ".", origin);
      const std::string path = name + "." + scalar_text(kv.first);
      const Field* f = find_field(path);
      if (!f) unknown_key(path);
      f->set(config, kv.second, path);
    }
  }
}

// Where content lines are (1-based; 0: none), found by scanning the text: yaml-cpp 0.7's LoadAll
// stops at an empty document and loops forever on some malformed input, and Load returns an empty
// document for text starting with ',' and ignores the rest (both found by tests/fuzz/fuzz_config).
struct ContentLines {
  int first = 0;            // the first line that is not blank, a comment or a document marker
  int second_document = 0;  // the first content line after a `---` or `...` line that follows content
};

ContentLines scan_content(const std::string& text) {
  ContentLines found;
  std::istringstream in(text);
  std::string line;
  bool separated = false;
  for (int number = 1; std::getline(in, line); ++number) {
    std::string rest = line;
    const bool marker = (line.rfind("---", 0) == 0 || line.rfind("...", 0) == 0) &&
                        (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
    if (marker) {
      if (found.first > 0) separated = true;
      rest = line.substr(3);
    }
    const size_t start = rest.find_first_not_of(" \t\r");
    if (start == std::string::npos || rest[start] == '#') continue;
    if (separated) {
      found.second_document = number;
      break;
    }
    if (found.first == 0) found.first = number;
  }
  return found;
}

// The one YAML document of a config. A later document would be ignored by Load, so it is an error.
YAML::Node load_document(const std::string& yaml_text, const std::string& origin) {
  const ContentLines lines = scan_content(yaml_text);
  if (lines.second_document > 0)
    throw Error(fmt::format("{}: line {}: a second YAML document (after a '---' line); a config is one document, "
                            "and the later ones would be ignored: merge them into one or remove the '---'",
                            origin, lines.second_document));
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}: malformed YAML at line {}, column {}: {}", origin, e.mark.line + 1,
                            e.mark.column + 1, e.msg));
  }
  if ((!root || root.IsNull()) && lines.first > 0) {
    std::istringstream in(yaml_text);
    std::string line;
    for (int n = 0; n < lines.first; ++n) std::getline(in, line);
    const std::string trimmed = line.substr(line.find_first_not_of(" \t"));
    if (trimmed.rfind("~", 0) != 0 && trimmed.rfind("null", 0) != 0 && trimmed.rfind("Null", 0) != 0 &&
        trimmed.rfind("NULL", 0) != 0)
      throw Error(fmt::format("{}: malformed YAML at line {}: '{}' starts no mapping of sections (model:, train:, "
                              "...), so nothing after it would be read", origin, lines.first, trimmed));
  }
  return root;
}

}  // namespace

std::vector<std::string> all_keys() {
  std::vector<std::string> out;
  for (const auto& f : fields()) out.push_back(f.path());
  return out;
}

std::vector<std::pair<std::string, ConfigValue>> values(const Config& config) {
  std::vector<std::pair<std::string, ConfigValue>> out;
  for (const auto& f : fields()) out.emplace_back(f.path(), f.value(config));
  return out;
}

std::vector<ConfigChange> diff(const Config& before, const Config& after) {
  std::vector<ConfigChange> out;
  for (const auto& f : fields()) {
    std::string a = f.get(before), b = f.get(after);
    if (a != b) out.push_back({f.path(), std::move(a), std::move(b)});
  }
  return out;
}

void apply_override(Config& config, const std::string& assignment) {
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error(fmt::format("override '{}' is not of the form section.key=value (for example "
                            "--set train.steps=1000)", assignment));
  const std::string path = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  const Field* f = find_field(path);
  if (!f) {
    const auto sections = section_names();
    if (std::find(sections.begin(), sections.end(), path) != sections.end()) {
      std::vector<std::string> keys;
      for (const auto& field : fields())
        if (field.section == path) keys.push_back(field.key);
      throw Error(fmt::format("override '{}': '{}' is a section, not a key; set one key at a time with --set "
                              "{}.KEY=VALUE (its keys: {})", assignment, path, path, fmt::join(keys, ", ")));
    }
    unknown_key(path);
  }
  YAML::Node node;
  if (text.empty()) {
    node = YAML::Node(std::string());  // --set tokenizer.model= clears a string
  } else {
    try {
      node = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw Error(fmt::format("override {}: value '{}' is not valid YAML: {}", path, text, e.msg));
    }
  }
  f->set(config, node, path);
}

namespace {

// The config of a loaded document: defaults, the document's keys, then the overrides in order.
Config config_from_document(const YAML::Node& root, const std::vector<std::string>& overrides,
                            const std::string& origin) {
  Config config;
  apply_yaml(config, root, origin);
  for (const auto& o : overrides) apply_override(config, o);
  validate(config);
  return config;
}

}  // namespace

Config parse_config(const std::string& yaml_text, const std::vector<std::string>& overrides,
                    const std::string& origin) {
  return config_from_document(load_document(yaml_text, origin), overrides, origin);
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(fmt::format("config '{}' is a directory, not a YAML file; pass the file itself (for example "
                            "configs/tiny.yaml, or RUN_DIR/config.yaml of an earlier run)", path));
  errno = 0;
  std::ifstream in(path);
  if (!in)  // the system's reason: missing, not permitted, a name too long, ...
    throw Error(fmt::format("cannot read config file '{}': {}. Configs ship in configs/ (for example "
                            "configs/tiny.yaml)", path, errno ? std::strerror(errno) : "no such file or not readable"));
  std::stringstream ss;
  ss << in.rdbuf();
  const YAML::Node root = load_document(ss.str(), path);  // parsed once
  if (!root || root.IsNull())
    spdlog::warn("config file '{}' is empty: every key keeps its default (`roformer config defaults` lists them)",
                 path);
  return config_from_document(root, overrides, path);
}

std::string to_string(Position value) { return enum_name(value); }
std::string to_string(RelativeTerms value) { return enum_name(value); }
std::string to_string(Norm value) { return enum_name(value); }
std::string to_string(Attention value) { return enum_name(value); }
std::string to_string(Activation value) { return enum_name(value); }
std::string to_string(Precision value) { return enum_name(value); }
std::string to_string(ParamDtype value) { return enum_name(value); }

namespace {

// Far above any real step (the largest published ones hold a few million tokens), far below 2^63.
constexpr int64_t kMaxSequencesPerStep = int64_t{1} << 31;
constexpr int64_t kMaxTokensPerStep = int64_t{1} << 40;

[[noreturn]] void invalid(const std::string& msg) { throw Error("invalid config: " + msg); }

// Every field of `section` (every field: "") within its range and choices: a config built in code
// is held to what the YAML loader enforces.
void check_fields(const Config& c, const std::string& section) {
  for (const auto& f : fields())
    if (section.empty() || f.section == section) f.check(c);
}

// The keys of disentangled attention: set to anything but their defaults, they need
// model.position: disentangled (elsewhere they would be silently ignored).
const std::vector<std::string>& disentangled_keys() {
  static const std::vector<std::string> keys = {"position_buckets",      "max_relative_positions", "pos_att_type",
                                                "share_att_key",         "position_biased_input",
                                                "enhanced_mask_decoder"};
  return keys;
}

void validate_disentangled(const ModelConfig& m) {
  if (m.position != Position::kDisentangled) {
    Config given, defaults;
    given.model = m;
    for (const auto& f : fields())
      if (f.section == "model" &&
          std::find(disentangled_keys().begin(), disentangled_keys().end(), f.key) != disentangled_keys().end() &&
          f.get(given) != f.get(defaults))
        invalid(fmt::format("model.{} = {} applies to model.position: disentangled only (got {}); remove it or set "
                            "model.position: disentangled", f.key, f.get(given), to_string(m.position)));
    return;
  }
  if (m.attention == Attention::kLinear)
    invalid("model.attention: linear has no disentangled form (the relative scores need the full score matrix); "
            "use model.attention: softmax with model.position: disentangled");
  // DeBERTa's decoder brings in the absolute positions the input lacks; the original code
  // (EnhancedMaskDecoder) skips it when the input has them (position_biased_input).
  if (m.enhanced_mask_decoder && m.position_biased_input)
    invalid("model.enhanced_mask_decoder adds the absolute positions that the input embeddings lack, but "
            "model.position_biased_input: true already adds them there (DeBERTa's decoder is skipped then); set one "
            "of the two to false");
  // HF make_log_bucket_position: distances from buckets/2 on are log(d / mid) / log((max - 1) / mid), so
  // max_relative_positions - 1 must exceed mid = buckets/2.
  const int64_t buckets = m.position_buckets, max_relative = effective_max_relative_positions(m);
  if (buckets == 1) invalid("model.position_buckets must be 0 (exact distances) or at least 2 (got 1)");
  if (buckets > 0 && buckets / 2 >= max_relative - 1)
    invalid(fmt::format("model.position_buckets ({}) needs model.max_relative_positions above {} (got {}{}): "
                        "distances up to position_buckets/2 are exact and the log buckets reach from there to "
                        "max_relative_positions; lower model.position_buckets (DeBERTa-v3 uses half of "
                        "max_relative_positions) or set it to 0 for exact distances", buckets, buckets / 2 + 1,
                        max_relative, m.max_relative_positions > 0 ? "" : ", from model.max_position_embeddings"));
}

}  // namespace

void validate_model(const ModelConfig& m) {
  Config c;
  c.model = m;
  check_fields(c, "model");
  if (m.hidden_size % m.num_heads != 0)
    invalid(fmt::format("model.hidden_size ({}) must be divisible by model.num_heads ({})", m.hidden_size,
                        m.num_heads));
  if (head_dim(m) % 2 != 0)
    invalid(fmt::format("the head dimension model.hidden_size / model.num_heads = {} must be even (rotary "
                        "embeddings rotate pairs of dimensions); change model.num_heads or model.hidden_size",
                        head_dim(m)));
  if (m.embedding_size > m.hidden_size)
    invalid(fmt::format("model.embedding_size ({}) must be <= model.hidden_size ({}), or 0 to use hidden_size",
                        m.embedding_size, m.hidden_size));
  if (m.attention == Attention::kLinear && m.rotary_value)
    invalid("model.rotary_value is only supported with model.attention: softmax");
  if (m.position != Position::kRotary && m.rotary_value)
    invalid("model.rotary_value needs model.position: rotary (got " + to_string(m.position) +
            "); set model.rotary_value: false");
  if (m.vocab_size != 0 && m.vocab_size < 6)
    invalid(fmt::format("model.vocab_size ({}) must leave room for the 5 special tokens; use 0 to take it from "
                        "the tokenizer", m.vocab_size));
  validate_disentangled(m);
}

namespace {

// train.phases' entries in order, each changing something, all within train.steps.
void validate_phase_list(const Config& c) {
  for (size_t i = 0; i < c.train.phases.size(); ++i) {
    const PhaseConfig& p = c.train.phases[i];
    const std::string key = fmt::format("train.phases[{}]", i);
    if (i == 0 && p.from_step <= 0)
      invalid(fmt::format("{}.from_step ({}) must be > 0: the steps before the first phase are data.max_seq_len and "
                          "train.batch_size's", key, p.from_step));
    if (i > 0 && p.from_step <= c.train.phases[i - 1].from_step)
      invalid(fmt::format("{}.from_step ({}) must be greater than the previous phase's ({}): list the phases in "
                          "order", key, p.from_step, c.train.phases[i - 1].from_step));
    if (p.from_step >= c.train.steps)
      invalid(fmt::format("{}.from_step ({}) must be < train.steps ({}): the phase would train no step", key,
                          p.from_step, c.train.steps));
    if (p.max_seq_len != 0 && p.max_seq_len < 8)
      invalid(fmt::format("{}.max_seq_len ({}) must be at least 8 (or left out: the previous phase's)", key,
                          p.max_seq_len));
    if (p.batch_size < 0)
      invalid(fmt::format("{}.batch_size ({}) must be at least 1 (or left out: the previous phase's)", key,
                          p.batch_size));
    if (p.max_seq_len == 0 && p.batch_size == 0)
      invalid(fmt::format("{} changes neither max_seq_len nor batch_size; give one or remove the phase", key));
  }
}

// One phase's shape: its length within the position table, something to predict in each sequence
// and micro-batch, and a step that fits in 64 bits. seq_key, batch_key: the keys that set them.
void validate_shape(const Config& c, int64_t seq_len, int64_t batch_size, const std::string& seq_key,
                    const std::string& batch_key) {
  if (seq_len > c.model.max_position_embeddings)
    invalid(fmt::format("{} ({}) exceeds model.max_position_embeddings ({})", seq_key, seq_len,
                        c.model.max_position_embeddings));
  const auto& k = c.masking;
  // A setting that predicts nothing trains on a loss of 0 and reports metrics over no predictions.
  // A sequence has at most max_seq_len - 2 positions to predict ([CLS] and [SEP] never are).
  const double maskable = static_cast<double>(seq_len - 2);
  if (k.exact_count && std::llround(k.mask_prob * maskable) < 1)
    invalid(fmt::format("masking.mask_prob {} chooses round({} x {}) = 0 positions of a sequence (masking.exact_count): "
                        "nothing would be predicted; raise masking.mask_prob to at least {:.3g}",
                        k.mask_prob, k.mask_prob, seq_len - 2, 0.5 / maskable));
  if (k.mask_prob * maskable * static_cast<double>(batch_size) < 0.5)
    invalid(fmt::format("masking.mask_prob {} predicts {:.2g} positions in a micro-batch of {} x {} tokens on average: "
                        "most micro-batches would predict nothing; raise masking.mask_prob (or {})",
                        k.mask_prob, k.mask_prob * maskable * static_cast<double>(batch_size), batch_size, seq_len,
                        batch_key));
  // Products of settings must fit in 64 bits with room for the world size (at most 2^20 ranks) and
  // the memory estimate: sequences and tokens of one optimizer step.
  int64_t sequences = 0, tokens = 0;
  if (__builtin_mul_overflow(batch_size, c.train.grad_accum, &sequences) || sequences > kMaxSequencesPerStep ||
      __builtin_mul_overflow(sequences, seq_len, &tokens) || tokens > kMaxTokensPerStep)
    invalid(fmt::format("{} x train.grad_accum x {} = {} x {} x {} tokens per optimizer step is beyond what a step can "
                        "hold (at most {} sequences and {} tokens); lower train.grad_accum or {}",
                        batch_key, seq_key, batch_size, c.train.grad_accum, seq_len, kMaxSequencesPerStep,
                        kMaxTokensPerStep, batch_key));
}

}  // namespace

std::vector<Phase> run_phases(const Config& c) {
  std::vector<Phase> out = {{0, c.train.steps, c.data.max_seq_len, c.train.batch_size}};
  for (const PhaseConfig& p : c.train.phases) {
    const Phase previous = out.back();
    out.back().end_step = p.from_step;
    out.push_back({p.from_step, c.train.steps, p.max_seq_len != 0 ? p.max_seq_len : previous.max_seq_len,
                   p.batch_size != 0 ? p.batch_size : previous.batch_size});
  }
  return out;
}

size_t phase_at(const Config& c, int64_t step) {
  size_t index = 0;
  for (size_t i = 0; i < c.train.phases.size(); ++i)
    if (step >= c.train.phases[i].from_step) index = i + 1;
  return index;
}

int64_t eval_seq_len(const Config& c) {
  return c.eval.max_seq_len != 0 ? c.eval.max_seq_len : run_phases(c).back().max_seq_len;
}

void validate(const Config& c) {
  check_fields(c, "");
  validate_model(c.model);
  const auto& k = c.masking;
  if (k.mask_token_rate + k.random_token_rate > 1.0 + 1e-12)
    invalid(fmt::format("masking.mask_token_rate + masking.random_token_rate = {} must be <= 1",
                        k.mask_token_rate + k.random_token_rate));
  validate_phase_list(c);
  const auto phases = run_phases(c);
  for (size_t i = 0; i < phases.size(); ++i) {
    // The keys that set this phase's shape: its own entry's, or those of the phase it keeps them from.
    size_t length_from = i, batch_from = i;
    while (length_from > 0 && c.train.phases[length_from - 1].max_seq_len == 0) --length_from;
    while (batch_from > 0 && c.train.phases[batch_from - 1].batch_size == 0) --batch_from;
    const std::string seq_key =
        length_from == 0 ? "data.max_seq_len" : fmt::format("train.phases[{}].max_seq_len", length_from - 1);
    const std::string batch_key =
        batch_from == 0 ? "train.batch_size" : fmt::format("train.phases[{}].batch_size", batch_from - 1);
    validate_shape(c, phases[i].max_seq_len, phases[i].batch_size, seq_key, batch_key);
  }
  if (c.eval.max_seq_len != 0 && c.eval.max_seq_len < 8)
    invalid(fmt::format("eval.max_seq_len ({}) must be at least 8, or 0 for the length training ends with",
                        c.eval.max_seq_len));
  if (c.eval.max_seq_len > c.model.max_position_embeddings)
    invalid(fmt::format("eval.max_seq_len ({}) exceeds model.max_position_embeddings ({})", c.eval.max_seq_len,
                        c.model.max_position_embeddings));
  const auto& dev = c.train.device;
  if (!(dev == "auto" || dev == "cpu" || dev == "cuda" || dev.rfind("cuda:", 0) == 0))
    invalid(fmt::format("train.device = '{}': use auto, cpu, cuda or cuda:N", dev));
  if (dev == "cpu" && c.train.precision == Precision::kFp16)
    invalid("train.precision fp16 needs CUDA; use fp32 or bf16 with train.device: cpu");
  if (c.train.param_dtype == ParamDtype::kBf16 && c.train.precision != Precision::kBf16)
    invalid(fmt::format("train.param_dtype bf16 computes in bf16 and needs train.precision: bf16 (it is {}); set "
                        "train.precision: bf16, or train.param_dtype: fp32", to_string(c.train.precision)));
  if (c.train.run_dir.empty()) invalid("train.run_dir must not be empty");
  if (c.distributed.backend == "nccl" && dev == "cpu")
    invalid("distributed.backend nccl needs CUDA but train.device is cpu; use distributed.backend: gloo (or auto)");
  if (c.distributed.backend == "gloo" && dev.rfind("cuda", 0) == 0)
    invalid(fmt::format("distributed.backend gloo is for CPU training but train.device is {}; use "
                        "distributed.backend: nccl (or auto)", dev));
}

std::string to_yaml(const Config& config) {
  std::string out;
  std::string section;
  for (const auto& f : fields()) {
    if (f.section != section) {
      section = f.section;
      out += section + ":\n";
    }
    out += fmt::format("  {}: {}\n", f.key, f.get(config));
  }
  return out;
}

std::string defaults_reference(bool markdown) {
  const Config defaults;
  std::string out;
  std::string section;
  if (markdown) {
    out += "# Configuration reference\n\n"
           "Generated by `roformer config defaults --markdown`; do not edit by hand (a test checks it).\n"
           "Set keys in a YAML file (`roformer train -c FILE`) or override them with "
           "`--set section.key=value`.\n";
  }
  for (const auto& f : fields()) {
    if (f.section != section) {
      section = f.section;
      if (markdown)
        out += fmt::format("\n## {}\n\n| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n",
                           section);
      else
        out += section + ":\n";
    }
    std::string allowed;
    if (!f.constraint.choices.empty()) {
      for (const auto& c : f.constraint.choices) allowed += (allowed.empty() ? "" : ", ") + c;
    } else if (f.type == "int" || f.type == "float") {
      allowed = f.constraint.describe();
    } else if (f.type == "phases") {
      allowed = "a list of {from_step, max_seq_len, batch_size}";
    } else {
      allowed = f.type == "bool" ? "true, false" : "any";
    }
    if (markdown)
      out += fmt::format("| `{}.{}` | {} | `{}` | {} | {} |\n", f.section, f.key, f.type, f.get(defaults), allowed,
                         f.comment);
    else
      out += fmt::format("  {}: {}  # {} ({}: {})\n", f.key, f.get(defaults), f.comment, f.type, allowed);
  }
  return out;
}

}  // namespace roformer::config
