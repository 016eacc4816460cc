// Checkpoint directories: atomic commit, manifest verification, `latest`, pruning, resume selection,
// and a full disk (simulated with RLIMIT_FSIZE in a child process) leaving the previous one intact.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/faults.h"
#include "core/file.h"
#include "core/hash.h"
#include "test_util.h"
#include "checkpoint/meta.h"
#include "checkpoint/store.h"
#include "checkpoint/trainer_state.h"

using namespace roformer::checkpoint;
using roformer::test::error_of;
using roformer::test::read_file;
using roformer::test::TempDir;
using roformer::test::write_file;
namespace fs = std::filesystem;

namespace {
std::string save(const std::string& dir, int64_t step, const std::string& payload) {
  CheckpointWriter w(dir, step);
  roformer::core::write_file_checked(w.path("model.safetensors"), payload);
  roformer::core::write_file_checked(w.path("trainer_state.json"), "{\"step\": " + std::to_string(step) + "}");
  for (const char* name : {"optimizer.pt", "config.yaml", "tokenizer.model"}) roformer::core::write_file_checked(w.path(name), name);
  return w.commit();
}
}  // namespace

TEST(Hash, StreamingEqualsOneShotAndDetectsChanges) {
  std::string data(1000, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  roformer::core::Hasher a, b;
  a.update(data.data(), data.size());
  b.update(data.data(), 3);
  b.update(data.data() + 3, 500);
  b.update(data.data() + 503, data.size() - 503);
  EXPECT_EQ(a.digest(), b.digest());
  data[999] ^= 1;
  roformer::core::Hasher c;
  c.update(data.data(), data.size());
  EXPECT_NE(a.digest(), c.digest());
  roformer::core::Hasher d;
  d.update(data.data(), data.size() - 1);
  EXPECT_NE(c.digest(), d.digest());
}

TEST(CheckpointStore, CommitWritesManifestAndLatest) {
  TempDir tmp;
  const std::string dir = tmp.str("ckpt");
  const std::string final_dir = save(dir, 12, "weights");
  EXPECT_EQ(fs::path(final_dir).filename().string(), "step_00000012");
  EXPECT_TRUE(fs::exists(final_dir + "/manifest.json"));
  EXPECT_EQ(read_file(dir + "/latest"), "step_00000012\n");
  EXPECT_TRUE(verify_checkpoint(final_dir).ok);
  // No temporary directory remains.
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_NE(e.path().filename().string().rfind(".tmp-", 0), 0u);
}

TEST(CheckpointStore, UncommittedWriterLeavesNothing) {
  TempDir tmp;
  const std::string dir = tmp.str("ckpt");
  save(dir, 1, "a");
  {
    CheckpointWriter w(dir, 2);
    write_file(w.path("model.safetensors"), "partial");
  }  // destroyed without commit, as when an exception unwinds a save
  EXPECT_EQ(list_checkpoints(dir).size(), 1u);
  EXPECT_EQ(read_file(dir + "/latest"), "step_00000001\n");
}

TEST(CheckpointStore, DetectsTruncationCorruptionAndMissingFiles) {
  TempDir tmp;
  const std::string dir = tmp.str("ckpt");
  const std::string a = save(dir, 1, "0123456789");
  write_file(a + "/model.safetensors", "01234");
  auto check = verify_checkpoint(a);
  EXPECT_FALSE(check.ok);
  EXPECT_NE(check.problem.find("model.safetensors has 5 bytes, the manifest says 10"), std::string::npos) << check.problem;

  const std::string b = save(dir, 2, "0123456789");
  write_file(b + "/model.safetensors", "0123456780");
  check = verify_checkpoint(b);
  EXPECT_FALSE(check.ok);
  EXPECT_NE(check.problem.find("does not match its checksum"), std::string::npos) << check.problem;

  const std::string c = save(dir, 3, "x");
  fs::remove(c + "/trainer_state.json");
  check = verify_checkpoint(c);
  EXPECT_FALSE(check.ok);
  EXPECT_NE(check.problem.find("trainer_state.json is missing"), std::string::npos) << check.problem;
}

// A manifest must list what every save writes: one with an empty list (or a file left out) vouches for
// nothing a resume needs, and --resume auto skips it like a damaged one.
TEST(CheckpointStore, AManifestWithoutTheFilesEveryCheckpointHoldsIsNotIntact) {
  TempDir tmp;
  const std::string dir = tmp.str("ckpt");
  const std::string first = save(dir, 1, "a"), second = save(dir, 2, "b");
  write_file(second + "/manifest.json", R"({"files": {}})");
  const auto check = verify_checkpoint(second);
  EXPECT_FALSE(check.ok);
  EXPECT_NE(check.problem.find("manifest.json does not list model.safetensors"), std::string::npos) << check.problem;
  std::vector<std::string> warnings;
  EXPECT_EQ(find_latest_valid_checkpoint(dir, &warnings), first);
  ASSERT_EQ(warnings.size(), 1u);
}

TEST(CheckpointStore, ResumeSkipsIncompleteAndCorruptWithWarnings) {
  TempDir tmp;
  const std::string dir = tmp.str("ckpt");
  const std::string good = save(dir, 100, "good");
  const std::string corrupt = save(dir, 200, "good");
  write_file(corrupt + "/model.safetensors", "evil");
  // A directory that looks like a checkpoint but never got its manifest.
  fs::create_directories(dir + "/step_00000300");
  write_file(dir + "/step_00000300/model.safetensors", "half");
  std::vector<std::string> warnings;
  EXPECT_EQ(find_latest_valid_checkpoint(dir, &warnings), good);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find("step_00000300"), std::string::npos);
  EXPECT_NE(warnings[0].find("no manifest.json"), std::string::npos);
  EXPECT_NE(warnings[1].find("step_00000200"), std::string::npos);
  EXPECT_EQ(find_latest_valid_checkpoint(tmp.str("nothing-here"), &warnings), "");
}

