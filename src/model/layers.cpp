// RoFormer building blocks; see layers.h. Reference: transformers 5.23.0 modeling_roformer.py.
#include "model/layers.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/embedding.h"
#include "kernels/fp8_linear.h"
#include "kernels/gemm_epilogue.h"
#include "kernels/layer_norm.h"
#include "kernels/op_paths.h"
#include "model/autocast.h"
#include "model/kernel_policy.h"
#include "model/recompute.h"

namespace roformer::model {
namespace F = torch::nn::functional;

namespace {
// An empty module used only to reproduce HF's nesting (e.g. "attention.output.dense").
std::shared_ptr<torch::nn::Module> group(torch::nn::Module& parent, const std::string& name) {
  return parent.register_module(name, std::make_shared<torch::nn::Module>());
}
// LibTorch's LayerNorm has weight and bias or neither; this one has its weight only. (The module is
// never cloned, which would rebuild it as a LayerNorm with a bias.)
class BiasFreeLayerNormImpl : public torch::nn::LayerNormImpl {
 public:
  explicit BiasFreeLayerNormImpl(const torch::nn::LayerNormOptions& options) : LayerNormImpl(options) { drop_bias(); }
  void reset() override {
    LayerNormImpl::reset();
    drop_bias();
  }

 private:
  void drop_bias() {
    parameters_.erase("bias");
    bias = torch::Tensor();
  }
};

// A fused LayerNorm's beta: the bias, or zeros (no gradient) for a LayerNorm without one.
torch::Tensor beta(const torch::nn::LayerNorm& norm) {
  return norm->bias.defined() ? norm->bias : torch::zeros_like(norm->weight).requires_grad_(false);
}

// The dtype the unfused ops give a LayerNorm's input and output: under autocast LayerNorm computes
// in fp32 (and the residual stream is fp32: the embeddings and every LayerNorm give fp32), else the
// promoted dtype of its inputs.
torch::ScalarType layer_norm_dtype(const torch::Tensor& x, const torch::Tensor& other) {
  if (autocast_state(x.device().type()).enabled) return torch::kFloat;
  return other.defined() ? torch::promote_types(x.scalar_type(), other.scalar_type()) : x.scalar_type();
}

// norm(residual + drop(x)) and residual + drop(x) (y, z) as one op: the layer's residual, dropout and
// LayerNorm under KernelPolicy::fused_layer_norm. x: the sublayer's output (B, T, H).
kernels::ResidualLayerNormOutput residual_dropout_norm(const torch::Tensor& x, const torch::Tensor& residual,
                                                       const torch::nn::LayerNorm& norm, double p) {
  const auto dtype = layer_norm_dtype(x, residual);
  return kernels::residual_dropout_layer_norm(x.to(dtype), residual.to(dtype), norm->weight, beta(norm), p,
                                              norm->options.eps(), kernels::backend_for(x.device()));
}
}  // namespace

torch::nn::Linear make_linear(const config::ModelConfig& m, int64_t in, int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(m.bias));
}

torch::nn::LayerNorm make_layer_norm(const config::ModelConfig& m, int64_t size) {
  const auto options = torch::nn::LayerNormOptions({size}).eps(m.layer_norm_eps);
  if (m.bias) return torch::nn::LayerNorm(options);
  return torch::nn::LayerNorm(std::shared_ptr<torch::nn::LayerNormImpl>(std::make_shared<BiasFreeLayerNormImpl>(options)));
}

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (kernel_policy().gemm_epilogues) return kernels::linear_epilogue(x, weight, bias);  // ATen's F::linear on the CPU
  return kernel_policy().bias_in_gemm && x.is_cuda() ? torch::linear(x, weight, bias) : F::linear(x, weight, bias);
}

torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return linear(x, layer->weight, layer->bias);
}

