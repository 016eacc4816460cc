// The process-wide kernel policy; see kernel_policy.h.
#include "model/kernel_policy.h"

#include <ATen/Context.h>

#include <algorithm>

#include <fmt/format.h>

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

namespace {

std::string attention_kernel_name(AttentionKernel kernel) {
  switch (kernel) {
    case AttentionKernel::kAuto: return "auto";
    case AttentionKernel::kFlash: return "flash";
    case AttentionKernel::kCudnn: return "cudnn";
    case AttentionKernel::kEfficient: return "efficient";
    case AttentionKernel::kMath: return "math";
  }
  return "?";
}

// The table's rows. Captureless lambdas: each row reads and sets its own field.
std::vector<KernelAlternative> build_alternatives() {
  using Value = std::variant<std::string, bool>;
  return {
      {"rotary", "--rotary", "auto (fused on CUDA, elementwise on the CPU) | elementwise | fused (one complex multiply)",
       "rotary", {"auto", "elementwise", "fused"}, "", "fused rotary", "element-wise rotary", "--rotary elementwise",
       "", "",
       [](KernelPolicy& p, const std::string& v) { p.rotary = *rotary_impl_named(v); },
       [](const KernelPolicy&, const c10::Device& d) -> Value { return to_string(rotary_impl(d)); }},
      {"attention", "--attention-kernel",
       "auto (LibTorch's choice) | flash | cudnn | efficient | math: allow only this SDPA kernel", "",
       {"auto", "flash", "cudnn", "efficient", "math"}, "", "", "", "", "all, flash attention",
       "--attention-kernel flash",
       [](KernelPolicy& p, const std::string& v) { p.attention = *attention_kernel_named(v); },
       [](const KernelPolicy& p, const c10::Device&) -> Value { return attention_kernel_name(p.attention); }},
      {"bias_in_gemm", "--separate-bias-add",
       "CUDA: Linear layers as matmul then `+= bias` (nn::Linear::forward) instead of the bias in the GEMM", "bias",
       {}, "", "bias in the GEMM", "bias added apart", "--separate-bias-add", "", "",
       [](KernelPolicy& p, const std::string&) { p.bias_in_gemm = false; },
       [](const KernelPolicy& p, const c10::Device& d) -> Value {
         return std::string(p.bias_in_gemm && d.is_cuda() ? "in GEMM" : "separate add");
       }},
      {"fused_qkv", "--separate-qkv", "CUDA: three q/k/v GEMMs instead of the fused one", "qkv", {}, "", "fused QKV",
       "3 QKV GEMMs", "--separate-qkv", "", "",
       [](KernelPolicy& p, const std::string&) { p.fused_qkv = false; },
       [](const KernelPolicy& p, const c10::Device& d) -> Value {
         return std::string(p.fused_qkv && d.is_cuda() ? "fused" : "separate");
       }},
      {"dense_head", "--dense-head", "MLM head over all B*T positions instead of the predicted ones", "head", {}, "",
       "", "", "", "", "",
       [](KernelPolicy& p, const std::string&) { p.dense_head = true; },
       [](const KernelPolicy& p, const c10::Device&) -> Value { return std::string(p.dense_head ? "dense" : "sparse"); }},
      // The fused ops of issue 38 (docs/kernels.md): Triton kernels on CUDA, their ATen paths on the CPU.
      {"fused_layer_norm", "--fused-layer-norm", "The layers' residual + dropout + LayerNorm as one op",
       "fused_layer_norm", {}, "fused", "", "", "", "all + fused layer norm (Triton)", "",
       [](KernelPolicy& p, const std::string&) { p.fused_layer_norm = true; },
       [](const KernelPolicy& p, const c10::Device&) -> Value { return p.fused_layer_norm; }},
      {"fused_rotary", "--fused-rotary", "q and k rotated by one op on the packed QKV projection", "fused_rotary", {},
       "fused", "", "", "", "all + fused rotary (Triton)", "",
       [](KernelPolicy& p, const std::string&) { p.fused_rotary = true; },
       [](const KernelPolicy& p, const c10::Device&) -> Value { return p.fused_rotary; }},
      {"fused_cross_entropy", "--fused-cross-entropy", "The MLM loss and hits from the logits in their dtype (no fp32 copy)",
       "fused_cross_entropy", {}, "fused", "", "", "", "all + fused cross-entropy (Triton)", "",
       [](KernelPolicy& p, const std::string&) { p.fused_cross_entropy = true; },
       [](const KernelPolicy& p, const c10::Device&) -> Value { return p.fused_cross_entropy; }},
      {"fused_embedding", "--fused-embedding", "The embeddings' sum + LayerNorm + dropout as one op", "fused_embedding",
       {}, "fused", "", "", "", "all + fused embedding (Triton)", "",
       [](KernelPolicy& p, const std::string&) { p.fused_embedding = true; },
       [](const KernelPolicy& p, const c10::Device&) -> Value { return p.fused_embedding; }},
      // Issue 51 (docs/kernels.md): cuBLASLt on CUDA, ATen on the CPU. Its row measures the tanh GELU,
      // with which the feed-forward block's GELU and dGELU join the GEMMs too (the reference: the
      // tanh GELU lever alone, which the kernels call runs beside it).
      {"gemm_epilogues", "--gemm-epilogues",
       "Linear layers through cuBLASLt with the bias (and, with model.hidden_act gelu_tanh, the FFN's GELU) and "
       "their gradients in the GEMMs' epilogues",
       "gemm_epilogues", {}, "", "", "", "", "GEMM epilogues, tanh GELU (cuBLASLt: bias, GELU, dGELU, bias gradients)",
       "--gemm-epilogues --set model.hidden_act=gelu_tanh",
       [](KernelPolicy& p, const std::string&) { p.gemm_epilogues = true; },
       [](const KernelPolicy& p, const c10::Device&) -> Value { return p.gemm_epilogues; }, /*device_pending=*/true},
  };
}

}  // namespace

const std::vector<KernelAlternative>& kernel_alternatives() {
  static const std::vector<KernelAlternative> rows = build_alternatives();
  return rows;
}

const KernelAlternative* find_kernel_alternative(const std::string& entry) {
  for (const auto& row : kernel_alternatives())
    if (entry == row.entry) return &row;
  return nullptr;
}

std::vector<std::string> kernel_alternative_groups() {
  std::vector<std::string> out;
  for (const auto& row : kernel_alternatives())
    if (*row.group && std::find(out.begin(), out.end(), row.group) == out.end()) out.push_back(row.group);
  return out;
}

std::optional<std::string> kernel_choice_error(const KernelAlternative& row, const std::string& value) {
  const auto& c = row.choices;
  if (c.empty() || std::find(c.begin(), c.end(), value) != c.end()) return std::nullopt;
  std::string list;
  for (size_t i = 0; i < c.size(); ++i) list += (i == 0 ? "" : i + 1 == c.size() ? " or " : ", ") + c[i];
  return fmt::format("{} must be {}, got '{}'", row.flag, list, value);
}

}  // namespace roformer::model
