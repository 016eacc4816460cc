// 64-bit content hashes (Hasher, file_checksum) for manifests and fingerprints; see hash.h.
#include "core/hash.h"

#include <cstring>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

namespace roformer::core {
namespace {
constexpr uint64_t kMul1 = 0x87C37B91114253D5ull;
constexpr uint64_t kMul2 = 0x4CF5AD432745937Full;
inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
// The finalizer of MurmurHash3 (fmix64): every input bit affects every output bit.
inline uint64_t fmix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xFF51AFD7ED558CCDull;
  k ^= k >> 33;
  k *= 0xC4CEB9FE1A85EC53ull;
  k ^= k >> 33;
  return k;
}
}  // namespace

void Hasher::mix_word(uint64_t w) {
  state_ ^= rotl(w * kMul1, 31) * kMul2;
  state_ = rotl(state_, 27) * 5 + 0x52DCE729;
}

void Hasher::update(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  length_ += size;
  if (tail_size_ > 0) {
    const size_t take = std::min(size, 8 - tail_size_);
    std::memcpy(tail_ + tail_size_, p, take);
    tail_size_ += take, p += take, size -= take;
    if (tail_size_ < 8) return;
    uint64_t w;
    std::memcpy(&w, tail_, 8);
    mix_word(w);
    tail_size_ = 0;
  }
  for (; size >= 8; p += 8, size -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    mix_word(w);
  }
  std::memcpy(tail_, p, size);
  tail_size_ = size;
}

uint64_t Hasher::digest() const {
  uint64_t h = state_;
  if (tail_size_ > 0) {
    uint64_t w = 0;
    std::memcpy(&w, tail_, tail_size_);
    h ^= rotl(w * kMul1, 31) * kMul2;
  }
  return fmix(h ^ length_);
}

std::string Hasher::hex_digest() const { return fmt::format("{:016x}", digest()); }

std::string file_checksum(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("cannot read '{}' to checksum it", path));
  Hasher h;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw Error(fmt::format("read error while checksumming '{}'", path));
  return h.hex_digest();
}

}  // namespace roformer::core
