// Every subcommand where the environment says no (issue 40): a full device, a read-only place, an
// over-long path, and SIGTERM at a random moment. Each ends in exit 1 with exactly one error line
// naming the cause, or, for the signal, in the command's own clean stop (train: exit 0) or its death
// by the signal (exit 143) after a complete publish or none; and no file changes that the command did
// not create: the user's files, and an earlier output that a failed --force would replace, stay
// byte for byte, and no staging or scratch folder is left anywhere.
//
// How each is made without root tricks: a full device is a file-size limit (ulimit -f: roformer
// ignores SIGXFSZ, so the write fails with EFBIG, as on a full disk) for the files a command writes,
// and /dev/full for standard output; a read-only place is a folder without write permission, or,
// for root (whom permissions do not bind), the same folder bound read-only in a private mount
// namespace (unshare -m; the test skips that case when the system refuses it).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "run_dir_util.h"
#include "test_util.h"

namespace roformer::test {
namespace {

namespace fs = std::filesystem;

// One subcommand: its arguments given where it writes (`out`: an output folder, or TMPDIR for the
// commands that write scratch files there), and what it writes.
struct Command {
  std::string name;
  enum Writes { kStdoutOnly, kOutput, kScratch } writes;
  std::function<std::string(const std::string& out)> args;
};

// Every file below `dir` with its bytes, and every folder (as "name/").
std::map<std::string, std::string> tree(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string rel = fs::relative(e.path(), dir).string();
    if (e.is_regular_file()) out[rel] = read_file(e.path().string());
    else if (e.is_directory()) out[rel + "/"] = "";
  }
  return out;
}

// `command` with the folder `dir` read-only for it; empty when this system cannot make it so.
std::string with_read_only(const std::string& dir, const std::string& command) {
  if (::geteuid() != 0) return "chmod a-w " + dir + " && " + command;
  static const bool can_mount =
      run_command("unshare -m sh -c 'mount --bind -o ro /tmp /tmp && exit 0'").exit_code == 0;
  if (!can_mount) return "";
  std::string quoted;
  for (const char c : command) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return "unshare -m sh -c 'mount --bind -o ro " + dir + " " + dir + " && exec " + quoted + "'";
}

class HostileEnvironment : public TinyRunTest {
 protected:
  void SetUp() override {
    TinyRunTest::SetUp();
    ASSERT_EQ(train("run", "--set train.steps=3").exit_code, 0);
    ASSERT_EQ(run_roformer("tokenizer train --input " + tmp_.str("train.txt") + " --vocab-size 120 --no-progress --out " +
                           tmp_.str("tok")).exit_code, 0);
    const std::string run = tmp_.str("run"), text = tmp_.str("train.txt"), tok = tmp_.str("tok/tokenizer.model");
    commands_ = {
        {"config defaults", Command::kStdoutOnly, [](const std::string&) { return "config defaults"; }},
        {"config print", Command::kStdoutOnly, [this](const std::string&) { return "config print -c " + config_; }},
        {"inspect", Command::kStdoutOnly, [run](const std::string&) { return "inspect " + run; }},
        {"fill-mask", Command::kStdoutOnly,
         [run](const std::string&) { return "fill-mask --device cpu --checkpoint " + run + " 'the [MASK] said'"; }},
        {"eval", Command::kScratch,
         [run, text](const std::string&) { return "eval --device cpu --checkpoint " + run + " --data " + text; }},
        {"bench data", Command::kScratch,
         [text, tok](const std::string&) {
           return "bench data --input " + text + " --tokenizer " + tok + " --seq-len 32 --batch-size 4 --threads-list 1 "
                  "--seconds 0.05";
         }},
        {"tokenizer train", Command::kOutput,
         [text](const std::string& out) {
           return "tokenizer train --input " + text + " --vocab-size 120 --no-progress --force --out " + out;
         }},
        {"prepare", Command::kOutput,
         [text, tok](const std::string& out) {
           return "prepare --tokenizer " + tok + " --input " + text + " --no-progress --force --out " + out;
         }},
        {"export", Command::kOutput,
         [run](const std::string& out) { return "export --checkpoint " + run + " --format hf --force --out " + out; }},
        {"train", Command::kOutput,
         [this](const std::string& out) { return "train -c " + config_ + " --set train.steps=3 --run-dir " + out; }},
        {"bench", Command::kOutput,
         [this](const std::string& out) {
           return "bench -c " + config_ + " --set train.device=cpu --steps 2 --warmup 1 --run-dir " + out;
         }},
    };
  }

