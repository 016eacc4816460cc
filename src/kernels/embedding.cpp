// Embeddings + LayerNorm + dropout, ATen and Triton paths; see embedding.h. M = B*T tokens, E wide.
#include "kernels/embedding.h"

#include <torch/torch.h>

#include "kernels/op_paths.h"

namespace roformer::kernels {

using torch::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

Tensor aten_embedding(const EmbeddingInputs& in, const Tensor& gamma, const Tensor& beta, double p, double eps,
                      const Tensor& keep) {
  const int64_t T = in.ids.size(1);
  auto z = torch::embedding(in.word, in.ids, in.padding_idx);  // (B, T, E)
  if (in.type.defined()) z = in.type_ids.defined() ? z + torch::embedding(in.type, in.type_ids) : z + in.type[0];
  if (in.position.defined()) z = z + in.position.narrow(0, in.position_offset, T);
  auto y = torch::layer_norm(z, {in.word.size(1)}, gamma, beta, eps);
  if (p > 0 && keep.defined()) return y * keep * (1.0 / (1.0 - p));
  return p > 0 ? torch::dropout(y, p, /*train=*/true) : y;
}

int type_mode(const EmbeddingInputs& in) { return !in.type.defined() ? 0 : in.type_ids.defined() ? 1 : 2; }

// The tables' gradients from z's (M, E): the word rows scattered (ATen's embedding backward,
// padding_idx excluded), the type rows likewise (type_ids) or summed into row 0 (no ids), the
// position rows summed over the batch into rows offset .. offset + T - 1. rows: (V, C, P), C or P 0
// for a table not given.
variable_list table_gradients(const Tensor& dz, const Tensor& ids, const Tensor& type_ids, std::vector<int64_t> rows,
                              int64_t position_offset, int64_t padding_idx) {
  const int64_t E = dz.size(1), T = ids.size(1);
  auto d_word = at::embedding_dense_backward(dz, ids.reshape(-1), rows[0], padding_idx, false);
  Tensor d_type, d_position;
  if (rows[1] > 0) {
    d_type = type_ids.defined() ? at::embedding_dense_backward(dz, type_ids.reshape(-1), rows[1], -1, false)
                                : torch::zeros({rows[1], E}, dz.options()).index_put_({0}, dz.sum(0));
  }
  if (rows[2] > 0) {
    d_position = torch::zeros({rows[2], E}, dz.options());
    d_position.narrow(0, position_offset, T).copy_(dz.view({-1, T, E}).sum(0));
  }
  return {d_word, d_type, d_position};
}

class EmbeddingFunction : public torch::autograd::Function<EmbeddingFunction> {
 public:
  // The tables come as separate arguments (autograd tracks each); the rest of `in` rides along.
  // type and position are optional: an undefined Tensor given to apply() as an input fails there.
  static variable_list forward(AutogradContext* ctx, const Tensor& word, const std::optional<Tensor>& type,
                               const std::optional<Tensor>& position, const Tensor& gamma, const Tensor& beta,
                               EmbeddingInputs in, double p, double eps) {
    const int64_t E = word.size(1), M = in.ids.numel();
    auto z = torch::empty({M, E}, word.options()), y = torch::empty({M, E}, word.options());
    auto f32 = word.options().dtype(torch::kFloat);
    auto mean = torch::empty({M}, f32), rstd = torch::empty({M}, f32);
    auto rng_used = torch::empty({2}, word.options().dtype(torch::kLong));
    DropoutRng rng;
    if (p > 0) rng = reserve_dropout_rng(word.device(), M * E);
    auto plan = plan_embedding_forward(in, gamma, beta, z, y, mean, rstd, rng, rng_used, p, eps);
    launch_triton(plan.kernel, plan.variant, word.device(), plan.grid, plan.args);
    ctx->save_for_backward({z, mean, rstd, gamma, rng_used, in.ids, in.type_ids});
    ctx->saved_data["p"] = p;
    ctx->saved_data["rows"] = std::vector<int64_t>{word.size(0), type ? type->size(0) : 0, position ? position->size(0) : 0};
    ctx->saved_data["offsets"] = std::vector<int64_t>{in.position_offset, in.padding_idx};
    return {y.view({in.ids.size(0), in.ids.size(1), E})};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const Tensor &z = saved[0], &mean = saved[1], &rstd = saved[2], &gamma = saved[3], &rng_used = saved[4];
    const double p = ctx->saved_data["p"].toDouble();
    const auto offsets = ctx->saved_data["offsets"].toIntVector();  // position offset, padding_idx
    const int64_t M = z.size(0), E = z.size(1);
    auto dy = contiguous_aligned(grads[0].reshape({M, E}), "embedding_layer_norm", "dy");  // aligned rows
    auto dz = torch::empty_like(z);
    const auto [rows, programs] = layer_norm_backward_blocks(M, z.device());
    auto partial = torch::empty({2, programs, E}, z.options().dtype(torch::kFloat));
    auto plan = plan_layer_norm_backward(dy, Tensor(), z, gamma, mean, rstd, rng_used, dz, Tensor(), partial, rows, p,
                                         p > 0 ? DropoutAt::kOutput : DropoutAt::kNone);
    launch_triton(plan.kernel, plan.variant, z.device(), plan.grid, plan.args);
    auto sums = partial.sum(1).to(gamma.scalar_type());
    auto tables = table_gradients(dz, saved[5], saved[6], ctx->saved_data["rows"].toIntVector(), offsets[0], offsets[1]);
    return {tables[0], tables[1], tables[2], sums[0], sums[1], Tensor(), Tensor(), Tensor()};
  }
};

}  // namespace

