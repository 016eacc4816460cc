// RoFormerForMaskedLM against Hugging Face transformers: tests/golden/*.safetensors hold the weights,
// inputs (with padding), logits, loss and every parameter gradient of HF's RoFormerForMaskedLM, and
// of DebertaV2ForMaskedLM for model.position: disentangled (written by tests/golden/make_golden.py).
// We load the same weights by HF name and compare.
//
// Tolerances (float32 on CPU): logits and loss |ours - HF| <= 1e-5 + 1e-5 |HF|; gradients
// |ours - HF| <= 1e-5 * max|HF grad of that tensor| + 1e-6 element-wise. The two sides run the
// same float32 math in a different order (SDPA vs HF's explicit softmax, broadcast token-type row,
// fused vs unfused matmuls), which moves results by a few float32 ulps (~1e-7 relative) per op.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/safetensors.h"
#include "hf/family.h"
#include "model/disentangled.h"
#include "model/roformer.h"
#include "model_util.h"
#include "test_util.h"

namespace {

using roformer::model::RoFormerForMaskedLM;
using roformer::model::RoFormerOptions;

struct Golden {
  std::string name;  // the fixture's file name without .safetensors
  std::map<std::string, torch::Tensor> tensors;
  std::map<std::string, std::string> meta;
  torch::Tensor get(const std::string& name) const {
    auto it = tensors.find(name);
    if (it == tensors.end()) throw std::runtime_error("fixture lacks " + name);
    return it->second;
  }
  std::map<std::string, torch::Tensor> with_prefix(const std::string& prefix) const {
    std::map<std::string, torch::Tensor> out;
    for (const auto& [k, v] : tensors)
      if (k.rfind(prefix, 0) == 0) out.emplace(k.substr(prefix.size()), v);
    return out;
  }
  int64_t num(const std::string& key) const { return std::stoll(meta.at(key)); }
};

Golden load_golden(const std::string& name) {
  Golden g;
  g.name = name;
  g.tensors = roformer::core::load_safetensors(roformer::test::source_dir() + "/tests/golden/" + name + ".safetensors",
                                               &g.meta);
  return g;
}

// The fixture's Hugging Face config as our model section (hidden_act by its config name).
RoFormerOptions options_for(const Golden& g) {
  roformer::config::Config c;
  for (const char* key : {"hidden_size", "num_layers", "num_heads", "intermediate_size", "embedding_size",
                          "max_position_embeddings", "type_vocab_size", "layer_norm_eps", "initializer_range",
                          "hidden_act"})
    roformer::config::apply_override(c, std::string("model.") + key + "=" + g.meta.at(key));
  c.model.hidden_dropout = 0.0;
  c.model.attention_dropout = 0.0;
  c.model.rotary_value = g.meta.at("rotary_value") == "1";
  return RoFormerOptions(c.model, g.num("vocab_size"));
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) out.push_back(item);
  return out;
}

double max_abs(const torch::Tensor& t) { return t.abs().max().item<double>(); }

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, KeysOrderAndParameterCountMatchHuggingFace) {
  auto g = load_golden(GetParam());
  RoFormerForMaskedLM model(options_for(g));
  std::vector<std::string> ours;
  for (const auto& [name, t] : model->hf_named_parameters()) ours.push_back(name);
  EXPECT_EQ(ours, split(g.meta.at("state_dict_keys"), ','));
  EXPECT_EQ(model->num_parameters(), g.num("hf_num_trainable_parameters"));
  int64_t buffers = 0;  // the rotary table: a frozen parameter in HF
  for (const auto& b : model->buffers()) buffers += b.numel();
  EXPECT_EQ(model->num_parameters() + buffers, g.num("hf_num_parameters"));
}

