// The kernel policy: how the model computes, never what. One process-wide value, read where the
// choice is made (model/layers.cpp, model/roformer.cpp); nothing is passed through RoFormerOptions
// or a constructor, and parameters, checkpoints and Hugging Face names are the same for every
// policy. The defaults are the measured-best path for each device (docs/benchmarks.md): on the CPU
// the reference kernels, bit-identical to the golden values; on CUDA the fast paths of issue 13.
// The alternatives exist to be measured again: `roformer bench` sets them once, before the model is
// built; tests switch with ScopedKernelPolicy, which puts the previous policy back. Set it before a
// model runs: a captured CUDA graph replays the kernels of the policy it was captured under.
//
// Adding an entry (e.g. a fused kernel of the GPU work, off until measured) is two declarations in
// this folder and the call site:
//   1. a field of KernelPolicy below, with its default and a comment naming the call site and what
//      it replaces;
//   2. its row in kernel_alternatives() (kernel_policy.cpp): the `roformer bench` flag and its help,
//      the key and value of the bench record, its group (`--fused-all`) and the name of its row in
//      the device script. From the rows come the bench's flags (app/commands_bench.cpp), its record
//      (bench/step_bench.cpp), `roformer bench --list-variants` (bench/variants.cpp: what gpu_check.sh measures) and
//      the tests' list of entries; tests/unit/test_structure.cpp checks that every field has its row;
//   3. the call site reads kernel_policy().field (and x.is_cuda() when it is a CUDA path);
// plus a test that compares the entry with the default path under ScopedKernelPolicy (tests/unit for
// what runs on the CPU, tests/gpu for the device).
#pragma once

#include <c10/core/Device.h>

#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace roformer::model {

// How the rotation of q and k is computed. Both forms give the same function (up to float rounding);
// the naive rotation matrices (tests/unit/test_rotary.cpp) are a test reference, never run here.
enum class RotaryImpl {
  kAuto,         // fused on CUDA, element-wise on the CPU
  kElementwise,  // x cos + rotate_half(x) sin (HF's form; bit-identical to the golden values on the CPU)
  kFused,        // the same rotation as one fp32 complex multiply, rounded once: fewer kernels
};
// "auto" | "elementwise" | "fused" (nullopt for another name), and back.
std::optional<RotaryImpl> rotary_impl_named(const std::string& name);
std::string to_string(RotaryImpl impl);

// The scaled-dot-product-attention kernels LibTorch may pick from (its process-wide flags).
enum class AttentionKernel { kAuto, kFlash, kCudnn, kEfficient, kMath };
// "auto" | "flash" | "cudnn" | "efficient" | "math" (nullopt for another name).
std::optional<AttentionKernel> attention_kernel_named(const std::string& name);

struct KernelPolicy {
  // RoFormerSelfAttention's rotation of q and k (and v with model.rotary_value).
  RotaryImpl rotary = RotaryImpl::kAuto;
  // CUDA: q, k and v from one (3H x H) GEMM of the three weights concatenated per forward
  // (RoFormerSelfAttention::forward) instead of three GEMMs. The CPU always runs the three (its
  // results stay bit-identical to the reference).
  bool fused_qkv = true;
  // CUDA: every Linear runs ATen's linear, the bias added inside the GEMM (model/layers.h `linear`),
  // instead of nn::Linear's matmul and then `+= bias`. The CPU keeps the reference F::linear.
  bool bias_in_gemm = true;
  // forward_sparse runs the MLM head on all B*T positions and then gathers the predicted rows: the
  // cost the sparse head avoids (bench --dense-head). The logits are the same.
  bool dense_head = false;
  // Only this SDPA kernel is allowed (LibTorch's global flags, set by set_kernel_policy); kAuto
  // leaves LibTorch's choice.
  AttentionKernel attention = AttentionKernel::kAuto;

