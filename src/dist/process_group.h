// The collectives a data-parallel run needs, over c10d: rendezvous through a c10d::TCPStore served by
// rank 0 (MASTER_ADDR:MASTER_PORT), then ProcessGroupNCCL for CUDA tensors or ProcessGroupGloo for
// CPU tensors.
//
// Every blocking call is bounded by ProcessGroupOptions::timeout. When a collective fails (a peer
// closed its connections because it died, or nothing arrived within the timeout) the call throws
// roformer::Error naming the rank that stopped: the surviving ranks check in under a key of the
// store and the ranks that do not check in within failure_grace are named; when the store itself is
// gone, rank 0 (its host) is the one that died. A world of one process needs no store and no
// backend: every collective is then the identity, so callers need no `if (distributed)`. For the
// tests, ProcessGroupOptions::one_rank_backend gives a world of one its backend all the same (an
// in-process store, no rendezvous): the NCCL path then runs on a machine with one GPU.
#pragma once

#include <torch/types.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "dist/env.h"

namespace roformer::dist {

struct ProcessGroupOptions {
  std::string backend = "auto";  // auto (nccl for a CUDA device, gloo for CPU) | gloo | nccl
  std::chrono::milliseconds timeout{std::chrono::minutes(10)};  // rendezvous and every collective
  std::chrono::milliseconds failure_grace{std::chrono::seconds(3)};  // wait for survivors' check-in
  // Tests: a world of one builds its backend anyway and every collective goes through it (a sum over
  // one rank), so NCCL and the gradient reducer's overlap run where only one GPU is lent.
  bool one_rank_backend = false;
};

class ProcessGroup {
 public:
  // Collective over env.world_size processes; tensors passed in must live on `device` (CPU for
  // gloo, the rank's CUDA device for nccl). Blocks until every rank has joined (bounded by timeout).
  ProcessGroup(const DistEnv& env, torch::Device device, const ProcessGroupOptions& options = {});
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return env_.rank; }
  int world_size() const { return env_.world_size; }
  bool is_main() const { return env_.rank == 0; }
  const std::string& backend() const { return backend_name_; }  // "local" for a world of one
  // Whether collectives go through a backend: a world of more than one, or one_rank_backend.
  bool communicates() const { return static_cast<bool>(backend_); }
  torch::Device device() const { return device_; }

  // In-place sum over ranks, blocking. `what` names the operation in error messages.
  void all_reduce_sum(std::vector<torch::Tensor>& tensors, const std::string& what = "all_reduce");
  void all_reduce_sum(torch::Tensor& tensor, const std::string& what = "all_reduce");
  // In-place sum started now; finish it with wait(). Returns null for a world of one.
  c10::intrusive_ptr<c10d::Work> all_reduce_sum_async(torch::Tensor& tensor);
  // Waits for `work`; throws roformer::Error naming the failed rank. Gloo: the host blocks, bounded
  // by the timeout. NCCL: the current stream waits (the host does not), and NCCL's watchdog aborts a
  // collective that outlives the timeout.
  void wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what);

  // In-place: every rank receives root's values.
  void broadcast(std::vector<torch::Tensor>& tensors, int root, const std::string& what = "broadcast");
  // Returns once every rank has called it.
  void barrier(const std::string& what = "barrier");
  // value of every rank, indexed by rank.
  std::vector<double> all_gather(double value, const std::string& what = "all_gather");

 private:
  void start_store();                              // the TCPStore rendezvous (rank 0 serves it)
  void start_backend(const std::string& backend);  // gloo or nccl over store_
  [[noreturn]] void fail(const std::string& what, const std::string& cause);
  std::string diagnose_peers();  // which ranks stopped, from the survivors' check-in in the store

  DistEnv env_;
  torch::Device device_;
  ProcessGroupOptions options_;
  std::string backend_name_ = "local";
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> backend_;
  bool failed_ = false;  // a collective failed: the backend is unusable
};

// "1, 3": ranks as they appear in messages.
std::string format_ranks(const std::vector<int>& ranks);

// Implemented in nccl_backend.cpp; throws roformer::Error when this build has no NCCL support.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                    std::chrono::milliseconds timeout, int device_index);
bool nccl_available();

}  // namespace roformer::dist