TEST_P(GoldenTest, RotaryTableEqualsHuggingFaceSinusoidalWeight) {
  auto g = load_golden(GetParam());
  RoFormerForMaskedLM model(options_for(g));
  auto hf = g.get("weight/roformer.encoder.embed_positions.weight");
  const auto ours = roformer::test::parameters_by_name(*model).at("roformer.encoder.embed_positions.weight");
  // Both are float32 roundings of the same float64 values.
  EXPECT_TRUE(torch::equal(ours, hf)) << "max diff " << max_abs(ours - hf);
}

// The parity checks of one fixture, for either family: the model (the fixture's weights loaded) in
// training mode against the fixture's logits where `compare` (B, T) bool is true, its loss, and the
// gradient of every parameter (`hf_grads`, under our names). Returns our parameters by name, their
// .grad filled.
std::map<std::string, torch::Tensor> expect_parity(RoFormerForMaskedLM& model, const Golden& g,
                                                   const std::map<std::string, torch::Tensor>& hf_grads,
                                                   const torch::Tensor& compare) {
  const std::string& name = g.name;
  model->train();
  auto ids = g.get("input/input_ids"), mask = g.get("input/attention_mask");
  auto types = g.get("input/token_type_ids"), labels = g.get("input/labels");
  const int64_t V = model->options().model().vocab_size;

  auto logits = model->forward(ids, mask, types);  // (B, T, V)
  auto hf_logits = g.get("output/logits");
  EXPECT_EQ(logits.sizes(), hf_logits.sizes());
  auto ours_at = logits.index({compare}), hf_at = hf_logits.index({compare});  // (compared tokens, V)
  EXPECT_TRUE(torch::allclose(ours_at, hf_at, 1e-5, 1e-5)) << "max |diff| " << max_abs(ours_at - hf_at);
  std::cout << "[golden " << name << "] max |logit diff| " << max_abs(ours_at - hf_at) << " (max |logit| "
            << max_abs(hf_at) << ")\n";

  // HF: CrossEntropyLoss() with ignore_index -100, mean over the predicted tokens.
  auto loss = torch::nn::functional::cross_entropy(logits.view({-1, V}), labels.view(-1),
                                                   torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100));
  const double hf_loss = g.get("output/loss").item<double>();
  EXPECT_NEAR(loss.item<double>(), hf_loss, 1e-5 + 1e-5 * std::abs(hf_loss));
  std::cout << "[golden " << name << "] loss " << loss.item<double>() << " vs HF " << hf_loss << "\n";
  loss.backward();

  const auto ours = roformer::test::parameters_by_name(*model);
  double worst = 0.0;
  size_t checked = 0;
  for (const auto& [param, hf_grad] : hf_grads) {
    SCOPED_TRACE(param);
    EXPECT_TRUE(ours.count(param)) << "no parameter for HF key " << param;
    if (!ours.count(param)) continue;
    auto grad = ours.at(param).grad();
    EXPECT_TRUE(grad.defined());
    if (!grad.defined()) continue;
    const double scale = max_abs(hf_grad), err = max_abs(grad - hf_grad);
    EXPECT_LE(err, 1e-5 * scale + 1e-6) << "max |grad diff| " << err << " (max |HF grad| " << scale << ")";
    // A bias whose term is constant along a softmax row (DeBERTa's pos_key_proj.bias: q_i . b for
    // every key; key_proj.bias without p2c) has a zero gradient up to rounding (|HF grad| ~1e-8):
    // only the absolute bound applies, and the relative figure reported leaves it out.
    if (scale > 1e-6) worst = std::max(worst, err / scale);
    ++checked;
  }
  std::cout << "[golden " << name << "] worst grad error relative to the tensor's max |grad| (tensors with "
            << "max |grad| > 1e-6): " << worst << "\n";
  // Every trainable parameter of ours has an HF gradient (tied tensors once).
  EXPECT_EQ(checked, model->parameters().size());
  return ours;
}

