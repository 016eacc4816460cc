// RoFormer building blocks; see layers.h. Reference: transformers 5.23.0 modeling_roformer.py.
#include "model/layers.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "model/disentangled.h"
#include "model/kernel_policy.h"
#include "model/recompute.h"
#include "model/rotary.h"

namespace roformer::model {
namespace F = torch::nn::functional;

namespace {
// An empty module used only to reproduce HF's nesting (e.g. "attention.output.dense").
std::shared_ptr<torch::nn::Module> group(torch::nn::Module& parent, const std::string& name) {
  return parent.register_module(name, std::make_shared<torch::nn::Module>());
}
torch::nn::LayerNorm layer_norm(int64_t size, double eps) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({size}).eps(eps));
}
}  // namespace

torch::Tensor linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  return kernel_policy().bias_in_gemm && x.is_cuda() ? torch::linear(x, weight, bias) : F::linear(x, weight, bias);
}

torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return linear(x, layer->weight, layer->bias);
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
RoFormerEmbeddingsImpl::RoFormerEmbeddingsImpl(const RoFormerOptions& options) : options_(options) {
  const auto& m = options.model();
  const int64_t E = options.embedding_size();
  word_embeddings = register_module(
      "word_embeddings",
      torch::nn::Embedding(torch::nn::EmbeddingOptions(m.vocab_size, E).padding_idx(options.pad_token_id())));
  // Registered second, as in HF BertEmbeddings (the order of the state dict and of initialization).
  if (config::has_absolute_table(m))
    position_embeddings = register_module("position_embeddings", torch::nn::Embedding(m.max_position_embeddings, E));
  if (m.type_vocab_size > 0)
    token_type_embeddings = register_module("token_type_embeddings", torch::nn::Embedding(m.type_vocab_size, E));
  layer_norm = register_module("LayerNorm", roformer::model::layer_norm(E, m.layer_norm_eps));
}

torch::Tensor RoFormerEmbeddingsImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                                              int64_t position_offset) {
  const auto& m = options_.model();
  // The table enters the input for BERT (absolute) and DeBERTa-v1 (position_biased_input); the
  // enhanced mask decoder's table does not.
  const bool add_positions = position_embeddings && (m.position == config::Position::kAbsolute || m.position_biased_input);
  auto positions = [&] {
    // Rows offset .. offset+T-1 broadcast over the batch: HF's lookup at position_ids.
    const int64_t T = input_ids.size(1), P = position_embeddings->weight.size(0);
    TORCH_CHECK(position_offset >= 0 && position_offset + T <= P, "positions ", position_offset, "..",
                position_offset + T - 1, " outside the ", P, "-row position table");
    return position_embeddings->weight.narrow(0, position_offset, T);  // (T, E) over (B, T, E)
  };
  auto x = word_embeddings->forward(input_ids);  // (B, T, E)
  // Each family's order of the sums, so the rounding is its own: DebertaV2Embeddings adds the
  // positions before the token types, BertEmbeddings after.
  if (add_positions && m.position == config::Position::kDisentangled) x = x + positions();
  if (token_type_embeddings) {
    // Undefined ids mean all zeros (HF's default): add row 0 by broadcasting instead of a lookup.
    x = token_type_ids.defined() ? x + token_type_embeddings->forward(token_type_ids)
                                 : x + token_type_embeddings->weight[0];
  }
  if (add_positions && m.position == config::Position::kAbsolute) x = x + positions();
  x = layer_norm->forward(x);
  return F::dropout(x, F::DropoutFuncOptions().p(m.hidden_dropout).training(is_training()));
}

// ---- Self-attention -----------------------------------------------------------------------------
RoFormerSelfAttentionImpl::RoFormerSelfAttentionImpl(const RoFormerOptions& options)
    : options_(options), attention_(options.model().attention),
      rotary_(options.model().position == config::Position::kRotary),
      disentangled_(options.model().position == config::Position::kDisentangled) {
  const auto& m = options.model();
  const int64_t H = m.hidden_size;
  query = register_module("query", torch::nn::Linear(H, H));
  key = register_module("key", torch::nn::Linear(H, H));
  value = register_module("value", torch::nn::Linear(H, H));
  if (disentangled_ && !m.share_att_key) {  // HF DisentangledSelfAttention registers them in this order
    if (m.pos_att_type != config::RelativeTerms::kP2C)
      pos_key_proj = register_module("pos_key_proj", torch::nn::Linear(H, H));
    if (m.pos_att_type != config::RelativeTerms::kC2P)
      pos_query_proj = register_module("pos_query_proj", torch::nn::Linear(H, H));
  }
}

