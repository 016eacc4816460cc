// TensorBoard Event messages, encoded field by field; see summary.h for the field numbers.
#include "tensorboard/summary.h"

#include <chrono>

#include "core/protobuf_wire.h"

namespace roformer::tensorboard {
namespace {

using core::ProtoWriter;

constexpr int kDtFloat = 1;   // tensorboard.DataType DT_FLOAT
constexpr int kDtString = 7;  // DT_STRING
constexpr int kSessionLogStart = 1;
constexpr const char* kHParamsStartTag = "_hparams_/session_start_info";
constexpr const char* kHParamsEndTag = "_hparams_/session_end_info";

// Event fields 1 and 2, left out when zero (as protobuf writes them), then `what` as field `field`.
std::string event(double wall_time, int64_t step, int field, const ProtoWriter& what) {
  ProtoWriter e;
  if (wall_time != 0) e.add_double(1, wall_time);
  if (step != 0) e.add_int64(2, step);
  return e.add_message(field, what).bytes();
}

// SummaryMetadata naming the plugin that reads the value; `content` is the plugin's own message.
ProtoWriter plugin_metadata(const std::string& plugin, const std::string& content) {
  ProtoWriter data;
  data.add_bytes(1, plugin);
  if (!content.empty()) data.add_bytes(2, content);
  return ProtoWriter().add_message(1, data);
}

// Summary.Value with a tensor and plugin metadata (fields 1, 8, 9 in that order).
ProtoWriter tensor_value(const std::string& tag, const ProtoWriter& tensor, const ProtoWriter& metadata) {
  return ProtoWriter().add_bytes(1, tag).add_message(8, tensor).add_message(9, metadata);
}

// The HParams plugin's summaries carry their data in the metadata and an empty float tensor of
// shape (0,) as the value (metadata.NULL_TENSOR in the plugin), which every reader accepts.
std::string hparams_event(double wall_time, int64_t step, const char* tag, int data_field, const ProtoWriter& data) {
  const ProtoWriter plugin_data = ProtoWriter().add_message(data_field, data);  // HParamsPluginData, version 0
  const ProtoWriter shape = ProtoWriter().add_message(2, ProtoWriter());       // one dim of size 0
  const ProtoWriter null_tensor = ProtoWriter().add_varint(1, kDtFloat).add_message(2, shape);
  const ProtoWriter value = tensor_value(tag, null_tensor, plugin_metadata("hparams", plugin_data.bytes()));
  return event(wall_time, step, 5, ProtoWriter().add_message(1, value));
}

// google.protobuf.Value: 2 number_value, 3 string_value, 4 bool_value (a oneof: written even when
// zero or false).
ProtoWriter struct_value(const HParamValue& v) {
  ProtoWriter out;
  if (const auto* d = std::get_if<double>(&v)) out.add_double(2, *d);
  if (const auto* s = std::get_if<std::string>(&v)) out.add_bytes(3, *s);
  if (const auto* b = std::get_if<bool>(&v)) out.add_bool(4, *b);
  return out;
}

}  // namespace

double wall_time_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string file_version_event(double wall_time) {
  ProtoWriter e;
  e.add_double(1, wall_time);
  return e.add_bytes(3, "brain.Event:2").bytes();
}

std::string session_start_event(double wall_time, int64_t step) {
  return event(wall_time, step, 7, ProtoWriter().add_varint(1, kSessionLogStart));
}

std::string scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& scalars) {
  ProtoWriter summary;
  for (const auto& s : scalars) {
    ProtoWriter value = ProtoWriter().add_bytes(1, s.tag).add_float(2, static_cast<float>(s.value));
    if (!s.description.empty()) value.add_message(9, ProtoWriter().add_bytes(3, s.description));  // summary_description
    summary.add_message(1, value);
  }
  return event(wall_time, step, 5, summary);
}

std::string text_event(double wall_time, int64_t step, const std::string& tag, const std::string& markdown) {
  // A scalar string tensor: dtype, an empty shape (no dims), the text as the one string_val.
  const ProtoWriter tensor = ProtoWriter().add_varint(1, kDtString).add_message(2, ProtoWriter()).add_bytes(8, markdown);
  return event(wall_time, step, 5, ProtoWriter().add_message(1, tensor_value(tag, tensor, plugin_metadata("text", ""))));
}

// SessionStartInfo: 1 hparams (map<string, Value>: entries of 1 key, 2 value), 5 start_time_secs.
std::string hparams_session_start_event(double wall_time, int64_t step, const std::vector<HParam>& hparams) {
  ProtoWriter start;
  for (const auto& h : hparams) start.add_message(1, ProtoWriter().add_bytes(1, h.name).add_message(2, struct_value(h.value)));
  start.add_double(5, wall_time);
  return hparams_event(wall_time, step, kHParamsStartTag, 3, start);
}

// SessionEndInfo: 1 status, 2 end_time_secs.
std::string hparams_session_end_event(double wall_time, int64_t step, SessionStatus status) {
  const ProtoWriter end = ProtoWriter().add_varint(1, static_cast<uint64_t>(status)).add_double(2, wall_time);
  return hparams_event(wall_time, step, kHParamsEndTag, 4, end);
}

}  // namespace roformer::tensorboard
