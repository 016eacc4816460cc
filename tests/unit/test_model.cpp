// RoFormerForMaskedLM behaviour (src/model/roformer.h) beyond the HF parity of test_model_golden:
// options mapping, sparse vs dense head, padding, bad inputs, weight-decay groups, HF names and
// loading errors, initialization, gradient checkpointing, the kernel policy's alternatives and FLOPs.
#include <gtest/gtest.h>
#include <ATen/Context.h>
#include <torch/torch.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <set>

#include "core/config.h"
#include "core/error.h"
#include "model/autocast.h"
#include "model/flops.h"
#include "model/kernel_policy.h"
#include "model/layers.h"
#include "model/roformer.h"
#include "model/size.h"
#include "model_util.h"
#include "test_util.h"

namespace {

using namespace roformer::model;
using roformer::test::error_of;

// The tiny model (model_util.h) with config overrides: tiny({"model.norm=pre"}).
RoFormerOptions tiny(const std::vector<std::string>& overrides = {}, int64_t vocab_size = 50) {
  return roformer::test::tiny_model_options(overrides, vocab_size);
}
RoFormerOptions tiny_norm(const std::string& norm) { return tiny({"model.norm=" + norm}); }

struct Batch {
  torch::Tensor ids, mask, types;
};
Batch make_batch(int64_t vocab, int64_t B = 3, int64_t T = 10) {
  torch::manual_seed(11);
  Batch b;
  b.ids = torch::randint(1, vocab, {B, T}, torch::kLong);
  b.mask = torch::ones({B, T}, torch::kLong);
  b.mask.index_put_({1, torch::indexing::Slice(T - 4, torch::indexing::None)}, 0);
  b.ids = b.ids.masked_fill(b.mask == 0, 0);
  b.types = torch::randint(0, 2, {B, T}, torch::kLong);
  return b;
}

// The options hold the config's model section as it is (nothing mirrored, nothing renamed): every
// key of the config table reads the same from the options, the vocabulary resolved.
TEST(ModelOptions, HoldTheConfigSectionAsItIs) {
  const auto c = roformer::config::parse_config(
      "", {"model.hidden_size=96", "model.num_layers=3", "model.num_heads=6", "model.intermediate_size=200",
           "model.max_position_embeddings=77", "model.type_vocab_size=0", "model.hidden_dropout=0.25",
           "model.attention_dropout=0.125", "model.layer_norm_eps=1e-6", "model.initializer_range=0.05",
           "model.rotary_base=500", "model.norm=pre", "model.attention=softmax", "model.rotary_value=true",
           "model.hidden_act=relu", "model.gradient_checkpointing=true", "data.max_seq_len=64"});
  const RoFormerOptions o(c.model, 1234);
  roformer::config::Config expected = c, held = c;
  expected.model.vocab_size = 1234;
  held.model = o.model();
  EXPECT_TRUE(roformer::config::diff(expected, held).empty());
  EXPECT_EQ(o.model().norm, roformer::config::Norm::kPre);
  EXPECT_EQ(o.model().hidden_act, roformer::config::Activation::kRelu);
  EXPECT_EQ(o.embedding_size(), 96);  // 0 resolves to hidden_size
  EXPECT_EQ(o.pad_token_id(), 0);
  EXPECT_EQ(RoFormerOptions(roformer::config::parse_config("", {"model.embedding_size=24"}).model, 10).embedding_size(), 24);
}

// The model refuses what a run's config refuses (one validator: model::validate_model_config), also
// for options built in code, and a vocabulary that was never resolved.
TEST(ModelOptions, InvalidOptionsAreRejectedWithTheReason) {
  EXPECT_NE(error_of([] { RoFormerForMaskedLM(tiny({"model.num_heads=5"})); })
                .find("model.hidden_size (32) must be divisible by model.num_heads (5)"),
            std::string::npos);
  EXPECT_NE(error_of([] { RoFormerForMaskedLM(tiny({"model.hidden_size=36", "model.num_heads=12"})); })
                .find("must be even"),
            std::string::npos);
  EXPECT_NE(error_of([] { RoFormerForMaskedLM(tiny({}, 0)); }).find("vocab_size must be > 0"), std::string::npos);
  auto o = tiny();
  o.model().num_layers = 0;  // out of the table's range, set in code
  EXPECT_NE(error_of([&] { RoFormerForMaskedLM m(o); }).find("config key model.num_layers = 0 is out of range"),
            std::string::npos);
}

TEST(KernelPolicy, RotaryImplementationsByName) {
  EXPECT_EQ(rotary_impl_named("fused"), RotaryImpl::kFused);
  EXPECT_EQ(rotary_impl_named("matrix"), std::nullopt);  // a reference (model/rotary.h), never a path of the model
  EXPECT_EQ(rotary_impl_named("complex"), std::nullopt);
  for (auto impl : {RotaryImpl::kAuto, RotaryImpl::kElementwise, RotaryImpl::kFused})
    EXPECT_EQ(rotary_impl_named(to_string(impl)), impl);
}

// The defaults are each device's measured-best path; a scoped policy is in force while it lives and
// puts the previous one back, LibTorch's attention-kernel flags included.
TEST(KernelPolicy, DefaultsPerDeviceAndScopedPolicyRestores) {
  EXPECT_EQ(rotary_impl(torch::kCPU), RotaryImpl::kElementwise);
  EXPECT_EQ(rotary_impl(torch::Device(torch::kCUDA, 0)), RotaryImpl::kFused);
  EXPECT_TRUE(kernel_policy().fused_qkv);
  EXPECT_TRUE(kernel_policy().bias_in_gemm);
  EXPECT_FALSE(kernel_policy().dense_head);
  auto& context = at::globalContext();
  const bool math = context.userEnabledMathSDP(), flash = context.userEnabledFlashSDP();
  {
    KernelPolicy p;
    p.rotary = RotaryImpl::kFused;
    p.attention = AttentionKernel::kMath;
    const ScopedKernelPolicy outer(p);
    EXPECT_EQ(rotary_impl(torch::kCPU), RotaryImpl::kFused);
    EXPECT_TRUE(context.userEnabledMathSDP());
    EXPECT_FALSE(context.userEnabledFlashSDP());
    {
      KernelPolicy q;
      q.dense_head = true;
      const ScopedKernelPolicy inner(q);
      EXPECT_TRUE(kernel_policy().dense_head);
      EXPECT_EQ(rotary_impl(torch::kCPU), RotaryImpl::kElementwise);
      EXPECT_EQ(context.userEnabledFlashSDP(), flash);  // auto: LibTorch's own flags again
    }
    EXPECT_FALSE(kernel_policy().dense_head);
    EXPECT_EQ(rotary_impl(torch::kCPU), RotaryImpl::kFused);
    EXPECT_FALSE(context.userEnabledFlashSDP());
  }
  EXPECT_EQ(rotary_impl(torch::kCPU), RotaryImpl::kElementwise);
  EXPECT_EQ(context.userEnabledMathSDP(), math);
  EXPECT_EQ(context.userEnabledFlashSDP(), flash);
  EXPECT_EQ(attention_kernel_named("cudnn"), AttentionKernel::kCudnn);
  EXPECT_EQ(attention_kernel_named("fast"), std::nullopt);
}

// The dense head (bench --dense-head) computes the logits forward_sparse computes, at every
// position first: the same values and gradients.
TEST(KernelPolicy, DenseHeadGivesTheSparseLogits) {
  torch::manual_seed(3);
  RoFormerForMaskedLM model(tiny());
  auto b = make_batch(model->options().model().vocab_size);
  const auto positions = torch::tensor({1, 5, 17, 29}, torch::kLong);
  auto sparse = model->forward_sparse(b.ids, b.mask, positions);
  sparse.pow(2).sum().backward();
  std::vector<torch::Tensor> sparse_grads;
  for (const auto& p : model->parameters()) sparse_grads.push_back(p.grad().clone());
  model->zero_grad();
  KernelPolicy p;
  p.dense_head = true;
  const ScopedKernelPolicy scoped(p);
  auto dense = model->forward_sparse(b.ids, b.mask, positions);
  EXPECT_TRUE(torch::allclose(dense, sparse, 1e-5, 1e-6));
  dense.pow(2).sum().backward();
  const auto params = model->parameters();
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(torch::allclose(params[i].grad(), sparse_grads[i], 1e-4, 1e-6)) << "parameter " << i;
}

TEST(Model, BadInputsGiveClearErrors) {
  RoFormerForMaskedLM model(tiny());
  auto too_big = torch::full({2, 5}, 50, torch::kLong);
  auto msg = error_of([&] { model->forward(too_big); });
  EXPECT_NE(msg.find("token id 50 outside the vocabulary [0, 50)"), std::string::npos) << msg;
  msg = error_of([&] { model->forward(torch::full({1, 3}, -1, torch::kLong)); });
  EXPECT_NE(msg.find("token id -1 outside the vocabulary"), std::string::npos) << msg;
  // Beyond the 32 rows: the learned absolute table refuses (rotary extends: test_position).
  RoFormerForMaskedLM absolute(tiny({"model.position=absolute"}));
  msg = error_of([&] { absolute->forward(torch::ones({1, 33}, torch::kLong)); });
  EXPECT_NE(msg.find("sequence length 33 exceeds model.max_position_embeddings 32"), std::string::npos) << msg;
  EXPECT_NO_THROW(absolute->forward(torch::ones({1, 32}, torch::kLong)));
  EXPECT_THROW(model->forward(torch::ones({1, 4}, torch::kLong), torch::ones({1, 5}, torch::kLong)), c10::Error);
}

TEST(Model, ShapesDenseAndSparse) {
  auto o = tiny();
  RoFormerForMaskedLM model(o);
  auto b = make_batch(o.model().vocab_size);
  EXPECT_EQ(model->encode(b.ids, b.mask, b.types).sizes(), (std::vector<int64_t>{3, 10, 32}));
  EXPECT_EQ(model->forward(b.ids, b.mask, b.types).sizes(), (std::vector<int64_t>{3, 10, 50}));
  auto pos = torch::tensor({0, 7, 12, 29}, torch::kLong);
  EXPECT_EQ(model->forward_sparse(b.ids, b.mask, pos, b.types).sizes(), (std::vector<int64_t>{4, 50}));
}

TEST(Model, SparseHeadEqualsDenseHeadGatheredValuesAndGradients) {
  for (const bool factorized : {false, true}) {
    SCOPED_TRACE(factorized);
    auto o = tiny({factorized ? "model.embedding_size=16" : "model.embedding_size=32"});
    RoFormerForMaskedLM model(o);
    auto b = make_batch(o.model().vocab_size);
    auto pos = torch::tensor({1, 4, 9, 10, 15, 22, 28}, torch::kLong);  // flat into B*T = 30
    auto labels = torch::tensor({3, 8, 1, 40, 2, 17, 9}, torch::kLong);

    auto dense = model->forward(b.ids, b.mask, b.types).view({-1, o.model().vocab_size}).index_select(0, pos);
    auto loss_dense = torch::nn::functional::cross_entropy(dense, labels);
    loss_dense.backward();
    std::vector<torch::Tensor> grads_dense;
    for (auto& p : model->parameters()) grads_dense.push_back(p.grad().clone());
    model->zero_grad();

    auto sparse = model->forward_sparse(b.ids, b.mask, pos, b.types);
    EXPECT_TRUE(torch::allclose(sparse, dense, 1e-6, 1e-6));
    auto loss_sparse = torch::nn::functional::cross_entropy(sparse, labels);
    loss_sparse.backward();
    auto params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i)
      EXPECT_TRUE(torch::allclose(params[i].grad(), grads_dense[i], 1e-5, 1e-7)) << i;
  }
}

