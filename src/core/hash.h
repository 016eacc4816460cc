// Fast 64-bit content hashes for integrity checks (checkpoint manifests) and fingerprints.
// Not cryptographic: it detects truncation, bit rot and mixed-up files, not tampering.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace roformer::core {

// Incremental hash over a byte stream; the result does not depend on how the stream is split.
class Hasher {
 public:
  void update(const void* data, size_t size);
  uint64_t digest() const;
  std::string hex_digest() const;  // 16 lowercase hex digits

 private:
  uint64_t state_ = 0x9E3779B97F4A7C15ull;
  uint64_t length_ = 0;
  unsigned char tail_[8] = {};
  size_t tail_size_ = 0;
  void mix_word(uint64_t w);
};

// Hash of a whole file as 16 hex digits; throws roformer::Error when it cannot be read.
std::string file_checksum(const std::string& path);

}  // namespace roformer::core
