// tensorboard/: the Event messages equal TensorBoard's own serialization byte for byte
// (tests/golden/tensorboard_events.json, from make_tensorboard_golden.py), the TFRecord framing and
// masked CRC-32C equal its reader's, event files are named to sort in start order, and the writer
// never overwrites a file and reports a full disk.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tensorboard/event_file.h"
#include "tensorboard/summary.h"
#include "tensorboard_util.h"
#include "test_util.h"

using namespace roformer::tensorboard;
namespace rt = roformer::test;

namespace {

nlohmann::json golden() {
  return nlohmann::json::parse(rt::read_file(rt::source_dir() + "/tests/golden/tensorboard_events.json"));
}

std::string unhex(const std::string& h) {
  std::string out;
  for (size_t i = 0; i + 1 < h.size(); i += 2) out.push_back(static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return out;
}

}  // namespace

TEST(TensorBoardEvents, EqualTensorBoardsOwnSerialization) {
  const auto g = golden();
  const auto& want = g["events"];
  const double wall = g["inputs"]["wall_time"].get<double>();
  EXPECT_EQ(rt::to_hex(file_version_event(wall)), want["file_version"]);
  EXPECT_EQ(rt::to_hex(session_start_event(wall, 5)), want["session_start"]);
  EXPECT_EQ(rt::to_hex(session_start_event(wall, 0)), want["session_start_step0"]) << "step 0 is left out";
  std::vector<Scalar> scalars;
  for (const auto& s : g["inputs"]["scalars"]) scalars.push_back({s[0].get<std::string>(), s[1].get<double>()});
  EXPECT_EQ(rt::to_hex(scalars_event(wall, 10, scalars)), want["scalars"]) << "a zero value is still written (a oneof)";
  std::vector<Scalar> described;
  for (const auto& s : g["inputs"]["scalars_described"])
    described.push_back({s[0].get<std::string>(), s[1].get<double>(), s[2].get<std::string>()});
  EXPECT_EQ(rt::to_hex(scalars_event(wall, 10, described)), want["scalars_described"])
      << "a description goes in the value's SummaryMetadata; an empty one writes no metadata";
  EXPECT_EQ(rt::to_hex(text_event(wall, 0, "config", g["inputs"]["text"].get<std::string>())), want["text"]);
  std::vector<HParam> hparams;
  for (const auto& h : g["inputs"]["hparams"]) {
    const auto& v = h[1];
    HParamValue value = v.is_boolean() ? HParamValue(v.get<bool>())
                        : v.is_number() ? HParamValue(v.get<double>())
                                        : HParamValue(v.get<std::string>());
    hparams.push_back({h[0].get<std::string>(), value});
  }
  EXPECT_EQ(rt::to_hex(hparams_session_start_event(wall, 7, hparams)), want["hparams_start"]);
  EXPECT_EQ(rt::to_hex(hparams_session_end_event(wall, 600, SessionStatus::kSuccess)), want["hparams_end"]);
}

TEST(TensorBoardEvents, MaskedCrcEqualsTheReaders) {
  const auto g = golden();  // held: a range over a member of the temporary would dangle
  for (const auto& [input, value] : g["masked_crc32c"].items()) {
    const std::string bytes = input.size() == 64 ? unhex(input) : input;
    EXPECT_EQ(masked_crc32c(bytes), value.get<uint32_t>()) << "'" << input << "'";
  }
}

TEST(TensorBoardEvents, ARecordIsLengthChecksumDataChecksum) {
  const std::string data = "hello, event";
  const std::string record = frame_record(data);
  ASSERT_EQ(record.size(), 8u + 4u + data.size() + 4u);
  EXPECT_EQ(rt::to_hex(record.substr(0, 8)), "0c00000000000000");  // 12, little-endian
  size_t pos = 8;
  EXPECT_EQ(rt::read_little_endian(record, pos, 4), masked_crc32c(record.substr(0, 8)));
  EXPECT_EQ(record.substr(12, data.size()), data);
  pos = 12 + data.size();
  EXPECT_EQ(rt::read_little_endian(record, pos, 4), masked_crc32c(data));
}

TEST(TensorBoardEventFiles, NamesSortInStartOrder) {
  EXPECT_EQ(new_event_file_name({}, 1700000000, "node0", 42), "events.out.tfevents.1700000000.node0.42");
  // An earlier file in the same second with a larger process id would sort after the new one.
  EXPECT_EQ(new_event_file_name({"events.out.tfevents.1700000000.node0.99"}, 1700000000, "node0", 42),
            "events.out.tfevents.1700000001.node0.42");
  // A clock set back: past the latest existing file.
  EXPECT_EQ(new_event_file_name({"events.out.tfevents.1700000500.a.1", "events.out.tfevents.1700000009.b.2"},
                                1700000000, "node0", 42),
            "events.out.tfevents.1700000501.node0.42");
  EXPECT_EQ(new_event_file_name({"events.out.tfevents.1600000000.a.1"}, 1700000000, "h", 7),
            "events.out.tfevents.1700000000.h.7") << "older files change nothing";
  EXPECT_EQ(new_event_file_name({"events.out.tfevents.x.a.1"}, 1700000000, "h", 7), "events.out.tfevents.1700000000.h.7");
  EXPECT_EQ(new_event_file_name({}, 999, "h", 7), "events.out.tfevents.0000000999.h.7") << "10 digits";
}

TEST(TensorBoardEventFiles, ListsOnlyEventFilesSorted) {
  rt::TempDir dir;
  EXPECT_TRUE(list_event_files(dir.str("missing")).empty());
  rt::write_file(dir.str("events.out.tfevents.2.h.1"), "");
  rt::write_file(dir.str("events.out.tfevents.1.h.1"), "");
  rt::write_file(dir.str("notes.txt"), "");
  rt::fs::create_directories(dir.str("events.out.tfevents.3.dir"));
  EXPECT_EQ(list_event_files(dir.str()), (std::vector<std::string>{"events.out.tfevents.1.h.1", "events.out.tfevents.2.h.1"}));
}

TEST(TensorBoardEventFiles, WriterStartsWithTheFileVersionAndWritesAtFlush) {
  rt::TempDir tmp;
  const std::string dir = tmp.str("a/tensorboard");
  EventFileWriter w(dir);  // creates the directory
  ASSERT_EQ(list_event_files(dir).size(), 1u);
  EXPECT_EQ(rt::fs::path(w.path()).parent_path(), rt::fs::path(dir));
  auto events = rt::read_events(w.path());
  ASSERT_EQ(events.size(), 1u) << "the file version is on disk at once";
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_GT(events[0].wall_time, 1.6e9);

  w.add(scalars_event(wall_time_now(), 3, {{"train/loss", 2.25}}));
  EXPECT_EQ(rt::read_events(w.path()).size(), 1u) << "queued until flush";
  w.flush();
  events = rt::read_events(w.path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].step, 3);
  ASSERT_EQ(events[1].scalars.size(), 1u);
  EXPECT_EQ(events[1].scalars[0], (std::pair<std::string, float>{"train/loss", 2.25f}));
  w.close();
  EXPECT_NE(rt::error_of([&] { w.add("x"), w.flush(); }).find("is closed"), std::string::npos);
}