TEST(Model, PaddedTokensDoNotChangeRealTokensAndAllOnesMaskEqualsNoMask) {
  for (const std::string attention : {"softmax", "linear"}) {
    SCOPED_TRACE(attention);
    auto o = tiny({"model.attention=" + attention});
    RoFormerForMaskedLM model(o);
    model->eval();
    auto b = make_batch(o.model().vocab_size);
    auto out = model->encode(b.ids, b.mask, b.types);
    auto ids2 = b.ids.clone();
    ids2.index_put_({1, torch::indexing::Slice(6, torch::indexing::None)}, 7);  // other tokens under the padding
    auto out2 = model->encode(ids2, b.mask, b.types);
    EXPECT_TRUE(torch::allclose(out[1].narrow(0, 0, 6), out2[1].narrow(0, 0, 6), 1e-5, 1e-6));
    // Without the mask the padded tokens would be attended to.
    auto unmasked = model->encode(ids2, {}, b.types);
    EXPECT_FALSE(torch::allclose(out[1].narrow(0, 0, 6), unmasked[1].narrow(0, 0, 6), 1e-5, 1e-6));
    auto ones = torch::ones_like(b.mask);
    EXPECT_TRUE(torch::equal(model->encode(b.ids, ones, b.types), model->encode(b.ids, {}, b.types)));
  }
}

