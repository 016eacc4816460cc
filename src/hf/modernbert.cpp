// Hugging Face ModernBertForMaskedLM (ModernBertConfig, transformers >= 4.48; the names of 5.x):
// rotary positions with a base per layer kind, pre-LN layers whose layer 0 reads the embedding
// LayerNorm's output as it is (model.first_attention_norm: false), a GeGLU feed-forward
// (model.feed_forward: glu), local attention within +-local_attention/2 in every layer but 0, n,
// 2n, ... (model.local_attention, model.global_attention_every), no biases but the decoder's
// (model.bias: false), no token types, the MLM head dense + act + LayerNorm + tied decoder.
//
// Names: model.embeddings.{tok_embeddings, norm}, model.layers.L.{attn_norm, attn.Wqkv, attn.Wo,
// mlp_norm, mlp.Wi, mlp.Wo}, model.final_norm, head.{dense, norm}, decoder.{weight (tied), bias}.
// Layout: Wqkv is [W_q; W_k; W_v] in one (3H, H) matrix, and its q and k rotate in the rotate-half
// layout (dimension j of a head pairs with j + D/2) where ours pairs adjacent dimensions (2j, 2j+1)
// at the same frequency (model/rotary.h): the rows of each head of W_q and W_k (and their biases)
// are permuted between the two. q.k is the same sum in another order, so the attention scores are
// those of Hugging Face's model up to rounding. Our rotary tables are buffers computed from the
// config; Hugging Face keeps its frequencies out of the state dict, so they are not exported.
#include <torch/torch.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_read.h"
#include "hf/family.h"
#include "model/options.h"

namespace roformer::hf {

namespace {

constexpr const char* kOurLayers = "roformer.encoder.layer.";
constexpr const char* kTheirLayers = "model.layers.";
constexpr const char* kSliding = "sliding_attention";
constexpr const char* kFull = "full_attention";

// Prefixes inside a layer, after "L.", (ours, theirs). q, k and v are one Wqkv (to_hf, from_hf).
const std::vector<std::pair<std::string, std::string>>& layer_names() {
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"attention.output.dense.", "attn.Wo."},      {"attention.output.LayerNorm.", "attn_norm."},
      {"intermediate.dense.", "mlp.Wi."},           {"output.dense.", "mlp.Wo."},
      {"output.LayerNorm.", "mlp_norm."},           {"attention.self.query.", "attn.Wqkv."},
      {"attention.self.key.", "attn.Wqkv."},        {"attention.self.value.", "attn.Wqkv."}};
  return names;
}

// A layer's name with its prefix inside the layer mapped (ours -> theirs when to_theirs); unchanged
// when none matches (the names outside the layers are the family's outer_names).
std::string layer_mapped(const std::string& name, bool to_theirs) {
  auto side = [&](const std::pair<std::string, std::string>& p) -> const std::string& {
    return to_theirs ? p.first : p.second;
  };
  auto other = [&](const std::pair<std::string, std::string>& p) -> const std::string& {
    return to_theirs ? p.second : p.first;
  };
  const std::string layers = to_theirs ? kOurLayers : kTheirLayers;
  if (!starts_with(name, layers)) return name;
  const auto dot = name.find('.', layers.size());
  if (dot == std::string::npos) return name;
  const std::string index = name.substr(layers.size(), dot - layers.size()), rest = name.substr(dot + 1);
  for (const auto& p : layer_names())
    if (starts_with(rest, side(p)))
      return (to_theirs ? kTheirLayers : kOurLayers) + index + "." + other(p) + rest.substr(side(p).size());
  return name;
}

// The rows of one projection (N*D, ...) of q or k between the layouts: ours pairs (2j, 2j+1) of a
// head, Hugging Face's (j, j + D/2).
torch::Tensor to_rotate_half(const torch::Tensor& w, int64_t heads) {
  const int64_t D = w.size(0) / heads;
  auto shape = w.sizes().vec();
  std::vector<int64_t> view = {heads, D / 2, 2};
  view.insert(view.end(), shape.begin() + 1, shape.end());
  return w.reshape(view).transpose(1, 2).reshape(shape).contiguous();
}
torch::Tensor from_rotate_half(const torch::Tensor& w, int64_t heads) {
  const int64_t D = w.size(0) / heads;
  auto shape = w.sizes().vec();
  std::vector<int64_t> view = {heads, 2, D / 2};
  view.insert(view.end(), shape.begin() + 1, shape.end());
  return w.reshape(view).transpose(1, 2).reshape(shape).contiguous();
}