namespace {

// Whether an encoder layer's GEMM y = x W^T runs in FP8: under an Fp8Scope (train.fp8) where the
// shapes and the device allow it (each path said once: "fp8", or "bf16 (why)").
bool use_fp8(const torch::Tensor& x, const torch::Tensor& weight) {
  if (!kernels::fp8_enabled()) return false;
  const auto why_not = kernels::fp8_linear_unsupported(x, weight);
  kernels::note_op_path_text("fp8_linear", why_not ? "bf16 (" + *why_not + ")" : "fp8");
  return !why_not;
}

// The encoder layers' linear layers (q, k, v, the attention output, the feed-forward block): FP8
// where use_fp8 says so, else `linear`. Attention, the embeddings and the MLM head never run FP8.
torch::Tensor block_linear(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return use_fp8(x, layer->weight) ? kernels::fp8_linear(x, layer->weight, layer->bias) : linear(layer, x);
}

// Rows stacked over one storage: the forward aliases it, the backward hands each part its rows of
// the gradient (views of one tensor, no copy).
class StackedViewFunction : public torch::autograd::Function<StackedViewFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& a,
                                                const torch::Tensor& /*b*/, const torch::Tensor& /*c*/) {
    ctx->saved_data["rows"] = a.size(0);
    auto sizes = a.sizes().vec();
    sizes[0] *= 3;
    return {torch::empty({0}, a.options()).set_(a.storage(), a.storage_offset(), sizes, a.strides())};
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    return grads[0].split(ctx->saved_data["rows"].toInt(), 0);
  }
};

bool side_by_side(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c) {
  auto same_kind = [&](const torch::Tensor& t) {
    return t.defined() && t.sizes() == a.sizes() && t.scalar_type() == a.scalar_type() && t.device() == a.device() &&
           t.is_contiguous() && t.storage().unsafeGetStorageImpl() == a.storage().unsafeGetStorageImpl();
  };
  return same_kind(a) && same_kind(b) && same_kind(c) && b.storage_offset() == a.storage_offset() + a.numel() &&
         c.storage_offset() == b.storage_offset() + b.numel();
}

}  // namespace

std::optional<torch::Tensor> stacked_view(const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c) {
  if (!side_by_side(a, b, c)) return std::nullopt;
  return StackedViewFunction::apply(a, b, c)[0];
}

torch::Tensor activation(const torch::Tensor& x, config::Activation act) {
  switch (act) {
    case config::Activation::kGelu: return torch::gelu(x);  // x Phi(x), erf form (HF "gelu")
    case config::Activation::kGeluTanh: return torch::gelu(x, "tanh");
    case config::Activation::kRelu: return torch::relu(x);
  }
  TORCH_CHECK(false, "unhandled activation");
}

// ---- Embeddings ---------------------------------------------------------------------------------
RoFormerEmbeddingsImpl::RoFormerEmbeddingsImpl(const RoFormerOptions& options, std::shared_ptr<PositionScheme> positions)
    : options_(options), positions_(std::move(positions)) {
  const auto& m = options.model();
  const int64_t E = options.embedding_size();
  word_embeddings = register_module(
      "word_embeddings",
      torch::nn::Embedding(torch::nn::EmbeddingOptions(m.vocab_size, E).padding_idx(options.pad_token_id())));
  // A position table second, as in HF BertEmbeddings (the order of the state dict and of initialization).
  positions_->register_embeddings(*this);
  if (m.type_vocab_size > 0)
    token_type_embeddings = register_module("token_type_embeddings", torch::nn::Embedding(m.type_vocab_size, E));
  layer_norm = register_module("LayerNorm", make_layer_norm(m, E));
}

torch::Tensor RoFormerEmbeddingsImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                                              int64_t position_offset) {
  const double p = is_training() ? options_.model().hidden_dropout : 0.0;
  if (kernel_policy().fused_embedding) {
    // One op (sums in fp32 in the order word + type + position; DeBERTa's input positions are
    // added before the token types below, a rounding apart).
    kernels::EmbeddingInputs in;
    in.ids = input_ids;
    in.word = word_embeddings->weight;
    if (token_type_embeddings) in.type = token_type_embeddings->weight;
    in.type_ids = token_type_ids;
    in.position = positions_->input_position_table();
    in.position_offset = position_offset;
    in.padding_idx = options_.pad_token_id();
    return kernels::embedding_layer_norm(in, layer_norm->weight, beta(layer_norm), p, layer_norm->options.eps(),
                                         kernels::backend_for(input_ids.device()));
  }
  auto x = word_embeddings->forward(input_ids);  // (B, T, E)
  // Each family's order of the sums, so the rounding is its own: DebertaV2Embeddings adds the
  // positions before the token types, BertEmbeddings after.
  x = positions_->add_input_positions(x, EmbeddingStage::kBeforeTokenTypes, position_offset);
  if (token_type_embeddings) {
    // Undefined ids mean all zeros (HF's default): add row 0 by broadcasting instead of a lookup.
    x = token_type_ids.defined() ? x + token_type_embeddings->forward(token_type_ids)
                                 : x + token_type_embeddings->weight[0];
  }
  x = positions_->add_input_positions(x, EmbeddingStage::kAfterTokenTypes, position_offset);
  x = layer_norm->forward(x);
  return F::dropout(x, F::DropoutFuncOptions().p(p).training(is_training()));
}

// ---- Self-attention -----------------------------------------------------------------------------
RoFormerSelfAttentionImpl::RoFormerSelfAttentionImpl(const RoFormerOptions& options, PositionScheme& positions,
                                                     bool local)
    : options_(options), attention_(options.model().attention), local_(local) {
  const auto& m = options.model();
  const int64_t H = m.hidden_size;
  query = register_module("query", make_linear(m, H, H));
  key = register_module("key", make_linear(m, H, H));
  value = register_module("value", make_linear(m, H, H));
  positions_ = positions.register_attention(*this, query, key, local);  // after q, k, v (HF's order)
  pack_qkv();
}

void RoFormerSelfAttentionImpl::pack_qkv() {
  torch::NoGradGuard no_grad;
  auto pack = [](torch::Tensor& a, torch::Tensor& b, torch::Tensor& c) {
    if (side_by_side(a, b, c)) return;
    const auto rows = torch::cat({a, b, c});  // one new storage: [a; b; c]
    const int64_t n = a.size(0);
    a.set_data(rows.narrow(0, 0, n));
    b.set_data(rows.narrow(0, n, n));
    c.set_data(rows.narrow(0, 2 * n, n));
  };
  pack(query->weight, key->weight, value->weight);
  if (query->bias.defined()) pack(query->bias, key->bias, value->bias);
}

bool RoFormerSelfAttentionImpl::qkv_packed() const {
  return side_by_side(query->weight, key->weight, value->weight) &&
         (!query->bias.defined() || side_by_side(query->bias, key->bias, value->bias));
}

void RoFormerSelfAttentionImpl::to(torch::Device device, torch::Dtype dtype, bool non_blocking) {
  torch::nn::Module::to(device, dtype, non_blocking);
  pack_qkv();
}

void RoFormerSelfAttentionImpl::to(torch::Dtype dtype, bool non_blocking) {
  torch::nn::Module::to(dtype, non_blocking);
  pack_qkv();
}

void RoFormerSelfAttentionImpl::to(torch::Device device, bool non_blocking) {
  torch::nn::Module::to(device, non_blocking);
  pack_qkv();
}

const torch::Tensor& RoFormerSelfAttentionImpl::key_mask(const LayerInputs& inputs) const {
  return local_ && inputs.local_mask.defined() ? inputs.local_mask : inputs.mask;
}

double RoFormerSelfAttentionImpl::score_scale() const {
  const auto& m = options_.model();
  return positions_->score_scale().value_or(1.0 / std::sqrt(static_cast<double>(m.hidden_size / m.num_heads)));
}

