// libFuzzer target: a checkpoint's manifest.json (checkpoint::parse_manifest). Every entry it accepts
// names a plain file inside the checkpoint directory.
#include "fuzz_util.h"
#include "checkpoint/store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace roformer;
  const std::string text(reinterpret_cast<const char*>(data), size);
  fuzz::accepts([&] {
    for (const auto& e : checkpoint::parse_manifest(text)) {
      fuzz::require(!e.name.empty() && e.name.find('/') == std::string::npos && e.name != "..",
                    "a manifest entry escapes the checkpoint directory");
    }
  });
  return 0;
}
