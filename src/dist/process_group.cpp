// Rendezvous, backends and failure diagnosis (see process_group.h). This file alone includes
// ProcessGroupGloo.hpp (compiled with USE_C10D_GLOO; CMake points it at Gloo declarations).
#include "dist/process_group.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "core/error.h"

namespace roformer::dist {

namespace {

std::string first_line(const std::string& text) {
  const auto end = text.find('\n');
  std::string line = end == std::string::npos ? text : text.substr(0, end);
  return line.size() > 400 ? line.substr(0, 400) + "..." : line;
}

bool is_loopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::string seconds(std::chrono::milliseconds ms) {
  const double s = static_cast<double>(ms.count()) / 1000.0;
  std::string text = std::to_string(s);
  text.erase(text.find_last_not_of('0') + 1);
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text + " s";
}

}  // namespace

std::string format_ranks(const std::vector<int>& ranks) {
  std::string out;
  for (const int r : ranks) out += (out.empty() ? "" : ", ") + std::to_string(r);
  return out;
}

ProcessGroup::ProcessGroup(const DistEnv& env, torch::Device device, const ProcessGroupOptions& options)
    : env_(env), device_(device), options_(options) {
  if (env_.world_size < 1 || env_.rank < 0 || env_.rank >= env_.world_size)
    throw Error("invalid distributed environment: rank " + std::to_string(env_.rank) + " of world size " +
                std::to_string(env_.world_size));
  if (options_.timeout.count() <= 0) throw Error("the collective timeout must be positive");
  if (env_.world_size == 1 && !options_.one_rank_backend) return;  // a world of one: every collective is the identity

  std::string backend = options_.backend;
  if (backend == "auto") backend = device_.is_cuda() ? "nccl" : "gloo";
  if (backend != "gloo" && backend != "nccl")
    throw Error("distributed backend must be auto, gloo or nccl, got " + options_.backend);
  if (backend == "nccl" && !device_.is_cuda())
    throw Error("the nccl backend needs a CUDA device; use gloo (or backend auto) to train on CPU");
  if (backend == "gloo" && !device_.is_cpu())
    throw Error("the gloo backend is used here for CPU tensors only; use nccl (or backend auto) on CUDA");

  if (env_.world_size == 1) {
    store_ = c10::make_intrusive<c10d::HashStore>();  // one_rank_backend: nobody to meet
  } else {
    start_store();
  }
  start_backend(backend);
}

void ProcessGroup::start_store() {
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(env_.master_port);
  store_options.isServer = env_.rank == 0;
  store_options.numWorkers = static_cast<std::size_t>(env_.world_size);
  store_options.waitWorkers = true;
  store_options.timeout = options_.timeout;
  try {
    store_ = c10::make_intrusive<c10d::TCPStore>(env_.master_addr, store_options);
  } catch (const std::exception& e) {
    throw Error("rank " + std::to_string(env_.rank) + ": rendezvous at " + env_.master_addr + ":" +
                std::to_string(env_.master_port) + " failed within " + seconds(options_.timeout) + ": " +
                first_line(e.what()) +
                " ---> HINT: every rank must reach MASTER_ADDR:MASTER_PORT (rank 0 serves it; the port must be free "
                "there) and all WORLD_SIZE ranks must start");
  }
}

void ProcessGroup::start_backend(const std::string& backend) {
  try {
    if (backend == "gloo") {
      auto gloo_options = c10d::ProcessGroupGloo::Options::create(options_.timeout);
      // Gloo binds one address for its peer connections: GLOO_SOCKET_IFNAME names an interface;
      // otherwise loopback for a loopback rendezvous (one machine), else the address of this
      // machine's hostname.
      const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
      if (ifname != nullptr && *ifname != '\0')
        gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      else if (env_.world_size == 1 || is_loopback(env_.master_addr))  // one rank: no peer to reach
        gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      else
        gloo_options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      gloo_options->threads = 2;
      backend_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, env_.rank, env_.world_size, gloo_options);
    } else {
      backend_ = make_nccl_backend(store_, env_.rank, env_.world_size, options_.timeout, device_.index());
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error("rank " + std::to_string(env_.rank) + ": creating the " + backend + " process group failed: " +
                first_line(e.what()));
  }
  backend_name_ = backend;
}

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::fail(const std::string& what, const std::string& cause) {
  failed_ = true;
  throw Error("rank " + std::to_string(env_.rank) + ": distributed " + what + " failed: " + diagnose_peers() +
              ". Backend error: " + first_line(cause) +
              " ---> HINT: read the log of the rank named above; the last complete checkpoint is intact, resume "
              "from it once every rank can run");
}

std::string ProcessGroup::diagnose_peers() {
  // Every survivor checks in; whoever has not checked in after failure_grace is named. The store is
  // served by rank 0, so a store that cannot be reached means rank 0 stopped.
  const int W = env_.world_size;
  std::vector<bool> seen(static_cast<size_t>(W), false);
  seen[static_cast<size_t>(env_.rank)] = true;
  auto key = [](int r) { return "roformer/dist/failed/" + std::to_string(r); };
  auto missing = [&] {
    std::vector<int> out;
    for (int r = 0; r < W; ++r)
      if (!seen[static_cast<size_t>(r)]) out.push_back(r);
    return out;
  };
  try {
    store_->setTimeout(options_.failure_grace);
    store_->add(key(env_.rank), 1);
    const auto deadline = std::chrono::steady_clock::now() + options_.failure_grace;
    for (;;) {
      for (int r = 0; r < W; ++r)
        if (!seen[static_cast<size_t>(r)] && store_->check({key(r)})) seen[static_cast<size_t>(r)] = true;
      if (missing().empty() || std::chrono::steady_clock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const std::exception&) {
    if (env_.rank != 0 && !seen[0])
      return "rank 0 stopped responding (the rendezvous store it serves at " + env_.master_addr + ":" +
             std::to_string(env_.master_port) + " is unreachable: it died or its host went down)";
  }
  const auto stopped = missing();
  if (stopped.empty())
    return "every rank is still alive, so the collective itself failed (mismatched collectives or tensor shapes "
           "across ranks?)";
  return std::string(stopped.size() == 1 ? "rank " : "ranks ") + format_ranks(stopped) +
         " stopped responding (it died or hung; no check-in within " + seconds(options_.failure_grace) +
         " after the failure, collective timeout " + seconds(options_.timeout) + ")";
}

void ProcessGroup::wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) {
  if (!work) return;
  bool done = false;
  try {
    // NCCL: wait() without a timeout only makes the current stream wait for the collective's
    // stream, so the host runs on (with a timeout it would block and poll this thread until the
    // collective finishes: a host sync per all-reduce). The backend's watchdog enforces
    // distributed.timeout_s instead (Options::timeout). Gloo completes on the host: bounded here.
    done = backend_name_ == "nccl" ? work->wait() : work->wait(options_.timeout);
  } catch (const std::exception& e) {
    fail(what, e.what());
  }
  if (!done) fail(what, "no completion within the collective timeout of " + seconds(options_.timeout));
}

c10::intrusive_ptr<c10d::Work> ProcessGroup::all_reduce_sum_async(torch::Tensor& tensor) {
  if (!backend_) return {};
  TORCH_CHECK(!failed_, "the process group failed earlier; it cannot run collectives");
  TORCH_CHECK(tensor.device() == device_, "all_reduce tensor on ", tensor.device(), ", process group on ", device_);
  std::vector<torch::Tensor> tensors{tensor};
  c10d::AllreduceOptions opts;
  opts.reduceOp = c10d::ReduceOp::SUM;
  opts.timeout = options_.timeout;
  try {
    return backend_->allreduce(tensors, opts);
  } catch (const std::exception& e) {
    fail("all_reduce", e.what());
  }
}

void ProcessGroup::all_reduce_sum(std::vector<torch::Tensor>& tensors, const std::string& what) {
  if (!backend_) return;
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (auto& t : tensors) works.push_back(all_reduce_sum_async(t));
  for (auto& w : works) wait(w, what);
}

void ProcessGroup::all_reduce_sum(torch::Tensor& tensor, const std::string& what) {
  if (!backend_) return;
  wait(all_reduce_sum_async(tensor), what);
}

void ProcessGroup::broadcast(std::vector<torch::Tensor>& tensors, int root, const std::string& what) {
  if (root < 0 || root >= env_.world_size) throw Error("broadcast root " + std::to_string(root) + " is not a rank");
  if (!backend_) return;
  TORCH_CHECK(!failed_, "the process group failed earlier; it cannot run collectives");
  for (auto& t : tensors) {
    TORCH_CHECK(t.device() == device_, "broadcast tensor on ", t.device(), ", process group on ", device_);
    std::vector<torch::Tensor> one{t};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    opts.timeout = options_.timeout;
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = backend_->broadcast(one, opts);
    } catch (const std::exception& e) {
      fail(what, e.what());
    }
    wait(work, what);
  }
}

void ProcessGroup::barrier(const std::string& what) {
  if (!backend_) return;
  // An all-reduce of one element on the group's device: the same code path for gloo and nccl (NCCL's
  // barrier would need the device ids) and bounded by the same timeout.
  auto token = torch::ones({1}, torch::TensorOptions().dtype(torch::kFloat32).device(device_));
  all_reduce_sum(token, what);
  TORCH_CHECK(token.item<float>() == static_cast<float>(env_.world_size), "barrier counted ", token.item<float>(),
              " ranks, expected ", env_.world_size);
}

std::vector<double> ProcessGroup::all_gather(double value, const std::string& what) {
  if (!backend_) return {value};
  // Each rank writes its value into its own slot of a zero vector; the sum is the gathered vector.
  auto slots = torch::zeros({env_.world_size}, torch::TensorOptions().dtype(torch::kFloat64).device(device_));
  slots[env_.rank] = value;
  all_reduce_sum(slots, what);
  auto cpu = slots.cpu();
  return std::vector<double>(cpu.data_ptr<double>(), cpu.data_ptr<double>() + env_.world_size);
}

}  // namespace roformer::dist
