// RoFormerForMaskedLM: the RoFormer encoder (Su et al. 2021) with the BERT-style MLM head, laid out
// like Hugging Face's RoFormerForMaskedLM so parameters map one to one to its state_dict keys
// (docs/model.md has the table). Data flow, top to bottom:
//   input_ids (B, T) -> embeddings (B, T, E) [-> embeddings_project (B, T, H)]
//   -> encoder: num_layers x RoFormerLayer with rotary self-attention (B, T, H)
// model.position picks where position information enters: rotary (above), absolute (learned rows
// added in the embeddings, as BERT), none, or disentangled (DeBERTa's relative attention,
// model/disentangled.h; with the enhanced mask decoder the head reads the last layer re-run on
// queries plus absolute positions instead of the encoder output).
//   -> MLM head: dense H->E, act, LayerNorm(E), decoder E->V tied to the word embedding, + bias.
// Training uses forward_sparse: the head runs only at the P predicted positions, logits (P, V).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/layers.h"
#include "model/options.h"
#include "model/position.h"

namespace roformer::model {

// Throws roformer::Error when an id of input_ids (a host tensor) is outside [0, vocab_size). The
// forward runs it only on CPU inputs; callers running the model on an accelerator check their host
// batch with it before the copy, so the forward never reads back from the device.
void check_token_ids(const torch::Tensor& input_ids, int64_t vocab_size);

class RoFormerForMaskedLMImpl : public torch::nn::Module {
 public:
  explicit RoFormerForMaskedLMImpl(const RoFormerOptions& options);

  // Encoder output (B, T, H). attention_mask: (B, T) int64/bool, 1 = token, 0 = padding, or
  // undefined (no padding); on an accelerator a defined mask is taken as padded (no read back).
  // token_type_ids: (B, T) int64 or undefined (zeros). Throws roformer::Error for T beyond the
  // position scheme's max_length (a learned absolute table) and, for CPU inputs, token ids outside
  // [0, vocab_size).
  torch::Tensor encode(const torch::Tensor& input_ids, const torch::Tensor& attention_mask = {},
                       const torch::Tensor& token_type_ids = {});
  // What the MLM head reads (B, T, H): encode's output, or with model.enhanced_mask_decoder the
  // decoder's (RoFormerEncoder::forward_emd). Arguments as encode.
  torch::Tensor head_states(const torch::Tensor& input_ids, const torch::Tensor& attention_mask = {},
                            const torch::Tensor& token_type_ids = {});
  // Dense MLM logits (B, T, V).
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask = {},
                        const torch::Tensor& token_type_ids = {});
  // Sparse MLM logits (P, V) at pred_positions: (P,) int64 flat indices into B*T. The head runs at
  // those P rows only, unless the kernel policy's dense_head (model/kernel_policy.h) asks otherwise.
  torch::Tensor forward_sparse(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                               const torch::Tensor& pred_positions, const torch::Tensor& token_type_ids = {});

  const RoFormerOptions& options() const { return options_; }
  // Where position information enters (model.position), chosen once; its tables are registered in
  // the modules below.
  const PositionScheme& positions() const { return *positions_; }
  // The attention kernel a (batch, seq_len) forward runs on this model's device with q/k/v in
  // `dtype` (the autocast dtype under bf16/fp16); see RoFormerSelfAttention::attention_backend.
  std::string attention_backend(int64_t batch, int64_t seq_len, torch::ScalarType dtype, bool padded) const;

  // Parameters under Hugging Face RoFormerForMaskedLM state_dict names, in HF's order. Tied tensors
  // appear under every HF key that holds them: cls.predictions.decoder.weight is the word embedding,
  // cls.predictions.decoder.bias is cls.predictions.bias. Also lists the buffers at their place in
  // the state dict: the rotary table roformer.encoder.embed_positions.weight (position rotary only;
  // absolute has the learned roformer.embeddings.position_embeddings.weight instead, BERT's
  // bert.embeddings.position_embeddings). Pre-LN adds roformer.encoder.final_layer_norm.* (no HF
  // equivalent). The tensors are the live ones (not copies).
  std::vector<std::pair<std::string, torch::Tensor>> hf_named_parameters() const;
  // The biases this model leaves out (model.bias false), as zeros under their HF names, each placed
  // after its weight's key in `tensors` (a list of hf_named_parameters): Hugging Face's families
  // always have them, and zero biases compute what this model does. Unchanged when model.bias is true.
  std::vector<std::pair<std::string, torch::Tensor>> with_zero_biases(
      std::vector<std::pair<std::string, torch::Tensor>> tensors) const;
  // Loads tensors by HF names (copy_ under NoGradGuard, converting dtype). The alias keys
  // (decoder.weight, decoder.bias) and the buffers (embed_positions.weight) are optional, as HF may
  // drop them.
  // Throws roformer::Error listing missing/unexpected keys and shape mismatches.
  void load_hf_state_dict(const std::map<std::string, torch::Tensor>& tensors);
  // What load_hf_state_dict would refuse, one line each ("missing key NAME", "unexpected key NAME",
  // "shape mismatch for NAME: expected [model's shape], got [given shape]"); empty when it fits.
  std::vector<std::string> hf_state_dict_problems(const std::map<std::string, torch::Tensor>& tensors) const;
  // Unique trainable parameters, tied weights counted once (excludes the rotary table buffer, which
  // HF stores as a frozen nn.Parameter and so counts in its num_parameters()).
  int64_t num_parameters() const;
  // Every layer's q, k and v side by side in one storage (RoFormerSelfAttentionImpl::pack_qkv).
  void pack_qkv();

  // Weight-decay groups: Linear weights decay; biases and LayerNorm weights/biases don't; the word
  // and token-type embeddings go to decay only when include_embeddings. Every parameter is in
  // exactly one group, each tied tensor once.
  std::vector<torch::Tensor> decay_parameters(bool include_embeddings) const;
  std::vector<torch::Tensor> no_decay_parameters(bool include_embeddings) const;

  RoFormerEmbeddings embeddings{nullptr};           // roformer.embeddings
  torch::nn::Linear embeddings_project{nullptr};    // roformer.embeddings_project (H, E); only if E != H
  RoFormerEncoder encoder{nullptr};                 // roformer.encoder
  RoFormerLMHead head{nullptr};                     // cls.predictions

 private:
  struct Embedded {
    torch::Tensor x;     // (B, T, H) the encoder's input
    torch::Tensor mask;  // (B, 1, 1, T) bool key mask, undefined without padding
  };
  // The checks of encode, the key mask and the embeddings (projected to H).
  Embedded embed(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                 const torch::Tensor& token_type_ids);
  void init_weights();
  bool decays(const std::string& name, bool include_embeddings) const;
  RoFormerOptions options_;
  std::shared_ptr<PositionScheme> positions_;
};
TORCH_MODULE(RoFormerForMaskedLM);

}  // namespace roformer::model
