// libFuzzer target: data::PreparedCorpus::open on a prepared directory built from the input, then
// every read the loader makes (each document, each word-start flag). The input is four
// length-prefixed files (u32 little-endian length, then the bytes): meta.json, documents.idx,
// word_starts.bin, shard_00000.tok (scripts/fuzz.sh packs real ones as seeds).
#include <algorithm>
#include <cstring>

#include "data/corpus.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace roformer;
  static const char* kFiles[] = {"meta.json", "documents.idx", "word_starts.bin", "shard_00000.tok"};
  const auto dir = fuzz::scratch("prepared");
  std::filesystem::create_directories(dir);
  size_t at = 0;
  for (const char* name : kFiles) {
    uint32_t len = 0;
    if (at + 4 <= size) std::memcpy(&len, data + at, 4);
    at = std::min(size, at + 4);
    len = static_cast<uint32_t>(std::min<size_t>(len, size - at));
    fuzz::write_bytes(dir / name, data + at, len);
    at += len;
  }
  fuzz::accepts([&] {
    const auto corpus = data::PreparedCorpus::open(dir.string());
    int64_t tokens = 0;
    std::vector<int32_t> doc;
    for (int64_t i = 0; i < corpus->num_documents(); ++i) {
      doc.clear();
      corpus->append_document(i, doc);
      for (int32_t id : doc) fuzz::require(id >= 0 && id < corpus->vocab_size(), "token id beyond the vocabulary");
      tokens += static_cast<int64_t>(doc.size());
      fuzz::require(corpus->document_at(corpus->document_offset(i)) <= i, "document_at past the document");
    }
    fuzz::require(tokens == corpus->num_tokens(), "documents do not add up to num_tokens");
    for (int64_t id = -1; id <= corpus->vocab_size(); ++id) (void)corpus->is_word_start(id);
  });
  return 0;
}