class ModernBert final : public Family {
 public:
  const char* model_type() const override { return "modernbert"; }
  const char* architecture() const override { return "ModernBertForMaskedLM"; }
  const char* title() const override { return "ModernBERT"; }
  const char* description() const override {
    return "A ModernBERT encoder (rotary positions, pre-LayerNorm GeGLU layers, local and global attention; "
           "`model.feed_forward: glu`)";
  }
  const char* what() const override { return "rotary positions in pre-LayerNorm GeGLU layers"; }
  config::Position position() const override { return config::Position::kRotary; }
  bool claims(const config::ModelConfig& m) const override { return m.feed_forward == config::FeedForward::kGlu; }
  bool biases_always() const override { return false; }  // its config says which it has
  bool token_types_always() const override { return false; }

  void check_expressible(const model::RoFormerOptions& options) const override {
    const auto& m = options.model();
    auto refuse = [&](const std::string& why) {
      throw Error(fmt::format("this model has model.feed_forward: glu, which Hugging Face's ModernBERT computes, but "
                              "{}; ModernBERT would load it and compute something else, so export is refused", why));
    };
    if (m.position != config::Position::kRotary)
      refuse(fmt::format("model.position: {} (ModernBERT's positions are rotary)", config::to_string(m.position)));
    if (m.norm != config::Norm::kPre) refuse("model.norm: post (ModernBERT is pre-LayerNorm)");
    if (m.first_attention_norm)
      refuse("model.first_attention_norm: true (ModernBERT's layer 0 reads the embedding LayerNorm's output as it is)");
    if (options.embedding_size() != m.hidden_size)
      refuse(fmt::format("a factorized embedding (model.embedding_size {} != model.hidden_size {})",
                         options.embedding_size(), m.hidden_size));
    if (m.type_vocab_size != 0)
      refuse(fmt::format("token types (model.type_vocab_size {}; ModernBERT has none: 0)", m.type_vocab_size));
    if (m.rotary_value) refuse("model.rotary_value: true (ModernBERT rotates queries and keys only)");
  }

  void write_config(const model::RoFormerOptions& options, nlohmann::json& config) const override {
    const auto& m = options.model();
    const bool local = m.local_attention > 0;
    const int64_t every = local ? m.global_attention_every : 1;
    nlohmann::json layer_types = nlohmann::json::array();
    for (int64_t i = 0; i < m.num_layers; ++i) layer_types.push_back(model::is_local_layer(m, i) ? kSliding : kFull);
    const double local_base = m.local_rotary_base > 0 ? m.local_rotary_base : m.rotary_base;
    const char* act = hf_activation(m.hidden_act);
    config.update({{"vocab_size", m.vocab_size},
                   {"hidden_size", m.hidden_size},
                   {"intermediate_size", m.intermediate_size},
                   {"num_hidden_layers", m.num_layers},
                   {"num_attention_heads", m.num_heads},
                   {"hidden_activation", act},
                   {"classifier_activation", act},
                   {"max_position_embeddings", m.max_position_embeddings},
                   {"initializer_range", m.initializer_range},
                   {"norm_eps", m.layer_norm_eps},
                   {"norm_bias", m.bias},
                   {"attention_bias", m.bias},
                   {"mlp_bias", m.bias},
                   {"classifier_bias", m.bias},
                   {"decoder_bias", true},
                   {"embedding_dropout", m.hidden_dropout},
                   {"mlp_dropout", m.hidden_dropout},
                   {"attention_dropout", m.attention_dropout},
                   // Without local layers every layer is global; the window is then never used.
                   {"local_attention", local ? m.local_attention : 128},
                   {"layer_types", layer_types},
                   {"rope_parameters",
                    {{kFull, {{"rope_type", "default"}, {"rope_theta", m.rotary_base}}},
                     {kSliding, {{"rope_type", "default"}, {"rope_theta", local_base}}}}},
                   // The same for transformers before 5 (4.48 and later), which read these.
                   {"global_attn_every_n_layers", every},
                   {"global_rope_theta", m.rotary_base},
                   {"local_rope_theta", local_base},
                   {"pad_token_id", options.pad_token_id()},
                   // ModernBertConfig's defaults name its own tokenizer's ids (50281, 50282); the
                   // model never reads them, and the tokenizer files say ours.
                   {"bos_token_id", nullptr},
                   {"eos_token_id", nullptr},
                   {"cls_token_id", nullptr},
                   {"sep_token_id", nullptr},
                   {"tie_word_embeddings", true}});
  }

