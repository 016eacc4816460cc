// The launcher of the ahead-of-time compiled Triton kernels; see triton_runtime.h. Images, argument
// lists and their signatures are plain C++ (built and tested everywhere); loading and launching need
// ROFORMER_WITH_TRITON_KERNELS (CMakeLists.txt, "Fused kernels"), which implies a CUDA LibTorch.
#include "kernels/triton_runtime.h"

#include <torch/torch.h>

#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>

#include "kernels/op_paths.h"

#ifdef ROFORMER_WITH_TRITON_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#endif

namespace roformer::kernels {

#ifndef ROFORMER_WITH_TRITON_KERNELS
std::vector<TritonImage> triton_images() { return {}; }  // the generated triton_images.cpp defines it otherwise
#endif

namespace {
const std::vector<TritonImage>& images() {
  static const std::vector<TritonImage> all = triton_images();
  return all;
}
}  // namespace

bool triton_kernels_built() { return !images().empty(); }

const TritonImage* find_triton_image(const std::string& kernel, const std::string& variant, int major, int minor) {
  // sm_90 cubins (Triton's sm_90a) run on 9.0 only; sm_80 cubins on every 8.x (same major, newer minor).
  const int arch = major == 9 && minor == 0 ? 90 : major == 8 ? 80 : 0;
  for (const auto& image : images())
    if (image.arch == arch && kernel == image.kernel && variant == image.variant) return &image;
  return nullptr;
}

std::optional<std::string> triton_device_unsupported(const torch::Tensor& x, const std::string& kernel,
                                                     const std::string& variant) {
  if (!x.is_cuda()) return "not a CUDA tensor";
  if (!triton_kernels_built()) return "this build has no fused kernels (ROFORMER_WITH_TRITON_KERNELS off)";
  const auto [major, minor] = device_capability(x.device());
  if (!find_triton_image(kernel, variant, major, minor))
    return "no compiled " + kernel + "/" + variant + " for sm_" + std::to_string(major) + std::to_string(minor);
  return std::nullopt;
}

bool aligned16(const torch::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

torch::Tensor contiguous_aligned(const torch::Tensor& t, const std::string& op, const std::string& name) {
  if (t.is_contiguous() && aligned16(t)) return t;
  if (!t.is_contiguous()) {
    auto c = t.contiguous();  // a new allocation: aligned (the allocators align far beyond 16 bytes)
    if (aligned16(c)) return c;
  }
  note_op_path_text(op, "triton, " + name + " copied to an aligned buffer (it came as a view at an unaligned offset)");
  auto copy = torch::empty(t.sizes(), t.options().memory_format(torch::MemoryFormat::Contiguous));
  copy.copy_(t);
  TORCH_CHECK(aligned16(copy), op, ": a fresh ", name, " buffer is not 16-byte aligned");
  return copy;
}

std::optional<std::string> divisibility_violation(const TritonImage& image, const KernelArgs& args) {
  const std::string flags = image.divisible16 ? image.divisible16 : "";
  for (size_t i = 0; i < flags.size() && i < args.size(); ++i) {
    if (flags[i] != '1') continue;
    const uint64_t bits = args.bits(i);
    const bool pointer = !args.type(i).empty() && args.type(i)[0] == '*';
    // An i32 sits in the slot's low 4 bytes (two's complement: divisibility reads the same there).
    const uint64_t value = args.type(i) == "i32" ? (bits & 0xffffffffu) : bits;
    if (value % 16 != 0)
      return "argument " + std::to_string(i) + " (" + args.type(i) + ") is " + std::to_string(value) +
             (pointer ? ", an address not 16-byte aligned" : ", not a multiple of 16") + ", which " + image.kernel +
             "/" + image.variant + " was compiled to assume";
  }
  return std::nullopt;
}

std::string triton_pointer_type(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kBFloat16: return "*bf16";
    case torch::kHalf: return "*fp16";
    case torch::kFloat: return "*fp32";
    case torch::kDouble: return "*fp64";
    case torch::kLong: return "*i64";
    case torch::kInt: return "*i32";
    case torch::kByte: return "*u8";
    case torch::kBool: return "*i1";
    default: TORCH_CHECK(false, "no Triton pointer type for ", dtype);
  }
}

KernelArgs& KernelArgs::tensor(const torch::Tensor& t) {
  const auto address = reinterpret_cast<uintptr_t>(t.data_ptr());
  values_.push_back(static_cast<uint64_t>(address));
  types_.push_back(triton_pointer_type(t.scalar_type()));
  return *this;
}

KernelArgs& KernelArgs::pointer(const void* p, const std::string& type) {
  TORCH_CHECK(!type.empty() && type[0] == '*', "pointer argument typed ", type);
  values_.push_back(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)));
  types_.push_back(type);
  return *this;
}