TEST(CheckpointStore, PruneKeepsNewest) {
  TempDir tmp;
  const std::string dir = tmp.str("ckpt");
  for (int s = 1; s <= 5; ++s) save(dir, s * 10, "w");
  fs::create_directories(dir + "/.tmp-step_00000060-99999");  // left by a killed process
  prune_checkpoints(dir, 2);
  auto left = list_checkpoints(dir);
  ASSERT_EQ(left.size(), 2u);
  EXPECT_EQ(fs::path(left[0]).filename().string(), "step_00000040");
  EXPECT_EQ(fs::path(left[1]).filename().string(), "step_00000050");
  EXPECT_FALSE(fs::exists(dir + "/.tmp-step_00000060-99999"));
}

// A checkpoint a reader holds (eval of a run that is training) is left to a later prune; one that is
// gone cannot be held.
TEST(CheckpointStore, PruneLeavesACheckpointBeingReadForALaterSave) {
  TempDir tmp;
  const std::string dir = tmp.str("ckpt");
  const std::string read = save(dir, 10, "w");
  save(dir, 20, "w");
  save(dir, 30, "w");
  {
    const CheckpointReadLock reading(read);
    prune_checkpoints(dir, 1);
    auto left = list_checkpoints(dir);
    ASSERT_EQ(left.size(), 2u);
    EXPECT_EQ(fs::path(left[0]).filename().string(), "step_00000010");
    EXPECT_EQ(fs::path(left[1]).filename().string(), "step_00000030");
  }
  prune_checkpoints(dir, 1);
  ASSERT_EQ(list_checkpoints(dir).size(), 1u);
  EXPECT_FALSE(fs::exists(read));
  EXPECT_THROW(CheckpointReadLock{read}, roformer::Error);
}

TEST(CheckpointStore, FullDiskDuringSaveKeepsPreviousCheckpoint) {
  TempDir tmp;
  const std::string dir = tmp.str("ckpt");
  const std::string first = save(dir, 1, std::string(1000, 'a'));
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Child: every write past 64 KiB fails with EFBIG, as a full disk fails with ENOSPC.
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {64 * 1024, 64 * 1024};
    setrlimit(RLIMIT_FSIZE, &lim);
    try {
      save(dir, 2, std::string(1 << 20, 'b'));
    } catch (const roformer::Error&) {
      _exit(3);  // the save reported the failure
    }
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3) << "the failed save must throw roformer::Error";
  EXPECT_TRUE(verify_checkpoint(first).ok);
  EXPECT_EQ(read_file(dir + "/latest"), "step_00000001\n");
  std::vector<std::string> warnings;
  EXPECT_EQ(find_latest_valid_checkpoint(dir, &warnings), first);
}