  config::ModelConfig read_config(const core::JsonReader& j) const override {
    auto refuse = [&](const std::string& what) {
      throw Error(fmt::format("{} has {}, which roformer's ModernBERT layers do not compute", j.origin(), what));
    };
    config::ModelConfig m;
    m.vocab_size = j.integer("vocab_size");
    m.hidden_size = j.integer("hidden_size");
    m.embedding_size = m.hidden_size;
    m.intermediate_size = j.integer("intermediate_size");
    m.num_layers = j.integer("num_hidden_layers");
    m.num_heads = j.integer("num_attention_heads");
    m.max_position_embeddings = j.integer("max_position_embeddings");
    m.layer_norm_eps = j.number("norm_eps", 1e-5);
    m.hidden_act = activation_from_hf(j, "hidden_activation");
    if (j.has("classifier_activation") && activation_from_hf(j, "classifier_activation") != m.hidden_act)
      refuse(fmt::format("classifier_activation \"{}\" other than hidden_activation \"{}\" (one activation for both)",
                         j.string("classifier_activation"), j.string("hidden_activation")));
    // ModernBertConfig's defaults: no biases but the decoder's.
    m.bias = j.boolean("norm_bias", false);
    for (const char* key : {"attention_bias", "mlp_bias", "classifier_bias"})
      if (j.boolean(key, false) != m.bias)
        refuse(fmt::format("{} {} but norm_bias {} (roformer's model.bias is one switch for all)", key,
                           j.boolean(key, false), m.bias));
    if (!j.boolean("decoder_bias", true)) refuse("decoder_bias false (the MLM decoder always has its bias)");
    m.position = config::Position::kRotary;
    m.norm = config::Norm::kPre;
    m.first_attention_norm = false;
    m.feed_forward = config::FeedForward::kGlu;
    m.attention = config::Attention::kSoftmax;
    m.type_vocab_size = 0;
    // Its dropout (ModernBERT's: none), so that `config from-hf` shows what it was trained with.
    m.hidden_dropout = j.number("mlp_dropout", 0.0);
    m.attention_dropout = j.number("attention_dropout", 0.0);
    read_layer_kinds(j, m);
    return m;
  }

  NamedTensors to_hf(const NamedTensors& ours, const config::ModelConfig& m) const override {
    std::map<std::string, torch::Tensor> by_name(ours.begin(), ours.end());
    NamedTensors out;
    for (const auto& [name, t] : ours) {
      if (starts_with(name, "roformer.encoder.embed_positions.")) continue;  // computed from the config
      const auto query = name.find(".attention.self.query.");
      if (query != std::string::npos) {  // [W_q; W_k; W_v], q and k rows in the rotate-half layout
        const std::string head = name.substr(0, query) + ".attention.self.", tail = name.substr(query + 22);
        out.emplace_back(to_hf_name(name),
                         torch::cat({to_rotate_half(t, m.num_heads), to_rotate_half(by_name.at(head + "key." + tail), m.num_heads),
                                     by_name.at(head + "value." + tail)}));
        continue;
      }
      if (name.find(".attention.self.") != std::string::npos) continue;  // key and value: in Wqkv
      out.emplace_back(to_hf_name(name), t);
    }
    return out;
  }

  std::map<std::string, torch::Tensor> from_hf(std::map<std::string, torch::Tensor> theirs,
                                               const config::ModelConfig& m) const override {
    std::map<std::string, torch::Tensor> out;
    for (auto& [name, t] : theirs) {
      const auto at = name.find(".attn.Wqkv.");
      const std::string ours = from_hf_name(name);
      if (at == std::string::npos || !starts_with(name, kTheirLayers) || t.dim() == 0 || t.size(0) != 3 * m.hidden_size) {
        out.emplace(ours, std::move(t));  // a Wqkv of another shape is reported as the query's mismatch
        continue;
      }
      const auto parts = t.chunk(3, 0);  // W_q, W_k, W_v (and their biases)
      const std::string prefix = ours.substr(0, ours.find(".attention.self.") + 16), tail = name.substr(at + 11);
      out.emplace(prefix + "query." + tail, from_rotate_half(parts[0], m.num_heads));
      out.emplace(prefix + "key." + tail, from_rotate_half(parts[1], m.num_heads));
      out.emplace(prefix + "value." + tail, parts[2].contiguous());
    }
    return out;
  }