double RoFormerSelfAttentionImpl::score_scale() const {
  const auto& m = options_.model();
  const double D = static_cast<double>(m.hidden_size / m.num_heads);
  const double terms = !disentangled_ ? 1.0 : m.pos_att_type == config::RelativeTerms::kBoth ? 3.0 : 2.0;
  return 1.0 / std::sqrt(D * terms);  // DeBERTa's 1/sqrt(3D) with both relative terms
}

std::optional<double> RoFormerSelfAttentionImpl::sdpa_scale() const {
  return disentangled_ ? std::optional<double>(score_scale()) : std::nullopt;  // SDPA's default is 1/sqrt(D)
}

torch::Tensor RoFormerSelfAttentionImpl::relative_scores(const torch::Tensor& q, const torch::Tensor& k,
                                                         const LayerInputs& inputs) {
  const auto& m = options_.model();
  const int64_t N = m.num_heads, D = m.hidden_size / N, R = inputs.rel.size(0);
  auto rel = F::dropout(inputs.rel, F::DropoutFuncOptions().p(m.hidden_dropout).training(is_training()));  // (R, H)
  auto heads = [&](const torch::Tensor& t) { return t.view({R, N, D}).transpose(0, 1); };  // (N, R, D)
  torch::Tensor pos_key, pos_query;  // (N, R, D); undefined for a term pos_att_type leaves out
  if (m.pos_att_type != config::RelativeTerms::kP2C)
    pos_key = heads(linear(m.share_att_key ? key : pos_key_proj, rel));
  if (m.pos_att_type != config::RelativeTerms::kC2P)
    pos_query = heads(linear(m.share_att_key ? query : pos_query_proj, rel));
  return disentangled_scores(q, k, pos_key, pos_query, inputs.rel_index, score_scale());
}

std::optional<at::Tensor> RoFormerSelfAttentionImpl::attention_bias(const torch::Tensor& q, const torch::Tensor& k,
                                                                    const LayerInputs& inputs) {
  if (!disentangled_) return inputs.mask.defined() ? std::optional<at::Tensor>(inputs.mask) : std::nullopt;
  auto scores = relative_scores(q, k, inputs);  // (B, N, T, T)
  if (inputs.mask.defined())
    scores = scores.masked_fill(inputs.mask.logical_not(), -std::numeric_limits<double>::infinity());
  return scores;
}

torch::Tensor RoFormerSelfAttentionImpl::rotate(const torch::Tensor& x, const torch::Tensor& sin_pos,
                                                const torch::Tensor& cos_pos) const {
  if (rotary_impl(x.device()) == RotaryImpl::kFused)
    return apply_rotary_fused(x, sin_pos, cos_pos, /*seq_dim=*/-2);  // (B, N, T, D)
  return apply_rotary(x, sin_pos, cos_pos);
}

torch::Tensor RoFormerSelfAttentionImpl::forward(const torch::Tensor& x, const LayerInputs& inputs,
                                                 const torch::Tensor& queries) {
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2);
  const int64_t N = options_.model().num_heads, D = H / N;
  const auto& sin_pos = inputs.sin_pos;
  const auto& cos_pos = inputs.cos_pos;
  auto heads = [&](const torch::Tensor& t) { return t.view({B, T, N, D}).transpose(1, 2); };  // (B, N, T, D)
  torch::Tensor q, k, v;
  bool rotated = false;  // q and k already rotated
  if (kernel_policy().fused_qkv && x.is_cuda() && !queries.defined()) {
    // One GEMM: (B, T, 3H) = x [Wq; Wk; Wv]^T + [bq; bk; bv], viewed as (B, T, 3, N, D). Split and
    // unbind rather than narrow/select: their backward is one cat/stack, not a zero-filled buffer
    // per slice plus the additions.
    auto qkv = torch::linear(x, torch::cat({query->weight, key->weight, value->weight}),
                             torch::cat({query->bias, key->bias, value->bias}))
                   .view({B, T, 3, N, D});
    if (rotary_ && rotary_impl(x.device()) == RotaryImpl::kFused && attention_ == config::Attention::kSoftmax) {
      // q and k rotated together: one rotation for both (positions along dim 1).
      auto parts = qkv.split_with_sizes({2, 1}, 2);
      auto qk = apply_rotary_fused(parts[0], sin_pos, cos_pos, /*seq_dim=*/1).unbind(2);
      q = qk[0].transpose(1, 2);
      k = qk[1].transpose(1, 2);
      v = parts[1].squeeze(2).transpose(1, 2);
      rotated = true;
    } else {
      auto parts = qkv.unbind(2);
      q = parts[0].transpose(1, 2);
      k = parts[1].transpose(1, 2);
      v = parts[2].transpose(1, 2);
    }
  } else {
    q = heads(linear(query, queries.defined() ? queries : x));
    k = heads(linear(key, x));
    v = heads(linear(value, x));
  }
  if (options_.model().rotary_value) v = rotate(v, sin_pos, cos_pos);

  torch::Tensor context;  // (B, N, T, D)
  if (attention_ == config::Attention::kLinear) {
    context = linear_attention(q, k, v, inputs.mask, sin_pos, cos_pos);
  } else {
    if (rotary_ && !rotated) {
      q = rotate(q, sin_pos, cos_pos);
      k = rotate(k, sin_pos, cos_pos);
    }
    // softmax(q k^T scale + mask) v; an undefined mask lets flash/efficient kernels run. Disentangled
    // attention's relative scores are an additive float bias (B, N, T, T), padded keys -inf: on CUDA
    // the memory-efficient kernel (which takes a bias and its gradient); on the CPU the math kernel
    // while the bias needs a gradient, the CPU flash kernel without one (evaluation, and a
    // checkpointed layer's forward), whose results differ in the last bits.
    const double p = is_training() ? options_.model().attention_dropout : 0.0;
    context = at::scaled_dot_product_attention(q, k, v, attention_bias(q, k, inputs), p, /*is_causal=*/false,
                                               sdpa_scale());
  }
  return context.transpose(1, 2).reshape({B, T, H});
}

