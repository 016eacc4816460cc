// The process-wide kernel policy; see kernel_policy.h.
#include "model/kernel_policy.h"

#include <ATen/Context.h>

namespace roformer::model {

namespace {

KernelPolicy& current() {
  static KernelPolicy policy;
  return policy;
}

// LibTorch's SDPA flags as they were before the first restriction, so kAuto puts them back.
struct SdpFlags {
  bool flash, cudnn, efficient, math;
};

std::optional<SdpFlags>& libtorch_defaults() {
  static std::optional<SdpFlags> flags;
  return flags;
}

void apply_attention_kernel(AttentionKernel kernel) {
  auto& context = at::globalContext();
  auto& defaults = libtorch_defaults();
  if (kernel == AttentionKernel::kAuto) {
    if (!defaults) return;  // never restricted: LibTorch's own flags are in force
    context.setSDPUseFlash(defaults->flash);
    context.setSDPUseCuDNN(defaults->cudnn);
    context.setSDPUseMemEfficient(defaults->efficient);
    context.setSDPUseMath(defaults->math);
    return;
  }
  if (!defaults)
    defaults = SdpFlags{context.userEnabledFlashSDP(), context.userEnabledCuDNNSDP(),
                        context.userEnabledMemEfficientSDP(), context.userEnabledMathSDP()};
  context.setSDPUseFlash(kernel == AttentionKernel::kFlash);
  context.setSDPUseCuDNN(kernel == AttentionKernel::kCudnn);
  context.setSDPUseMemEfficient(kernel == AttentionKernel::kEfficient);
  context.setSDPUseMath(kernel == AttentionKernel::kMath);
}

}  // namespace

std::string to_string(RotaryImpl impl) {
  switch (impl) {
    case RotaryImpl::kAuto: return "auto";
    case RotaryImpl::kElementwise: return "elementwise";
    case RotaryImpl::kFused: return "fused";
  }
  return "?";
}

std::optional<RotaryImpl> rotary_impl_named(const std::string& name) {
  for (auto impl : {RotaryImpl::kAuto, RotaryImpl::kElementwise, RotaryImpl::kFused})
    if (to_string(impl) == name) return impl;
  return std::nullopt;
}

std::optional<AttentionKernel> attention_kernel_named(const std::string& name) {
  if (name == "auto") return AttentionKernel::kAuto;
  if (name == "flash") return AttentionKernel::kFlash;
  if (name == "cudnn") return AttentionKernel::kCudnn;
  if (name == "efficient") return AttentionKernel::kEfficient;
  if (name == "math") return AttentionKernel::kMath;
  return std::nullopt;
}

const KernelPolicy& kernel_policy() { return current(); }

void set_kernel_policy(const KernelPolicy& policy) {
  apply_attention_kernel(policy.attention);
  current() = policy;
}

RotaryImpl rotary_impl(const c10::Device& device) {
  const RotaryImpl set = current().rotary;
  if (set != RotaryImpl::kAuto) return set;
  return device.is_cuda() ? RotaryImpl::kFused : RotaryImpl::kElementwise;
}

}  // namespace roformer::model