TEST(CheckpointStore, ManifestEntriesMustBePlainFilesWithSizeAndChecksum) {
  const auto ok = parse_manifest(R"({"files": {"a.pt": {"size": 3, "checksum": "00ff"}}})");
  ASSERT_EQ(ok.size(), 1u);
  EXPECT_EQ(ok[0].name, "a.pt");
  EXPECT_EQ(ok[0].size, 3u);
  EXPECT_NE(error_of([] { parse_manifest("{not json"); }).find("manifest.json is not valid JSON"), std::string::npos);
  EXPECT_NE(error_of([] { parse_manifest("[1]"); }).find("manifest.json holds [1] but must hold a JSON object"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_manifest("{}"); }).find("manifest.json has no \"files\""), std::string::npos);
  EXPECT_NE(error_of([] { parse_manifest(R"({"files": {"../../x": {"size": 1, "checksum": "a"}}})"); })
                .find("manifest.json lists '../../x', which is not a file name inside the checkpoint"),
            std::string::npos);
  // A size of the wrong type used to escape as a JSON type error (exit 2).
  EXPECT_NE(error_of([] { parse_manifest(R"({"files": {"a": {"size": "3", "checksum": "a"}}})"); })
                .find("manifest.json: \"files.a.size\" is \"3\" (a string) but must be a count (an integer >= 0)"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_manifest(R"({"files": {"a": {"size": 3}}})"); })
                .find("manifest.json has no \"files.a.checksum\""),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_manifest(R"({"files": {"a": 7}})"); })
                .find("manifest.json: \"files.a\" is 7 but must be a JSON object"),
            std::string::npos);
  // verify_checkpoint reports it as the checkpoint's problem.
  TempDir dir;
  write_file(dir.str("manifest.json"), R"({"files": {"a": {"size": -1, "checksum": "x"}}})");
  const auto check = verify_checkpoint(dir.str());
  EXPECT_FALSE(check.ok);
  EXPECT_NE(check.problem.find("\"files.a.size\" is -1 but must be a count"), std::string::npos) << check.problem;
}

TEST(CheckpointStore, TrainerStateFieldsAreChecked) {
  const std::string good = R"({"step": 12, "tokens_seen": 40, "loader": {"epoch": 0, "position": 4},
                               "world_size": 2, "global_batch_size": 8, "loss_scale": 1024.0, "good_steps": 3,
                               "tokenizer_fingerprint": "0123456789abcdef"})";
  const auto s = parse_trainer_state(good, "ck/trainer_state.json");
  EXPECT_EQ(s.step, 12);
  EXPECT_EQ(s.loader_position, 4);
  EXPECT_EQ(s.world_size, 2);
  EXPECT_EQ(s.global_batch_size.value_or(-1), 8);
  EXPECT_DOUBLE_EQ(s.loss_scale, 1024.0);
  EXPECT_EQ(s.loader_phase, 0);  // written before train.phases: the first phase
  TrainerState phased = s;
  phased.loader_phase = 1;
  EXPECT_EQ(parse_trainer_state(trainer_state_json(phased), "t.json").loader_phase, 1);
  auto msg = error_of([] { parse_trainer_state(R"({"step": "12"})", "ck/trainer_state.json"); });
  EXPECT_NE(msg.find("ck/trainer_state.json: \"step\" is \"12\" (a string) but must be a count (an integer >= 0); "
                     "the checkpoint is damaged"),
            std::string::npos) << msg;
  msg = error_of([] { parse_trainer_state(R"({"step": 1, "tokens_seen": 2})", "t.json"); });
  EXPECT_NE(msg.find("t.json has no \"loader\""), std::string::npos) << msg;
  msg = error_of([] { parse_trainer_state("{", "t.json"); });
  EXPECT_NE(msg.find("t.json is not valid JSON"), std::string::npos) << msg;
  msg = error_of([] {
    parse_trainer_state(R"({"step": 1, "tokens_seen": 2, "loader": {"epoch": -1, "position": 0}})", "t.json");
  });
  EXPECT_NE(msg.find("t.json: \"loader.epoch\" is -1 but must be a count"), std::string::npos) << msg;
  msg = error_of([] {
    parse_trainer_state(R"({"step": 1, "tokens_seen": 2, "loader": {"epoch": 0, "position": 0}, "loss_scale": 0,
                            "tokenizer_fingerprint": "x"})", "t.json");
  });
  EXPECT_NE(msg.find("t.json: \"loss_scale\" is 0 but must be a positive number"), std::string::npos) << msg;
}

