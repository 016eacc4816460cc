// Gradient checkpointing (activation recomputation); see recompute.h.
#include "model/recompute.h"

#include <ATen/core/Generator.h>
#include <torch/torch.h>

#include <mutex>
#include <optional>

#include "model/autocast.h"
#include "model/layers.h"

namespace roformer::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Generator default_generator(const torch::Device& device) {
  return at::globalContext().defaultGenerator(device);
}

torch::Tensor get_rng_state(const torch::Device& device) {
  auto gen = default_generator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_rng_state(const torch::Device& device, const torch::Tensor& state) {
  auto gen = default_generator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// The layer's tensor inputs in the order Function::apply takes them (after x). Undefined ones are
// passed as nullopt: Function::apply refuses an undefined tensor argument (unpadded batches, no
// rotary or relative positions, no decoder queries).
std::optional<torch::Tensor> optional(const torch::Tensor& t) {
  return t.defined() ? std::optional<torch::Tensor>(t) : std::nullopt;
}

struct CheckpointedLayer : public torch::autograd::Function<CheckpointedLayer> {
  // Inputs with a gradient: x, queries, rel; without: mask, sin_pos, cos_pos, rel_index.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const std::optional<torch::Tensor>& queries,
                               const std::optional<torch::Tensor>& rel, const std::optional<torch::Tensor>& mask,
                               const std::optional<torch::Tensor>& sin_pos, const std::optional<torch::Tensor>& cos_pos,
                               const std::optional<torch::Tensor>& rel_index, int64_t layer_address) {
    // Function::apply already disables grad mode here: no activations are kept.
    ctx->saved_data["layer"] = layer_address;
    // The recompute runs in backward, outside the caller's autocast region: replay this state.
    const auto autocast = autocast_state(x.device().type());
    ctx->saved_data["autocast"] = autocast.enabled;
    ctx->saved_data["autocast_dtype"] = static_cast<int64_t>(autocast.dtype);
    ctx->saved_data["cpu_rng"] = get_rng_state(torch::kCPU);
    if (x.is_cuda()) ctx->saved_data["device_rng"] = get_rng_state(x.device());
    ctx->saved_data["mask"] = mask;  // no gradient; kept as they are
    ctx->saved_data["rel_index"] = rel_index;
    LayerInputs inputs{mask.value_or(torch::Tensor()), sin_pos.value_or(torch::Tensor()),
                       cos_pos.value_or(torch::Tensor()), rel.value_or(torch::Tensor()),
                       rel_index.value_or(torch::Tensor())};
    const auto q = queries.value_or(torch::Tensor());
    // Undefined tensors are saved (and restored) as undefined.
    ctx->save_for_backward({x, q, inputs.rel, inputs.sin_pos, inputs.cos_pos});
    auto* layer = reinterpret_cast<RoFormerLayerImpl*>(layer_address);
    return layer->forward(x, inputs, q);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    auto* layer = reinterpret_cast<RoFormerLayerImpl*>(ctx->saved_data["layer"].toInt());
    const auto device = saved[0].device();
    // Replay the forward's random stream (dropout), then give the caller its own back.
    auto cpu_now = get_rng_state(torch::kCPU);
    torch::Tensor device_now;
    set_rng_state(torch::kCPU, ctx->saved_data["cpu_rng"].toTensor());
    if (device.is_cuda()) {
      device_now = get_rng_state(device);
      set_rng_state(device, ctx->saved_data["device_rng"].toTensor());
    }
    // Detached leaves for the inputs with a gradient (x, queries, rel), the others as saved.
    auto leaf = [](const torch::Tensor& t) { return t.defined() ? t.detach().requires_grad_(true) : t; };
    auto x = leaf(saved[0]), queries = leaf(saved[1]), rel = leaf(saved[2]);
    const LayerInputs inputs{ctx->saved_data["mask"].toOptional<torch::Tensor>().value_or(torch::Tensor()), saved[3],
                             saved[4], rel,
                             ctx->saved_data["rel_index"].toOptional<torch::Tensor>().value_or(torch::Tensor())};
    torch::Tensor out;
    {
      torch::AutoGradMode enable(true);
      AutocastScope autocast(device.type(), AutocastState{ctx->saved_data["autocast"].toBool(),
                                                          static_cast<c10::ScalarType>(ctx->saved_data["autocast_dtype"].toInt())});
      out = layer->forward(x, inputs, queries);
    }
    set_rng_state(torch::kCPU, cpu_now);
    if (device.is_cuda()) set_rng_state(device, device_now);
    // Re-entrant backward: parameter gradients accumulate into their .grad, the inputs' into theirs.
    torch::autograd::backward({out}, {grad_outputs[0]});
    auto grad = [](const torch::Tensor& t) { return t.defined() ? t.grad() : torch::Tensor(); };
    return {grad(x),         grad(queries),   grad(rel),       torch::Tensor(),
            torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor checkpointed_layer_forward(const std::shared_ptr<RoFormerLayerImpl>& layer, const torch::Tensor& x,
                                         const LayerInputs& inputs, const torch::Tensor& queries) {
  // The layer outlives the graph (it belongs to the model), so its address is enough to find it.
  return CheckpointedLayer::apply(x, optional(queries), optional(inputs.rel), optional(inputs.mask),
                                  optional(inputs.sin_pos), optional(inputs.cos_pos), optional(inputs.rel_index),
                                  reinterpret_cast<int64_t>(layer.get()));
}

}  // namespace roformer::model
