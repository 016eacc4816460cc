// The protocol-buffer wire format, the encoding side: enough to write small messages by field
// number (TensorBoard's Event and Summary, tensorboard/) without generated code or libprotobuf.
// A message is a sequence of (field number << 3 | wire type) keys, each followed by its value:
//   wire type 0  varint (int32, int64, uint64, bool, enum); a negative int64 takes ten bytes
//   wire type 1  8 bytes little-endian (double, fixed64)
//   wire type 2  varint length, then the bytes (string, bytes, an embedded message)
//   wire type 5  4 bytes little-endian (float, fixed32)
// (https://protobuf.dev/programming-guides/encoding/). Fields come out in the order they are added;
// proto3 readers accept any order, and writing them by increasing number, with zero values left
// out, gives the bytes that protobuf's own serializers give.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace roformer::core {

// Appends `value` as a base-128 varint: 7 bits per byte, least significant group first, the high
// bit set on every byte but the last.
void append_varint(std::string& out, uint64_t value);

class ProtoWriter {
 public:
  ProtoWriter& add_varint(int field, uint64_t value);
  ProtoWriter& add_int64(int field, int64_t value) { return add_varint(field, static_cast<uint64_t>(value)); }
  ProtoWriter& add_bool(int field, bool value) { return add_varint(field, value ? 1 : 0); }
  ProtoWriter& add_double(int field, double value);
  ProtoWriter& add_float(int field, float value);
  ProtoWriter& add_bytes(int field, std::string_view value);  // string or bytes
  ProtoWriter& add_message(int field, const ProtoWriter& message) { return add_bytes(field, message.bytes()); }

  const std::string& bytes() const { return out_; }

 private:
  void add_key(int field, int wire_type);
  std::string out_;
};

}  // namespace roformer::core
