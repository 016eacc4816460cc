// CRC-32C (Castagnoli): the reflected polynomial 0x82F63B78, initial value and final XOR ~0, the
// checksum of TFRecord files (TensorBoard event files), iSCSI and ext4 (RFC 3720, appendix B.4).
// Table-driven, one byte per lookup: the records it checks are small, so no hardware path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace roformer::core {

// The CRC-32C of `size` bytes. `crc` continues an earlier result, so that
// crc32c(b, nb, crc32c(a, na)) equals the CRC of a followed by b.
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
inline uint32_t crc32c(std::string_view bytes, uint32_t crc = 0) { return crc32c(bytes.data(), bytes.size(), crc); }

}  // namespace roformer::core