std::optional<at::Tensor> RoFormerSelfAttentionImpl::attention_bias(const torch::Tensor& q, const torch::Tensor& k,
                                                                    const LayerInputs& inputs) {
  const auto& mask = key_mask(inputs);
  auto scores = positions_->score_bias(q, k, inputs.positions, is_training());  // (B, N, T, T) or undefined
  if (!scores.defined()) return mask.defined() ? std::optional<at::Tensor>(mask) : std::nullopt;
  if (mask.defined()) scores = scores.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity());
  return scores;
}

torch::Tensor RoFormerSelfAttentionImpl::forward(const torch::Tensor& x, const LayerInputs& inputs,
                                                 const torch::Tensor& queries) {
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2);
  const int64_t N = options_.model().num_heads, D = H / N;
  auto heads = [&](const torch::Tensor& t) { return t.view({B, T, N, D}).transpose(1, 2); };  // (B, N, T, D)
  const bool softmax = attention_ == config::Attention::kSoftmax;
  torch::Tensor q, k, v;
  if (kernel_policy().fused_qkv && x.is_cuda() && !queries.defined()) {
    // One GEMM: (B, T, 3H) = x [Wq; Wk; Wv]^T + [bq; bk; bv], viewed as (B, T, 3, N, D). Split and
    // unbind rather than narrow/select: their backward is one cat/stack, not a zero-filled buffer
    // per slice plus the additions. [Wq; Wk; Wv] is the packed weights' storage (pack_qkv), or, where
    // they were moved apart, their concatenation.
    auto stacked = [](const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& c) {
      if (!a.defined()) return torch::Tensor();
      auto view = stacked_view(a, b, c);
      return view ? *view : torch::cat({a, b, c});
    };
    const auto weight = stacked(query->weight, key->weight, value->weight);
    kernels::note_op_path_text("qkv_projection", qkv_packed() ? "one GEMM, packed weights"
                                                              : "one GEMM, weights concatenated (not packed)");
    const auto bias = stacked(query->bias, key->bias, value->bias);
    auto qkv = (use_fp8(x, weight)                ? kernels::fp8_linear(x, weight, bias)
                : kernel_policy().gemm_epilogues ? kernels::linear_epilogue(x, weight, bias)
                                                 : torch::linear(x, weight, bias))
                   .view({B, T, 3, N, D});
    if (softmax) {  // q and k as the position scheme transforms them (rotary's fused form: in one call)
      const auto parts = positions_->transform_packed(qkv, inputs.positions);
      q = parts[0];
      k = parts[1];
      v = parts[2];
    } else {  // linear attention transforms its feature maps instead
      auto parts = qkv.unbind(2);
      q = parts[0].transpose(1, 2);
      k = parts[1].transpose(1, 2);
      v = parts[2].transpose(1, 2);
    }
  } else {
    q = heads(block_linear(query, queries.defined() ? queries : x));
    k = heads(block_linear(key, x));
    v = heads(block_linear(value, x));
    if (softmax) positions_->transform(q, k, v, inputs.positions);
  }
  if (!softmax) return linear_attention(q, k, v, inputs).transpose(1, 2).reshape({B, T, H});
  // softmax(q k^T scale + mask) v; an undefined mask lets flash/efficient kernels run. A position
  // bias of the scores (disentangled attention's relative scores) is an additive float bias
  // (B, N, T, T), padded keys -inf: on CUDA the memory-efficient kernel (which takes a bias and its
  // gradient); on the CPU the math kernel while the bias needs a gradient, the CPU flash kernel
  // without one (evaluation, and a checkpointed layer's forward), whose results differ in the last bits.
  const double p = is_training() ? options_.model().attention_dropout : 0.0;
  auto context = at::scaled_dot_product_attention(q, k, v, attention_bias(q, k, inputs), p, /*is_causal=*/false,
                                                  positions_->score_scale());  // (B, N, T, D)
  return context.transpose(1, 2).reshape({B, T, H});
}

