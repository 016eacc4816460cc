// TensorBoard event files: serialized Events (tensorboard/summary.h) framed as TFRecords, one file
// per writing process, named so that TensorBoard (which reads a run's files in name order) reads
// them in the order they were started.
//
// A record: uint64 length of the data (little-endian), uint32 masked CRC-32C of those 8 bytes, the
// data, uint32 masked CRC-32C of the data. TensorBoard's reader checks both checksums and stops
// reading a file at the first record that fails.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/file.h"

namespace roformer::tensorboard {

// TFRecord's masked CRC-32C: rotated right by 15 bits plus 0xa282ead8, so that the checksum of
// data which itself holds checksums is not degenerate.
uint32_t masked_crc32c(std::string_view bytes);

// One record as it lies in the file.
std::string frame_record(std::string_view data);

// The names of the event files in `dir`, sorted (TensorBoard's reading order); empty when `dir`
// does not exist.
std::vector<std::string> list_event_files(const std::string& dir);

// The name of a new event file: events.out.tfevents.<seconds, 10 digits>.<host>.<pid>, the form
// TensorFlow and PyTorch write. <seconds> is `now_seconds`, or one past the latest time among
// `existing` names when that is not earlier, so the new file sorts after all of them (two starts
// within a second, or a clock set back, would otherwise order by host and process id).
std::string new_event_file_name(const std::vector<std::string>& existing, int64_t now_seconds,
                                const std::string& host, int64_t pid);

// Writes one new event file. Records are queued by add() and reach the file at flush(); every write
// is checked (roformer::Error naming the file: a full disk, a file-size limit).
class EventFileWriter {
 public:
  // Creates `dir` when missing and a new event file in it (new_event_file_name), and writes the
  // file_version event first.
  explicit EventFileWriter(const std::string& dir);
  ~EventFileWriter();  // flushes and closes; a failure here is logged (it cannot be thrown)

  void add(const std::string& event);  // one serialized tensorboard.Event
  void flush();                        // the queued records, appended in one write
  void close();                        // flush, then close; checked
  const std::string& path() const { return file_.path(); }

 private:
  core::AppendFile file_;
  std::string pending_;
};

}  // namespace roformer::tensorboard