TEST(Model, AllPaddingRowAttendsEverywhereLikeHfAndStaysFinite) {
  for (const std::string attention : {"softmax", "linear"}) {
    SCOPED_TRACE(attention);
    RoFormerForMaskedLM model(tiny({"model.attention=" + attention}));
    auto b = make_batch(50);
    b.mask[2].zero_();
    b.ids[2].zero_();
    auto logits = model->forward_sparse(b.ids, b.mask, torch::tensor({0, 3, 12}, torch::kLong), b.types);
    auto full = model->encode(b.ids, b.mask, b.types);
    EXPECT_TRUE(torch::isfinite(full).all().item<bool>());
    if (attention == "softmax") {
      // As HF's additive finfo.min mask: a row with no token attends uniformly to all its positions,
      // i.e. it is encoded as if it had no mask (not as zeros or NaN, which backends differ on).
      auto alone = model->encode(b.ids.narrow(0, 2, 1), {}, b.types.narrow(0, 2, 1));
      EXPECT_TRUE(torch::allclose(full[2], alone[0], 1e-5, 1e-6));
    }
    torch::nn::functional::cross_entropy(logits, torch::tensor({1, 2, 3}, torch::kLong)).backward();
    for (const auto& p : model->parameters()) EXPECT_TRUE(torch::isfinite(p.grad()).all().item<bool>());
  }
}

TEST(Model, TokenTypesUndefinedEqualZeros) {
  RoFormerForMaskedLM model(tiny());
  auto b = make_batch(50);
  auto zeros = torch::zeros_like(b.ids);
  EXPECT_TRUE(torch::allclose(model->forward(b.ids, b.mask), model->forward(b.ids, b.mask, zeros), 1e-6, 1e-6));
  EXPECT_FALSE(torch::allclose(model->forward(b.ids, b.mask), model->forward(b.ids, b.mask, b.types), 1e-4, 1e-4));
  RoFormerForMaskedLM no_types(tiny({"model.type_vocab_size=0"}));
  for (const auto& [name, t] : no_types->hf_named_parameters())
    EXPECT_EQ(name.find("token_type"), std::string::npos) << name;
  EXPECT_EQ(no_types->forward(b.ids, b.mask).sizes(), (std::vector<int64_t>{3, 10, 50}));
}