// phi(x) = elu(x) + 1,
//   out_m = sum_n (R_m phi(q_m))^T (R_n phi(k_n)) v_n / sum_n phi(q_m)^T phi(k_n)
// The denominator uses the unrotated features so it stays positive. Padded keys get phi = 0.
torch::Tensor RoFormerSelfAttentionImpl::linear_attention(const torch::Tensor& q, const torch::Tensor& k,
                                                          const torch::Tensor& v, const LayerInputs& inputs) const {
  auto fq = torch::elu(q) + 1.0;
  auto fk = torch::elu(k) + 1.0;
  const auto& mask = inputs.mask;  // (B, 1, 1, T): transposed to (B, 1, T, 1)
  if (mask.defined()) fk = fk * mask.transpose(-1, -2).to(fk.dtype());
  auto rq = positions_->transform_features(fq, inputs.positions);
  auto rk = positions_->transform_features(fk, inputs.positions);
  auto kv = torch::matmul(rk.transpose(-2, -1), v);                // (B, N, D, D)
  auto numerator = torch::matmul(rq, kv);                          // (B, N, T, D)
  auto denominator = torch::matmul(fq, fk.sum(-2).unsqueeze(-1));  // (B, N, T, 1)
  return numerator / denominator.clamp_min(1e-6);
}

std::string RoFormerSelfAttentionImpl::attention_backend(int64_t batch, int64_t seq_len, torch::ScalarType dtype,
                                                         const torch::Device& device, bool padded) const {
  if (attention_ == config::Attention::kLinear) return "linear (no SDPA)";
  const int64_t B = batch, T = seq_len, N = options_.model().num_heads, D = options_.model().hidden_size / N;
  auto opts = torch::TensorOptions().dtype(dtype).device(device);
  // As in forward: q and k are the (contiguous) rotary outputs, v a transposed view of the projection.
  auto q = torch::empty({B, N, T, D}, opts), k = torch::empty({B, N, T, D}, opts);
  auto v = torch::empty({B, T, N, D}, opts).transpose(1, 2);
  std::optional<at::Tensor> mask;
  if (positions_->bias_kind() == ScoreBias::kTrained) {
    // Always a float bias, trained through (disentangled: its gradient is the relative embeddings').
    mask = torch::empty({B, N, T, T}, opts).requires_grad_(is_training() && torch::GradMode::is_enabled());
  } else if (local_ && T - 1 > options_.model().local_attention / 2) {  // the band of LayerInputs::local_mask
    mask = torch::ones({padded ? B : 1, 1, T, T}, opts.dtype(torch::kBool));
  } else if (padded) {
    mask = torch::ones({B, 1, 1, T}, opts.dtype(torch::kBool));
  }
  const double p = is_training() ? options_.model().attention_dropout : 0.0;
  switch (at::_fused_sdp_choice(q, k, v, mask, p, /*is_causal=*/false, positions_->score_scale())) {  // sdp::SDPBackend
    case 0: return "math";
    case 1: return "flash";
    case 2: return "efficient";
    case 3: return "cudnn";
    case 4: return "overrideable";
    default: return "none";
  }
}

// ---- Encoder layer --------------------------------------------------------------------------------
RoFormerLayerImpl::RoFormerLayerImpl(const RoFormerOptions& options, PositionScheme& positions, int64_t layer)
    : options_(options) {
  const auto& m = options.model();
  const int64_t H = m.hidden_size, I = m.intermediate_size;
  auto attention = group(*this, "attention");
  self_attention = attention->register_module("self", RoFormerSelfAttention(options, positions, is_local_layer(m, layer)));
  auto attention_output = group(*attention, "output");
  attention_dense = attention_output->register_module("dense", make_linear(m, H, H));
  if (layer > 0 || m.first_attention_norm || m.norm != config::Norm::kPre)
    attention_layer_norm = attention_output->register_module("LayerNorm", make_layer_norm(m, H));
  auto intermediate = group(*this, "intermediate");
  const int64_t inner = m.feed_forward == config::FeedForward::kGlu ? 2 * I : I;
  intermediate_dense = intermediate->register_module("dense", make_linear(m, H, inner));
  auto output = group(*this, "output");
  output_dense = output->register_module("dense", make_linear(m, I, H));
  output_layer_norm = output->register_module("LayerNorm", make_layer_norm(m, H));
}

