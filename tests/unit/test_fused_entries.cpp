// The kernel policy's fused entries (model/kernel_policy.h; the ops of src/kernels, issue 38) against
// the default path on the CPU, where each op runs its ATen path: so what is checked is the wiring
// (which tensors go in, in which dtype, what comes out and where gradients flow). With each entry on,
// and all on, the model's logits and every parameter's gradient equal the default's, for post- and
// pre-LayerNorm, each position scheme, fp32 and bf16 autocast; rotary's packed call site
// (transform_packed, CUDA's path) directly; the training step's loss, accuracy and updates with
// fused_cross_entropy, fp32 and bf16 parameters. The Triton kernels are checked against these ATen
// paths in tests/triton (interpreter) and tests/gpu.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "model/autocast.h"
#include "model/kernel_policy.h"
#include "model/position.h"
#include "model/roformer.h"
#include "model_util.h"
#include "train_step_util.h"

namespace {

using namespace roformer::model;
using roformer::config::Precision;

using roformer::test::fused_entries;

// The names of the autograd nodes that produced t (its whole graph).
std::multiset<std::string> graph_names(const torch::Tensor& t) {
  std::multiset<std::string> names;
  std::set<torch::autograd::Node*> seen;
  std::vector<std::shared_ptr<torch::autograd::Node>> todo = {t.grad_fn()};
  while (!todo.empty()) {
    auto node = todo.back();
    todo.pop_back();
    if (!node || !seen.insert(node.get()).second) continue;
    names.insert(node->name());
    for (const auto& edge : node->next_edges()) todo.push_back(edge.function);
  }
  return names;
}

bool has_node(const std::multiset<std::string>& names, const std::string& part) {
  for (const auto& n : names)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

struct Outputs {
  torch::Tensor logits;               // (P, V) fp32
  std::vector<torch::Tensor> grads;   // every parameter's (zeros where none)
  std::multiset<std::string> graph;   // the logits' autograd nodes
};

// One forward (training mode: the layers' dropout calls run, with p 0 in the tiny model; or eval)
// and the backward of the MLM loss, from the same initialization and batch every time.
Outputs forward_backward(const RoFormerOptions& o, bool training, Precision precision) {
  torch::manual_seed(5);
  RoFormerForMaskedLM model(o);
  model->train(training);
  torch::manual_seed(11);
  const int64_t B = 3, T = 12, V = o.model().vocab_size;
  auto ids = torch::randint(1, V, {B, T}, torch::kLong);
  auto mask = torch::ones({B, T}, torch::kLong);
  mask.index_put_({1, torch::indexing::Slice(T - 4, torch::indexing::None)}, 0);
  ids = ids.masked_fill(mask == 0, o.pad_token_id());  // the padding row gets no gradient
  auto types = torch::randint(0, 2, {B, T}, torch::kLong);
  auto positions = torch::tensor({0, 3, 5, 11, 14, 21, 26, 33}, torch::kLong);
  auto labels = torch::randint(0, V, {positions.size(0)}, torch::kLong);
  Outputs out;
  {
    AutocastScope autocast(torch::kCPU, precision);
    out.logits = model->forward_sparse(ids, mask, positions, types);
  }
  out.graph = graph_names(out.logits);
  torch::nn::functional::cross_entropy(out.logits.to(torch::kFloat), labels).backward();
  out.logits = out.logits.detach().to(torch::kFloat);
  for (const auto& p : model->parameters())
    out.grads.push_back(p.grad().defined() ? p.grad().clone() : torch::zeros_like(p));
  return out;
}

// The model configurations each entry is checked in: both norms; rotary, absolute (its table in the
// embeddings), DeBERTa's with input positions and with the enhanced mask decoder (queries that are
// not the layer's input); rotary with value rotation; a model without biases (pre-LN, factorized).
const std::vector<std::vector<std::string>>& models() {
  static const std::vector<std::vector<std::string>> all = {
      {"model.norm=post"},
      {"model.norm=pre"},
      {"model.norm=post", "model.position=absolute"},
      {"model.norm=pre", "model.position=absolute"},
      {"model.position=disentangled", "model.position_buckets=8", "model.position_biased_input=true"},
      {"model.position=disentangled", "model.position_buckets=8", "model.enhanced_mask_decoder=true",
       "model.norm=pre"},
      {"model.rotary_value=true"},
      {"model.bias=false", "model.norm=pre", "model.embedding_size=16"}};
  return all;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts) s += p + " ";
  return s;
}

void expect_close(const Outputs& fused, const Outputs& plain, double rtol, double atol, const std::string& what) {
  EXPECT_TRUE(torch::allclose(fused.logits, plain.logits, rtol, atol))
      << what << " logits, largest difference " << (fused.logits - plain.logits).abs().max().item<double>();
  ASSERT_EQ(fused.grads.size(), plain.grads.size());
  for (size_t i = 0; i < plain.grads.size(); ++i)
    EXPECT_TRUE(torch::allclose(fused.grads[i], plain.grads[i], rtol, atol))
        << what << " parameter " << i << ", largest difference "
        << (fused.grads[i] - plain.grads[i]).abs().max().item<double>();
}

// fp32: each op's ATen path is the model's own computation (DeBERTa's embeddings sum in another order,
// a rounding apart), so the logits and gradients agree to float rounding.
TEST(FusedEntries, ModelMatchesTheDefaultPathInFp32) {
  for (const auto& overrides : models()) {
    const auto o = roformer::test::tiny_model_options(overrides);
    for (const bool training : {true, false}) {
      const auto plain = forward_backward(o, training, Precision::kFp32);
      for (const auto& e : fused_entries()) {
        const ScopedKernelPolicy scoped(e.policy());
        const auto fused = forward_backward(o, training, Precision::kFp32);
        expect_close(fused, plain, 1e-5, 1e-6, joined(overrides) + e.name + (training ? " train" : " eval"));
      }
    }
  }
}

// bf16 autocast: the fused ops compute what the autocast ops compute (LayerNorm in fp32, the
// residual stream fp32), except rotary, which rounds q and k to bf16 once instead of after each
// product: logits within bf16 rounding, the gradients' scale unchanged.
TEST(FusedEntries, ModelMatchesTheDefaultPathUnderBf16Autocast) {
  for (const auto& overrides : {models()[0], models()[1], models()[3]}) {
    const auto o = roformer::test::tiny_model_options(overrides);
    const auto plain = forward_backward(o, true, Precision::kBf16);
    for (const auto& e : fused_entries()) {
      const ScopedKernelPolicy scoped(e.policy());
      const auto fused = forward_backward(o, true, Precision::kBf16);
      EXPECT_EQ(fused.logits.scalar_type(), plain.logits.scalar_type());
      const bool rounds_otherwise = e.name == "fused_rotary" || e.name == "all";
      expect_close(fused, plain, rounds_otherwise ? 5e-2 : 1e-5, rounds_otherwise ? 5e-2 : 1e-6,
                   joined(overrides) + e.name + " bf16");
    }
  }
}

// The entries change the path, not only the flag: the fused LayerNorm's autograd node is in the
// graph, and rotary's op computes q and k otherwise than the element-wise form.
TEST(FusedEntries, TheEntriesTakeTheFusedOps) {
  const auto o = roformer::test::tiny_model_options();
  const auto plain = forward_backward(o, true, Precision::kFp32);
  EXPECT_FALSE(has_node(plain.graph, "ResidualDropoutLayerNorm"));
  KernelPolicy layer_norm;
  layer_norm.fused_layer_norm = true;
  {
    const ScopedKernelPolicy scoped(layer_norm);
    EXPECT_TRUE(has_node(forward_backward(o, true, Precision::kFp32).graph, "ResidualDropoutLayerNorm"));
  }
  KernelPolicy rotary;
  rotary.fused_rotary = true;
  const ScopedKernelPolicy scoped(rotary);
  EXPECT_NE(forward_backward(o, true, Precision::kFp32).graph, plain.graph);
}

// CUDA's call site of the rotation, transform_packed (the packed QKV projection), run on the CPU:
// q and k from kernels::rotary_qk equal the default's (element-wise on the CPU; the fused complex
// form as CUDA's default), v untouched, and the gradient reaches the projection the same.
TEST(FusedEntries, RotaryPackedCallSiteMatches) {
  const auto o = roformer::test::tiny_model_options();
  auto scheme = make_position_scheme(o);
  torch::nn::Module encoder, attention;
  scheme->register_encoder_front(encoder);
  torch::nn::Linear query(32, 32), key(32, 32);
  auto positions = scheme->register_attention(attention, query, key);
  torch::manual_seed(2);
  const int64_t B = 2, T = 12, N = 4, D = 8;
  const auto qkv0 = torch::randn({B, T, 3, N, D});
  auto rotate = [&](const KernelPolicy& policy, torch::Tensor& grad) {
    const ScopedKernelPolicy scoped(policy);
    auto qkv = qkv0.clone().requires_grad_(true);
    const auto inputs = scheme->prepare(torch::zeros({B, T, N * D}));
    auto parts = positions->transform_packed(qkv, inputs);
    auto out = torch::stack({parts[0], parts[1], parts[2]});  // (3, B, N, T, D)
    (out * torch::linspace(-1, 1, out.numel()).view(out.sizes())).sum().backward();
    grad = qkv.grad();
    return out.detach();
  };
  torch::Tensor plain_grad, complex_grad, fused_grad;
  const auto plain = rotate(KernelPolicy{}, plain_grad);
  KernelPolicy complex_form;
  complex_form.rotary = RotaryImpl::kFused;
  const auto complex = rotate(complex_form, complex_grad);
  KernelPolicy fused_op;
  fused_op.fused_rotary = true;
  const auto fused = rotate(fused_op, fused_grad);
  EXPECT_TRUE(torch::allclose(fused, plain, 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(fused, complex, 1e-6, 1e-6));
  EXPECT_TRUE(torch::equal(fused[2], qkv0.select(2, 2).transpose(1, 2)));  // v as it was
  EXPECT_FALSE(torch::allclose(fused[0], qkv0.select(2, 0).transpose(1, 2)));  // q turned
  EXPECT_TRUE(torch::allclose(fused_grad, plain_grad, 1e-6, 1e-6));
}

// The training step with each entry on (fused_cross_entropy's call site is the step's loss): the
// same losses, accuracies and parameters after three updates as the default step, fp32 and bf16
// parameters (the CPU computes in bf16 without autocast then, as CUDA's default does).
TEST(FusedEntries, TrainingStepMatchesTheDefaultStep) {
  using roformer::test::make_step;
  using roformer::test::tiny_step_config;
  for (const bool bf16 : {false, true}) {
    // Without dropout: the ATen paths draw their masks otherwise than the model's dropout calls.
    const auto cfg = bf16 ? tiny_step_config(true, 1.0, "cpu", "bf16", {"train.param_dtype=bf16", "model.hidden_dropout=0"})
                          : tiny_step_config(true, 1.0, "cpu", "fp32", {"model.hidden_dropout=0"});
    std::vector<roformer::train::StepResult> plain_results;
    auto plain = make_step(cfg);
    for (int i = 0; i < 3; ++i) plain_results.push_back(plain->run(true));
    const auto plain_params = roformer::test::snapshot(*plain);
    for (const auto& e : fused_entries()) {
      SCOPED_TRACE(e.name + (bf16 ? " bf16" : " fp32"));
      const ScopedKernelPolicy scoped(e.policy());
      auto fused = make_step(cfg);
      for (int i = 0; i < 3; ++i) {
        const auto r = fused->run(true);
        const double tol = bf16 ? 2e-2 : 1e-5;
        EXPECT_NEAR(r.loss, plain_results[i].loss, tol * plain_results[i].loss) << e.name << " step " << i + 1;
        EXPECT_NEAR(r.accuracy, plain_results[i].accuracy, bf16 ? 0.02 : 1e-12) << e.name << " step " << i + 1;
      }
      // bf16: rotary's op rounds q and k once, the element-wise form after each product; AdamW turns
      // such gradient differences into up to lr = 1e-2 per step where a gradient is near zero (the
      // largest seen: 0.0039 in the query and key weights after three steps).
      const double worst = roformer::test::expect_close(roformer::test::snapshot(*fused), plain_params,
                                                        bf16 ? 2e-2 : 1e-4, bf16 ? 1e-2 : 1e-6);
      std::cout << e.name << (bf16 ? " bf16" : " fp32") << ": largest parameter difference " << worst << "\n";
    }
  }
}

}  // namespace
