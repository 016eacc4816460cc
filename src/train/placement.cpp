// The device and process group of a training process; see train/placement.h.
#include "train/placement.h"

#include <torch/cuda.h>
#include <torch/utils.h>

#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/device.h"
#include "core/error.h"
#include "dist/process_group.h"
#include "train/memory_check.h"

namespace roformer::train {

void validate_placement(const config::Config& c) {
  const auto& dev = c.train.device;
  if (!(dev == "auto" || dev == "cpu" || dev == "cuda" || dev.rfind("cuda:", 0) == 0))
    config::invalid(fmt::format("train.device = '{}': use auto, cpu, cuda or cuda:N", dev));
  if (dev == "cpu" && c.train.precision == config::Precision::kFp16)
    config::invalid("train.precision fp16 needs CUDA; use fp32 or bf16 with train.device: cpu");
  if (c.train.param_dtype == config::ParamDtype::kBf16 && c.train.precision != config::Precision::kBf16)
    config::invalid(fmt::format("train.param_dtype bf16 computes in bf16 and needs train.precision: bf16 (it is {}); "
                                "set train.precision: bf16, or train.param_dtype: fp32",
                                config::to_string(c.train.precision)));
  if (c.train.fp8 != config::Fp8::kOff && c.train.precision != config::Precision::kBf16)
    config::invalid(fmt::format("train.fp8 {} computes the encoder's GEMMs in FP8 and the rest in bf16 and needs "
                                "train.precision: bf16 (it is {}); set train.precision: bf16, or train.fp8: off",
                                config::to_string(c.train.fp8), config::to_string(c.train.precision)));
  if (c.train.run_dir.empty()) config::invalid("train.run_dir must not be empty");
  if (c.distributed.backend == "nccl" && dev == "cpu")
    config::invalid("distributed.backend nccl needs CUDA but train.device is cpu; use distributed.backend: gloo (or "
                    "auto)");
  if (c.distributed.backend == "gloo" && dev.rfind("cuda", 0) == 0)
    config::invalid(fmt::format("distributed.backend gloo is for CPU training but train.device is {}; use "
                                "distributed.backend: nccl (or auto)", dev));
}

Placement::Placement(config::Config& cfg, const dist::DistEnv& env, bool one_rank_backend) : env_(env) {
  device_ = core::resolve_device(cfg.train.device, "train.device");
  config::resolve_param_dtype(cfg, device_.is_cuda());  // before config.yaml is written
  if (env.distributed() && device_.is_cuda()) {  // each rank drives the GPU of its LOCAL_RANK
    const auto visible = static_cast<int>(torch::cuda::device_count());
    if (env.local_rank >= visible)
      throw Error(fmt::format("LOCAL_RANK is {} but this node has {} visible CUDA device(s): start at most {} "
                              "process(es) per node (torchrun --nproc-per-node)", env.local_rank, visible, visible));
    device_ = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
  }
  core::use_device(device_);
  dist::ProcessGroupOptions o;
  o.backend = cfg.distributed.backend;
  o.timeout = std::chrono::seconds(cfg.distributed.timeout_s);
  o.one_rank_backend = one_rank_backend;
  group_ = std::make_unique<dist::ProcessGroup>(env, device_, o);  // world of one: no store, identity collectives
  if (env.distributed())
    spdlog::info("data-parallel run: {} processes (launched by {}), {} backend, rendezvous {}:{}; this is rank 0 on {}",
                 env.world_size, env.launcher, group_->backend(), env.master_addr, env.master_port, device_.str());
  if (cfg.train.precision == config::Precision::kFp16 && !device_.is_cuda())
    throw Error("train.precision fp16 needs CUDA; use fp32 or bf16 on the CPU");
  if (cfg.train.num_threads > 0) torch::set_num_threads(static_cast<int>(cfg.train.num_threads));
  // Before the data and the model are built; the vocabulary is the configured one until the tokenizer is loaded.
  check_training_memory(cfg, cfg.model.vocab_size > 0 ? cfg.model.vocab_size : cfg.tokenizer.vocab_size,
                        core::device_memory_bytes(device_), device_.str());
}

Placement::~Placement() = default;

}  // namespace roformer::train