  // The fused ops of issue 38 (src/kernels, docs/kernels.md), off until a device has measured them.
  // On: the op with its Triton kernel on CUDA (its ATen path where the kernel cannot run, as
  // kernels::triton_*_unsupported says), its ATen path on the CPU; off: the model's own ops.
  // RoFormerLayer::forward: post-LN's LN(u + drop(W a)) (both sublayers) and pre-LN's a = u + drop(...)
  // with the LayerNorm after it as kernels::residual_dropout_layer_norm.
  bool fused_layer_norm = false;
  // RotaryAttention (model/rotary.cpp): q and k rotated together by kernels::rotary_qk from the fp32
  // (T, D) rows of the rotary table; in place of apply_rotary / apply_rotary_fused.
  bool fused_rotary = false;
  // TrainStep::micro_step (train/step.cpp): the MLM loss sum and hits by kernels::cross_entropy_sum,
  // from the (P, V) logits in their dtype, instead of an fp32 copy, cross_entropy and argmax.
  bool fused_cross_entropy = false;
  // RoFormerEmbeddings::forward: the tables' sum, LayerNorm and dropout by kernels::embedding_layer_norm.
  bool fused_embedding = false;

  // Issue 51, off until a device has measured it. `linear` (model/layers.cpp: every Linear, the
  // fused QKV GEMM, the MLM head's) through cuBLASLt with the bias in the forward GEMM's epilogue and
  // its gradient in the weight-gradient GEMM's (kernels::linear_epilogue); with model.hidden_act
  // gelu_tanh the feed-forward block as kernels::ffn_gelu_epilogue (bias and GELU in the up-projection,
  // dGELU in the down-projection's input gradient). The CPU and what cuBLASLt cannot take run ATen.
  bool gemm_epilogues = false;
};

// The policy in force (the defaults unless set).
const KernelPolicy& kernel_policy();
// Replaces the policy for the whole process and applies its attention restriction.
void set_kernel_policy(const KernelPolicy& policy);
// The rotary form the policy gives tensors on `device` (kAuto resolved: never kAuto).
RotaryImpl rotary_impl(const c10::Device& device);

// One alternative of the policy, declared once as a row of kernel_alternatives(): everything that
// names it (the bench flag, its help, the record key, the device script's variant rows) is generated
// from the row. A row is a switch (a flag that sets the entry: --fused-rotary) or an option with
// choices (--rotary auto|elementwise|fused, the default first).
struct KernelAlternative {
  const char* entry;       // the KernelPolicy field it sets ("fused_rotary")
  const char* flag;        // the `roformer bench` flag ("--fused-rotary")
  const char* help;        // the flag's help
  const char* record_key;  // its key in the bench record ("fused_rotary"); "" when the record has none
  std::vector<std::string> choices;  // an option's values, the default first; empty: a switch
  const char* group;       // switches that --GROUP-all sets together ("fused"); "" for none
  // The device script's rows (`roformer bench --list-variants`): a CUDA fast path on by default
  // names itself and its reference ("fused QKV", "3 QKV GEMMs") and the arguments that choose the
  // reference (--separate-qkv); an alternative off by default names its row ("fused rotary
  // (Triton)") and the arguments that measure it (its flag when ""). Empty: no row of its own.
  const char* fast_path;
  const char* reference;
  const char* reference_args;
  const char* variant;
  const char* variant_args;
  // Sets the entry from the flag: a switch given (value ""), or an option's value (one of choices).
  void (*set)(KernelPolicy& policy, const std::string& value);
  // The record's value: what the entry makes the step compute on `device` (a name or a bool).
  std::variant<std::string, bool> (*record)(const KernelPolicy& policy, const c10::Device& device);
  // Waiting for a device (issue 51's alternatives): `gpu_check.sh kernels` measures it beside the
  // default at seq 512 and 128 (an option: each choice but the default), right after the groups.
  bool device_pending = false;
};

// Every alternative, in the order the bench lists its flags.
const std::vector<KernelAlternative>& kernel_alternatives();
// The row of `entry` (nullptr for none).
const KernelAlternative* find_kernel_alternative(const std::string& entry);
// The groups of switches (`--GROUP-all`), in the order of their first row.
std::vector<std::string> kernel_alternative_groups();
// Why `value` is no choice of option `row` (nullopt: it is one), as the bench reports it.
std::optional<std::string> kernel_choice_error(const KernelAlternative& row, const std::string& value);

// Sets a policy for as long as it lives, then puts the previous one back (tests).
class ScopedKernelPolicy {
 public:
  explicit ScopedKernelPolicy(const KernelPolicy& policy) : saved_(kernel_policy()) { set_kernel_policy(policy); }
  ~ScopedKernelPolicy() { set_kernel_policy(saved_); }
  ScopedKernelPolicy(const ScopedKernelPolicy&) = delete;
  ScopedKernelPolicy& operator=(const ScopedKernelPolicy&) = delete;

 private:
  KernelPolicy saved_;
};

}  // namespace roformer::model
