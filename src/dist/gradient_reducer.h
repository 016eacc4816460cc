// Data-parallel gradient all-reduce that overlaps communication with backward (the scheme of
// PyTorch's DDP Reducer, reduced to what this trainer needs).
//
// Parameters are grouped into buckets of about bucket_mb megabytes in reverse registration order
// (backward produces the last layers' gradients first) and by dtype. A post-accumulate-grad hook on
// every parameter copies its gradient into its bucket's flat buffer; when every gradient of a
// bucket has arrived, and every earlier bucket has been started, the bucket's all-reduce starts
// while backward goes on. Buckets start in the same order on every rank, as c10d requires.
// finish() starts what backward did not (parameters that got no gradient in the last backward
// contribute their current .grad, or zeros), waits, and writes the sums back into .grad.
//
// The reducer SUMS, it never averages: the trainer divides each micro-batch's loss by the predicted
// tokens of the whole step summed over every rank and micro-batch (all-reduced before backward), so
// the sum over ranks of the accumulated gradients is exactly the gradient a single process would get
// with the same global batch. Gradient accumulation: set_sync(false) before the backward of every
// micro-batch but the last of a step (gradients accumulate locally in .grad, no communication, like
// DDP's no_sync), set_sync(true) before the last one, then finish(). After finish() every rank holds
// the same gradients, so clipping by their norm clips by the global norm.
//
// Each parameter has one post-accumulate-grad slot in LibTorch; the reducer takes it for its
// lifetime and clears it in its destructor.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "dist/process_group.h"

namespace roformer::dist {

struct GradientReducerOptions {
  double bucket_mb = 25.0;  // bucket capacity in MiB (a parameter larger than that gets a bucket of its own)
};

class GradientReducer {
 public:
  GradientReducer(ProcessGroup& group, std::vector<torch::Tensor> parameters,
                  const GradientReducerOptions& options = {});
  ~GradientReducer();  // removes the hooks; waits for nothing (call finish() first)
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Whether the next backward communicates (true by default). false = accumulate locally only.
  void set_sync(bool sync);
  bool sync() const { return sync_; }
  // After the last backward of a step (with sync on): completes the all-reduce; .grad then holds
  // the sum over ranks. Throws roformer::Error (naming the failed rank) when a peer stopped. With
  // sync off it does nothing.
  void finish();

  int64_t num_buckets() const { return static_cast<int64_t>(buckets_.size()); }
  // Indices into the constructor's parameter list, bucket by bucket, in launch order.
  std::vector<std::vector<int64_t>> bucket_parameters() const;
  // Buckets of the last finish() whose all-reduce started during backward (the overlapped ones).
  int64_t buckets_started_in_backward() const { return started_in_backward_; }

 private:
  struct Bucket {
    std::vector<int64_t> params;  // indices into params_
    std::vector<int64_t> offsets; // element offset of each in flat
    int64_t numel = 0;            // elements of all its parameters
    torch::Tensor flat;           // (numel,) the gradients, then their sum over ranks
    int64_t pending = 0;          // gradients still to arrive in this backward
    c10::intrusive_ptr<c10d::Work> work;
  };
  struct Slot {
    int64_t bucket = 0;
    int64_t index = 0;  // position within the bucket
    bool ready = false;
  };

  void on_grad_ready(int64_t param);    // the hook
  void copy_in(int64_t param);          // .grad (or zeros) -> its bucket slice
  void start_ready_buckets(bool in_backward);  // in order, every bucket whose gradients are all in
  void reset();

  ProcessGroup& group_;
  std::vector<torch::Tensor> params_;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  std::mutex mu_;  // hooks may run on autograd's device threads
  bool sync_ = true;
  int64_t next_start_ = 0;  // buckets start strictly in index order
  int64_t started_in_backward_ = 0;
  int64_t started_now_in_backward_ = 0;
};

// The reducer a training run needs: none for a world of one (there is nothing to sum, and the
// bucket copies would cost a pass over the gradients), else a GradientReducer; also for a world of
// one whose group has its backend (ProcessGroupOptions::one_rank_backend: the tests' NCCL path).
std::unique_ptr<GradientReducer> make_gradient_reducer(ProcessGroup& group, std::vector<torch::Tensor> parameters,
                                                       const GradientReducerOptions& options);

}  // namespace roformer::dist
