// The TensorBoard messages roformer writes, serialized with the protobuf wire format
// (core/protobuf_wire.h). Each function returns one serialized tensorboard.Event; field numbers
// are those of tensorboard/compat/proto/{event,summary,tensor,tensor_shape}.proto and
// tensorboard/plugins/hparams/{plugin_data,api}.proto (tensorboard 2.21), and zero values of
// plain fields are left out as protobuf's serializers leave them out, so the bytes equal those of
// TensorBoard's Python classes (tests/golden/make_tensorboard_golden.py pins a few).
//
//   Event           1 wall_time (double, seconds since the epoch), 2 step (int64),
//                   3 file_version | 5 summary | 7 session_log
//   Summary         1 value (repeated): 1 tag, 2 simple_value (float) | 8 tensor, 9 metadata
//   SummaryMetadata 1 plugin_data: 1 plugin_name, 2 content (the plugin's own message)
//   SessionLog      1 status (START = 1)
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace roformer::tensorboard {

// Seconds since the epoch, as Event.wall_time holds them.
double wall_time_now();

// "brain.Event:2", the first event of every file: version 2 tells TensorBoard's reader to treat a
// SessionLog START as a restart (it then drops what it read at steps >= the START's step).
std::string file_version_event(double wall_time);

// SessionLog START at `step`: a process (re)starts the run there. A run resumed from the checkpoint
// at step M starts at M + 1, so steps written after M by the process that died are dropped.
std::string session_start_event(double wall_time, int64_t step);

// Scalars as Summary simple values (float), the form every TensorBoard version and W&B's sync read.
// A scalar given a description carries it in its SummaryMetadata (summary_description), which
// TensorBoard shows beside the chart; it reads the first one of each tag, so a writer gives it once.
struct Scalar {
  std::string tag;  // "train/loss": the part before '/' groups the charts
  double value;     // stored as float
  std::string description = {};
};
std::string scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& scalars);

// A text summary (the Text plugin: a scalar DT_STRING tensor), rendered as Markdown.
std::string text_event(double wall_time, int64_t step, const std::string& tag, const std::string& markdown);

// The HParams plugin's session: the start holds the settings, the end the outcome; the metrics the
// HParams tab shows are the last values of the run's scalar tags. TensorBoard keeps the first
// session start and end it reads in a run directory.
using HParamValue = std::variant<double, bool, std::string>;
struct HParam {
  std::string name;  // "model.hidden_size"
  HParamValue value;
};
enum class SessionStatus { kSuccess = 1, kFailure = 2, kRunning = 3 };  // tensorboard.hparams.Status
std::string hparams_session_start_event(double wall_time, int64_t step, const std::vector<HParam>& hparams);
std::string hparams_session_end_event(double wall_time, int64_t step, SessionStatus status);

}  // namespace roformer::tensorboard