// The sparse head (training's forward_sparse) at the predicted positions gives the fixture's loss.
void expect_sparse_loss(RoFormerForMaskedLM& model, const Golden& g) {
  auto labels = g.get("input/labels").view(-1);
  auto positions = (labels != -100).nonzero().squeeze(1);  // (P,) flat indices
  auto logits = model->forward_sparse(g.get("input/input_ids"), g.get("input/attention_mask"), positions,
                                      g.get("input/token_type_ids"));  // (P, V)
  auto loss = torch::nn::functional::cross_entropy(logits, labels.index_select(0, positions));
  const double hf_loss = g.get("output/loss").item<double>();
  EXPECT_NEAR(loss.item<double>(), hf_loss, 1e-5 + 1e-5 * std::abs(hf_loss));
}

TEST_P(GoldenTest, LogitsLossAndGradientsMatchHuggingFace) {
  auto g = load_golden(GetParam());
  RoFormerForMaskedLM model(options_for(g));
  model->load_hf_state_dict(g.with_prefix("weight/"));
  const auto every = torch::ones_like(g.get("input/attention_mask"), torch::kBool);  // HF RoFormer masks keys only
  const auto ours = expect_parity(model, g, g.with_prefix("grad/"), every);
  // The padding row of the word embedding gets no gradient from the lookup (HF padding_idx), only
  // from the tied decoder: so it must match too (already checked above); make sure it is nonzero.
  EXPECT_GT(max_abs(ours.at("roformer.embeddings.word_embeddings.weight").grad()[0]), 0.0);
}

TEST_P(GoldenTest, SparseHeadLossMatchesHuggingFace) {
  auto g = load_golden(GetParam());
  RoFormerForMaskedLM model(options_for(g));
  model->load_hf_state_dict(g.with_prefix("weight/"));
  expect_sparse_loss(model, g);
}

// The fixtures are sensitive to the variant: the rotary_value weights run without rotating V (and
// the other fixtures with it) give clearly different logits, so the parity above is not vacuous.
TEST(GoldenSensitivity, WrongRotaryValueSettingChangesLogits) {
  for (const std::string name : {"roformer_post", "roformer_rotary_value"}) {
    auto g = load_golden(name);
    auto options = options_for(g);
    options.model().rotary_value = !options.model().rotary_value;
    RoFormerForMaskedLM model(options);
    model->load_hf_state_dict(g.with_prefix("weight/"));
    torch::NoGradGuard no_grad;
    auto logits = model->forward(g.get("input/input_ids"), g.get("input/attention_mask"), g.get("input/token_type_ids"));
    EXPECT_GT(max_abs(logits - g.get("output/logits")), 1e-3) << name;
  }
}

TEST_P(GoldenTest, FixtureRecordsVersions) {
  auto g = load_golden(GetParam());
  EXPECT_EQ(g.meta.at("transformers_version"), "5.23.0");
  EXPECT_EQ(g.meta.at("torch_version").substr(0, 6), "2.11.0");
}

INSTANTIATE_TEST_SUITE_P(Configs, GoldenTest,
                         ::testing::Values("roformer_post", "roformer_factorized", "roformer_rotary_value"));

// ---- DebertaV2ForMaskedLM (model.position: disentangled) --------------------------------------------
// Same tolerances. Logits are compared where attention_mask is 1: HF DeBERTa zeroes the padded
// positions' embeddings and lets a padded query attend uniformly to every key, where ours attends to
// the tokens; no token reads a padded position (their keys are masked on both sides) and none is
// predicted, so the loss and every gradient are compared in full.

// Our options for a DeBERTa fixture: the shared sizes plus its `model_overrides`.
RoFormerOptions deberta_options_for(const Golden& g) {
  roformer::config::Config c;
  for (const char* key : {"hidden_size", "num_layers", "num_heads", "intermediate_size", "max_position_embeddings",
                          "layer_norm_eps", "initializer_range", "hidden_act"})
    roformer::config::apply_override(c, std::string("model.") + key + "=" + g.meta.at(key));
  for (const auto& o : split(g.meta.at("model_overrides"), ',')) roformer::config::apply_override(c, "model." + o);
  c.model.hidden_dropout = 0.0;
  c.model.attention_dropout = 0.0;
  return RoFormerOptions(c.model, g.num("vocab_size"));
}

