// The encoder's input embeddings + LayerNorm + dropout as one differentiable op with two
// implementations (issue 38), for M = B*T tokens of width E:
//
//   z = word[id] + type[c] + position[offset + t]      (B, T, E), as RoFormerEmbeddings adds them
//   y = dropout(LayerNorm(z; gamma, beta, eps), p)
//
// type: the token-type table with type_ids (B, T), or with type_ids undefined its row 0 for every
// token (Hugging Face's default ids of zeros), or no table at all; position: an absolute table
// (BERT), or undefined (rotary models). Gradients flow to word, type, position, gamma and beta.
// Backend::kTriton runs src/kernels/triton/embedding.py forward (the rows gathered, summed in fp32,
// normalized, dropped: one kernel) and layer_norm.py's backward with the mask after the
// normalization, then ATen's embedding backward (a sorted, deterministic scatter into the word
// table) and sums for the type and position rows. kAten composes ATen ops, as the model does today.
#pragma once

#include <torch/types.h>

#include <optional>
#include <string>

#include "kernels/layer_norm.h"

namespace roformer::kernels {

struct EmbeddingInputs {
  torch::Tensor ids;              // (B, T) int64
  torch::Tensor word;             // (V, E)
  torch::Tensor type;             // (C, E) or undefined
  torch::Tensor type_ids;         // (B, T) int64 or undefined (row 0 of `type`)
  torch::Tensor position;         // (P, E) or undefined; rows offset .. offset + T - 1 are added
  int64_t position_offset = 0;
  int64_t padding_idx = -1;       // the word row that gets no gradient (-1: none)
};

// (B, T, E) in the word table's dtype. gamma, beta: (E,). keep: (B, T, E) bool, the dropout mask to
// apply instead of drawing one (kAten only: tests replay a Triton draw with it).
torch::Tensor embedding_layer_norm(const EmbeddingInputs& in, const torch::Tensor& gamma, const torch::Tensor& beta,
                                   double p, double eps, Backend backend, const torch::Tensor& keep = torch::Tensor());

// Why kTriton cannot run these arguments (nullopt: it can): dtypes other than one of bf16/fp32 for
// every table and gamma/beta, E > 4096 or not a multiple of 16, ids not int64, tables not
// contiguous and aligned, or the device reasons (triton_device_unsupported).
std::optional<std::string> triton_embedding_unsupported(const EmbeddingInputs& in, const torch::Tensor& gamma,
                                                        const torch::Tensor& beta);

// The forward launch over the B*T tokens: writes z, y (M, E), mean, rstd (M,) fp32, rng_used.
LaunchPlan plan_embedding_forward(const EmbeddingInputs& in, const torch::Tensor& gamma, const torch::Tensor& beta,
                                  const torch::Tensor& z, const torch::Tensor& y, const torch::Tensor& mean,
                                  const torch::Tensor& rstd, const DropoutRng& rng, const torch::Tensor& rng_used,
                                  double p, double eps);

}  // namespace roformer::kernels
