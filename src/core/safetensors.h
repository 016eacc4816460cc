// A small reader/writer for the safetensors format (https://github.com/huggingface/safetensors):
//   [8 bytes: little-endian u64 header length N][N bytes: JSON header][data section]
// The JSON header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end)} with
// offsets relative to the data section, plus an optional "__metadata__" string -> string map.
// The writer pads the header with spaces so the data section starts 8-byte aligned; the reader
// validates every field and throws roformer::Error naming the file and what is wrong.
// Supported dtypes: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL. Assumes a little-endian host.
#pragma once

#include <torch/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace roformer::core {

// Writes the tensors in the given order (each made contiguous and copied to CPU first).
// Throws roformer::Error on a duplicate or empty name, an unsupported dtype or an I/O failure.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads every tensor (CPU, the stored dtype). `metadata`, when given, receives "__metadata__".
std::map<std::string, torch::Tensor> load_safetensors(const std::string& path,
                                                      std::map<std::string, std::string>* metadata = nullptr);

// Each tensor's shape, its header entry checked against the file as load_safetensors checks it (a
// shape that does not match its bytes, offsets beyond the file), without reading the data.
std::map<std::string, std::vector<int64_t>> safetensors_shapes(const std::string& path);

}  // namespace roformer::core