LaunchPlan plan_embedding_forward(const EmbeddingInputs& in, const Tensor& gamma, const Tensor& beta, const Tensor& z,
                                  const Tensor& y, const Tensor& mean, const Tensor& rstd, const DropoutRng& rng,
                                  const Tensor& rng_used, double p, double eps) {
  const int64_t E = in.word.size(1), M = in.ids.numel(), T = in.ids.size(1);
  const bool dropout = p > 0;
#ifdef ROFORMER_WITH_TRITON_KERNELS
  const int64_t* seed = dropout ? rng.seed : rng_used.data_ptr<int64_t>();  // not read without dropout
  const int64_t* offset = dropout ? rng.offset : rng_used.data_ptr<int64_t>();
  // Unused tables and ids are given another tensor of their type: never read.
  const Tensor& type = in.type.defined() ? in.type : in.word;
  const Tensor& position = in.position.defined() ? in.position : in.word;
  using K = triton::embedding_layer_norm_fwd;
  return {K::kKernel, layer_norm_variant(in.word.scalar_type(), E), {static_cast<uint32_t>(M), 1, 1},
          K::args(in.ids, in.word, in.type_ids.defined() ? in.type_ids : in.ids, type, position, gamma, beta, z, y, mean,
                  rstd, seed, offset, rng_used, dropout ? rng.offset_add : 0, E, T, in.position_offset,
                  in.word.stride(0), type.stride(0), position.stride(0), p, eps, type_mode(in),
                  in.position.defined(), dropout)};
#else
  no_triton_kernels("plan_embedding_forward");
#endif
}

std::optional<std::string> triton_embedding_unsupported(const EmbeddingInputs& in, const Tensor& gamma,
                                                        const Tensor& beta) {
  const auto dtype = in.word.scalar_type();
  if (dtype != torch::kBFloat16 && dtype != torch::kFloat) return "dtype is neither bf16 nor fp32";
  const int64_t E = in.word.size(1);
  if (E > 4096 || E % 16 != 0) return "E = " + std::to_string(E) + " is not a multiple of 16 up to 4096";
  for (const Tensor* t : {&in.word, &in.type, &in.position, &gamma, &beta})
    if (t->defined() && (t->scalar_type() != dtype || t->size(-1) != E || !t->is_contiguous() || !aligned16(*t) ||
                         t->device() != in.word.device()))
      return "the tables and gamma/beta are not contiguous, aligned (., E) tensors of one dtype and device";
  for (const Tensor* t : {&in.ids, &in.type_ids})
    if (t->defined() && (t->scalar_type() != torch::kLong || t->dim() != 2 || !t->is_contiguous() ||
                         t->device() != in.word.device()))
      return "ids are not contiguous (B, T) int64 on the tables' device";
  return triton_device_unsupported(in.word, "embedding_layer_norm_fwd", layer_norm_variant(dtype, E));
}

Tensor embedding_layer_norm(const EmbeddingInputs& in, const Tensor& gamma, const Tensor& beta, double p, double eps,
                            Backend backend, const Tensor& keep) {
  TORCH_CHECK(!keep.defined() || backend == Backend::kAten, "an explicit keep mask is for the ATen path only");
  TORCH_CHECK(in.ids.dim() == 2 && in.word.dim() == 2, "embedding_layer_norm: ids ", in.ids.sizes(), " and word ",
              in.word.sizes(), " are not (B, T) and (V, E)");
  TORCH_CHECK(!in.position.defined() || in.position_offset + in.ids.size(1) <= in.position.size(0),
              "embedding_layer_norm: positions ", in.position_offset, "..", in.position_offset + in.ids.size(1) - 1,
              " outside the ", in.position.size(0), "-row table");
  const auto why_not = backend == Backend::kTriton ? triton_embedding_unsupported(in, gamma, beta)
                                                   : aten_asked_for(in.word);
  note_op_path("embedding_layer_norm", why_not);
  if (!why_not) {
    auto optional = [](const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; };
    return EmbeddingFunction::apply(in.word, optional(in.type), optional(in.position), gamma, beta, in, p, eps)[0];
  }
  return aten_embedding(in, gamma, beta, p, eps, keep);
}

}  // namespace roformer::kernels