void KernelArgs::push(const void* bits, size_t size, const char* type) {
  uint64_t slot = 0;
  std::memcpy(&slot, bits, size);  // little-endian: a 4-byte value sits in the slot's first bytes
  values_.push_back(slot);
  types_.emplace_back(type);
}

KernelArgs& KernelArgs::i32(int64_t v) {
  TORCH_CHECK(v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max(),
              "kernel argument ", types_.size(), " (i32) out of range: ", v);
  const auto value = static_cast<int32_t>(v);
  push(&value, sizeof value, "i32");
  return *this;
}

KernelArgs& KernelArgs::i64(int64_t v) {
  push(&v, sizeof v, "i64");
  return *this;
}

KernelArgs& KernelArgs::f32(double v) {
  const auto value = static_cast<float>(v);  // the kernel's parameter is .f32: 4 bytes, not a double
  push(&value, sizeof value, "fp32");
  return *this;
}

std::string KernelArgs::signature() const {
  std::string out;
  for (const auto& t : types_) out += (out.empty() ? "" : ",") + t;
  return out;
}

std::vector<void*> KernelArgs::launch_params() {
  std::vector<void*> params;
  for (auto& v : values_) params.push_back(&v);
  params.push_back(&scratch_[0]);                  // global scratch (aot.py refuses kernels that need it)
  params.push_back(&scratch_[1]);                  // profile scratch
  return params;
}

#ifdef ROFORMER_WITH_TRITON_KERNELS
namespace {

// The driver functions used, resolved through the runtime: no link against libcuda.
struct Driver {
  decltype(&cuModuleLoadData) module_load_data = nullptr;
  decltype(&cuModuleGetFunction) module_get_function = nullptr;
  decltype(&cuFuncSetAttribute) func_set_attribute = nullptr;
  decltype(&cuLaunchKernel) launch_kernel = nullptr;
  decltype(&cuGetErrorString) get_error_string = nullptr;
  decltype(&cuCtxGetCurrent) ctx_get_current = nullptr;
  decltype(&cuCtxSetCurrent) ctx_set_current = nullptr;
  decltype(&cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&cuDeviceGet) device_get = nullptr;
};

template <class F>
void resolve(const char* name, F& fn) {
  void* address = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  // 12000: the functions' CUDA 12.0 ABI, unchanged since; any driver able to run this wheel has it.
  const auto err = cudaGetDriverEntryPointByVersion(name, &address, 12000, cudaEnableDefault, &found);
  TORCH_CHECK(err == cudaSuccess && found == cudaDriverEntryPointSuccess && address != nullptr,
              "the CUDA driver has no ", name, " (", cudaGetErrorString(err), "): the fused kernels need a driver for CUDA >= 12");
  fn = reinterpret_cast<F>(address);
}

const Driver& driver() {
  static const Driver d = [] {
    Driver d;
    resolve("cuModuleLoadData", d.module_load_data);
    resolve("cuModuleGetFunction", d.module_get_function);
    resolve("cuFuncSetAttribute", d.func_set_attribute);
    resolve("cuLaunchKernel", d.launch_kernel);
    resolve("cuGetErrorString", d.get_error_string);
    resolve("cuCtxGetCurrent", d.ctx_get_current);
    resolve("cuCtxSetCurrent", d.ctx_set_current);
    resolve("cuDevicePrimaryCtxRetain", d.primary_ctx_retain);
    resolve("cuDeviceGet", d.device_get);
    return d;
  }();
  return d;
}

void check(CUresult r, const char* what, const TritonImage& image) {
  if (r == CUDA_SUCCESS) return;
  const char* text = nullptr;
  driver().get_error_string(r, &text);
  TORCH_CHECK(false, what, " failed for Triton kernel ", image.kernel, "/", image.variant, " sm_", image.arch, ": ",
              text ? text : "unknown error", " (CUresult ", static_cast<int>(r), ")");
}

// The device's primary context (PyTorch's), retained once per device, made current on this thread
// where it is not: the autograd engine's device threads may not have made it current yet.
void make_primary_context_current(int device, const TritonImage& image) {
  static std::mutex mutex;
  static std::map<int, CUcontext> primary;
  CUcontext target = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = primary.find(device);
    if (it == primary.end()) {
      CUdevice handle = 0;
      check(driver().device_get(&handle, device), "cuDeviceGet", image);
      check(driver().primary_ctx_retain(&target, handle), "cuDevicePrimaryCtxRetain", image);
      primary[device] = target;
    } else {
      target = it->second;
    }
  }
  CUcontext current = nullptr;
  check(driver().ctx_get_current(&current), "cuCtxGetCurrent", image);
  if (current != target) check(driver().ctx_set_current(target), "cuCtxSetCurrent", image);
}

