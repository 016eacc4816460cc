// The launcher of the fused kernels compiled ahead of time from Triton (issue 38).
//
// At build time src/kernels/triton/aot.py compiles each kernel variant of src/kernels/triton/*.py
// for sm_90 and sm_80 into cubins, which the generated triton_images.cpp links into the library
// with a record each (TritonImage). At run time a kernel is found by (kernel, variant, the device's
// architecture), loaded once per device into the current context with the CUDA driver API, and
// launched on the current stream. The driver API is resolved through the CUDA runtime
// (cudaGetDriverEntryPointByVersion), so nothing links libcuda and a machine without a driver still
// starts. Loading switches the thread to relaxed capture mode, so even a first call inside a CUDA
// graph capture is safe; launches themselves are captured like any kernel.
//
// Where the kernels were not built (ROFORMER_WITH_TRITON_KERNELS off: no CUDA LibTorch, or a Python
// whose triton cannot compile them; CMake says which at configure), triton_images() is empty and
// every fused op runs its ATen path.
#pragma once

#include <torch/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace roformer::kernels {

// One compiled kernel variant for one GPU architecture.
struct TritonImage {
  const char* kernel;     // the Triton function, e.g. "residual_dropout_layer_norm_fwd"
  const char* variant;    // its specialization, e.g. "bf16_1024" (storage dtype, block width)
  int arch;               // compute capability x 10: 90 (H100/H200), 80 (A100; also runs on 8.6/8.9)
  int num_warps;          // a program is 32 * num_warps threads
  int shared_bytes;       // dynamic shared memory per program
  const char* entry;      // the cubin's entry point
  const char* signature;  // the runtime parameters' types in order, e.g. "*bf16,*fp32,i64,i32,fp32"
  const unsigned char* cubin;
  size_t cubin_size;
  // One character per runtime parameter: '1' where the kernel was compiled assuming it 16-byte
  // aligned (a pointer) or a multiple of 16 (an integer; aot.py's ":16"), '0' elsewhere.
  const char* divisible16;
};

// Every image linked into this build; empty without ROFORMER_WITH_TRITON_KERNELS.
std::vector<TritonImage> triton_images();
// True when this build holds the compiled kernels.
bool triton_kernels_built();
// The image for a device of compute capability major.minor: sm_90 for 9.0, sm_80 for 8.x; nullptr
// for any other, or when kernel/variant was not compiled.
const TritonImage* find_triton_image(const std::string& kernel, const std::string& variant, int major, int minor);

// The typed arguments of the generated launchers (build/kernels/triton_launchers.h, which aot.py
// writes from each kernel's parameters: triton::<kernel>::args(...)), so that a call with another
// number or kind of arguments than the kernel takes does not compile. A pointer is a tensor (its
// dtype checked at launch against the variant's signature) or a raw int64 device pointer (the
// dropout generator's seed and offset); integers are integers, floats floats.
struct PtrArg {
  PtrArg(const torch::Tensor& t) : tensor(&t) {}  // NOLINT: implicit, as a parameter
  PtrArg(const int64_t* p) : raw(p) {}             // NOLINT
  const torch::Tensor* tensor = nullptr;
  const int64_t* raw = nullptr;
};
struct I32Arg {
  template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
  I32Arg(T v) : value(static_cast<int64_t>(v)) {}  // NOLINT; checked to fit at KernelArgs::arg
  int64_t value;
};
struct I64Arg {
  template <class T, std::enable_if_t<std::is_integral_v<T>, int> = 0>
  I64Arg(T v) : value(static_cast<int64_t>(v)) {}  // NOLINT
  int64_t value;
};
struct F32Arg {
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  F32Arg(T v) : value(static_cast<double>(v)) {}  // NOLINT
  double value;
};

