// The device script's rows; see variants.h.
#include "bench/variants.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "model/kernel_policy.h"

namespace roformer::bench {

namespace {

// The config's levers the device script measures beside the kernel alternatives (name, arguments).
const std::vector<BenchVariant> kStepLevers = {
    {"all, eager (no CUDA graphs)", "--set train.cuda_graph=false"},
    {"all, autocast (fp32 parameters)", "--set train.param_dtype=fp32"},
    {"all, autocast, eager", "--set train.param_dtype=fp32 --set train.cuda_graph=false"},
    {"all, 2x batch", "--set train.batch_size={batch2}"},
    {"all, 4x batch", "--set train.batch_size={batch4}"},
    {"position absolute (BERT's learned table; no rotary)", "--set model.position=absolute"},
    {"position disentangled (DeBERTa c2p+p2c, 256 buckets)", "--set model.position=disentangled"},
    {"position disentangled + enhanced mask decoder",
     "--set model.position=disentangled --set model.enhanced_mask_decoder=true"}};
// Config levers waiting for a device (issue 51: FP8), measured by the kernels call at 512 and 128
// right after the kernel alternatives that wait for one.
const std::vector<BenchVariant> kPendingLevers = {
    {"FP8 linear layers (train.fp8 dynamic: _scaled_mm, per-tensor dynamic scaling)", "--set train.fp8=dynamic"}};
// Issue 39's model levers (docs/recipe.md predicts their GPU savings from the profile); the last is all three.
const std::vector<BenchVariant> kModelLevers = {
    {"no biases (model.bias false)", "--set model.bias=false"},
    {"tanh GELU", "--set model.hidden_act=gelu_tanh"},
    {"no dropout", "--set model.hidden_dropout=0 --set model.attention_dropout=0"},
    {"no biases, tanh GELU, no dropout",
     "--set model.bias=false --set model.hidden_act=gelu_tanh --set model.hidden_dropout=0 --set "
     "model.attention_dropout=0"}};

std::string joined(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() || p.empty() ? "" : separator) + p;
  return out;
}

// The CUDA fast paths on by default: the reference (all off), each alone, the default (all on).
std::vector<BenchVariant> fast_path_variants() {
  std::vector<const model::KernelAlternative*> fast;
  for (const auto& row : model::kernel_alternatives())
    if (*row.fast_path) fast.push_back(&row);
  auto reference_args = [&](const model::KernelAlternative* except) {
    std::vector<std::string> args;
    for (const auto* row : fast)
      if (row != except) args.push_back(row->reference_args);
    return joined(args, " ");
  };
  std::vector<std::string> references, fast_paths;
  for (const auto* row : fast) references.push_back(row->reference), fast_paths.push_back(row->fast_path);
  std::vector<BenchVariant> out = {{"reference (" + joined(references, ", ") + ")", reference_args(nullptr)}};
  for (const auto* row : fast) out.push_back({std::string(row->fast_path) + " only", reference_args(row)});
  out.push_back({"default (" + joined(fast_paths, ", ") + "; bf16 parameters + fp32 masters, CUDA graphs)", ""});
  return out;
}

// The alternatives off by default that have a row: those of no group, or each of a group's and then
// the group together (--GROUP-all).
std::vector<BenchVariant> alternative_variants(bool grouped) {
  std::vector<BenchVariant> out;
  for (const auto& row : model::kernel_alternatives())
    if (*row.variant && (*row.group != '\0') == grouped)
      out.push_back({row.variant, *row.variant_args ? row.variant_args : row.flag});
  if (grouped)
    for (const auto& group : model::kernel_alternative_groups())
      out.push_back({"all + every " + group + " op", "--" + group + "-all"});
  return out;
}

// The alternatives waiting for a device (KernelAlternative::device_pending): a switch's row, an
// option's rows for each choice but its default.
std::vector<BenchVariant> pending_variants() {
  std::vector<BenchVariant> out;
  for (const auto& row : model::kernel_alternatives()) {
    if (!row.device_pending) continue;
    if (row.choices.empty()) out.push_back({row.variant, *row.variant_args ? row.variant_args : row.flag});
    for (size_t i = 1; i < row.choices.size(); ++i)
      out.push_back({std::string(row.entry) + " " + row.choices[i], std::string(row.flag) + " " + row.choices[i]});
  }
  return out;
}

// gpu_check.sh kernels: the default and every group together at both lengths first, then what waits
// for a device (issue 51: the kernel alternatives, then the FP8 lever) at 512 with the tanh GELU lever beside it (the GEMM
// epilogues' reference) and at 128, the model levers together, each grouped alternative at both
// lengths, and each other lever alone.
std::vector<BenchVariant> kernels_call_variants() {
  std::vector<BenchVariant> out;
  for (const int64_t seq : {512, 128}) {
    out.push_back({"default", "", seq});
    for (const auto& group : model::kernel_alternative_groups()) out.push_back({"all " + group, "--" + group + "-all", seq});
  }
  auto pending = pending_variants();
  pending.insert(pending.end(), kPendingLevers.begin(), kPendingLevers.end());
  const BenchVariant tanh_gelu = *std::find_if(kModelLevers.begin(), kModelLevers.end(), [](const BenchVariant& v) {
    return v.args == "--set model.hidden_act=gelu_tanh";
  });
  for (const auto& v : pending) out.push_back({v.name, v.args, 512});
  if (!pending.empty()) out.push_back({tanh_gelu.name, tanh_gelu.args, 512});
  for (const auto& v : pending) out.push_back({v.name, v.args, 128});
  out.push_back({kModelLevers.back().name, kModelLevers.back().args, 512});
  for (const int64_t seq : {512, 128})
    for (const auto& row : model::kernel_alternatives())
      if (*row.group) out.push_back({row.variant, row.flag, seq});
  for (size_t i = 0; i + 1 < kModelLevers.size(); ++i)
    if (pending.empty() || kModelLevers[i].name != tanh_gelu.name)
      out.push_back({kModelLevers[i].name, kModelLevers[i].args, 512});
  return out;
}

}  // namespace

std::vector<BenchVariant> bench_variants(const std::string& set) {
  if (set == "kernels") return kernels_call_variants();
  if (set != "all") throw Error(fmt::format("--list-variants takes all or kernels, got '{}'", set));
  std::vector<BenchVariant> out = fast_path_variants();
  for (const auto& part : {alternative_variants(false), kStepLevers, kPendingLevers, alternative_variants(true), kModelLevers})
    out.insert(out.end(), part.begin(), part.end());
  return out;
}

std::string variant_lines(const std::string& set) {
  std::string out;
  for (const auto& v : bench_variants(set))
    out += (v.seq ? std::to_string(v.seq) + "|" : "") + v.name + "|" + v.args + "\n";
  return out;
}

}  // namespace roformer::bench