// The typed trainer state writes the file it reads: every field survives the round trip, and the
// text is the JSON the checkpoints have always had (two-space indent, sorted keys, final newline).
TEST(TrainerState, WrittenStateParsesBackToTheSameFields) {
  roformer::checkpoint::TrainerState s;
  s.step = 1200;
  s.tokens_seen = 4915200;
  s.loader_epoch = 2;
  s.loader_position = 77;
  s.world_size = 4;
  s.global_batch_size = 128;
  s.loss_scale = 1024.0;
  s.good_steps = 33;
  s.tokenizer_fingerprint = "f019c55d26a14507";
  s.num_parameters = 110257664;
  s.reason = "periodic";
  s.roformer_version = "0.1.0";
  roformer::metrics::EvalRecord eval;
  eval.step = 12, eval.loss = 2.5, eval.accuracy = 0.41, eval.top5_accuracy = 0.6, eval.perplexity = 12.18;
  eval.n_predicted = 300;
  s.last_eval = eval;
  const std::string text = roformer::checkpoint::trainer_state_json(s);
  EXPECT_EQ(text.rfind("{\n  \"global_batch_size\": 128,\n", 0), 0u) << text;
  EXPECT_EQ(text.back(), '\n');
  const auto p = roformer::checkpoint::parse_trainer_state(text, "state.json");
  EXPECT_EQ(p.step, s.step);
  EXPECT_EQ(p.tokens_seen, s.tokens_seen);
  EXPECT_EQ(p.loader_epoch, s.loader_epoch);
  EXPECT_EQ(p.loader_position, s.loader_position);
  EXPECT_EQ(p.world_size, s.world_size);
  EXPECT_EQ(p.global_batch_size, s.global_batch_size);
  EXPECT_EQ(p.loss_scale, s.loss_scale);
  EXPECT_EQ(p.good_steps, s.good_steps);
  EXPECT_EQ(p.tokenizer_fingerprint, s.tokenizer_fingerprint);
  EXPECT_EQ(p.num_parameters, s.num_parameters);
  EXPECT_EQ(p.reason, s.reason);
  EXPECT_EQ(p.roformer_version, s.roformer_version);
  ASSERT_TRUE(p.last_eval.has_value());
  EXPECT_EQ(p.last_eval->accuracy, 0.41);
  EXPECT_EQ(p.last_eval->perplexity, 12.18);
  EXPECT_EQ(p.last_eval->step, 12);
  EXPECT_EQ(p.last_eval->n_predicted, 300);
  // An older checkpoint's last_eval (four figures) still reads; a hand-edited figure drops it, as
  // it is the reader's only and resuming needs none of it.
  auto with_last_eval = [&](const std::string& last_eval) {
    auto j = nlohmann::json::parse(text);
    j["last_eval"] = nlohmann::json::parse(last_eval);
    return roformer::checkpoint::parse_trainer_state(j.dump(), "state.json");
  };
  const auto old = with_last_eval(R"({"loss": 2.5, "accuracy": 0.41, "top5_accuracy": 0.6, "perplexity": 12.18})");
  ASSERT_TRUE(old.last_eval.has_value());
  EXPECT_EQ(old.last_eval->top5_accuracy, 0.6);
  EXPECT_EQ(old.last_eval->n_predicted, 0);
  EXPECT_FALSE(with_last_eval(R"({"loss": "high", "accuracy": 0.41})").last_eval.has_value());
  EXPECT_EQ(with_last_eval(R"({"loss": "high"})").step, s.step);
}