  // Runs `line` (a shell command line) and checks the user-error shape: exit 1 and one error line
  // holding one of `causes`; no file of the test folder changed but under `out`, and no staging or
  // scratch folder anywhere.
  void expect_refused(const std::string& line, const std::vector<std::string>& causes, const std::string& out) {
    const auto before = tree(tmp_.str());
    const auto r = run_command(line);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    int error_lines = 0;
    for (size_t at = r.output.find("[error]"); at != std::string::npos; at = r.output.find("[error]", at + 1))
      ++error_lines;
    EXPECT_EQ(error_lines, 1) << r.output;
    EXPECT_TRUE(std::any_of(causes.begin(), causes.end(),
                            [&](const std::string& cause) { return r.output.find(cause) != std::string::npos; }))
        << r.output;
    EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
    expect_only_created_under(before, out);
  }

  // Every file and folder of `before` is as it was, except inside `out` (which must be the command's
  // own); nothing new appeared outside it; no staging or scratch folder is left.
  void expect_only_created_under(const std::map<std::string, std::string>& before, const std::string& out) {
    const std::string own = out.empty() ? std::string() : fs::relative(out, tmp_.str()).string();
    const auto after = tree(tmp_.str());
    auto inside = [&](const std::string& rel) { return !own.empty() && rel.rfind(own, 0) == 0; };
    for (const auto& [rel, bytes] : before) {
      if (inside(rel)) continue;
      const auto it = after.find(rel);
      EXPECT_TRUE(it != after.end() && it->second == bytes) << rel << " changed or went";
    }
    for (const auto& [rel, bytes] : after) {
      EXPECT_TRUE(before.count(rel) || inside(rel)) << rel << " appeared outside " << own;
      for (const char* leftover : {"-staging-", "roformer-eval-", "roformer-bench-"})
        EXPECT_EQ(rel.find(leftover), std::string::npos) << rel << " was left behind";
    }
  }

