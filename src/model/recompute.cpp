// Gradient checkpointing (activation recomputation); see recompute.h.
#include "model/recompute.h"

#include <ATen/core/Generator.h>
#include <torch/torch.h>

#include <mutex>
#include <optional>

#include "kernels/fp8_linear.h"
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

// An undefined tensor is passed as nullopt: Function::apply refuses an undefined tensor argument
// (unpadded batches, no decoder queries).
std::optional<torch::Tensor> optional(const torch::Tensor& t) {
  return t.defined() ? std::optional<torch::Tensor>(t) : std::nullopt;
}

struct CheckpointedLayer : public torch::autograd::Function<CheckpointedLayer> {
  // Inputs with a gradient: x, queries and the position scheme's trainable tensors (disentangled:
  // the relative rows), a list of at least one (Function::apply counts each as an input); without:
  // the key masks and the scheme's fixed tensors (rotary rows, the relative index).
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, const std::optional<torch::Tensor>& queries,
                               at::TensorList trainable, const std::optional<torch::Tensor>& mask,
                               const std::optional<torch::Tensor>& local_mask, const std::vector<torch::Tensor>& fixed,
                               int64_t layer_address) {
    // Function::apply already disables grad mode here: no activations are kept.
    ctx->saved_data["layer"] = layer_address;
    // The recompute runs in backward, outside the caller's autocast region: replay this state.
    const auto autocast = autocast_state(x.device().type());
    ctx->saved_data["autocast"] = autocast.enabled;
    ctx->saved_data["autocast_dtype"] = static_cast<int64_t>(autocast.dtype);
    ctx->saved_data["fp8"] = kernels::fp8_enabled();  // and the FP8 linear layers' state (train.fp8)
    ctx->saved_data["cpu_rng"] = get_rng_state(torch::kCPU);
    if (x.is_cuda()) ctx->saved_data["device_rng"] = get_rng_state(x.device());
    ctx->saved_data["mask"] = mask;  // no gradient; kept as they are
    ctx->saved_data["local_mask"] = local_mask;
    ctx->saved_data["fixed"] = fixed;
    const auto q = queries.value_or(torch::Tensor());
    // Undefined tensors are saved (and restored) as undefined.
    std::vector<torch::Tensor> saved = {x, q};
    saved.insert(saved.end(), trainable.begin(), trainable.end());
    ctx->save_for_backward(saved);
    auto* layer = reinterpret_cast<RoFormerLayerImpl*>(layer_address);
    return layer->forward(x, layer_inputs(mask, local_mask, trainable.vec(), fixed), q);
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
    // Detached leaves for the inputs with a gradient (x, queries, the trainable ones), the others as saved.
    auto leaf = [](const torch::Tensor& t) { return t.defined() ? t.detach().requires_grad_(true) : t; };
    for (auto& t : saved) t = leaf(t);
    const std::vector<torch::Tensor> trainable(saved.begin() + 2, saved.end());
    const auto inputs = layer_inputs(ctx->saved_data["mask"].toOptional<torch::Tensor>(),
                                     ctx->saved_data["local_mask"].toOptional<torch::Tensor>(), trainable,
                                     ctx->saved_data["fixed"].toTensorVector());
    torch::Tensor out;
    {
      torch::AutoGradMode enable(true);
      AutocastScope autocast(device.type(), AutocastState{ctx->saved_data["autocast"].toBool(),
                                                          static_cast<c10::ScalarType>(ctx->saved_data["autocast_dtype"].toInt())});
      kernels::Fp8Scope fp8(ctx->saved_data["fp8"].toBool());
      out = layer->forward(saved[0], inputs, saved[1]);
    }
    set_rng_state(torch::kCPU, cpu_now);
    if (device.is_cuda()) set_rng_state(device, device_now);
    // Re-entrant backward: parameter gradients accumulate into their .grad, the inputs' into theirs;
    // one gradient per input of forward (undefined for those without), in its order.
    torch::autograd::backward({out}, {grad_outputs[0]});
    variable_list grads;
    for (const auto& t : saved) grads.push_back(t.defined() ? t.grad() : torch::Tensor());
    grads.resize(grads.size() + 4);  // mask, local_mask, fixed, layer_address
    return grads;
  }

  static LayerInputs layer_inputs(const std::optional<torch::Tensor>& mask, const std::optional<torch::Tensor>& local_mask,
                                  std::vector<torch::Tensor> trainable, std::vector<torch::Tensor> fixed) {
    return {mask.value_or(torch::Tensor()), local_mask.value_or(torch::Tensor()),
            {std::move(trainable), std::move(fixed)}};
  }
};

}  // namespace

torch::Tensor checkpointed_layer_forward(const std::shared_ptr<RoFormerLayerImpl>& layer, const torch::Tensor& x,
                                         const LayerInputs& inputs, const torch::Tensor& queries) {
  // The layer outlives the graph (it belongs to the model), so its address is enough to find it.
  return CheckpointedLayer::apply(x, optional(queries), at::TensorList(inputs.positions.trainable), optional(inputs.mask),
                                  optional(inputs.local_mask), inputs.positions.fixed,
                                  reinterpret_cast<int64_t>(layer.get()));
}

}  // namespace roformer::model
