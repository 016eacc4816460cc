// RoFormerForMaskedLM; see roformer.h.
#include "model/roformer.h"

#include <torch/torch.h>

#include <set>
#include <sstream>

#include "core/config.h"
#include "core/error.h"
#include "model/kernel_policy.h"
#include "model/tensor_names.h"

namespace roformer::model {

namespace {
using names::kDecoderBias;
using names::kDecoderWeight;
using names::kHeadBias;
using names::kWordEmbeddings;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
std::string shape_str(const torch::Tensor& t) {
  std::ostringstream os;
  os << t.sizes();
  return os.str();
}
}  // namespace

void check_token_ids(const torch::Tensor& input_ids, int64_t vocab_size) {
  TORCH_CHECK(input_ids.is_cpu(), "check_token_ids reads a host tensor, got one on ", input_ids.device());
  if (input_ids.numel() == 0) return;
  auto [lo, hi] = torch::aminmax(input_ids);
  const int64_t min_id = lo.item<int64_t>(), max_id = hi.item<int64_t>();
  if (min_id < 0 || max_id >= vocab_size)
    throw Error("token id " + std::to_string(max_id >= vocab_size ? max_id : min_id) + " outside the vocabulary [0, " +
                std::to_string(vocab_size) + ") (does the tokenizer match model.vocab_size?)");
}

RoFormerForMaskedLMImpl::RoFormerForMaskedLMImpl(const RoFormerOptions& options) : options_(options) {
  validate_model_config(options_.model());  // the model section's rules, for options built in code too
  const int64_t V = options_.model().vocab_size;
  if (V <= 0) throw Error("invalid model options: vocab_size must be > 0 (got " + std::to_string(V) + ")");
  if (options_.pad_token_id() < 0 || options_.pad_token_id() >= V)
    throw Error("invalid model options: pad_token_id outside the vocabulary");
  positions_ = make_position_scheme(options_);
  auto roformer = register_module("roformer", std::make_shared<torch::nn::Module>());
  embeddings = roformer->register_module("embeddings", RoFormerEmbeddings(options_, positions_));
  if (options_.embedding_size() != options_.model().hidden_size)
    embeddings_project = roformer->register_module(
        "embeddings_project", make_linear(options_.model(), options_.embedding_size(), options_.model().hidden_size));
  encoder = roformer->register_module("encoder", RoFormerEncoder(options_, positions_));
  auto cls = register_module("cls", std::make_shared<torch::nn::Module>());
  head = cls->register_module("predictions", RoFormerLMHead(options_));
  init_weights();
}

void RoFormerForMaskedLMImpl::init_weights() {
  // HF _init_weights: Linear and Embedding weights ~ N(0, initializer_range), biases 0, LayerNorm
  // weight 1 / bias 0, the padding row of the word embedding 0, cls.predictions.bias 0. The rotary
  // table is already HF's create_weight().
  torch::NoGradGuard no_grad;
  for (auto& p : named_parameters()) {
    const auto& name = p.key();
    auto& t = p.value();
    const bool is_norm = name.find("LayerNorm") != std::string::npos || name.find("final_layer_norm") != std::string::npos;
    if (is_norm) {
      ends_with(name, ".weight") ? t.fill_(1.0) : t.zero_();
    } else if (ends_with(name, "bias")) {
      t.zero_();
    } else {
      t.normal_(0.0, options_.model().initializer_range);
    }
  }
  embeddings->word_embeddings->weight[options_.pad_token_id()].zero_();
}

RoFormerForMaskedLMImpl::Embedded RoFormerForMaskedLMImpl::embed(const torch::Tensor& input_ids,
                                                                  const torch::Tensor& attention_mask,
                                                                  const torch::Tensor& token_type_ids) {
  TORCH_CHECK(input_ids.dim() == 2, "input_ids must be (B, T), got ", input_ids.sizes());
  TORCH_CHECK(input_ids.scalar_type() == torch::kLong, "input_ids must be int64");
  const int64_t B = input_ids.size(0), T = input_ids.size(1);
  // A learned absolute table has max_position_embeddings rows and nothing beyond; the rotary table
  // is a formula and extends (rotary_rows), relative buckets cover any distance; with no positions
  // nothing limits T (PositionScheme::max_length).
  const auto& m = options_.model();
  if (const auto longest = positions_->max_length(); longest && T > *longest)
    throw Error("sequence length " + std::to_string(T) + " exceeds model.max_position_embeddings " +
                std::to_string(*longest) +
                " (the rows of the learned absolute position table; lower data.max_seq_len or raise "
                "model.max_position_embeddings)");
  // No read back from an accelerator here: callers check their host batch before the copy.
  if (input_ids.is_cpu()) check_token_ids(input_ids, m.vocab_size);
  if (token_type_ids.defined())
    TORCH_CHECK(token_type_ids.sizes() == input_ids.sizes(), "token_type_ids must be (B, T) like input_ids");

  // Key-padding mask (B, 1, 1, T), true = attend; left undefined when nothing is padded.
  torch::Tensor mask;
  if (attention_mask.defined()) {
    TORCH_CHECK(attention_mask.sizes() == input_ids.sizes(), "attention_mask must be (B, T) like input_ids, got ",
                attention_mask.sizes());
    auto keep = attention_mask.to(torch::kBool);  // (B, T)
    // On the host an all-token mask is dropped so the fused attention kernels run. On a device that
    // test would read back (a host sync per forward), so there a defined mask means padding: the
    // loader leaves it undefined for batches without any.
    if (!keep.is_cpu() || !keep.all().item<bool>()) {
      // A row with no token at all would mask every key, and SDPA backends disagree on softmax
      // over nothing (zeros on CPU, NaN in some kernels, which then leaks into the gradients as
      // 0 * NaN). Let such rows attend everywhere instead, as HF's additive finfo.min mask does;
      // nothing is predicted there.
      keep = keep | ~keep.any(1, /*keepdim=*/true);
      mask = keep.view({B, 1, 1, T});
    }
  }

  auto x = embeddings->forward(input_ids, token_type_ids);  // (B, T, E)
  if (embeddings_project) x = linear(embeddings_project, x);  // (B, T, H)
  return {x, mask};
}

torch::Tensor RoFormerForMaskedLMImpl::encode(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                              const torch::Tensor& token_type_ids) {
  const auto [x, mask] = embed(input_ids, attention_mask, token_type_ids);
  return encoder->forward(x, mask);  // (B, T, H)
}

torch::Tensor RoFormerForMaskedLMImpl::head_states(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                                   const torch::Tensor& token_type_ids) {
  const auto [x, mask] = embed(input_ids, attention_mask, token_type_ids);
  // The decoder's absolute positions (DeBERTa's z_states), mapped to H by the embedding projection
  // when E < H; without a decoder the head reads the encoder output.
  auto z = positions_->decoder_positions(x.size(1));  // (T, E)
  if (!z.defined()) return encoder->forward(x, mask);  // (B, T, H)
  if (embeddings_project) z = linear(embeddings_project, z);  // (T, H)
  return encoder->forward_emd(x, mask, z);  // (B, T, H)
}

torch::Tensor RoFormerForMaskedLMImpl::forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                               const torch::Tensor& token_type_ids) {
  return head->forward(head_states(input_ids, attention_mask, token_type_ids), embeddings->word_embeddings->weight);
}

