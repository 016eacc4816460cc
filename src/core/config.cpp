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
#include <optional>
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
  Resume resume = Resume::kRefuse;  // what a resumed run may do with it (checkpoint/resume_policy.h)
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

// A key whose value is a list of mappings of integers (train.phases): each entry's keys, in the order
// they are printed, with how each sets and reads its member of the entry; `required` ones must be
// given, the others may be left out. Declared beside the key's row (entry_keys below); what the
// entries mean and their rules are their component's (train/length_phases.h).
template <class E>
struct EntryKey {
  const char* name;
  bool required;
  void (*set)(E& entry, int64_t value);
  std::optional<int64_t> (*get)(const E& entry);  // nullopt: left out
};
template <class E>
const std::vector<EntryKey<E>>& entry_keys();
template <class E>
const char* entry_example();
template <class E>
const char* entry_noun();  // what one entry is called in messages

template <class E>
std::vector<std::string> entry_key_names() {
  std::vector<std::string> out;
  for (const auto& k : entry_keys<E>()) out.push_back(k.name);
  return out;
}

// One entry: a mapping of known keys, each once, integer values; an unknown or repeated key is an
// error naming the entry.
template <class E>
E parse_entry(const YAML::Node& item, const std::string& where) {
  const auto names = entry_key_names<E>();
  if (!item.IsMap()) type_error(where, item, fmt::format("a mapping {}", entry_example<E>()).c_str());
  E entry;
  std::map<std::string, bool> seen;
  for (const auto& kv : item) {
    const std::string key = scalar_text(kv.first);
    if (const auto colon = key.find(':'); colon != std::string::npos)  // {from_step:540} is one YAML scalar
      throw Error(fmt::format("config key {}: '{}' needs a space after its colon ('{}: {}'), or quoted keys "
                              "({{\"{}\":{}}}), for YAML to read a key and a value", where, key,
                              key.substr(0, colon), key.substr(colon + 1), key.substr(0, colon), key.substr(colon + 1)));
    const auto known = std::find(names.begin(), names.end(), key);
    if (known == names.end())
      throw Error(fmt::format("config key {} has no key '{}'; did you mean '{}'? A {} takes {}", where, key,
                              core::nearest(key, names), entry_noun<E>(), fmt::join(names, ", ")));
    if (!seen.emplace(key, true).second)
      throw Error(fmt::format("config key {}: '{}' appears twice; give it once", where, key));
    const YAML::Node& value = kv.second;
    if (!value.IsScalar()) type_error(where + "." + key, value, "an integer");
    entry_keys<E>()[known - names.begin()].set(entry, parse_integer(value, where + "." + key));
  }
  for (const auto& k : entry_keys<E>())
    if (k.required && !seen.count(k.name))
      throw Error(fmt::format("config key {} has no {}: every {} gives it (e.g. {})", where, k.name,
                              entry_noun<E>(), entry_example<E>()));
  return entry;
}

template <class E>
std::vector<E> parse_entries(const YAML::Node& node, const std::string& path) {
  if (!node.IsSequence())
    type_error(path, node, fmt::format("a list of {}s like [{}]", entry_noun<E>(), entry_example<E>()).c_str());
  std::vector<E> out;
  for (size_t i = 0; i < node.size(); ++i) out.push_back(parse_entry<E>(node[i], fmt::format("{}[{}]", path, i)));
  return out;
}

template <class E>
std::string format_entries(const std::vector<E>& entries) {
  std::string out = "[";
  for (size_t i = 0; i < entries.size(); ++i) {
    std::string fields;
    for (const auto& k : entry_keys<E>())
      if (const auto v = k.get(entries[i])) fields += fmt::format("{}{}: {}", fields.empty() ? "" : ", ", k.name, *v);
    out += fmt::format("{}{{{}}}", i ? ", " : "", fields);
  }
  return out + "]";
}