// The image loaded into `device`'s primary context, once per (device, image).
CUfunction function_for(const TritonImage& image, int device) {
  static std::mutex mutex;
  static std::map<std::pair<int, const TritonImage*>, CUfunction> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find({device, &image});
  if (it != loaded.end()) return it->second;
  // Loading a module is not a stream operation, but a capture in global mode refuses it: relaxed
  // for this thread while loading, so a first call inside a CUDA graph capture works.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  C10_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  make_primary_context_current(device, image);
  CUmodule module = nullptr;
  CUfunction fn = nullptr;
  check(driver().module_load_data(&module, image.cubin), "cuModuleLoadData", image);
  check(driver().module_get_function(&fn, module, image.entry), "cuModuleGetFunction", image);
  if (image.shared_bytes > 48 * 1024)
    check(driver().func_set_attribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, image.shared_bytes),
          "cuFuncSetAttribute", image);
  C10_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  loaded[{device, &image}] = fn;
  return fn;
}

}  // namespace

std::pair<int, int> device_capability(const torch::Device& device) {
  const auto* props = at::cuda::getDeviceProperties(device.index());
  return {props->major, props->minor};
}

int device_sm_count(const torch::Device& device) {
  return at::cuda::getDeviceProperties(device.index())->multiProcessorCount;
}

void launch_triton(const std::string& kernel, const std::string& variant, const torch::Device& device,
                   std::array<uint32_t, 3> grid, KernelArgs& args) {
  TORCH_CHECK(device.is_cuda() && device.has_index(), "launch_triton needs a CUDA device with an index, got ", device);
  const auto [major, minor] = device_capability(device);
  const TritonImage* image = find_triton_image(kernel, variant, major, minor);
  TORCH_CHECK(image != nullptr, "no compiled Triton kernel ", kernel, "/", variant, " for sm_", major, minor,
              " (this build has sm_90 and sm_80)");
  TORCH_CHECK(args.signature() == image->signature, "Triton kernel ", kernel, "/", variant, " takes (",
              image->signature, ") but was given (", args.signature(), "): src/kernels/triton and its C++ caller disagree");
  if (auto bad = divisibility_violation(*image, args))
    TORCH_CHECK(false, "Triton kernel ", kernel, "/", variant, " not launched: ", *bad,
                " (the op should have taken its ATen path or copied the tensor)");
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return;
  c10::cuda::CUDAGuard guard(device);
  CUfunction fn = function_for(*image, device.index());
  make_primary_context_current(device.index(), *image);
  auto params = args.launch_params();
  const auto stream = at::cuda::getCurrentCUDAStream(device.index()).stream();
  check(driver().launch_kernel(fn, grid[0], grid[1], grid[2], 32 * image->num_warps, 1, 1, image->shared_bytes, stream,
                               params.data(), nullptr),
        "cuLaunchKernel", *image);
}

#else  // no kernels in this build

std::pair<int, int> device_capability(const torch::Device&) {
  TORCH_CHECK(false, "device_capability needs a build with the fused kernels (ROFORMER_WITH_TRITON_KERNELS)");
}

int device_sm_count(const torch::Device&) {
  TORCH_CHECK(false, "device_sm_count needs a build with the fused kernels (ROFORMER_WITH_TRITON_KERNELS)");
}

void launch_triton(const std::string& kernel, const std::string& variant, const torch::Device&, std::array<uint32_t, 3>,
                   KernelArgs&) {
  TORCH_CHECK(false, "Triton kernel ", kernel, "/", variant, " requested, but this build has no fused kernels ",
              "(ROFORMER_WITH_TRITON_KERNELS off: see the CMake configure output)");
}

#endif

void no_triton_kernels(const char* what) {
  TORCH_CHECK(false, what, " needs the fused kernels, but this build has none (ROFORMER_WITH_TRITON_KERNELS off: see "
              "the CMake configure output)");
}

}  // namespace roformer::kernels