// A checkpoint's config and trainer state, read in one place for every reader: typed, and an error
// naming the file when one is damaged; inspect's reader keeps the part that could be read.
TEST(CheckpointMeta, ReadsConfigAndStateAndNamesTheDamagedFile) {
  TempDir tmp;
  const std::string dir = tmp.str("step_00000012");
  fs::create_directories(dir);
  roformer::config::Config cfg = roformer::config::parse_config("", {"model.hidden_size=48", "train.steps=3000"});
  write_file(dir + "/config.yaml", roformer::config::to_yaml(cfg));
  TrainerState state;
  state.step = 12;
  state.tokens_seen = 384;
  state.tokenizer_fingerprint = "0123456789abcdef";
  write_file(dir + "/trainer_state.json", trainer_state_json(state));

  const CheckpointMeta meta = read_checkpoint_meta(dir);
  EXPECT_EQ(meta.dir, dir);
  EXPECT_EQ(meta.config.model.hidden_size, 48);
  EXPECT_EQ(meta.config.train.steps, 3000);
  EXPECT_EQ(meta.state.step, 12);
  EXPECT_EQ(meta.state.tokens_seen, 384);
  const CheckpointMetaParts whole = read_checkpoint_meta_parts(dir);
  EXPECT_TRUE(whole.config && whole.state);
  EXPECT_EQ(whole.problem, "");

  write_file(dir + "/trainer_state.json", R"({"step": "12"})");
  const std::string msg = error_of([&] { read_checkpoint_meta(dir); });
  EXPECT_NE(msg.find(dir + "/trainer_state.json: \"step\" is \"12\" (a string) but must be a count"),
            std::string::npos) << msg;
  const CheckpointMetaParts parts = read_checkpoint_meta_parts(dir);
  ASSERT_TRUE(parts.config.has_value());
  EXPECT_EQ(parts.config->model.hidden_size, 48);
  EXPECT_FALSE(parts.state.has_value());
  EXPECT_NE(parts.problem.find("trainer_state.json"), std::string::npos) << parts.problem;

  fs::remove(dir + "/config.yaml");
  const std::string missing = error_of([&] { read_checkpoint_meta(dir); });
  EXPECT_NE(missing.find("config.yaml"), std::string::npos) << missing;
  EXPECT_FALSE(read_checkpoint_meta_parts(dir).config.has_value());
}

// The tests' fault injection is read from the environment once, into a plain value; unset means none.
TEST(Faults, ReadFromTheEnvironmentOnce) {
  using roformer::core::Faults;
  for (const char* name : {"ROFORMER_FAULT_NONFINITE_GRAD_AT_STEP", "ROFORMER_FAULT_OOM_AT_STEP",
                           "ROFORMER_FAULT_KILL_IN_SAVE_AT_STEP", "ROFORMER_FAULT_SAVE_DELAY_MS"})
    ::unsetenv(name);
  const Faults none = Faults::from_environment();
  EXPECT_EQ(none.nonfinite_grad_at_step, -1);
  EXPECT_EQ(none.oom_at_step, -1);
  EXPECT_EQ(none.kill_in_save_at_step, -1);
  EXPECT_EQ(none.save_delay_ms, 0);
  ::setenv("ROFORMER_FAULT_NONFINITE_GRAD_AT_STEP", "5", 1);
  ::setenv("ROFORMER_FAULT_OOM_AT_STEP", "8", 1);
  ::setenv("ROFORMER_FAULT_KILL_IN_SAVE_AT_STEP", "12", 1);
  ::setenv("ROFORMER_FAULT_SAVE_DELAY_MS", "250", 1);
  const Faults set = Faults::from_environment();
  EXPECT_EQ(set.nonfinite_grad_at_step, 5);
  EXPECT_EQ(set.oom_at_step, 8);
  EXPECT_EQ(set.kill_in_save_at_step, 12);
  EXPECT_EQ(set.save_delay_ms, 250);
  for (const char* name : {"ROFORMER_FAULT_NONFINITE_GRAD_AT_STEP", "ROFORMER_FAULT_OOM_AT_STEP",
                           "ROFORMER_FAULT_KILL_IN_SAVE_AT_STEP", "ROFORMER_FAULT_SAVE_DELAY_MS"})
    ::unsetenv(name);
}
