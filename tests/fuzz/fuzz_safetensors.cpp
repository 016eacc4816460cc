// libFuzzer target: core::load_safetensors on arbitrary bytes (header length, JSON header, dtypes,
// shapes, offsets). A tensor it returns must have exactly the bytes its entry claims.
#include <map>

#include "core/safetensors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace roformer;
  const auto path = fuzz::scratch("input.safetensors");
  fuzz::write_bytes(path, data, size);
  std::map<std::string, std::string> metadata;
  fuzz::accepts([&] {
    const auto tensors = core::load_safetensors(path.string(), &metadata);
    size_t bytes = 0;
    for (const auto& [name, t] : tensors) bytes += static_cast<size_t>(t.numel()) * t.element_size();
    fuzz::require(bytes <= size, "tensors hold more bytes than the file");
  });
  return 0;
}