// phi(x) = elu(x) + 1,
//   out_m = sum_n (R_m phi(q_m))^T (R_n phi(k_n)) v_n / sum_n phi(q_m)^T phi(k_n)
// The denominator uses the unrotated features so it stays positive. Padded keys get phi = 0.
torch::Tensor RoFormerSelfAttentionImpl::linear_attention(const torch::Tensor& q, const torch::Tensor& k,
                                                          const torch::Tensor& v, const torch::Tensor& mask,
                                                          const torch::Tensor& sin_pos,
                                                          const torch::Tensor& cos_pos) const {
  auto fq = torch::elu(q) + 1.0;
  auto fk = torch::elu(k) + 1.0;
  if (mask.defined()) fk = fk * mask.transpose(-1, -2).to(fk.dtype());  // mask (B, 1, T, 1)
  auto rq = rotary_ ? rotate(fq, sin_pos, cos_pos) : fq;
  auto rk = rotary_ ? rotate(fk, sin_pos, cos_pos) : fk;
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
  if (disentangled_) {
    // Always a float bias, trained through (its gradient is the relative embeddings').
    mask = torch::empty({B, N, T, T}, opts).requires_grad_(is_training() && torch::GradMode::is_enabled());
  } else if (padded) {
    mask = torch::ones({B, 1, 1, T}, opts.dtype(torch::kBool));
  }
  const double p = is_training() ? options_.model().attention_dropout : 0.0;
  switch (at::_fused_sdp_choice(q, k, v, mask, p, /*is_causal=*/false, sdpa_scale())) {  // sdp::SDPBackend
    case 0: return "math";
    case 1: return "flash";
    case 2: return "efficient";
    case 3: return "cudnn";
    case 4: return "overrideable";
    default: return "none";
  }
}

// ---- Encoder layer --------------------------------------------------------------------------------
RoFormerLayerImpl::RoFormerLayerImpl(const RoFormerOptions& options) : options_(options) {
  const int64_t H = options.model().hidden_size, I = options.model().intermediate_size;
  const double eps = options.model().layer_norm_eps;
  auto attention = group(*this, "attention");
  self_attention = attention->register_module("self", RoFormerSelfAttention(options));
  auto attention_output = group(*attention, "output");
  attention_dense = attention_output->register_module("dense", torch::nn::Linear(H, H));
  attention_layer_norm = attention_output->register_module("LayerNorm", layer_norm(H, eps));
  auto intermediate = group(*this, "intermediate");
  intermediate_dense = intermediate->register_module("dense", torch::nn::Linear(H, I));
  auto output = group(*this, "output");
  output_dense = output->register_module("dense", torch::nn::Linear(I, H));
  output_layer_norm = output->register_module("LayerNorm", layer_norm(H, eps));
}