torch::Tensor RoFormerForMaskedLMImpl::forward_sparse(const torch::Tensor& input_ids,
                                                      const torch::Tensor& attention_mask,
                                                      const torch::Tensor& pred_positions,
                                                      const torch::Tensor& token_type_ids) {
  TORCH_CHECK(pred_positions.dim() == 1 && pred_positions.scalar_type() == torch::kLong,
              "pred_positions must be (P,) int64 flat indices into B*T");
  if (kernel_policy().dense_head)  // (B*T, V), then the predicted rows: the cost the sparse head avoids
    return forward(input_ids, attention_mask, token_type_ids).view({-1, options_.model().vocab_size})
        .index_select(0, pred_positions);
  auto h = head_states(input_ids, attention_mask, token_type_ids);           // (B, T, H)
  auto picked = h.reshape({-1, h.size(-1)}).index_select(0, pred_positions);  // (P, H)
  return head->forward(picked, embeddings->word_embeddings->weight);         // (P, V)
}

std::vector<std::pair<std::string, torch::Tensor>> RoFormerForMaskedLMImpl::hf_named_parameters() const {
  // PyTorch's state_dict order: module by module in registration order, each module's parameters
  // then its buffers. The only buffer, the rotary table, is a frozen parameter in HF's RoFormer.
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& m : named_modules("", /*include_self=*/true)) {
    const std::string prefix = m.key().empty() ? "" : m.key() + ".";
    for (const auto& p : m.value()->named_parameters(/*recurse=*/false)) out.emplace_back(prefix + p.key(), p.value());
    for (const auto& b : m.value()->named_buffers(/*recurse=*/false)) out.emplace_back(prefix + b.key(), b.value());
  }
  out.emplace_back(kDecoderWeight, embeddings->word_embeddings->weight);
  out.emplace_back(kDecoderBias, head->bias);
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> RoFormerForMaskedLMImpl::with_zero_biases(
    std::vector<std::pair<std::string, torch::Tensor>> tensors) const {
  if (options_.model().bias) return tensors;
  std::map<std::string, torch::Tensor> absent;  // weight's key -> the zero bias that follows it
  for (const auto& m : named_modules()) {
    torch::Tensor weight, bias;
    if (const auto* linear = m.value()->as<torch::nn::Linear>()) {
      weight = linear->weight;
      bias = linear->bias;
    } else if (const auto* norm = m.value()->as<torch::nn::LayerNorm>()) {
      weight = norm->weight;
      bias = norm->bias;
    }
    if (weight.defined() && !bias.defined())
      absent.emplace(m.key() + ".weight", torch::zeros({weight.size(0)}, weight.options().requires_grad(false)));
  }
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (auto& [name, t] : tensors) {
    out.emplace_back(name, t);
    if (auto it = absent.find(name); it != absent.end())
      out.emplace_back(name.substr(0, name.size() - std::string("weight").size()) + "bias", it->second);
  }
  return out;
}