TEST(Model, TiedWeightsAndHfNames) {
  RoFormerForMaskedLM model(tiny({"model.embedding_size=16"}));
  std::map<std::string, torch::Tensor> named;
  std::vector<std::string> order;
  for (const auto& [name, t] : model->hf_named_parameters()) {
    named[name] = t;
    order.push_back(name);
  }
  EXPECT_EQ(named.at("cls.predictions.decoder.weight").data_ptr(),
            named.at("roformer.embeddings.word_embeddings.weight").data_ptr());
  EXPECT_EQ(named.at("cls.predictions.decoder.bias").data_ptr(), named.at("cls.predictions.bias").data_ptr());
  EXPECT_EQ(named.at("roformer.embeddings_project.weight").sizes(), (std::vector<int64_t>{32, 16}));
  EXPECT_EQ(named.at("cls.predictions.transform.dense.weight").sizes(), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(named.at("roformer.encoder.embed_positions.weight").sizes(), (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(order.front(), "roformer.embeddings.word_embeddings.weight");
  EXPECT_EQ(order.back(), "cls.predictions.decoder.bias");
  // Pre-LN adds a final LayerNorm.
  RoFormerForMaskedLM pre(tiny_norm("pre"));
  int finals = 0;
  for (const auto& [name, t] : pre->hf_named_parameters()) finals += name.rfind("roformer.encoder.final_layer_norm.", 0) == 0;
  EXPECT_EQ(finals, 2);
}

TEST(Model, LoadHfStateDictRoundTripAndErrors) {
  auto o = tiny();
  RoFormerForMaskedLM a(o), b(o);
  std::map<std::string, torch::Tensor> state;
  for (const auto& [name, t] : a->hf_named_parameters()) state[name] = t.detach().clone();
  b->load_hf_state_dict(state);
  auto batch = make_batch(o.model().vocab_size);
  EXPECT_TRUE(torch::equal(a->forward(batch.ids, batch.mask), b->forward(batch.ids, batch.mask)));

  // HF's save_pretrained drops tied duplicates: still loadable without the alias keys.
  auto reduced = state;
  reduced.erase("cls.predictions.decoder.weight");
  reduced.erase("cls.predictions.decoder.bias");
  reduced.erase("roformer.encoder.embed_positions.weight");
  EXPECT_NO_THROW(b->load_hf_state_dict(reduced));

  auto broken = state;
  broken.erase("roformer.encoder.layer.1.output.dense.bias");
  broken["roformer.pooler.dense.weight"] = torch::zeros({2});
  broken["roformer.encoder.layer.0.attention.self.query.weight"] = torch::zeros({32, 31});
  const auto msg = error_of([&] { b->load_hf_state_dict(broken); });
  EXPECT_NE(msg.find("3 problem(s)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing key roformer.encoder.layer.1.output.dense.bias"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unexpected key roformer.pooler.dense.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("shape mismatch for roformer.encoder.layer.0.attention.self.query.weight: expected [32, 32], "
                     "got [32, 31]"),
            std::string::npos)
      << msg;
}

// model.bias false: no linear layer or LayerNorm has a bias (only the MLM decoder's output bias
// stays), and the model computes what the same weights with zero biases compute; with_zero_biases
// gives exactly the keys and shapes of the model with biases (what an export writes).
TEST(Model, WithoutBiasesNoBiasParametersAndZeroBiasesEquivalent) {
  for (const std::vector<std::string>& overrides : std::vector<std::vector<std::string>>{
           {},
           {"model.norm=pre", "model.embedding_size=16"},
           {"model.position=disentangled", "model.position_buckets=8", "model.share_att_key=false"}}) {
    SCOPED_TRACE(overrides.empty() ? "rotary" : overrides.front());
    auto without = overrides, with = overrides;
    without.push_back("model.bias=false");
    RoFormerForMaskedLM bare(tiny(without)), biased(tiny(with));
    std::vector<std::string> biases;
    for (const auto& p : bare->named_parameters())
      if (p.key().size() > 4 && p.key().compare(p.key().size() - 4, 4, "bias") == 0) biases.push_back(p.key());
    EXPECT_EQ(biases, std::vector<std::string>{"cls.predictions.bias"});
    EXPECT_LT(bare->num_parameters(), biased->num_parameters());

    const auto full = bare->with_zero_biases(bare->hf_named_parameters());
    std::map<std::string, torch::Tensor> state;
    for (const auto& [name, t] : full) state[name] = t.detach().clone();
    std::map<std::string, std::vector<int64_t>> expected, got;
    for (const auto& [name, t] : biased->hf_named_parameters()) expected[name] = t.sizes().vec();
    for (const auto& [name, t] : state) got[name] = t.sizes().vec();
    EXPECT_EQ(got, expected);
    ASSERT_NO_THROW(biased->load_hf_state_dict(state));
    auto batch = make_batch(50);
    EXPECT_TRUE(torch::allclose(bare->forward(batch.ids, batch.mask), biased->forward(batch.ids, batch.mask), 1e-5, 1e-6));
    // It trains: every parameter gets a gradient.
    bare->forward(batch.ids, batch.mask).sum().backward();
    for (const auto& p : bare->named_parameters()) EXPECT_TRUE(p.value().grad().defined()) << p.key();
  }
}

TEST(Model, DecayGroupsPartitionParameters) {
  RoFormerForMaskedLM model(tiny({"model.norm=pre", "model.embedding_size=16"}));
  for (const bool with_embeddings : {false, true}) {
    SCOPED_TRACE(with_embeddings);
    auto decay = model->decay_parameters(with_embeddings), no_decay = model->no_decay_parameters(with_embeddings);
    std::set<void*> d, n;
    for (auto& t : decay) d.insert(t.data_ptr());
    for (auto& t : no_decay) n.insert(t.data_ptr());
    EXPECT_EQ(d.size(), decay.size());
    EXPECT_EQ(n.size(), no_decay.size());
    EXPECT_EQ(decay.size() + no_decay.size(), model->parameters().size());
    for (auto* p : d) EXPECT_FALSE(n.count(p));
    int64_t total = 0;
    for (auto& t : decay) total += t.numel();
    for (auto& t : no_decay) total += t.numel();
    EXPECT_EQ(total, model->num_parameters());
    void* word = model->embeddings->word_embeddings->weight.data_ptr();
    EXPECT_EQ(d.count(word), with_embeddings ? 1u : 0u);
    EXPECT_TRUE(d.count(model->embeddings_project->weight.data_ptr()));
    EXPECT_TRUE(n.count(model->embeddings_project->bias.data_ptr()));
    EXPECT_TRUE(n.count(model->head->bias.data_ptr()));
    EXPECT_TRUE(n.count(model->head->layer_norm->weight.data_ptr()));
    EXPECT_TRUE(n.count(model->encoder->final_layer_norm->weight.data_ptr()));
    for (auto& t : decay) EXPECT_EQ(t.dim(), 2);  // only matrices decay
  }
}

// The memory checks count the model from its options alone (model/size.h): exactly the parameters
// the built model has, for every position scheme and the settings that add or drop tensors, plus
// the rotary table at its float64 build peak (24 P D bytes); the position tables are named by the
// key that sets their size.
TEST(ModelSize, CountsWhatTheBuiltModelHas) {
  for (const std::vector<std::string>& overrides : std::vector<std::vector<std::string>>{
           {},
           {"model.position=absolute"},
           {"model.position=none", "model.type_vocab_size=0", "model.norm=pre"},
           {"model.embedding_size=16"},
           {"model.position=disentangled", "model.position_buckets=8"},
           {"model.position=disentangled", "model.position_buckets=0", "model.share_att_key=false"},
           {"model.position=disentangled", "model.position_buckets=8", "model.share_att_key=false",
            "model.pos_att_type=c2p", "model.position_biased_input=true"},
           {"model.position=disentangled", "model.position_buckets=8", "model.enhanced_mask_decoder=true"},
           {"model.bias=false"},
           {"model.norm=pre", "model.embedding_size=16", "model.bias=false"},
           {"model.position=disentangled", "model.position_buckets=8", "model.share_att_key=false", "model.bias=false"},
           // ModernBERT's layers: GeGLU, no attention LayerNorm in layer 0, two rotary tables.
           {"model.norm=pre", "model.first_attention_norm=false", "model.type_vocab_size=0", "model.bias=false",
            "model.local_attention=4", "model.local_rotary_base=500", "model.feed_forward=glu"},
           {"model.norm=pre", "model.first_attention_norm=false", "model.feed_forward=glu"}}) {
    SCOPED_TRACE(overrides.empty() ? "rotary" : overrides.back());
    const auto options = tiny(overrides);
    RoFormerForMaskedLM model(options);
    const auto size = model_size(options);
    EXPECT_EQ(size.parameters(), static_cast<double>(model->num_parameters()));
    double buffers = 0;
    for (const auto& b : model->buffers()) buffers += static_cast<double>(b.numel());
    EXPECT_EQ(size.buffer_bytes(), 24.0 * buffers);  // 4 bytes each, 6 times that while built
  }
  auto keys = [](const ModelSize& size) {
    std::set<std::string> out;
    for (const auto& part : size.parts) out.insert(part.key);
    return out;
  };
  EXPECT_TRUE(keys(model_size(tiny({"model.position=disentangled", "model.position_buckets=8"})))
                  .count("model.position_buckets"));
  EXPECT_TRUE(keys(model_size(tiny({"model.position=disentangled", "model.position_buckets=0"})))
                  .count("model.max_position_embeddings"));
  EXPECT_EQ(model_size(tiny({"model.max_position_embeddings=1000000000"})).largest_key(4),
            "model.max_position_embeddings");
  EXPECT_EQ(model_size(tiny({"model.position=disentangled", "model.position_buckets=0",
                             "model.max_relative_positions=1000000000"})).largest_key(16),
            "model.max_relative_positions");
}

TEST(Model, InitializationFollowsHuggingFace) {
  auto o = tiny({"model.hidden_size=256", "model.intermediate_size=512", "model.initializer_range=0.02"}, 400)
               .pad_token_id(3);
  RoFormerForMaskedLM model(o);
  for (const auto& [name, t] : model->hf_named_parameters()) {
    SCOPED_TRACE(name);
    if (name.find("embed_positions") != std::string::npos) continue;
    if (name.find("LayerNorm") != std::string::npos) {
      EXPECT_TRUE(torch::equal(t, name.find("weight") != std::string::npos ? torch::ones_like(t) : torch::zeros_like(t)));
    } else if (name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0) {
      EXPECT_EQ(t.abs().max().item<float>(), 0.0f);
    } else if (t.numel() >= 4096) {  // enough samples for a 10% std estimate
      EXPECT_NEAR(t.std().item<double>(), 0.02, 0.002);
      EXPECT_NEAR(t.mean().item<double>(), 0.0, 0.002);
    } else {
      EXPECT_GT(t.abs().max().item<double>(), 0.0);
      EXPECT_LT(t.abs().max().item<double>(), 0.02 * 6);
    }
  }
  EXPECT_EQ(model->embeddings->word_embeddings->weight[3].abs().max().item<float>(), 0.0f);
  EXPECT_GT(model->embeddings->word_embeddings->weight[2].abs().max().item<float>(), 0.0f);
}

TEST(Model, PaddingRowGetsNoGradientFromTheLookup) {
  // Like HF's nn.Embedding(padding_idx): with an untied view (only the lookup), row pad stays 0.
  RoFormerForMaskedLM model(tiny());
  auto b = make_batch(50);
  model->encode(b.ids, b.mask, b.types).sum().backward();
  auto g = model->embeddings->word_embeddings->weight.grad();
  EXPECT_EQ(g[0].abs().max().item<float>(), 0.0f);
  EXPECT_GT(g.abs().max().item<float>(), 0.0f);
}

double loss_and_grads(RoFormerForMaskedLM& model, const Batch& b, std::vector<torch::Tensor>* grads) {
  model->zero_grad();
  torch::manual_seed(99);  // same dropout masks in both runs
  auto pos = torch::tensor({0, 3, 5, 11, 14, 21, 26}, torch::kLong);
  auto labels = torch::tensor({3, 8, 1, 40, 2, 17, 9}, torch::kLong);
  auto loss = torch::nn::functional::cross_entropy(model->forward_sparse(b.ids, b.mask, pos, b.types), labels);
  loss.backward();
  grads->clear();
  for (auto& p : model->parameters()) grads->push_back(p.grad().clone());
  return loss.item<double>();
}

// Two models with the same weights in training mode, the second recomputing its layers in backward.
std::pair<RoFormerForMaskedLM, RoFormerForMaskedLM> plain_and_checkpointed(const RoFormerOptions& o) {
  torch::manual_seed(5);
  RoFormerForMaskedLM plain(o);
  RoFormerOptions recomputing = o;
  recomputing.model().gradient_checkpointing = true;
  RoFormerForMaskedLM checkpointed(recomputing);
  std::map<std::string, torch::Tensor> state;
  for (const auto& [name, t] : plain->hf_named_parameters()) state[name] = t.detach().clone();
  checkpointed->load_hf_state_dict(state);
  plain->train();
  checkpointed->train();
  return {plain, checkpointed};
}

// The position schemes whose layers take other inputs: rotary tables; disentangled attention's
// relative embeddings (a gradient to return from the recomputation); the enhanced mask decoder's
// queries (the last layer recomputed twice, on other queries).
// ModernBERT's layers on the tiny model: pre-LN without layer 0's attention norm, GeGLU, no biases,
// layer 1 local within +-4 with its own rotary base.
std::vector<std::string> modernbert_layers() {
  return {"model.norm=pre",          "model.first_attention_norm=false", "model.feed_forward=glu",
          "model.bias=false",        "model.type_vocab_size=0",          "model.local_attention=8",
          "model.global_attention_every=2", "model.local_rotary_base=500", "model.rotary_base=160000"};
}

const std::vector<std::vector<std::string>>& layer_input_schemes() {
  static const std::vector<std::vector<std::string>> schemes = {
      {"model.position=rotary"},
      {"model.position=disentangled", "model.position_buckets=8"},
      {"model.position=disentangled", "model.position_buckets=8", "model.enhanced_mask_decoder=true"}};
  return schemes;
}

TEST(Model, GradientCheckpointingGivesTheSameLossAndGradients) {
  for (const auto& scheme : layer_input_schemes())
    for (const std::string norm : {"post", "pre"})
      for (const double dropout : {0.0, 0.2})
        for (const bool padded : {true, false}) {  // unpadded: no mask (what training batches have)
          SCOPED_TRACE(scheme.back() + " " + norm + " dropout " + std::to_string(dropout) +
                       (padded ? " padded" : " unpadded"));
          auto overrides = scheme;
          overrides.insert(overrides.end(), {"model.norm=" + norm, "model.hidden_dropout=" + std::to_string(dropout),
                                             "model.attention_dropout=" + std::to_string(dropout)});
          auto o = tiny(overrides);
          auto [plain, checkpointed] = plain_and_checkpointed(o);
          auto b = make_batch(o.model().vocab_size);
          if (!padded) b.mask = torch::Tensor();
          std::vector<torch::Tensor> g_plain, g_ckpt;
          const double l_plain = loss_and_grads(plain, b, &g_plain);
          const double l_ckpt = loss_and_grads(checkpointed, b, &g_ckpt);
          // A checkpointed layer's forward runs without a gradient, where the CPU takes disentangled
          // attention's bias to SDPA's flash kernel instead of the math one (layers.cpp): the loss
          // agrees to float rounding there (measured 4.7e-7 of 4.2), exactly elsewhere.
          if (scheme.front() == "model.position=rotary")
            EXPECT_DOUBLE_EQ(l_plain, l_ckpt);
          else
            EXPECT_NEAR(l_plain, l_ckpt, 1e-6 * std::abs(l_plain));
          ASSERT_EQ(g_plain.size(), g_ckpt.size());
          for (size_t i = 0; i < g_plain.size(); ++i)
            EXPECT_TRUE(torch::allclose(g_plain[i], g_ckpt[i], 1e-5, 1e-7))
                << i << " max diff " << (g_plain[i] - g_ckpt[i]).abs().max().item<float>();
          if (dropout > 0) {  // the dropout really was active: another seed gives another loss
            plain->zero_grad();
            torch::manual_seed(100);
            auto pos = torch::tensor({0, 3, 5}, torch::kLong);
            auto other = torch::nn::functional::cross_entropy(plain->forward_sparse(b.ids, b.mask, pos, b.types),
                                                              torch::tensor({3, 8, 1}, torch::kLong));
            torch::manual_seed(99);
            auto same = torch::nn::functional::cross_entropy(plain->forward_sparse(b.ids, b.mask, pos, b.types),
                                                             torch::tensor({3, 8, 1}, torch::kLong));
            EXPECT_NE(other.item<double>(), same.item<double>());
          }
        }
}

// ModernBERT's layers (issue 54), recomputed: the local layers' band mask and their own rotary rows
// pass through the recomputation like the key mask; the same loss and gradients, exactly.
TEST(Model, GradientCheckpointingWithLocalLayersGivesTheSameLossAndGradients) {
  for (const bool padded : {true, false}) {
    SCOPED_TRACE(padded ? "padded" : "unpadded");
    auto o = tiny(modernbert_layers());
    auto [plain, checkpointed] = plain_and_checkpointed(o);
    auto b = make_batch(o.model().vocab_size, 3, 12);
    if (!padded) b.mask = torch::Tensor();
    b.types = torch::Tensor();
    std::vector<torch::Tensor> g_plain, g_ckpt;
    EXPECT_DOUBLE_EQ(loss_and_grads(plain, b, &g_plain), loss_and_grads(checkpointed, b, &g_ckpt));
    ASSERT_EQ(g_plain.size(), g_ckpt.size());
    for (size_t i = 0; i < g_plain.size(); ++i) EXPECT_TRUE(torch::equal(g_plain[i], g_ckpt[i])) << i;
  }
}

// A local layer's token i reads the keys within +-local_attention/2 only; a global layer every key.
// Changing the input at position 11 leaves a local layer's output at 0..6 as it was (window +-4)
// and changes a global layer's everywhere. A padded batch whose window holds no token for some
// padded queries stays finite.
TEST(Model, LocalLayersAttendWithinTheWindow) {
  auto o = tiny(modernbert_layers());
  RoFormerForMaskedLM model(o);
  model->eval();
  torch::NoGradGuard no_grad;
  torch::manual_seed(3);
  auto x = torch::randn({1, 12, 32}), changed = x.clone();
  changed.index_put_({0, 11}, torch::randn({32}));
  auto attention = [&](int64_t layer, const torch::Tensor& input) {
    auto l = std::dynamic_pointer_cast<RoFormerLayerImpl>(model->encoder->layers->ptr(layer));
    return l->self_attention->forward(input, model->encoder->layer_inputs(input, {}));
  };
  using torch::indexing::Slice;
  for (const int64_t layer : {0, 1}) {  // global_attention_every 2: layer 0 global, layer 1 local
    SCOPED_TRACE(layer);
    auto a = attention(layer, x), b = attention(layer, changed);
    const double near = (a.index({0, Slice(0, 7)}) - b.index({0, Slice(0, 7)})).abs().max().item<double>();
    if (layer == 1)
      EXPECT_EQ(near, 0.0);
    else
      EXPECT_GT(near, 1e-4);
    EXPECT_GT((a.index({0, 7}) - b.index({0, 7})).abs().max().item<double>(), 1e-4);  // 7 sees 11
  }
  auto ids = torch::randint(5, 50, {2, 12}, torch::kLong);
  auto mask = torch::ones({2, 12}, torch::kLong);
  mask.index_put_({1, Slice(2, torch::indexing::None)}, 0);  // queries 7..11 of row 1 see no token
  EXPECT_TRUE(torch::isfinite(model->forward(ids, mask)).all().item<bool>());
}

TEST(Model, GradientCheckpointingRecomputesUnderTheForwardsAutocast) {
  // The trainer calls backward outside its autocast scope (as PyTorch code does), so the recompute
  // must re-enter the forward's bf16 autocast. Not bit-exact even then: the recomputed graph sums the
  // four gradient contributions of a layer input in another order, and bf16 rounding in backward
  // amplifies that to ~4e-4 of the gradients (relative L1, measured). Recomputed in float32 (the bug
  // this guards against) the gradients differ by ~2.4e-3.
  constexpr double kMaxRelativeL1 = 1e-3;
  for (const auto& scheme : layer_input_schemes())
    for (const std::string norm : {"post", "pre"}) {
      SCOPED_TRACE(scheme.back() + " " + norm);
      auto overrides = scheme;
      overrides.insert(overrides.end(), {"model.norm=" + norm, "model.hidden_dropout=0.1", "model.attention_dropout=0.1"});
      auto o = tiny(overrides);
      auto [plain, checkpointed] = plain_and_checkpointed(o);
      auto b = make_batch(o.model().vocab_size);
      auto run = [&](RoFormerForMaskedLM& model, std::vector<torch::Tensor>* grads) {
        model->zero_grad();
        torch::manual_seed(99);
        auto pos = torch::tensor({0, 3, 5, 11, 14, 21, 26}, torch::kLong);
        torch::Tensor logits;
        {
          AutocastScope autocast(torch::kCPU, roformer::config::Precision::kBf16);
          logits = model->forward_sparse(b.ids, b.mask, pos, b.types);
        }
        EXPECT_EQ(logits.scalar_type(), torch::kBFloat16);
        auto loss = torch::nn::functional::cross_entropy(logits.to(torch::kFloat32),
                                                         torch::tensor({3, 8, 1, 40, 2, 17, 9}, torch::kLong));
        loss.backward();  // outside autocast
        for (auto& p : model->parameters()) grads->push_back(p.grad().clone());
        return loss.item<double>();
      };
      std::vector<torch::Tensor> g_plain, g_ckpt;
      const double l_plain = run(plain, &g_plain), l_ckpt = run(checkpointed, &g_ckpt);
      EXPECT_DOUBLE_EQ(l_plain, l_ckpt);
      ASSERT_EQ(g_plain.size(), g_ckpt.size());
      double diff = 0, size = 0;
      for (size_t i = 0; i < g_plain.size(); ++i) {
        diff += (g_plain[i] - g_ckpt[i]).abs().sum().item<double>();
        size += g_plain[i].abs().sum().item<double>();
      }
      EXPECT_LT(diff / size, kMaxRelativeL1);
      std::cout << scheme.back() << " " << norm << ": relative L1 difference of the gradients " << diff / size << "\n";
      EXPECT_FALSE(autocast_state(torch::kCPU).enabled) << "the recompute leaves autocast as it found it";
    }
}

TEST(Model, AttentionBackendIsReportedFromLibTorchsSelector) {
  RoFormerForMaskedLM model(tiny());
  const std::set<std::string> kernels = {"flash", "efficient", "cudnn", "math", "overrideable"};
  EXPECT_TRUE(kernels.count(model->attention_backend(2, 16, torch::kFloat32, false)));
  // On the CPU, LibTorch's flash kernel takes unpadded float32 batches; padded ones too.
  EXPECT_EQ(model->attention_backend(2, 16, torch::kFloat32, false), "flash");
  RoFormerForMaskedLM linear(tiny({"model.attention=linear"}));
  EXPECT_EQ(linear->attention_backend(2, 16, torch::kFloat32, false), "linear (no SDPA)");
  // Disentangled attention's relative scores are a float bias that is trained through: on the CPU
  // LibTorch's selector gives that to the math kernel (its gradient is the bias's).
  RoFormerForMaskedLM relative(tiny({"model.position=disentangled", "model.position_buckets=8"}));
  EXPECT_EQ(relative->attention_backend(2, 16, torch::kFloat32, false), "math");
}

// The fused rotary form (one complex multiply, the default on CUDA), set by the kernel policy on
// the CPU, is the element-wise model to float rounding, values and gradients, in every attention
// form. (The naive rotation matrices are checked against the element-wise op in test_rotary.)
TEST(Model, FusedRotaryMatchesElementwise) {
  KernelPolicy fused;
  fused.rotary = RotaryImpl::kFused;
  for (const std::string attention : {"softmax", "linear"}) {
    // rotary_value (V rotated too) exists for softmax attention only (model::validate_model_config).
    auto o = tiny({"model.attention=" + attention,
                   std::string("model.rotary_value=") + (attention == "softmax" ? "true" : "false")});
    torch::manual_seed(3);
    RoFormerForMaskedLM a(o);
    torch::manual_seed(3);
    RoFormerForMaskedLM b(o);
    auto batch = make_batch(o.model().vocab_size);
    auto la = a->forward(batch.ids, batch.mask, batch.types);  // the CPU's default: element-wise
    la.pow(2).mean().backward();
    const ScopedKernelPolicy scoped(fused);
    auto lb = b->forward(batch.ids, batch.mask, batch.types);
    EXPECT_TRUE(torch::allclose(la, lb, 1e-4, 1e-5)) << attention;
    lb.pow(2).mean().backward();
    auto ga = a->parameters(), gb = b->parameters();
    for (size_t i = 0; i < ga.size(); ++i)
      EXPECT_TRUE(torch::allclose(ga[i].grad(), gb[i].grad(), 1e-3, 1e-6)) << attention << " " << i;
  }
}

TEST(Model, DropoutOnlyInTrainingMode) {
  RoFormerForMaskedLM model(tiny({"model.hidden_dropout=0.3", "model.attention_dropout=0.3"}));
  auto b = make_batch(50);
  model->eval();
  EXPECT_TRUE(torch::equal(model->forward(b.ids, b.mask), model->forward(b.ids, b.mask)));
  model->train();
  EXPECT_FALSE(torch::equal(model->forward(b.ids, b.mask), model->forward(b.ids, b.mask)));
}

TEST(Flops, FormulaByHand) {
  // H 32, I 48, E 16 (projection), V 50, L 2, N 4 (D 8); B 2, T 10, P 5.
  auto o = tiny({"model.embedding_size=16"});
  const double tokens = 2 * 10;
  const double proj = 2 * tokens * 16 * 32;
  const double layer = 4 * 2 * tokens * 32 * 32 + 2 * 2 * tokens * 32 * 48 + 2 * 2 * 2 * 10 * 10 * 32;
  const double head = 2 * 5 * 32 * 16 + 2 * 5 * 16 * 50;
  EXPECT_DOUBLE_EQ(mlm_train_flops_per_step(o, 2, 10, 5), 3 * (proj + 2 * layer + head));
  const double linear_layer = 4 * 2 * tokens * 32 * 32 + 2 * 2 * tokens * 32 * 48 + 2 * 2 * tokens * 32 * 8;
  EXPECT_DOUBLE_EQ(mlm_train_flops_per_step(tiny({"model.embedding_size=16", "model.attention=linear"}), 2, 10, 5), 3 * (proj + 2 * linear_layer + head));
  // GeGLU: W_1 maps to 2I, so the feed-forward is three H x I matmuls.
  const double glu_layer = 4 * 2 * tokens * 32 * 32 + 3 * 2 * tokens * 32 * 48 + 2 * 2 * 2 * 10 * 10 * 32;
  EXPECT_DOUBLE_EQ(mlm_train_flops_per_step(tiny({"model.embedding_size=16", "model.feed_forward=glu"}), 2, 10, 5),
                   3 * (proj + 2 * glu_layer + head));
  // RoFormer-base, T 512, 15% predicted: ~ 6 N_params per token order of magnitude.
  const RoFormerOptions base(roformer::config::ModelConfig{}, 30000);
  const double f = mlm_train_flops_per_step(base, 1, 512, 77);
  EXPECT_GT(f, 6.0 * 85e6 * 512);
  EXPECT_LT(f, 6.0 * 85e6 * 512 * 1.3);
}

// q, k and v's weights and biases lie side by side in one storage (issue 51: CUDA's fused-QKV GEMM
// reads [Wq; Wk; Wv] without concatenating them per forward), and stay so through to(), the bf16
// compute copy and a state dict load; the names, shapes and values are those of three parameters.
TEST(Model, QkvParametersShareOneStorageThroughMovesAndLoads) {
  RoFormerForMaskedLM model(roformer::test::tiny_model_options());
  auto attention = [&](RoFormerForMaskedLM& m) {
    return std::dynamic_pointer_cast<RoFormerLayerImpl>(m->encoder->layers->ptr(0))->self_attention;
  };
  auto a = attention(model);
  ASSERT_TRUE(a->qkv_packed());
  const int64_t H = a->query->weight.size(0);
  EXPECT_EQ(static_cast<const char*>(a->key->weight.data_ptr()),
            static_cast<const char*>(a->query->weight.data_ptr()) + H * H * a->query->weight.element_size());
  EXPECT_TRUE(a->query->weight.is_leaf() && a->key->weight.is_leaf() && a->value->weight.is_leaf());
  // Initialized one by one as before (HF's order): the three weights differ.
  EXPECT_FALSE(torch::equal(a->query->weight, a->key->weight));
  const auto names = model->hf_named_parameters();
  EXPECT_TRUE(std::any_of(names.begin(), names.end(), [](const auto& p) {
    return p.first == "roformer.encoder.layer.0.attention.self.key.weight";
  }));
  model->to(torch::kDouble);
  EXPECT_TRUE(attention(model)->qkv_packed()) << "to() packs again";
  model->to(torch::kFloat);
  // A load copies into the parameters: still packed, with the loaded values.
  std::map<std::string, torch::Tensor> state;
  for (const auto& [name, t] : model->hf_named_parameters()) state[name] = t.detach().clone() + 1;
  model->load_hf_state_dict(state);
  a = attention(model);
  EXPECT_TRUE(a->qkv_packed());
  EXPECT_TRUE(torch::equal(a->value->weight, state.at("roformer.encoder.layer.0.attention.self.value.weight")));
  // Moved apart from outside: no longer packed; pack_qkv puts them together again, values kept.
  const auto before = a->key->weight.detach().clone();
  {
    torch::NoGradGuard no_grad;
    a->key->weight.set_data(a->key->weight.data().clone());
  }
  EXPECT_FALSE(a->qkv_packed());
  model->pack_qkv();
  EXPECT_TRUE(a->qkv_packed());
  EXPECT_TRUE(torch::equal(a->key->weight, before));
}

// stacked_view: [a; b; c] over their one storage, no copy, equal to their concatenation, and its
// gradient reaches each as its rows; apart, there is no view.
TEST(Model, StackedViewOfPackedWeightsIsTheirConcatenationWithoutACopy) {
  torch::manual_seed(3);
  auto rows = torch::randn({12, 5});
  auto a = rows.narrow(0, 0, 4).detach().requires_grad_(), b = rows.narrow(0, 4, 4).detach().requires_grad_(),
       c = rows.narrow(0, 8, 4).detach().requires_grad_();
  const auto view = stacked_view(a, b, c);
  ASSERT_TRUE(view.has_value());
  EXPECT_EQ(view->data_ptr(), a.data_ptr());
  EXPECT_TRUE(torch::equal(*view, torch::cat({a, b, c})));
  const auto w = torch::randn({12, 5});
  (*view * w).sum().backward();
  EXPECT_TRUE(torch::equal(a.grad(), w.narrow(0, 0, 4)));
  EXPECT_TRUE(torch::equal(c.grad(), w.narrow(0, 8, 4)));
  EXPECT_FALSE(stacked_view(a, c, b).has_value()) << "out of order";
  EXPECT_FALSE(stacked_view(a, b, torch::randn({4, 5})).has_value()) << "another storage";
}

}  // namespace