torch::Tensor RoFormerLayerImpl::feed_forward(const torch::Tensor& a) const {
  const auto& m = options_.model();
  const bool fp8 = kernels::fp8_enabled();  // FP8 GEMMs (where they can run), the activation apart
  if (!fp8 && kernel_policy().gemm_epilogues && m.feed_forward == config::FeedForward::kMlp &&
      m.hidden_act == config::Activation::kGeluTanh)  // cuBLASLt's GELU is the tanh form
    return kernels::ffn_gelu_epilogue(a, intermediate_dense->weight, intermediate_dense->bias, output_dense->weight,
                                      output_dense->bias);
  auto project = [&](const torch::nn::Linear& layer, const torch::Tensor& x) {
    return fp8 ? block_linear(layer, x) : linear(layer, x);
  };
  auto inner = project(intermediate_dense, a);  // (..., I) or glu (..., 2I)
  if (m.feed_forward == config::FeedForward::kGlu) {
    auto halves = inner.chunk(2, -1);  // W_in a, W_gate a: (..., I) each
    return project(output_dense, activation(halves[0], m.hidden_act) * halves[1]);
  }
  return project(output_dense, activation(inner, m.hidden_act));
}

torch::Tensor RoFormerLayerImpl::attention_input(const torch::Tensor& t) {
  return attention_layer_norm ? attention_layer_norm->forward(t) : t;
}

torch::Tensor RoFormerLayerImpl::forward(const torch::Tensor& x, const LayerInputs& inputs, const torch::Tensor& queries) {
  const auto& m = options_.model();
  auto drop = [&](const torch::Tensor& t) {
    return F::dropout(t, F::DropoutFuncOptions().p(m.hidden_dropout).training(is_training()));
  };
  auto ffn = [&](const torch::Tensor& t) { return feed_forward(t); };
  const torch::Tensor& u = queries.defined() ? queries : x;  // the residual stream
  const bool fused = kernel_policy().fused_layer_norm;
  const double p = is_training() ? m.hidden_dropout : 0.0;
  if (m.norm == config::Norm::kPre) {
    auto normed_queries = queries.defined() ? attention_input(queries) : torch::Tensor();
    auto attended = self_attention->forward(attention_input(x), inputs, normed_queries);
    if (fused) {  // a and LN(a) from one op; the second residual's LayerNorm is the next layer's
      auto [normed, a] = residual_dropout_norm(block_linear(attention_dense, attended), u, output_layer_norm, p);
      return a + drop(ffn(normed));
    }
    auto a = u + drop(block_linear(attention_dense, attended));
    return a + drop(ffn(output_layer_norm->forward(a)));
  }
  auto attended = self_attention->forward(x, inputs, queries);
  if (fused) {
    auto a = residual_dropout_norm(block_linear(attention_dense, attended), u, attention_layer_norm, p).y;
    return residual_dropout_norm(ffn(a), a, output_layer_norm, p).y;
  }
  auto a = attention_layer_norm->forward(u + drop(block_linear(attention_dense, attended)));
  return output_layer_norm->forward(a + drop(ffn(a)));
}

// ---- Encoder --------------------------------------------------------------------------------------
RoFormerEncoderImpl::RoFormerEncoderImpl(const RoFormerOptions& options, std::shared_ptr<PositionScheme> positions)
    : options_(options), positions_(std::move(positions)) {
  const auto& m = options.model();
  positions_->register_encoder_front(*this);  // the rotary table, first as in HF RoFormerEncoder
  layers = register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < m.num_layers; ++i) layers->push_back(RoFormerLayer(options, *positions_, i));
  positions_->register_encoder_back(*this);  // the relative table, after the layers as in HF DebertaV2Encoder
  if (m.norm == config::Norm::kPre)
    final_layer_norm = register_module("final_layer_norm", make_layer_norm(m, m.hidden_size));
}