// A kernel's runtime arguments, in the order of its parameters, each stored at the width its PTX
// declares (pointers and i64: 8 bytes, i32 and fp32: 4; an fp32 is never passed as a double), with
// the type recorded so a launch can check the list against the image's signature.
class KernelArgs {
 public:
  KernelArgs& tensor(const torch::Tensor& t);  // a device pointer typed by t's dtype ("*bf16", ...)
  KernelArgs& pointer(const void* p, const std::string& type);  // a raw device pointer of Triton type `type`
  KernelArgs& i32(int64_t v);                  // checked to fit
  KernelArgs& i64(int64_t v);
  KernelArgs& f32(double v);
  // The same from the generated launchers' typed arguments.
  KernelArgs& arg(const PtrArg& p) { return p.tensor ? tensor(*p.tensor) : pointer(p.raw, "*i64"); }
  KernelArgs& arg(I32Arg v) { return i32(v.value); }
  KernelArgs& arg(I64Arg v) { return i64(v.value); }
  KernelArgs& arg(F32Arg v) { return f32(v.value); }
  // "*bf16,*i64,i32,fp32,...", comparable with TritonImage::signature.
  std::string signature() const;
  size_t size() const { return types_.size(); }
  // Argument i as stored: an address, or an integer in the slot's first 4 or 8 bytes.
  uint64_t bits(size_t i) const { return values_.at(i); }
  const std::string& type(size_t i) const { return types_.at(i); }  // "*bf16", "i32", ...
  // Pointers to each stored value, then the two scratch pointers (null) every Triton 3.x kernel
  // takes last: the kernelParams array of cuLaunchKernel. Valid while this object lives unchanged.
  std::vector<void*> launch_params();

 private:
  void push(const void* bits, size_t size, const char* type);  // `size` bytes into a new slot
  std::vector<uint64_t> values_;  // one 8-byte slot per argument; 4-byte ones in its first bytes
  std::vector<std::string> types_;
  uint64_t scratch_[2] = {0, 0};
};

// The Triton pointer type of a dtype: "*bf16", "*fp32", "*i64", "*u8", ...
std::string triton_pointer_type(torch::ScalarType dtype);

// Why `args` break what `image` was compiled to assume (nullopt: they keep it): a pointer parameter
// compiled as 16-byte aligned given an address that is not, or an integer one compiled as a multiple
// of 16 given a value that is not. Such a launch would read and write the wrong bytes.
std::optional<std::string> divisibility_violation(const TritonImage& image, const KernelArgs& args);

// Launches kernel/variant with grid (x, y, z) programs on the current CUDA stream of `device`.
// Throws (TORCH_CHECK) when no image exists for the device, when `args` does not match the image's
// signature (both are printed) or its alignment (divisibility_violation), or when the driver refuses.
// The ops check their tensors first and take another path (op_paths.h) rather than reach this error.
void launch_triton(const std::string& kernel, const std::string& variant, const torch::Device& device,
                   std::array<uint32_t, 3> grid, KernelArgs& args);

// Why kernel/variant cannot run on x's device (nullopt: it can): x not on a CUDA device, no kernels
// in this build, or none compiled for the device's architecture. The ops' own checks (dtypes,
// shapes, alignment) come first, so that they are also testable on the CPU.
std::optional<std::string> triton_device_unsupported(const torch::Tensor& x, const std::string& kernel,
                                                     const std::string& variant);
// t's data starts at a 16-byte boundary (what the kernels' ":16" pointer hints promise).
bool aligned16(const torch::Tensor& t);
// t as a kernel may read it: contiguous and 16-byte aligned. A gradient can arrive as a contiguous
// view at any offset (the backward of cat hands each input a slice of the output's gradient): it is
// then copied into a fresh buffer, and the copy is noted as `op`'s path (op_paths.h), once.
torch::Tensor contiguous_aligned(const torch::Tensor& t, const std::string& op, const std::string& name);

// Throws: `what` needs the fused kernels, which this build does not hold.
[[noreturn]] void no_triton_kernels(const char* what);

// The device's compute capability (major, minor); CUDA builds only (throws elsewhere).
std::pair<int, int> device_capability(const torch::Device& device);
// Streaming multiprocessors of the device (grid sizes of the row-block kernels).
int device_sm_count(const torch::Device& device);

}  // namespace roformer::kernels

#ifdef ROFORMER_WITH_TRITON_KERNELS
#include "kernels/triton_launchers.h"  // generated: triton::<kernel>::kKernel and ::args(...), one per kernel
#endif