std::vector<std::string> RoFormerForMaskedLMImpl::hf_state_dict_problems(
    const std::map<std::string, torch::Tensor>& tensors) const {
  // The tied aliases, and the buffers (computed from the config: the rotary table).
  std::set<std::string> optional = {kDecoderWeight, kDecoderBias};
  for (const auto& b : named_buffers()) optional.insert(b.key());
  std::vector<std::string> problems;
  std::map<std::string, torch::Tensor> expected;
  for (auto& [name, t] : hf_named_parameters()) expected.emplace(name, t);
  for (const auto& [name, t] : expected)
    if (!tensors.count(name) && !optional.count(name)) problems.push_back("missing key " + name);
  for (const auto& [name, t] : tensors) {
    auto it = expected.find(name);
    if (it == expected.end()) {
      problems.push_back("unexpected key " + name);
    } else if (!t.defined() || t.sizes() != it->second.sizes()) {
      problems.push_back("shape mismatch for " + name + ": expected " + shape_str(it->second) + ", got " +
                         (t.defined() ? shape_str(t) : std::string("undefined")));
    }
  }
  return problems;
}

void RoFormerForMaskedLMImpl::load_hf_state_dict(const std::map<std::string, torch::Tensor>& tensors) {
  const auto problems = hf_state_dict_problems(tensors);
  if (!problems.empty()) {
    std::string msg = "cannot load Hugging Face RoFormerForMaskedLM weights (" + std::to_string(problems.size()) +
                      " problem(s); does the checkpoint match the model config?):";
    for (const auto& p : problems) msg += "\n  " + p;
    throw Error(msg);
  }
  std::map<std::string, torch::Tensor> expected;
  for (auto& [name, t] : hf_named_parameters()) expected.emplace(name, t);
  torch::NoGradGuard no_grad;
  for (const auto& [name, t] : tensors) {
    // The aliases hold the same tensors as their primary keys; copy the primary when both exist.
    if (name == kDecoderWeight && tensors.count(kWordEmbeddings)) continue;
    if (name == kDecoderBias && tensors.count(kHeadBias)) continue;
    expected.at(name).copy_(t);
  }
}

std::string RoFormerForMaskedLMImpl::attention_backend(int64_t batch, int64_t seq_len, torch::ScalarType dtype,
                                                       bool padded) const {
  if (encoder->layers->size() == 0) return "none (no layers)";
  auto layer = std::dynamic_pointer_cast<RoFormerLayerImpl>(encoder->layers->ptr(0));
  return layer->self_attention->attention_backend(batch, seq_len, dtype, embeddings->word_embeddings->weight.device(),
                                                  padded);
}

void RoFormerForMaskedLMImpl::pack_qkv() {
  for (size_t i = 0; i < encoder->layers->size(); ++i)
    std::dynamic_pointer_cast<RoFormerLayerImpl>(encoder->layers->ptr(i))->self_attention->pack_qkv();
}

int64_t RoFormerForMaskedLMImpl::num_parameters() const {
  int64_t n = 0;
  for (const auto& p : parameters()) n += p.numel();
  return n;
}

bool RoFormerForMaskedLMImpl::decays(const std::string& name, bool include_embeddings) const {
  if (name.find("LayerNorm") != std::string::npos || name.find("final_layer_norm") != std::string::npos) return false;
  if (ends_with(name, "bias")) return false;
  if (name.find("_embeddings.") != std::string::npos) return include_embeddings;
  return true;  // Linear weights
}

std::vector<torch::Tensor> RoFormerForMaskedLMImpl::decay_parameters(bool include_embeddings) const {
  std::vector<torch::Tensor> out;
  for (const auto& p : named_parameters())
    if (decays(p.key(), include_embeddings)) out.push_back(p.value());
  return out;
}

std::vector<torch::Tensor> RoFormerForMaskedLMImpl::no_decay_parameters(bool include_embeddings) const {
  std::vector<torch::Tensor> out;
  for (const auto& p : named_parameters())
    if (!decays(p.key(), include_embeddings)) out.push_back(p.value());
  return out;
}

}  // namespace roformer::model