// The fixture's tensors under prefix, renamed from DebertaV2's names to ours.
std::map<std::string, torch::Tensor> ours_from_hf(const Golden& g, const std::string& prefix) {
  std::map<std::string, torch::Tensor> out;
  for (auto& [name, t] : g.with_prefix(prefix)) out.emplace(roformer::hf::deberta_v2_family().from_hf_name(name), t);
  return out;
}

class DebertaGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DebertaGoldenTest, KeysAndParameterCountMatchHuggingFace) {
  auto g = load_golden(GetParam());
  RoFormerForMaskedLM model(deberta_options_for(g));
  std::set<std::string> ours, theirs;
  for (const auto& [name, t] : model->hf_named_parameters())
    ours.insert(roformer::hf::deberta_v2_family().to_hf_name(name));
  for (const auto& key : split(g.meta.at("state_dict_keys"), ',')) theirs.insert(key);
  EXPECT_EQ(ours, theirs);
  EXPECT_EQ(model->num_parameters(), g.num("hf_num_trainable_parameters"));
  EXPECT_EQ(model->num_parameters(), g.num("hf_num_parameters"));  // no buffer counted as a parameter
}

TEST_P(DebertaGoldenTest, LogitsLossAndGradientsMatchHuggingFace) {
  auto g = load_golden(GetParam());
  RoFormerForMaskedLM model(deberta_options_for(g));
  model->load_hf_state_dict(ours_from_hf(g, "weight/"));
  const auto tokens = g.get("input/attention_mask").to(torch::kBool);  // (B, T): see above
  expect_parity(model, g, ours_from_hf(g, "grad/"), tokens);
  // The relative table is trained through both terms' gathers: its gradient is not zero.
  EXPECT_GT(max_abs(roformer::test::parameters_by_name(*model).at("roformer.encoder.rel_embeddings.weight").grad()), 0.0);
}

TEST_P(DebertaGoldenTest, SparseHeadLossMatchesHuggingFace) {
  auto g = load_golden(GetParam());
  RoFormerForMaskedLM model(deberta_options_for(g));
  model->load_hf_state_dict(ours_from_hf(g, "weight/"));
  expect_sparse_loss(model, g);
}

INSTANTIATE_TEST_SUITE_P(Configs, DebertaGoldenTest,
                         ::testing::Values("deberta_shared", "deberta_separate", "deberta_c2p", "deberta_p2c"));

// The relative buckets are HF's make_log_bucket_position exactly, for every distance within +-2047:
// DeBERTa-v3's (256, 512), docs/positions.md's (64, 128) and the fixtures' settings.
TEST(DebertaGolden, LogBucketsEqualHuggingFace) {
  auto g = load_golden("deberta_buckets");
  auto distance = g.get("distance");
  size_t pairs = 0;
  for (const auto& [name, hf] : g.with_prefix("bucket/")) {
    SCOPED_TRACE(name);
    const auto sizes = split(name, '_');
    auto ours = roformer::model::log_bucket_positions(distance, std::stoll(sizes[0]), std::stoll(sizes[1]));
    EXPECT_TRUE(torch::equal(ours, hf)) << (ours != hf).sum().item<int64_t>() << " distances differ";
    ++pairs;
  }
  EXPECT_EQ(pairs, 5u);
}

