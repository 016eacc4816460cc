// StepGraphs; see step_graphs.h. The CUDA part is compiled where CMake found a CUDA LibTorch
// (ROFORMER_WITH_CUDA); elsewhere supported() is false and the step never constructs one.
#include "train/step_graphs.h"

#include <spdlog/spdlog.h>

#include <map>
#include <tuple>
#include <utility>

#include "core/error.h"

#ifdef ROFORMER_WITH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace roformer::train {

#ifdef ROFORMER_WITH_CUDA

namespace {

using Graph = std::unique_ptr<at::cuda::CUDAGraph>;

// Runs fn with `side` as the current stream, ordered after the work queued so far on the current
// stream and before what is queued on it afterwards.
void on_stream(c10::cuda::CUDAStream side, const std::function<void()>& fn) {
  const auto current = c10::cuda::getCurrentCUDAStream();
  c10::cuda::CUDAEvent ready, done;
  ready.record(current);
  ready.block(side);
  {
    c10::cuda::CUDAStreamGuard guard(side);
    fn();
  }
  done.record(side);
  done.block(current);
}

// Captures fn on `side` into a graph drawing on `pool` (fn's kernels are recorded, not run).
// Thread-local capture mode: the data loader's threads may use CUDA meanwhile (pinned memory).
Graph capture(c10::cuda::CUDAStream side, at::cuda::MempoolId_t pool, const std::function<void()>& fn) {
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  on_stream(side, [&] {
    graph->capture_begin(pool, cudaStreamCaptureModeThreadLocal);
    try {
      fn();
    } catch (...) {
      try {
        graph->capture_end();
      } catch (...) {  // the capture is already invalid; the first error is the one to report
      }
      throw;
    }
    graph->capture_end();
  });
  return graph;
}

MicroInputs device_buffers(const MicroInputs& host, const c10::Device& device) {
  auto like = [&](const torch::Tensor& t) {
    return t.defined() ? torch::empty(t.sizes(), t.options().device(device)) : torch::Tensor();
  };
  return {like(host.ids), like(host.mask), like(host.positions), like(host.labels)};
}

void copy_into(const MicroInputs& buffers, const MicroInputs& host) {
  buffers.ids.copy_(host.ids, /*non_blocking=*/true);
  if (host.mask.defined()) buffers.mask.copy_(host.mask, true);
  buffers.positions.copy_(host.positions, true);
  buffers.labels.copy_(host.labels, true);
}

}  // namespace

struct StepGraphs::Impl {
  struct Micro {
    MicroInputs buffers;
    Graph graph;  // null until the second micro-batch of this shape
  };
  using Shape = std::tuple<int64_t, int64_t, int64_t, bool, int64_t>;  // B, T, P, padded, step's P

  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
  at::cuda::MempoolId_t pool = at::cuda::graph_pool_handle();
  std::map<Shape, Micro> micro;
  bool warned_shapes = false;
  bool update_warm = false;
  Graph update;
  int64_t captured = 0, replayed = 0;

  void replay(at::cuda::CUDAGraph& graph) {
    graph.replay();
    ++replayed;
  }
};

bool StepGraphs::supported() { return true; }

StepGraphs::StepGraphs() : impl_(std::make_unique<Impl>()) {}

void StepGraphs::micro(const MicroInputs& host, int64_t step_n_pred,
                       const std::function<void(const MicroInputs&)>& region) {
  const Impl::Shape shape{host.ids.size(0), host.ids.size(1), host.positions.numel(), host.mask.defined(), step_n_pred};
  auto it = impl_->micro.find(shape);
  if (it == impl_->micro.end()) {
    MicroInputs buffers = device_buffers(host, c10::Device(c10::kCUDA, c10::cuda::current_device()));
    copy_into(buffers, host);
    if (static_cast<int>(impl_->micro.size()) >= kMaxShapes) {  // too many shapes: eager, as without graphs
      if (!impl_->warned_shapes)
        spdlog::info("CUDA graphs: more than {} batch shapes; further shapes run eagerly", kMaxShapes);
      impl_->warned_shapes = true;
      region(buffers);
      return;
    }
    auto& m = impl_->micro.emplace(shape, Impl::Micro{std::move(buffers), nullptr}).first->second;
    on_stream(impl_->side, [&] { region(m.buffers); });  // warm-up, eagerly
    return;
  }
  auto& m = it->second;
  copy_into(m.buffers, host);
  if (!m.graph) {
    m.graph = capture(impl_->side, impl_->pool, [&] { region(m.buffers); });
    ++impl_->captured;
  }
  impl_->replay(*m.graph);
}

void StepGraphs::update(const std::function<void()>& region) {
  if (!impl_->update_warm) {  // AdamW creates its state on its first update: never inside a capture
    impl_->update_warm = true;
    on_stream(impl_->side, region);
    return;
  }
  if (!impl_->update) {
    impl_->update = capture(impl_->side, impl_->pool, region);
    ++impl_->captured;
  }
  impl_->replay(*impl_->update);
}

#else  // a CPU-only LibTorch

struct StepGraphs::Impl {
  int64_t captured = 0, replayed = 0;
};

bool StepGraphs::supported() { return false; }

StepGraphs::StepGraphs() { throw Error("this build has no CUDA support (CMake found a CPU-only LibTorch): no CUDA graphs"); }

void StepGraphs::micro(const MicroInputs&, int64_t, const std::function<void(const MicroInputs&)>&) {}
void StepGraphs::update(const std::function<void()>&) {}

#endif

StepGraphs::~StepGraphs() = default;

int64_t StepGraphs::captured() const { return impl_->captured; }
int64_t StepGraphs::replayed() const { return impl_->replayed; }

}  // namespace roformer::train