// train.phases' entries (core/config.h PhaseConfig; train/length_phases.h gives them their meaning).
template <>
const std::vector<EntryKey<PhaseConfig>>& entry_keys() {
  static const std::vector<EntryKey<PhaseConfig>> keys = {
      {"from_step", true, [](PhaseConfig& p, int64_t v) { p.from_step = v; },
       [](const PhaseConfig& p) -> std::optional<int64_t> { return p.from_step; }},
      {"max_seq_len", false, [](PhaseConfig& p, int64_t v) { p.max_seq_len = v; },
       [](const PhaseConfig& p) { return p.max_seq_len; }},
      {"batch_size", false, [](PhaseConfig& p, int64_t v) { p.batch_size = v; },
       [](const PhaseConfig& p) { return p.batch_size; }}};
  return keys;
}
template <>
const char* entry_example<PhaseConfig>() {
  return "{from_step: 9000, max_seq_len: 512, batch_size: 64}";
}
template <>
const char* entry_noun<PhaseConfig>() {
  return "phase";
}

template <class T>
T parse_value(const YAML::Node& node, const std::string& path) {
  if (!node.IsDefined() || node.IsNull())
    throw Error(fmt::format("config key {} has no value; give one or remove the key to keep the default",
                            path));
  if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    return parse_string_list(node, path);
  } else if constexpr (std::is_same_v<T, std::vector<PhaseConfig>>) {
    return parse_entries<PhaseConfig>(node, path);
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
    return format_entries(v);
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
const std::vector<std::pair<FeedForward, const char*>>& enum_names() {
  static const std::vector<std::pair<FeedForward, const char*>> names = {{FeedForward::kMlp, "mlp"},
                                                                         {FeedForward::kGlu, "glu"}};
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
template <>
const std::vector<std::pair<Fp8, const char*>>& enum_names() {
  static const std::vector<std::pair<Fp8, const char*>> names = {{Fp8::kOff, "off"}, {Fp8::kDynamic, "dynamic"}};
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
void add(std::vector<Field>& fields, const char* section, const char* key, Resume resume, Accessor access,
         const char* comment, Constraint constraint = {}) {
  using T = std::decay_t<decltype(access(std::declval<Config&>()))>;
  if constexpr (std::is_enum_v<T>) constraint.choices = enum_choices<T>();
  Field f;
  f.section = section;
  f.key = key;
  f.resume = resume;
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

// One row: section, key, its resume column (Resume: kExact, kRescue, kRefuse), the comment printed in
// the reference, and its range or choices.
#define ROFORMER_FIELD(sec, key, resume, comment, ...) \
  add(f, #sec, #key, Resume::resume, [](Config& c) -> auto& { return c.sec.key; }, comment, ##__VA_ARGS__)

// The resume column (checkpoint/resume_policy.h): kExact keys change neither the model nor the data
// order, so a resumed run still continues exactly (train.device, train.num_threads, optimizer.fused and
// the distributed keys keep the math but may change float rounding; train.cuda_graph replays the very
// kernels the eager step launches). kRescue keys rescue a diverged run, with a warning that it is no
// longer an exact continuation: the learning rate, clipping and schedule; train.batch_size and
// train.grad_accum so a run can resume on another number of processes with the same global batch
// (the data position is global); train.param_dtype, since checkpoints hold fp32 weights either way.
// kRefuse keys change the model or the data.
std::vector<Field> build_fields() {
  std::vector<Field> f;
  // model
  ROFORMER_FIELD(model, vocab_size, kRefuse, "Vocabulary size V; 0 takes it from the tokenizer", at_least(0));
  ROFORMER_FIELD(model, hidden_size, kRefuse, "Hidden size H", at_least(1));
  ROFORMER_FIELD(model, num_layers, kRefuse, "Number of encoder layers", at_least(1));
  ROFORMER_FIELD(model, num_heads, kRefuse, "Attention heads N; H must divide by N and H/N be even", at_least(1));
  ROFORMER_FIELD(model, intermediate_size, kRefuse, "Feed-forward inner size", at_least(1));
  ROFORMER_FIELD(model, embedding_size, kRefuse,
                 "Word-embedding size E; 0 means H; E < H adds an E->H projection (ALBERT-style)", at_least(0));
  ROFORMER_FIELD(model, max_position_embeddings, kRefuse,
                 "Rows of the rotary sin/cos table or of the learned absolute position table (longest sequence)",
                 at_least(1));
  ROFORMER_FIELD(model, position, kRefuse,
                 "rotary: RoPE in every attention layer; absolute: learned position embeddings added to the word "
                 "embeddings (BERT); none: no position information (a control); disentangled: DeBERTa's relative "
                 "attention (content-to-position and position-to-content scores from shared relative embeddings)");
  ROFORMER_FIELD(model, position_buckets, kRefuse,
                 "disentangled: relative distances up to half of this are kept, longer ones log-bucketed up to "
                 "max_relative_positions (DeBERTa-v2/v3); 0 keeps exact distances",
                 at_least(0));
  ROFORMER_FIELD(model, max_relative_positions, kRefuse,
                 "disentangled: distances from this on share the outermost bucket; 0 means max_position_embeddings",
                 at_least(0));
  ROFORMER_FIELD(model, pos_att_type, kRefuse,
                 "disentangled: the relative terms added to the content scores: content-to-position (c2p), "
                 "position-to-content (p2c) or both");
  ROFORMER_FIELD(model, share_att_key, kRefuse,
                 "disentangled: project the relative embeddings with the query/key weights (DeBERTa-v3); false adds "
                 "pos_key_proj / pos_query_proj");
  ROFORMER_FIELD(model, position_biased_input, kRefuse,
                 "disentangled: also add a learned absolute position table to the input embeddings (DeBERTa-v1; "
                 "limits sequences to max_position_embeddings)");
  ROFORMER_FIELD(model, enhanced_mask_decoder, kRefuse,
                 "disentangled: the MLM head reads the last layer re-run twice on queries plus learned absolute "
                 "positions (DeBERTa's EMD; pretraining head only; limits sequences to max_position_embeddings)");
  ROFORMER_FIELD(model, type_vocab_size, kRefuse, "Token-type embeddings (Hugging Face default 2); 0 disables",
                 at_least(0));
  ROFORMER_FIELD(model, hidden_dropout, kRefuse, "Dropout on embeddings and sublayer outputs", unit_interval_open_right());
  ROFORMER_FIELD(model, attention_dropout, kRefuse, "Dropout on attention probabilities", unit_interval_open_right());
  ROFORMER_FIELD(model, layer_norm_eps, kRefuse, "LayerNorm epsilon (Hugging Face default 1e-12)", positive());
  ROFORMER_FIELD(model, initializer_range, kRefuse, "Std of the normal weight initialization", positive());
  ROFORMER_FIELD(model, rotary_base, kRefuse, "Rotary base: theta_i = base^(-2i/D)", positive());
  ROFORMER_FIELD(model, rotary_value, kRefuse, "Also apply the rotary embedding to the values");
  ROFORMER_FIELD(model, norm, kRefuse, "post: LayerNorm after each residual (BERT, Hugging Face); pre: before, plus a final LayerNorm");
  ROFORMER_FIELD(model, attention, kRefuse, "softmax: scaled dot-product attention; linear: the paper's elu+1 linear attention");
  ROFORMER_FIELD(model, hidden_act, kRefuse, "Feed-forward activation (gelu_tanh: the tanh approximation, Hugging Face's gelu_pytorch_tanh)");
  ROFORMER_FIELD(model, bias, kRefuse,
                 "Additive biases in every linear layer and LayerNorm; false: none (ModernBERT; no bias adds and no "
                 "bias gradients), the MLM decoder's output bias kept. Exports write zero biases, so Hugging Face "
                 "loads them unchanged");
  ROFORMER_FIELD(model, feed_forward, kRefuse,
                 "mlp: W_2 act(W_1 x); glu: W_in maps to 2 x intermediate_size, act of its first half times the "
                 "second, then W_o (ModernBERT's GeGLU with gelu)");
  ROFORMER_FIELD(model, first_attention_norm, kRefuse,
                 "pre-LN: layer 0 normalizes its attention input; false: the embedding LayerNorm's output enters "
                 "layer 0's attention as it is (ModernBERT)");
  ROFORMER_FIELD(model, local_attention, kRefuse,
                 "Window of the local layers: a token attends to those within +-local_attention/2 (ModernBERT: "
                 "128); 0: every layer attends globally",
                 at_least(0));
  ROFORMER_FIELD(model, global_attention_every, kRefuse,
                 "With local_attention: layers 0, n, 2n, ... attend globally, the others locally (ModernBERT: 3)",
                 at_least(1));
  ROFORMER_FIELD(model, local_rotary_base, kRefuse,
                 "Rotary base of the local layers (ModernBERT: 10000, its global layers 160000 from rotary_base); 0: "
                 "rotary_base",
                 at_least(0));
  ROFORMER_FIELD(model, gradient_checkpointing, kRefuse, "Recompute each layer in backward to save activation memory");
  ROFORMER_FIELD(model, family, kExact,
                 "The Hugging Face family `roformer export` writes (config.json's model_type): auto, the one whose "
                 "architecture the model has (roformer: rotary, bert: absolute, deberta-v2: disentangled, "
                 "modernbert: feed_forward glu); roberta: a BERT-like model exported as RoBERTa (set by `config "
                 "from-hf` for a RoBERTa directory)",
                 one_of({"auto", "roformer", "bert", "roberta", "deberta-v2", "modernbert"}));
  // tokenizer
  ROFORMER_FIELD(tokenizer, model, kRefuse, "Existing SentencePiece .model to use; empty trains one into RUN_DIR/tokenizer");
  ROFORMER_FIELD(tokenizer, input, kRefuse, "Text files to train the tokenizer on; empty uses data.train_files");
  ROFORMER_FIELD(tokenizer, vocab_size, kRefuse, "Vocabulary size of a trained tokenizer, special tokens included", at_least(16));
  ROFORMER_FIELD(tokenizer, model_type, kRefuse, "SentencePiece algorithm", one_of({"unigram", "bpe"}));
  ROFORMER_FIELD(tokenizer, character_coverage, kRefuse, "Fraction of characters covered by the vocabulary (SentencePiece accepts 0.98 to 1)",
                 Constraint{0.98, 1, false, false, {}});
  ROFORMER_FIELD(tokenizer, input_sentence_size, kRefuse, "Lines sampled from large inputs (bounds memory and time)",
                 at_least(1));
  ROFORMER_FIELD(tokenizer, seed, kRefuse, "Seed of the sampling", at_least(0));
  // data
  ROFORMER_FIELD(data, train_files, kRefuse, "Training data: text, JSONL or Parquet files (.gz/.zst too), folders and glob patterns; or prepared directories");
  ROFORMER_FIELD(data, valid_files, kRefuse, "Validation data, as data.train_files; empty disables evaluation");
  ROFORMER_FIELD(data, prepared_dir, kExact, "Where prepared token shards are written; empty means RUN_DIR/data");
  ROFORMER_FIELD(data, max_seq_len, kRefuse, "Sequence length T, [CLS] and [SEP] included", at_least(8));
  ROFORMER_FIELD(data, packing, kRefuse, "full: pack documents into full sequences (no padding); document: one document per sequence, padded",
                 one_of({"full", "document"}));
  ROFORMER_FIELD(data, num_workers, kExact, "Background threads building batches", Constraint{0, 256, false, false, {}});
  ROFORMER_FIELD(data, prefetch, kExact, "Batches queued ahead of the training step", Constraint{1, 1024, false, false, {}});
  ROFORMER_FIELD(data, text_field, kRefuse, "JSONL field or Parquet column holding the text");
  // masking
  ROFORMER_FIELD(masking, mask_prob, kRefuse, "Fraction of positions chosen for prediction", Constraint{0, 1, true, true, {}});
  ROFORMER_FIELD(masking, mask_token_rate, kRefuse, "Of the chosen positions, fraction replaced by [MASK]", unit_interval());
  ROFORMER_FIELD(masking, random_token_rate, kRefuse, "Of the chosen positions, fraction replaced by a random token",
                 unit_interval());
  ROFORMER_FIELD(masking, whole_word, kRefuse, "Choose whole words (SentencePiece word-start pieces) instead of pieces");
  ROFORMER_FIELD(masking, exact_count, kRefuse, "Exactly round(p*n) positions per sequence (static shapes) instead of Bernoulli(p)");
  // optimizer
  ROFORMER_FIELD(optimizer, lr, kRescue, "Peak learning rate", positive());
  ROFORMER_FIELD(optimizer, beta1, kRefuse, "AdamW beta1", unit_interval_open_right());
  ROFORMER_FIELD(optimizer, beta2, kRefuse, "AdamW beta2", unit_interval_open_right());
  ROFORMER_FIELD(optimizer, eps, kRefuse, "AdamW epsilon", positive());
  ROFORMER_FIELD(optimizer, weight_decay, kRefuse, "Decoupled weight decay for Linear weights", at_least(0));
  ROFORMER_FIELD(optimizer, decay_embeddings, kRefuse, "Also decay the embedding matrices");
  ROFORMER_FIELD(optimizer, grad_clip, kRescue, "Clip the global gradient norm to this; 0 disables", at_least(0));
  ROFORMER_FIELD(optimizer, fused, kExact, "Use the fused AdamW kernel (at::_fused_adamw_, CUDA and CPU); false: torch::optim::AdamW's per-parameter loop");
  // schedule
  ROFORMER_FIELD(schedule, type, kRescue, "Decay after warmup: linear or cosine to min_lr at the last step; wsd (warmup-stable-decay): the peak until the last decay_fraction of the steps, then linear to min_lr; constant",
                 one_of({"linear", "cosine", "wsd", "constant"}));
  ROFORMER_FIELD(schedule, warmup_steps, kRescue, "Linear warmup steps from 0 to optimizer.lr", at_least(0));
  ROFORMER_FIELD(schedule, min_lr, kRescue, "Learning rate reached at the last step", at_least(0));
  ROFORMER_FIELD(schedule, decay_fraction, kRescue, "wsd: fraction of train.steps at the end that decays linearly to min_lr",
                 Constraint{0, 1, true, false, {}});
  // train
  ROFORMER_FIELD(train, steps, kExact, "Optimizer steps", at_least(1));
  ROFORMER_FIELD(train, batch_size, kRescue, "Sequences per micro-batch", at_least(1));
  ROFORMER_FIELD(train, grad_accum, kRescue, "Micro-batches per optimizer step", at_least(1));
  ROFORMER_FIELD(train, precision, kRefuse, "fp32, bf16 (autocast) or fp16 (autocast + dynamic loss scaling, CUDA only)");
  ROFORMER_FIELD(train, param_dtype, kRescue,
                 "Dtype the step computes with: fp32 (parameters fp32; bf16 runs under autocast), or bf16 (with "
                 "precision bf16: parameters, activations and residual stream bf16 without autocast; the optimizer "
                 "keeps fp32 master weights, accumulates gradients in fp32, and checkpoints save the fp32 masters); "
                 "auto: bf16 on CUDA with precision bf16, fp32 otherwise (config.yaml records the choice)");
  ROFORMER_FIELD(train, device, kExact, "auto (CUDA when available), cpu, cuda or cuda:N");
  ROFORMER_FIELD(train, cuda_graph, kExact,
                 "CUDA: replay each micro-batch's forward + backward and the update between logging steps as "
                 "captured CUDA graphs (one per batch shape; the first of each runs eagerly); false: every step "
                 "eagerly. Single process, fused AdamW, bf16 or fp32, no gradient checkpointing; otherwise eager");
  ROFORMER_FIELD(train, fp8, kRescue,
                 "off, or dynamic: the encoder layers' linear layers (q, k, v, attention output, feed-forward) as FP8 "
                 "GEMMs (at::_scaled_mm) with per-tensor dynamic scaling, x and W in E4M3, their gradient in E5M2; "
                 "attention, the embeddings and the MLM head stay bf16, the parameters and checkpoints are unchanged "
                 "and evaluation runs bf16. Needs precision bf16; a GPU without FP8 (before sm_89) or a dimension that "
                 "is not a multiple of 16 runs those layers bf16 and says so once (docs/kernels.md)");
  ROFORMER_FIELD(train, seed, kRefuse, "Seed of initialization, data order, masking and dropout", at_least(0));
  ROFORMER_FIELD(train, run_dir, kExact, "Directory for logs, metrics, checkpoints and the resolved config");
  ROFORMER_FIELD(train, num_threads, kExact, "CPU intra-op threads; 0 keeps LibTorch's default", Constraint{0, 1024, false, false, {}});
  ROFORMER_FIELD(train, phases, kRefuse,
                 "Later sequence-length phases, e.g. [{from_step: 9000, max_seq_len: 512, batch_size: 64}]: from that "
                 "step (0-based) on, sequences of max_seq_len tokens, batch_size per micro-batch (either left out: "
                 "the previous phase's). The steps before the first are data.max_seq_len and train.batch_size. One "
                 "prepared corpus, one schedule over train.steps (docs/training.md)");
  // checkpoint
  ROFORMER_FIELD(checkpoint, every, kExact, "Save every N steps; 0 saves only at the end (and on SIGINT/SIGTERM)",
                 at_least(0));
  ROFORMER_FIELD(checkpoint, keep_last, kExact, "Complete checkpoints kept; older ones are deleted", at_least(1));
  // logging
  ROFORMER_FIELD(logging, every, kExact, "Log a progress line and a metrics record every N steps", at_least(1));
  ROFORMER_FIELD(logging, progress, kExact, "auto: a live bar on a terminal, plain lines otherwise",
                 one_of({"auto", "bar", "plain"}));
  ROFORMER_FIELD(logging, level, kExact, "Console log level", one_of({"trace", "debug", "info", "warn", "error"}));
  ROFORMER_FIELD(logging, tensorboard, kExact,
                 "Write TensorBoard event files into RUN_DIR, so that tensorboard --logdir names each run by its "
                 "folder (scalars at every logging step and evaluation, the config, HParams); false writes none");
  // eval
  ROFORMER_FIELD(eval, every, kExact, "Evaluate on the validation set every N steps; 0 only at the end", at_least(0));
  ROFORMER_FIELD(eval, max_sequences, kExact, "Validation sequences evaluated (a fixed, deterministic set)", at_least(1));
  ROFORMER_FIELD(eval, batch_size, kExact, "Sequences per evaluation batch", at_least(1));
  ROFORMER_FIELD(eval, seed, kExact, "Seed of the evaluation masks (fixed so figures compare across runs)", at_least(0));
  ROFORMER_FIELD(eval, mask_prob, kExact, "Fraction of positions predicted at evaluation, 80/10/10 by piece whatever masking.* trains with, so accuracies compare across recipes",
                 Constraint{0, 1, true, false, {}});
  ROFORMER_FIELD(eval, max_seq_len, kExact,
                 "Sequence length of the validation sequences; 0: the length training ends with (train.phases' last, "
                 "else data.max_seq_len)",
                 at_least(0));
  // distributed
  ROFORMER_FIELD(distributed, backend, kExact, "Collectives when torchrun/SLURM start several processes: auto (nccl on CUDA, gloo on CPU), gloo or nccl",
                 one_of({"auto", "gloo", "nccl"}));
  ROFORMER_FIELD(distributed, timeout_s, kExact, "Seconds any rendezvous or collective may wait before the run stops naming the missing rank",
                 at_least(1));
  ROFORMER_FIELD(distributed, bucket_mb, kExact, "Gradient all-reduce bucket size in MiB (buckets start during backward)", positive());
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

Resume resume_of(const std::string& key) {
  const Field* f = find_field(key);
  return f ? f->resume : Resume::kRefuse;
}

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
  check_table(config);
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
std::string to_string(FeedForward value) { return enum_name(value); }
std::string to_string(Precision value) { return enum_name(value); }
std::string to_string(ParamDtype value) { return enum_name(value); }
std::string to_string(Fp8 value) { return enum_name(value); }

void invalid(const std::string& msg) { throw Error("invalid config: " + msg); }

void check_table(const Config& c, const std::string& section) {
  for (const auto& f : fields())
    if (section.empty() || f.section == section) f.check(c);
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
      allowed = fmt::format("a list of {{{}}}", fmt::join(entry_key_names<PhaseConfig>(), ", "));
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
