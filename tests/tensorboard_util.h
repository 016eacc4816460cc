// Reading event files back in the C++ tests, without TensorBoard: the records (both checksums
// verified), a minimal protobuf wire decoder, and the few Event fields the tests look at.
// tests/python/check_tensorboard.py reads the same files with TensorBoard's own reader.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "tensorboard/event_file.h"
#include "test_util.h"

namespace roformer::test {

// One field of a message: varints in `varint`; fixed64/fixed32 as their bits in `varint`; length-
// delimited fields in `bytes`.
struct WireField {
  int number = 0, wire_type = 0;
  uint64_t varint = 0;
  std::string bytes;
};

inline uint64_t read_varint(const std::string& s, size_t& pos) {
  uint64_t v = 0;
  for (int shift = 0; pos < s.size() && shift < 64; shift += 7) {
    const auto b = static_cast<unsigned char>(s[pos++]);
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
  ADD_FAILURE() << "truncated varint";
  return v;
}

inline uint64_t read_little_endian(const std::string& s, size_t& pos, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes && pos < s.size(); ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[pos++])) << (8 * i);
  return v;
}

inline std::vector<WireField> decode_fields(const std::string& message) {
  std::vector<WireField> out;
  size_t pos = 0;
  while (pos < message.size()) {
    WireField f;
    const uint64_t key = read_varint(message, pos);
    f.number = static_cast<int>(key >> 3);
    f.wire_type = static_cast<int>(key & 7);
    if (f.wire_type == 0) f.varint = read_varint(message, pos);
    else if (f.wire_type == 1) f.varint = read_little_endian(message, pos, 8);
    else if (f.wire_type == 5) f.varint = read_little_endian(message, pos, 4);
    else if (f.wire_type == 2) {
      const auto n = static_cast<size_t>(read_varint(message, pos));
      f.bytes = message.substr(pos, n);
      pos += n;
    } else {
      ADD_FAILURE() << "wire type " << f.wire_type;
      break;
    }
    out.push_back(std::move(f));
  }
  return out;
}

inline const WireField* field(const std::vector<WireField>& fields, int number) {
  for (const auto& f : fields)
    if (f.number == number) return &f;
  return nullptr;
}

// The data of every record of an event file, checking the framing as TensorBoard's reader does.
inline std::vector<std::string> read_records(const std::string& path) {
  const std::string file = read_file(path);
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < file.size()) {
    size_t p = pos;
    const uint64_t length = read_little_endian(file, p, 8);
    const auto length_crc = static_cast<uint32_t>(read_little_endian(file, p, 4));
    EXPECT_EQ(length_crc, roformer::tensorboard::masked_crc32c(file.substr(pos, 8))) << path << " at " << pos;
    const std::string data = file.substr(p, length);
    p += length;
    const auto data_crc = static_cast<uint32_t>(read_little_endian(file, p, 4));
    EXPECT_EQ(data_crc, roformer::tensorboard::masked_crc32c(data)) << path << " at " << pos;
    if (p > file.size()) {
      ADD_FAILURE() << path << ": truncated record at " << pos;
      break;
    }
    out.push_back(data);
    pos = p;
  }
  return out;
}

// The Event fields the tests read.
struct DecodedEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  bool session_start = false;
  std::vector<std::pair<std::string, float>> scalars;  // simple values
  std::vector<std::string> tags;                       // every Summary.Value tag
  std::string text;                                    // the string_val of a text summary
};

inline DecodedEvent decode_event(const std::string& bytes) {
  DecodedEvent e;
  const auto fields = decode_fields(bytes);
  if (const auto* f = field(fields, 1)) std::memcpy(&e.wall_time, &f->varint, sizeof e.wall_time);
  if (const auto* f = field(fields, 2)) e.step = static_cast<int64_t>(f->varint);
  if (const auto* f = field(fields, 3)) e.file_version = f->bytes;
  if (const auto* f = field(fields, 7)) e.session_start = field(decode_fields(f->bytes), 1)->varint == 1;
  if (const auto* f = field(fields, 5)) {
    for (const auto& v : decode_fields(f->bytes)) {
      const auto value = decode_fields(v.bytes);
      const std::string tag = field(value, 1)->bytes;
      e.tags.push_back(tag);
      if (const auto* simple = field(value, 2)) {
        float x;
        const auto bits = static_cast<uint32_t>(simple->varint);
        std::memcpy(&x, &bits, sizeof x);
        e.scalars.emplace_back(tag, x);
      }
      if (const auto* tensor = field(value, 8)) {
        // The decoded fields must outlive the pointer into them: a temporary in the condition dies
        // before the body runs (Debian 13's allocator reused its bytes).
        const auto tensor_fields = decode_fields(tensor->bytes);
        if (const auto* s = field(tensor_fields, 8)) e.text = s->bytes;
      }
    }
  }
  return e;
}

inline std::vector<DecodedEvent> read_events(const std::string& path) {
  std::vector<DecodedEvent> out;
  for (const auto& r : read_records(path)) out.push_back(decode_event(r));
  return out;
}

}  // namespace roformer::test