  std::string roformer(const std::string& args) const { return roformer_bin() + " " + args; }
  std::vector<Command> commands_;
};

TEST_F(HostileEnvironment, AFullDevice) {
  for (const auto& c : commands_) {
    SCOPED_TRACE(c.name);
    if (c.writes == Command::kStdoutOnly) {
      expect_refused("{ " + roformer(c.args("")) + " > /dev/full; } 2>&1", {"no space left on the device"}, "");
      continue;
    }
    // 8 KiB a file: every command here writes a larger one (a tokenizer is 240 KB, a model 80 KB).
    const std::string out = c.writes == Command::kScratch ? tmp_.str("scratch") : tmp_.str("out-" + std::to_string(&c - &commands_[0]));
    fs::create_directories(tmp_.str("scratch"));
    const std::string env = c.writes == Command::kScratch ? "env TMPDIR=" + out + " " : "";
    expect_refused("ulimit -f 8 && " + env + roformer(c.args(out)) + " 2>&1", {"File too large"},
                   c.writes == Command::kScratch ? "" : out);
  }
}

TEST_F(HostileEnvironment, AReadOnlyPlace) {
  const std::string ro = tmp_.str("ro");
  fs::create_directories(ro);
  for (const auto& c : commands_) {
    if (c.writes == Command::kStdoutOnly) continue;  // they write nowhere but standard output
    SCOPED_TRACE(c.name);
    const std::string out = c.writes == Command::kScratch ? ro : ro + "/out";
    const std::string env = c.writes == Command::kScratch ? "env TMPDIR=" + ro + " " : "";
    const std::string line = with_read_only(ro, env + roformer(c.args(out)));
    if (line.empty()) GTEST_SKIP() << "running as root, and this system refuses a private read-only mount";
    expect_refused(line + " 2>&1", {::geteuid() == 0 ? "Read-only file system" : "Permission denied"}, "");
    run_command("chmod u+w " + ro);
  }
}

// The system's words (strerror) or main's for a std::filesystem error.
const std::vector<std::string> kTooLong = {"File name too long", "longer than the system allows"};

TEST_F(HostileEnvironment, AnOverLongPath) {
  const std::string long_dir = tmp_.str(std::string(300, 'a'));
  for (const auto& c : commands_) {
    SCOPED_TRACE(c.name);
    if (c.writes == Command::kStdoutOnly) {
      if (c.name == "config defaults") continue;  // it reads and writes no path
      // The path it reads: the config or the checkpoint.
      std::string args = c.args("");
      const std::string path = c.name == "config print" ? config_ : tmp_.str("run");
      args.replace(args.find(path), path.size(), long_dir + "/x");
      expect_refused(roformer(args) + " 2>&1", kTooLong, "");
      continue;
    }
    const std::string env = c.writes == Command::kScratch ? "env TMPDIR=" + long_dir + " " : "";
    expect_refused(env + roformer(c.args(long_dir + "/out")) + " 2>&1", kTooLong, "");
  }
}

// SIGTERM after a random delay within the command's run (the seed is printed for a replay). A
// command dies of it (143) or, train, stops cleanly (0) or finishes first (0); an earlier output of
// the same command that --force replaces is, afterwards, either the old one whole or a complete
// new one; nothing else changed, and no staging or scratch folder remains.
TEST_F(HostileEnvironment, ATerminationSignalAtARandomMoment) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  for (const auto& c : commands_) {
    SCOPED_TRACE(c.name);
    const std::string out = c.writes == Command::kScratch ? tmp_.str("scratch") : tmp_.str("out");
    fs::create_directories(tmp_.str("scratch"));
    const std::string env = c.writes == Command::kScratch ? "env TMPDIR=" + out + " " : "";
    // A first run leaves an output that the second, interrupted, replaces (--force) or resumes.
    if (c.writes == Command::kOutput) {
      ASSERT_EQ(run_command(env + roformer(c.args(out))).exit_code, 0);
    }
    const auto before = tree(tmp_.str());
    const int delay_ms = static_cast<int>(rng() % 2500);
    const std::string extra = c.name == "train" ? " --resume auto --set train.steps=200" : "";
    const auto r = run_command(env + roformer(c.args(out)) + extra + " > /dev/null 2>&1 & pid=$!; sleep " +
                               std::to_string(delay_ms / 1000.0) + "; kill -TERM $pid 2>/dev/null; wait $pid; echo \"exit $?\"");
    SCOPED_TRACE("after " + std::to_string(delay_ms) + " ms: " + r.output);
    const bool clean = r.output.find("exit 0") != std::string::npos, killed = r.output.find("exit 143") != std::string::npos;
    EXPECT_TRUE(clean || killed) << r.output;
    if (c.writes == Command::kOutput && c.name != "train" && c.name != "bench") {
      // The same inputs give the same files: the folder holds each of them again (the old set or a
      // complete new one, never a part), its marker (written last) included.
      const std::string own = fs::relative(out, tmp_.str()).string() + "/";
      for (const auto& [rel, bytes] : before) {
        if (rel.rfind(own, 0) == 0) {
          EXPECT_TRUE(fs::exists(tmp_.str(rel))) << rel << " is gone: a partial publish";
        }
      }
    }
    expect_only_created_under(before, c.writes == Command::kOutput ? out : "");
    if (c.writes == Command::kOutput) core::remove_tree(out);
  }
}

}  // namespace
}  // namespace roformer::test