// Sensitivity: the deberta_shared weights read with other log buckets (the same 16 rows reached at
// distance 39 instead of 9) or without the p2c term give clearly different logits, so the parity
// above is not vacuous.
TEST(DebertaGolden, WrongRelativeSettingsChangeLogits) {
  auto g = load_golden("deberta_shared");
  auto ids = g.get("input/input_ids"), types = g.get("input/token_type_ids");
  torch::NoGradGuard no_grad;
  RoFormerForMaskedLM reference(deberta_options_for(g));
  reference->load_hf_state_dict(ours_from_hf(g, "weight/"));
  const auto expected = reference->forward(ids, {}, types);
  for (const std::string change : {"model.max_relative_positions=40", "model.pos_att_type=c2p"}) {
    SCOPED_TRACE(change);
    roformer::config::Config c;
    c.model = deberta_options_for(g).model();
    roformer::config::apply_override(c, change);
    RoFormerForMaskedLM model(RoFormerOptions(c.model, g.num("vocab_size")));
    model->load_hf_state_dict(ours_from_hf(g, "weight/"));
    EXPECT_GT(max_abs(model->forward(ids, {}, types) - expected), 1e-3);
  }
}

// ---- ModernBertForMaskedLM (model.feed_forward: glu, pre-LN, local and global layers) ----------------
// A tiny random model made by the venv's transformers inside the test (tests/python/
// make_modernbert_reference.py), read through the family (hf/modernbert.cpp: config.json, the
// Wqkv split and its rotate-half rows), at T = 20 (beyond the local layers' window of +-4: their
// band mask) and T = 5 (within it). Same tolerances as above; logits compared where attention_mask
// is 1 (a padded query's outputs differ: ours attends to itself where its window holds no token).
struct ModernBertReference {
  roformer::test::TempDir dir;
  RoFormerOptions options{roformer::config::ModelConfig(), 6};
  std::map<std::string, torch::Tensor> weights;  // Hugging Face's names
  std::map<std::string, torch::Tensor> tensors;  // reference.safetensors
  // The inputs and outputs at length T as a Golden for expect_parity.
  Golden at(int64_t T) const {
    Golden g;
    g.name = "modernbert T=" + std::to_string(T);
    const std::string t = "_T" + std::to_string(T);
    for (const char* key : {"input/input_ids", "input/attention_mask", "input/labels", "output/logits", "output/loss"})
      g.tensors.emplace(key, tensors.at(key + t));
    g.tensors.emplace("input/token_type_ids", torch::Tensor());  // ModernBERT has no token types
    return g;
  }
};

std::unique_ptr<ModernBertReference> make_modernbert_reference(const std::string& variant) {
  auto ref = std::make_unique<ModernBertReference>();
  const std::string out = ref->dir.str();
  auto r = roformer::test::run_command(roformer::test::python() + " " + roformer::test::source_dir() +
                                       "/tests/python/make_modernbert_reference.py " + out + " " + variant);
  if (r.exit_code != 0) throw std::runtime_error(r.output);
  const std::string config = out + "/hf/config.json";
  const auto exported = roformer::hf::read_config_json(nlohmann::json::parse(roformer::test::read_file(config)), config);
  EXPECT_EQ(exported.family, &roformer::hf::modernbert_family());
  EXPECT_EQ(exported.model.hidden_dropout, 0.0);  // the model's mlp_dropout and attention_dropout
  EXPECT_EQ(exported.model.attention_dropout, 0.0);
  ref->options = RoFormerOptions(exported.model, exported.model.vocab_size);
  ref->weights = roformer::core::load_safetensors(out + "/hf/model.safetensors");
  ref->tensors = roformer::core::load_safetensors(out + "/reference.safetensors");
  return ref;
}