TEST(TensorBoardEventFiles, SecondWriterGetsANewFileThatSortsAfter) {
  rt::TempDir tmp;
  std::string first, second;
  {
    EventFileWriter a(tmp.str());
    first = a.path();
    a.add(session_start_event(wall_time_now(), 0));
  }  // closed by the destructor, flushed
  EventFileWriter b(tmp.str());  // same process, most likely the same second
  second = b.path();
  EXPECT_LT(rt::fs::path(first).filename(), rt::fs::path(second).filename());
  EXPECT_EQ(rt::read_events(first).size(), 2u) << "the first file is left as it was";
}

TEST(TensorBoardEventFiles, AFullDiskIsAnErrorNamingTheFile) {
  rt::TempDir tmp;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: writes past 4 KiB fail with EFBIG, as writes to a full disk fail with ENOSPC.
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {4096, 4096};
    setrlimit(RLIMIT_FSIZE, &lim);
    try {
      EventFileWriter w(tmp.str());
      w.add(text_event(wall_time_now(), 0, "config", std::string(8192, 'x')));
      w.flush();
    } catch (const roformer::Error& e) {
      const std::string msg = e.what();
      _exit(msg.find("cannot write TensorBoard event file '" + tmp.str()) != std::string::npos &&
                    msg.find("File too large") != std::string::npos
                ? 3
                : 4);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3) << "the failed write must throw roformer::Error naming the file and the reason";
}
