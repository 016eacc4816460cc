// Devices: the one place where a device name from a config key or a flag (auto | cpu | cuda |
// cuda:N) becomes a torch::Device, and where the process is bound to it.
//
// A CUDA device always carries its index once resolved ("cuda" is the current device, normally 0):
// LibTorch's per-device calls (allocator statistics, generators, streams) reject index -1. Binding
// (use_device) makes it the process's current device, so streams, synchronize, pinned host memory
// and tensors created without an index follow it, and a process on cuda:N never touches device 0.
#pragma once

#include <c10/core/Device.h>

#include <string>

#include "core/config.h"

namespace roformer::core {

// auto | cpu | cuda | cuda:N -> a concrete device. `key` names the setting in messages
// ("train.device", "--device"). Throws Error when CUDA is asked for and absent, N is out of range,
// or the name is not a device.
c10::Device resolve_device(const std::string& name, const std::string& key);

// Makes a CUDA device the current device of the process; nothing for the CPU.
void use_device(const c10::Device& device);

// resolve_device, then use_device: what every command that runs the model calls first.
c10::Device select_device(const std::string& name, const std::string& key);

// Waits for the device's queued work (CUDA); nothing for the CPU.
void synchronize(const c10::Device& device);

// The name the driver reports for that very device ("NVIDIA H100 80GB HBM3"); "cpu" for the CPU.
std::string device_name(const c10::Device& device);

// Peak dense TFLOP/s of a device for a precision (bf16/fp16 tensor cores, or fp32 without TF32),
// from the name device_name gives ("NVIDIA H100 80GB HBM3"); 0 when unknown (the CPU included).
// The denominator of MFU, for `roformer bench` and the training log alike.
double known_peak_tflops(const std::string& device_name, config::Precision precision);

// Bytes of memory of the device: physical RAM for the CPU, the total of that very GPU for CUDA;
// 0 when unknown (a CUDA device in a build without CUDA support).
double device_memory_bytes(const c10::Device& device);

// Whether this build can query CUDA properties and set the sync-debug mode (a CUDA LibTorch).
bool built_with_cuda();

// PyTorch's CUDA sync-debug mode: 0 off, 1 warn, 2 error on any call that synchronizes the host with
// the device (tests use 2 to prove a step issues none). Throws Error in a build without CUDA.
void set_cuda_sync_debug_mode(int mode);

}  // namespace roformer::core
