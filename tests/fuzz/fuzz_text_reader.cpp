// libFuzzer target: data::DocumentReader (plain text and JSONL, chosen by the first byte; inputs
// starting with gzip's or zstd's magic bytes are decompressed first). Every paragraph it returns is
// non-empty valid UTF-8 without a newline.
#include "data/text_reader.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace roformer;
  if (size == 0) return 0;
  const bool jsonl = data[0] & 1;
  const auto path = fuzz::scratch(jsonl ? "input.jsonl" : "input.txt");
  fuzz::write_bytes(path, data + 1, size - 1);
  fuzz::accepts([&] {
    data::DocumentReader reader(path.string(), "text");
    std::vector<std::string> paragraphs;
    while (reader.next(paragraphs)) {
      fuzz::require(!paragraphs.empty(), "a document without paragraphs");
      for (const auto& p : paragraphs) {
        fuzz::require(!p.empty(), "an empty paragraph");
        fuzz::require(p.find('\n') == std::string::npos, "a newline inside a paragraph");
        fuzz::require(data::find_invalid_utf8(p) < 0, "invalid UTF-8 passed through");
      }
    }
  });
  return 0;
}