  // The names outside the layers as listed (outer_names), those inside as layer_names() maps them.
  std::string to_hf_name(const std::string& ours) const override {
    const std::string outer = outer_mapped(ours, true);
    return outer.empty() ? layer_mapped(ours, true) : outer;
  }
  std::string from_hf_name(const std::string& theirs) const override {
    const std::string outer = outer_mapped(theirs, false);
    return outer.empty() ? layer_mapped(theirs, false) : outer;
  }

 protected:
  std::vector<NamePrefix> outer_names() const override {
    return {{"roformer.embeddings.word_embeddings.", "model.embeddings.tok_embeddings."},
            {"roformer.embeddings.LayerNorm.", "model.embeddings.norm."},
            {"roformer.encoder.final_layer_norm.", "model.final_norm."},
            {"cls.predictions.transform.dense.", "head.dense."},
            {"cls.predictions.transform.LayerNorm.", "head.norm."},
            {"cls.predictions.decoder.weight", "decoder.weight"},  // tied to the word embedding
            {"cls.predictions.bias", "decoder.bias"}};
  }

 private:
  // Which layers attend locally and with which rotary bases: layer_types (transformers 5) or
  // global_attn_every_n_layers (4.x), rope_parameters or global/local_rope_theta.
  static void read_layer_kinds(const core::JsonReader& j, config::ModelConfig& m) {
    int64_t every = j.integer("global_attn_every_n_layers", 3);
    if (every < 1) j.wrong("global_attn_every_n_layers", "an integer >= 1");
    if (j.has("layer_types") && !j.at("layer_types").is_null()) {
      const auto types = j.strings("layer_types");
      if (static_cast<int64_t>(types.size()) != m.num_layers)
        j.wrong("layer_types", fmt::format("a list of num_hidden_layers ({}) layer types", m.num_layers));
      // The period: the first local layer's index after 0 runs of global ones, as global_attn_every_n_layers.
      every = 1;
      while (every < m.num_layers && types[static_cast<size_t>(every)] != kFull) ++every;
      for (size_t i = 0; i < types.size(); ++i) {
        const bool global = static_cast<int64_t>(i) % every == 0;
        if (types[i] != (global ? kFull : kSliding))
          j.wrong("layer_types", fmt::format("\"{}\" at layers 0, n, 2n, ... and \"{}\" between (roformer's "
                                             "model.global_attention_every); layer {} breaks the pattern",
                                             kFull, kSliding, i));
      }
    }
    const bool any_local = every > 1 && m.num_layers > 1;
    double global_base = j.number("global_rope_theta", 160000.0), local_base = j.number("local_rope_theta", 10000.0);
    if (j.has("rope_parameters") && !j.at("rope_parameters").is_null()) {
      const auto rope = j.object("rope_parameters");
      auto theta = [&](const char* kind, double fallback) {
        if (!rope.has(kind)) return fallback;
        const auto params = rope.object(kind);
        const std::string type = params.string("rope_type", "default");
        if (type != "default")
          throw Error(fmt::format("{} has rope_parameters.{}.rope_type \"{}\"; roformer computes the default rotary "
                                  "embedding only", j.origin(), kind, type));
        return params.number("rope_theta", fallback);
      };
      global_base = theta(kFull, global_base);
      local_base = theta(kSliding, local_base);
    }
    m.rotary_base = global_base;
    if (!any_local) return;  // every layer global: no window, one base
    m.local_attention = j.integer("local_attention", 128);
    if (m.local_attention < 2 || m.local_attention % 2 != 0)
      j.wrong("local_attention", "an even window of at least 2 tokens (ModernBERT: 128)");
    m.global_attention_every = every;
    if (local_base != global_base) m.local_rotary_base = local_base;
  }
};

}  // namespace

const Family& modernbert_family() {
  static const ModernBert family;
  return family;
}

}  // namespace roformer::hf