torch::Tensor RoFormerLayerImpl::forward(const torch::Tensor& x, const LayerInputs& inputs, const torch::Tensor& queries) {
  const auto& m = options_.model();
  auto drop = [&](const torch::Tensor& t) {
    return F::dropout(t, F::DropoutFuncOptions().p(m.hidden_dropout).training(is_training()));
  };
  auto ffn = [&](const torch::Tensor& t) {
    return linear(output_dense, activation(linear(intermediate_dense, t), m.hidden_act));
  };
  const torch::Tensor& u = queries.defined() ? queries : x;  // the residual stream
  if (m.norm == config::Norm::kPre) {
    auto normed_queries = queries.defined() ? attention_layer_norm->forward(queries) : torch::Tensor();
    auto attended = self_attention->forward(attention_layer_norm->forward(x), inputs, normed_queries);
    auto a = u + drop(linear(attention_dense, attended));
    return a + drop(ffn(output_layer_norm->forward(a)));
  }
  auto attended = self_attention->forward(x, inputs, queries);
  auto a = attention_layer_norm->forward(u + drop(linear(attention_dense, attended)));
  return output_layer_norm->forward(a + drop(ffn(a)));
}

// ---- Encoder --------------------------------------------------------------------------------------
RoFormerEncoderImpl::RoFormerEncoderImpl(const RoFormerOptions& options) : options_(options) {
  const auto& m = options.model();
  const int64_t D = m.hidden_size / m.num_heads;
  if (m.position == config::Position::kRotary) {
    auto positions = group(*this, "embed_positions");
    embed_positions = positions->register_buffer("weight", rotary_table(m.max_position_embeddings, D, m.rotary_base));
  }
  layers = register_module("layer", torch::nn::ModuleList());
  for (int64_t i = 0; i < m.num_layers; ++i) layers->push_back(RoFormerLayer(options));
  if (m.position == config::Position::kDisentangled) {  // after the layers, as in HF DebertaV2Encoder
    rel_embeddings = register_module("rel_embeddings", torch::nn::Embedding(2 * relative_span(m), m.hidden_size));
    rel_layer_norm = register_module("LayerNorm", layer_norm(m.hidden_size, m.layer_norm_eps));
  }
  if (m.norm == config::Norm::kPre)
    final_layer_norm = register_module("final_layer_norm", layer_norm(m.hidden_size, m.layer_norm_eps));
}

LayerInputs RoFormerEncoderImpl::layer_inputs(const torch::Tensor& x, const torch::Tensor& mask) {
  LayerInputs inputs;
  inputs.mask = mask;
  const int64_t T = x.size(1);
  if (embed_positions.defined()) {
    std::tie(inputs.sin_pos, inputs.cos_pos) = rotary_sin_cos(positions_for(T), T);
    if (rotary_impl(x.device()) != RotaryImpl::kFused) {  // fused rotates in fp32
      inputs.sin_pos = inputs.sin_pos.to(rotary_dtype(x));  // the dtype of q and k, autocast included
      inputs.cos_pos = inputs.cos_pos.to(rotary_dtype(x));
    }
  }
  if (rel_embeddings) {
    // Built on the host once per length and device (a copy to the device would synchronize each step).
    if (!relative_.index.defined() || relative_.index.size(0) != T || relative_.index.device() != x.device())
      relative_ = relative_index(T, options_.model(), x.device());
    // LayerNorm acts row by row, so normalizing only the rows this length reads is exact.
    inputs.rel = rel_layer_norm->forward(rel_embeddings->weight.narrow(0, relative_.first_row, relative_.rows));
    inputs.rel_index = relative_.index;
  }
  return inputs;
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

torch::Tensor RoFormerEncoderImpl::positions_for(int64_t seq_len) const {
  const int64_t P = embed_positions.size(0);
  if (seq_len <= P) return embed_positions;
  // theta_i does not depend on P and each row is computed from its own position, so rows < P equal
  // the buffer's exactly; only longer inputs (evaluation beyond the training length) pay for it.
  return rotary_table(seq_len, embed_positions.size(1), options_.model().rotary_base).to(embed_positions.device());
}

// ---- MLM head -------------------------------------------------------------------------------------
RoFormerLMHeadImpl::RoFormerLMHeadImpl(const RoFormerOptions& options) : options_(options) {
  const auto& m = options.model();
  const int64_t E = options.embedding_size();
  // HF's state_dict lists cls.predictions.bias first.
  bias = register_parameter("bias", torch::zeros({m.vocab_size}));
  auto transform = group(*this, "transform");
  dense = transform->register_module("dense", torch::nn::Linear(m.hidden_size, E));
  layer_norm = transform->register_module("LayerNorm", roformer::model::layer_norm(E, m.layer_norm_eps));
}

torch::Tensor RoFormerLMHeadImpl::forward(const torch::Tensor& h, const torch::Tensor& decoder_weight) {
  auto t = layer_norm->forward(activation(linear(dense, h), options_.model().hidden_act));  // (..., E)
  return linear(t, decoder_weight, bias);  // (..., V)
}

}  // namespace roformer::model