class ModernBertGolden : public ::testing::TestWithParam<std::string> {
 protected:
  // One reference per variant for the suite (transformers takes half a minute to import here).
  void SetUp() override {
    if (roformer::test::python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
    static std::map<std::string, std::shared_ptr<ModernBertReference>> made;
    auto& ref = made[GetParam()];
    if (!ref) ref = make_modernbert_reference(GetParam());
    ref_ = ref;
  }
  RoFormerForMaskedLM loaded() const {
    RoFormerForMaskedLM model(ref_->options);
    model->load_hf_state_dict(family().from_hf(ref_->weights, ref_->options.model()));
    return model;
  }
  static const roformer::hf::Family& family() { return roformer::hf::modernbert_family(); }
  std::shared_ptr<ModernBertReference> ref_;
};

TEST_P(ModernBertGolden, ConfigReadsAsModernBertLayers) {
  const auto& m = ref_->options.model();
  EXPECT_EQ(m.feed_forward, roformer::config::FeedForward::kGlu);
  EXPECT_EQ(m.norm, roformer::config::Norm::kPre);
  EXPECT_FALSE(m.first_attention_norm);
  EXPECT_EQ(m.local_attention, 8);
  EXPECT_EQ(m.type_vocab_size, 0);
  if (GetParam() == "plain") {
    EXPECT_FALSE(m.bias);
    EXPECT_EQ(m.global_attention_every, 3);
    EXPECT_EQ(m.rotary_base, 160000.0);
    EXPECT_EQ(m.local_rotary_base, 10000.0);
  } else {
    EXPECT_TRUE(m.bias);
    EXPECT_EQ(m.global_attention_every, 2);
    EXPECT_EQ(m.local_rotary_base, 0.0);  // one base
    EXPECT_EQ(m.hidden_act, roformer::config::Activation::kGeluTanh);
  }
}

// Our tensors in the family's names and layout are Hugging Face's state dict, key for key and
// value for value (the permutation of q and k undone exactly), and the parameter counts agree.
TEST_P(ModernBertGolden, TensorsRoundTripToHuggingFaceKeys) {
  auto model = loaded();
  roformer::hf::NamedTensors ours;
  for (const auto& [name, t] : model->hf_named_parameters())
    if (name != "cls.predictions.decoder.weight" && name != "cls.predictions.decoder.bias") ours.emplace_back(name, t);
  const auto theirs = family().to_hf(ours, ref_->options.model());
  std::set<std::string> keys;
  for (const auto& [name, t] : theirs) {
    keys.insert(name);
    ASSERT_TRUE(ref_->weights.count(name)) << name;
    EXPECT_TRUE(torch::equal(t, ref_->weights.at(name))) << name;
  }
  std::set<std::string> hf_keys;
  for (const auto& [name, t] : ref_->weights) hf_keys.insert(name);
  EXPECT_EQ(keys, hf_keys);
  int64_t hf_parameters = 0;
  for (const auto& [name, t] : ref_->weights) hf_parameters += t.numel();
  EXPECT_EQ(model->num_parameters(), hf_parameters);  // the tied decoder counted once on both sides
}

TEST_P(ModernBertGolden, LogitsLossAndGradientsMatchHuggingFace) {
  auto model = loaded();
  auto g = ref_->at(20);
  const auto tokens = g.get("input/attention_mask").to(torch::kBool);
  std::map<std::string, torch::Tensor> grads;  // HF's gradients under HF's names -> ours
  for (const auto& [name, t] : ref_->tensors)
    if (name.rfind("grad/", 0) == 0) grads.emplace(name.substr(5), t);
  expect_parity(model, g, family().from_hf(grads, ref_->options.model()), tokens);
  expect_sparse_loss(model, g);
}

TEST_P(ModernBertGolden, WithinTheWindowLogitsAndLossMatchHuggingFace) {
  auto model = loaded();
  model->eval();
  auto g = ref_->at(5);
  torch::NoGradGuard no_grad;
  const auto tokens = g.get("input/attention_mask").to(torch::kBool);
  auto logits = model->forward(g.get("input/input_ids"), g.get("input/attention_mask"));
  auto ours = logits.index({tokens}), hf = g.get("output/logits").index({tokens});
  EXPECT_TRUE(torch::allclose(ours, hf, 1e-5, 1e-5)) << "max |diff| " << max_abs(ours - hf);
  expect_sparse_loss(model, g);
}

// Sensitivity: the same weights without the window, with one rotary base, or with the ordinary
// adjacent-pair rows (no permutation) give clearly different logits at T = 20.
TEST_P(ModernBertGolden, WrongWindowBaseOrLayoutChangesLogits) {
  auto g = ref_->at(20);
  auto ids = g.get("input/input_ids"), mask = g.get("input/attention_mask");
  const auto tokens = mask.to(torch::kBool);
  torch::NoGradGuard no_grad;
  const auto expected = g.get("output/logits").index({tokens});
  std::vector<std::pair<std::string, roformer::config::ModelConfig>> changes;
  auto m = ref_->options.model();
  m.local_attention = 0;
  m.global_attention_every = 3;
  m.local_rotary_base = 0;
  changes.emplace_back("no window", m);
  if (GetParam() == "plain") {
    m = ref_->options.model();
    m.local_rotary_base = 0;
    changes.emplace_back("one base", m);
  }
  for (const auto& [what, changed] : changes) {
    SCOPED_TRACE(what);
    RoFormerForMaskedLM model(RoFormerOptions(changed, changed.vocab_size));
    model->load_hf_state_dict(family().from_hf(ref_->weights, changed));
    EXPECT_GT(max_abs(model->forward(ids, mask).index({tokens}) - expected), 1e-3);
  }
  // The Wqkv rows taken in Hugging Face's order, as if both used adjacent pairs.
  auto model = loaded();
  for (int64_t l = 0; l < ref_->options.model().num_layers; ++l) {
    const auto& wqkv = ref_->weights.at("model.layers." + std::to_string(l) + ".attn.Wqkv.weight");
    auto layer = std::dynamic_pointer_cast<roformer::model::RoFormerLayerImpl>(model->encoder->layers->ptr(l));
    layer->self_attention->query->weight.copy_(wqkv.chunk(3, 0)[0]);
    layer->self_attention->key->weight.copy_(wqkv.chunk(3, 0)[1]);
  }
  EXPECT_GT(max_abs(model->forward(ids, mask).index({tokens}) - expected), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Variants, ModernBertGolden, ::testing::Values("plain", "biased"));

// model.family: its choices are auto and the families' model types; auto never chooses RoBERTa (it
// computes what BERT does), a family named must claim the model, and RoBERTa needs the pad id 1.
TEST(HfFamilies, ModelFamilyNamesTheFamilyAnExportTakes) {
  using roformer::hf::export_family;
  for (const auto* f : roformer::hf::families()) {
    roformer::config::Config c;
    c.model.family = f->model_type();
    EXPECT_NO_THROW(roformer::config::check_table(c, "model")) << f->model_type();
  }
  roformer::config::Config other;
  other.model.family = "xlnet";
  EXPECT_THROW(roformer::config::check_table(other, "model"), roformer::Error);

  roformer::config::ModelConfig m;
  m.position = roformer::config::Position::kAbsolute;
  auto options = [](const roformer::config::ModelConfig& model, int64_t pad) {
    return roformer::model::RoFormerOptions(model, 100).pad_token_id(pad);
  };
  EXPECT_STREQ(export_family(options(m, 1)).model_type(), "bert");
  m.family = "roberta";
  EXPECT_STREQ(export_family(options(m, 1)).model_type(), "roberta");
  try {
    export_family(options(m, 0));
    ADD_FAILURE() << "a RoBERTa export of a model padding with id 0";
  } catch (const roformer::Error& e) {
    EXPECT_NE(std::string(e.what()).find("RoBERTa, whose positions begin after the pad id 1, but this model's "
                                         "tokenizer pads with id 0; set model.family: auto"), std::string::npos)
        << e.what();
  }
  m.position = roformer::config::Position::kRotary;
  try {
    export_family(options(m, 1));
    ADD_FAILURE() << "a rotary model exported as RoBERTa";
  } catch (const roformer::Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.family: roberta exports as RoBERTa, which has learned absolute "
                                         "positions from padding_idx + 1, but this model has model.position: rotary"),
              std::string::npos) << e.what();
  }
  m.family = "auto";
  EXPECT_STREQ(export_family(options(m, 1)).model_type(), "roformer");
}

}  // namespace
