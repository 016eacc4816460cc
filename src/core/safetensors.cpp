// safetensors reader/writer; see safetensors.h for the format.
#include "core/safetensors.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "core/error.h"

namespace roformer::core {
namespace {

struct DtypeName {
  const char* name;
  torch::ScalarType type;
};
constexpr DtypeName kDtypes[] = {
    {"F64", torch::kFloat64}, {"F32", torch::kFloat32}, {"F16", torch::kFloat16},
    {"BF16", torch::kBFloat16}, {"I64", torch::kInt64}, {"I32", torch::kInt32},
    {"I16", torch::kInt16},   {"I8", torch::kInt8},     {"U8", torch::kUInt8},
    {"BOOL", torch::kBool},
};

const char* dtype_name(torch::ScalarType type) {
  for (const auto& d : kDtypes)
    if (d.type == type) return d.name;
  return nullptr;
}

bool dtype_from_name(const std::string& name, torch::ScalarType* type) {
  for (const auto& d : kDtypes)
    if (name == d.name) {
      *type = d.type;
      return true;
    }
  return false;
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error("safetensors file " + path + ": " + what);
}

}  // namespace

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = meta;
  }
  std::vector<torch::Tensor> data;
  std::set<std::string> seen;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (name.empty() || name == "__metadata__") fail(path, "invalid tensor name '" + name + "'");
    if (!seen.insert(name).second) fail(path, "duplicate tensor name '" + name + "'");
    TORCH_CHECK(tensor.defined(), "save_safetensors: tensor '", name, "' is undefined");
    const char* dtype = dtype_name(tensor.scalar_type());
    if (!dtype) fail(path, "tensor '" + name + "' has unsupported dtype " + std::string(c10::toString(tensor.scalar_type())));
    auto cpu = tensor.detach().to(torch::kCPU).contiguous();
    const uint64_t bytes = static_cast<uint64_t>(cpu.numel()) * cpu.element_size();
    header[name] = {{"dtype", dtype}, {"shape", cpu.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    data.push_back(cpu);
  }
  std::string text = header.dump();
  // Pad with spaces so that 8 + header length is a multiple of 8: the data starts 8-byte aligned.
  text.append((8 - text.size() % 8) % 8, ' ');
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(path, std::string("cannot open for writing: ") + (errno ? std::strerror(errno) : "refused"));
  const uint64_t n = text.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>((n >> (8 * i)) & 0xff);
  out.write(reinterpret_cast<const char*>(len), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& t : data)
    out.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.numel() * t.element_size()));
  out.flush();
  if (!out) fail(path, std::string("write failed: ") + (errno ? std::strerror(errno) : "disk full?"));
}

namespace {

// One header entry: its dtype, shape and bytes [begin, begin + bytes) of the data section, every field
// checked against the data section's `data_len` bytes.
struct Entry {
  torch::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin = 0, bytes = 0;
};

Entry read_entry(const std::string& path, const std::string& name, const nlohmann::json& entry, uint64_t data_len) {
  const std::string where = "tensor '" + name + "': ";
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
    fail(path, where + "entry needs dtype, shape and data_offsets");
  if (!entry["dtype"].is_string()) fail(path, where + "dtype is not a string");
  Entry e;
  if (!dtype_from_name(entry["dtype"].get<std::string>(), &e.type))
    fail(path, where + "unknown dtype " + entry["dtype"].get<std::string>());
  if (!entry["shape"].is_array()) fail(path, where + "shape is not an array");
  // Checked products: a damaged shape must not wrap around to the byte count it claims.
  uint64_t numel = 1;
  for (const auto& d : entry["shape"]) {
    if (!d.is_number_unsigned()) fail(path, where + "shape has a non-integer or negative dimension");
    const uint64_t dim = d.get<uint64_t>();
    if (dim > data_len || (dim != 0 && numel > data_len / dim))
      fail(path, where + "shape " + entry["shape"].dump() + " holds more elements than the data section has bytes");
    e.shape.push_back(static_cast<int64_t>(dim));
    numel *= dim;
  }
  const auto& offsets = entry["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
    fail(path, where + "data_offsets must be two non-negative integers");
  const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  if (begin > end || end > data_len)
    fail(path, where + "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                   ") outside the data section of " + std::to_string(data_len) + " bytes (truncated file?)");
  e.begin = begin;
  e.bytes = numel * c10::elementSize(e.type);
  if (end - begin != e.bytes)
    fail(path, where + "holds " + std::to_string(end - begin) + " bytes but dtype and shape need " +
                   std::to_string(e.bytes));
  return e;
}

// The file's header, opened at `in`, parsed and checked as a whole (its entries: read_entry); the
// data section's size into `data_len`. `in` is left at the start of the data section.
nlohmann::json read_header(const std::string& path, std::ifstream& in, uint64_t* data_len) {
  if (!in) fail(path, "cannot open (does the file exist?)");
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (file_size < 8) fail(path, "file is " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
  unsigned char len[8];
  in.read(reinterpret_cast<char*>(len), 8);
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(len[i]) << (8 * i);
  if (header_len > file_size - 8)
    fail(path, "header length " + std::to_string(header_len) + " exceeds the file size " + std::to_string(file_size));
  std::string text(header_len, '\0');
  in.read(text.data(), static_cast<std::streamsize>(header_len));
  if (!in) fail(path, "read failed");
  *data_len = file_size - 8 - header_len;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    fail(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail(path, "header is not a JSON object");
  return header;
}

}  // namespace

std::map<std::string, torch::Tensor> load_safetensors(const std::string& path,
                                                      std::map<std::string, std::string>* metadata) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  uint64_t data_len = 0;
  const nlohmann::json header = read_header(path, in, &data_len);
  std::string data(data_len, '\0');
  in.read(data.data(), static_cast<std::streamsize>(data_len));
  if (!in) fail(path, "read failed");

  std::map<std::string, torch::Tensor> result;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) fail(path, "__metadata__ is not an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) fail(path, "__metadata__ value for '" + k + "' is not a string");
        if (metadata) (*metadata)[k] = v.get<std::string>();
      }
      continue;
    }
    const Entry e = read_entry(path, name, entry, data_len);
    auto tensor = torch::empty(e.shape, torch::TensorOptions().dtype(e.type));
    if (e.bytes > 0) std::memcpy(tensor.data_ptr(), data.data() + e.begin, e.bytes);
    result.emplace(name, std::move(tensor));
  }
  return result;
}

std::map<std::string, std::vector<int64_t>> safetensors_shapes(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  uint64_t data_len = 0;
  const nlohmann::json header = read_header(path, in, &data_len);
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    shapes.emplace(name, read_entry(path, name, entry, data_len).shape);
  }
  return shapes;
}

}  // namespace roformer::core
