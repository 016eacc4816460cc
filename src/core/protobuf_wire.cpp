// Protocol-buffer wire encoding; see protobuf_wire.h.
#include "core/protobuf_wire.h"

#include <cstring>

namespace roformer::core {
namespace {

// The IEEE-754 bits of a double or float, little-endian (the wire's order, whatever the host's).
template <class Bits, class Value>
void append_fixed(std::string& out, Value value) {
  static_assert(sizeof(Bits) == sizeof(Value));
  Bits bits;
  std::memcpy(&bits, &value, sizeof bits);
  for (size_t i = 0; i < sizeof(Bits); ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xFFu));
}

}  // namespace

void append_varint(std::string& out, uint64_t value) {
  while (value >= 0x80u) {
    out.push_back(static_cast<char>((value & 0x7Fu) | 0x80u));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void ProtoWriter::add_key(int field, int wire_type) {
  append_varint(out_, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

ProtoWriter& ProtoWriter::add_varint(int field, uint64_t value) {
  add_key(field, 0);
  append_varint(out_, value);
  return *this;
}

ProtoWriter& ProtoWriter::add_double(int field, double value) {
  add_key(field, 1);
  append_fixed<uint64_t>(out_, value);
  return *this;
}

ProtoWriter& ProtoWriter::add_float(int field, float value) {
  add_key(field, 5);
  append_fixed<uint32_t>(out_, value);
  return *this;
}

ProtoWriter& ProtoWriter::add_bytes(int field, std::string_view value) {
  add_key(field, 2);
  append_varint(out_, value.size());
  out_.append(value.data(), value.size());
  return *this;
}

}  // namespace roformer::core