LayerInputs RoFormerEncoderImpl::layer_inputs(const torch::Tensor& x, const torch::Tensor& mask) {
  return {mask, local_mask(x.size(1), mask, x.device()), positions_->prepare(x)};
}

torch::Tensor RoFormerEncoderImpl::local_mask(int64_t seq_len, const torch::Tensor& mask, const torch::Device& device) {
  const int64_t T = seq_len, half = options_.model().local_attention / 2;
  if (half == 0 || T - 1 <= half) return {};  // no local layers, or the window holds every key
  if (!band_.defined() || band_.size(0) != T || band_.device() != device) {
    auto i = torch::arange(T, torch::TensorOptions().dtype(torch::kLong).device(device));
    band_ = (i.unsqueeze(1) - i.unsqueeze(0)).abs() <= half;  // (T, T)
  }
  if (!mask.defined()) return band_.view({1, 1, T, T});
  // Padded keys leave the band, the diagonal stays: a padded query with no token in its window
  // would otherwise mask every key (NaN in some kernels, and from there into the tokens' values).
  auto diagonal = torch::eye(T, torch::TensorOptions().dtype(torch::kBool).device(device));
  return band_.view({1, 1, T, T}) & (mask | diagonal.view({1, 1, T, T}));  // (B, 1, T, T)
}

torch::Tensor RoFormerEncoderImpl::run_layer(size_t i, const torch::Tensor& x, const LayerInputs& inputs,
                                             const torch::Tensor& queries) {
  auto layer = std::dynamic_pointer_cast<RoFormerLayerImpl>(layers->ptr(i));
  const bool checkpoint = options_.model().gradient_checkpointing && is_training() && torch::GradMode::is_enabled();
  return checkpoint ? checkpointed_layer_forward(layer, x, inputs, queries) : layer->forward(x, inputs, queries);
}

torch::Tensor RoFormerEncoderImpl::forward(const torch::Tensor& x, const torch::Tensor& mask) {
  const auto inputs = layer_inputs(x, mask);
  auto h = x;
  for (size_t i = 0; i < layers->size(); ++i) h = run_layer(i, h, inputs, {});
  return final_layer_norm ? final_layer_norm->forward(h) : h;
}

torch::Tensor RoFormerEncoderImpl::forward_emd(const torch::Tensor& x, const torch::Tensor& mask,
                                               const torch::Tensor& z) {
  const auto inputs = layer_inputs(x, mask);
  const size_t last = layers->size() - 1;
  auto h = x;
  for (size_t i = 0; i < last; ++i) h = run_layer(i, h, inputs, {});
  // DeBERTa's EnhancedMaskDecoder: two passes of the last layer (shared weights), queries first
  // h + z (absolute positions), then the first pass's output; keys and values stay h.
  auto decoded = run_layer(last, h, inputs, h + z);  // z (T, H) over (B, T, H)
  decoded = run_layer(last, h, inputs, decoded);
  return final_layer_norm ? final_layer_norm->forward(decoded) : decoded;
}

// ---- MLM head -------------------------------------------------------------------------------------
RoFormerLMHeadImpl::RoFormerLMHeadImpl(const RoFormerOptions& options) : options_(options) {
  const auto& m = options.model();
  const int64_t E = options.embedding_size();
  // HF's state_dict lists cls.predictions.bias first.
  bias = register_parameter("bias", torch::zeros({m.vocab_size}));
  auto transform = group(*this, "transform");
  dense = transform->register_module("dense", make_linear(m, m.hidden_size, E));
  layer_norm = transform->register_module("LayerNorm", make_layer_norm(m, E));
}

torch::Tensor RoFormerLMHeadImpl::forward(const torch::Tensor& h, const torch::Tensor& decoder_weight) {
  auto t = layer_norm->forward(activation(linear(dense, h), options_.model().hidden_act));  // (..., E)
  return linear(t, decoder_weight, bias);  // (..., V)
}

}  // namespace roformer::model
