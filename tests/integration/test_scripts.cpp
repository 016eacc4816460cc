// The scripts a user runs beside the CLI: scripts/compare_positions.sh (position schemes trained at
// an equal budget, evaluated at 1x/2x/4x the training length, a markdown table, a JSON file, a
// PNG, and runs that TensorBoard's HParams tab compares), on a tiny model and a synthetic corpus
// so it runs in seconds; scripts/setup.sh's handling of a failed configure; container_check.sh's
// refusal of a scratch folder that exists; and the commands that look at a run (plot_metrics.py,
// tensorboard.sh) from the project's venv.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "test_util.h"
#include "train/schedule.h"

using namespace roformer::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string compare_yaml(const std::string& dir) {
  return "model:\n  hidden_size: 32\n  num_layers: 1\n  num_heads: 2\n  intermediate_size: 64\n"
         "  max_position_embeddings: 32\n  hidden_dropout: 0.0\n  attention_dropout: 0.0\n"
         "tokenizer:\n  vocab_size: 120\n"
         "data:\n  train_files: [" + dir + "/train.txt]\n  valid_files: [" + dir + "/valid.txt]\n  max_seq_len: 32\n"
         "schedule:\n  warmup_steps: 1\ntrain:\n  steps: 6\n  batch_size: 4\n  precision: fp32\n  device: cpu\n"
         "checkpoint:\n  every: 0\nlogging:\n  every: 3\n  progress: plain\neval:\n  every: 3\n  max_sequences: 8\n";
}

// The comparison scripts' inputs in tmp: synthetic train.txt and valid.txt of the given numbers of
// documents, and cmp.yaml (compare_yaml) reading them.
void write_compare_inputs(const TempDir& tmp, int train_documents, int valid_documents) {
  write_file(tmp.str("train.txt"), synthetic_corpus(train_documents, 3, 21));
  write_file(tmp.str("valid.txt"), synthetic_corpus(valid_documents, 3, 22));
  write_file(tmp.str("cmp.yaml"), compare_yaml(tmp.str()));
}

// `bash scripts/SCRIPT` with the roformer of bin_dir (default this build's) and the project's venv.
std::string script_command(const std::string& script, std::string bin_dir = "") {
  if (bin_dir.empty()) bin_dir = fs::path(roformer_bin()).parent_path().string();
  return "BUILD_DIR=" + bin_dir + " ROFORMER_PYTHON=" + python() + " bash " + source_dir() + "/scripts/" + script;
}

std::string compare_command(const TempDir& tmp, const std::string& args) {
  return script_command("compare_positions.sh") + " -c " + tmp.str("cmp.yaml") + " -o " + tmp.str("out") + " " +
         args + " 2>&1";
}

// scripts/compare_runs.sh over the variants of tmp/v.variants, the config tmp/cmp.yaml, into tmp/out.
std::string compare_runs_command(const TempDir& tmp, const std::string& args, const std::string& bin_dir = "") {
  return script_command("compare_runs.sh", bin_dir) + " --variants-file " + tmp.str("v.variants") + " -c " +
         tmp.str("cmp.yaml") + " -o " + tmp.str("out") + " " + args + " 2>&1";
}

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> out;
  std::istringstream lines(read_file(path));
  std::string line;
  while (std::getline(lines, line))
    if (!line.empty()) out.push_back(json::parse(line));
  return out;
}

}  // namespace

TEST(CompareScript, TrainsEachVariantEvaluatesLongerAndReports) {
  if (python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
  TempDir tmp;
  write_compare_inputs(tmp, 60, 40);
  const std::string args = "--variants 'rotary absolute' --seeds '1 2'";
  auto r = run_command(compare_command(tmp, args));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Where it is: run k of n, and after the first an estimate of the time left.
  EXPECT_NE(r.output.find("== run 1 of 4 ==\n"), std::string::npos) << r.output;
  const size_t fourth = r.output.find("== run 4 of 4, ");
  ASSERT_NE(fourth, std::string::npos) << r.output;
  const std::string line = r.output.substr(fourth, r.output.find('\n', fourth) - fourth);
  EXPECT_NE(line.find(" so far, about "), std::string::npos) << line;
  EXPECT_EQ(line.substr(line.size() - 8), " left ==") << line;

  // Two variants x two seeds x three lengths; absolute is refused beyond its 32 learned rows.
  const auto evals = read_jsonl(tmp.str("out/evals.jsonl"));
  ASSERT_EQ(evals.size(), 12u) << r.output;
  for (const auto& e : evals) {
    const int64_t len = 32 * e["mult"].get<int64_t>();
    if (e["variant"] == "absolute" && len > 32) {
      EXPECT_NE(e["refused"].get<std::string>().find("--seq-len " + std::to_string(len) +
                                                     " exceeds model.max_position_embeddings 32"),
                std::string::npos) << e.dump();
    } else {
      ASSERT_TRUE(e.contains("eval")) << e.dump();
      EXPECT_EQ(e["eval"]["seq_len"], len);
      EXPECT_EQ(e["eval"]["train_seq_len"], 32);
      EXPECT_GT(e["eval"]["n_predicted"].get<int64_t>(), 0);
    }
  }
  // Equal budget: every run trained the same steps on the same tokenizer and data.
  for (const std::string run : {"rotary-s1", "rotary-s2", "absolute-s1", "absolute-s2"}) {
    const std::string checkpoint = tmp.str("out/runs/" + run + "/checkpoints/step_00000006");
    ASSERT_TRUE(fs::exists(checkpoint)) << run;
    EXPECT_TRUE(read_file(checkpoint + "/tokenizer.model") == read_file(tmp.str("out/tokenizer/tokenizer.model")))
        << run << " has another tokenizer";
  }
  const std::string md = read_file(tmp.str("out/results.md"));
  EXPECT_NE(md.find("| rotary (RoPE) | "), std::string::npos) << md;
  EXPECT_NE(md.find("| absolute (learned, BERT) | "), std::string::npos) << md;
  EXPECT_NE(md.find(" ± "), std::string::npos) << md;  // two seeds: mean ± standard deviation
  EXPECT_NE(md.find("| refused | refused |"), std::string::npos) << md;
  EXPECT_NE(md.find("Rotary's mean validation loss (2 seeds) was below absolute's at"), std::string::npos) << md;
  EXPECT_NE(md.find("| 6 | "), std::string::npos) << md;  // the curve's last evaluation step
  const std::string png = read_file(tmp.str("out/curves.png"));
  ASSERT_GT(png.size(), 1000u);
  EXPECT_EQ(png.substr(1, 3), "PNG");
  const json results = json::parse(read_file(tmp.str("out/results.json")));
  EXPECT_EQ(results.size(), 4u);
  EXPECT_EQ(results["rotary-s2"]["curve"].size(), 2u);  // evaluations at steps 3 and 6
  // TensorBoard's HParams tab over the runs: one session each, its settings and its last evaluation.
  auto tensorboard = run_command(python() + " " + source_dir() + "/tests/python/check_tensorboard.py hparams " +
                                 tmp.str("out/runs") + " rotary-s1 rotary-s2 absolute-s1 absolute-s2");
  EXPECT_EQ(tensorboard.exit_code, 0) << tensorboard.output;

  // Again (one run of them): a finished run is not trained again, and its figures are the same.
  auto again = run_command(compare_command(tmp, "--variants rotary --seeds 2"));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("nothing left to train"), std::string::npos) << again.output;
  const auto evals_again = read_jsonl(tmp.str("out/evals.jsonl"));
  ASSERT_EQ(evals_again.size(), 3u);
  for (const auto& e : evals) {
    if (e["variant"] != "rotary" || e["seed"] != 2) continue;
    const auto& same = evals_again[e["mult"].get<int>() / 2]["eval"];  // mult 1, 2, 4: lines 0, 1, 2
    for (const char* key : {"seq_len", "n_predicted", "accuracy", "top5_accuracy", "loss"})
      EXPECT_EQ(e["eval"][key], same[key]) << key;
  }

  // Another config into the same OUT is refused; so are unknown variants and a non-empty OUT.
  auto other = run_command(compare_command(tmp, args + " --set train.steps=8"));
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.output.find(tmp.str("out") + " holds a comparison with another config"), std::string::npos)
      << other.output;
  auto unknown = run_command(compare_command(tmp, "--variants 'rotary alibi'"));
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.output.find("unknown variant 'alibi'"), std::string::npos) << unknown.output;
  write_file(tmp.str("busy/notes.txt"), "mine");
  auto busy = run_command(compare_command(tmp, "-o " + tmp.str("busy")));  // the last -o counts
  EXPECT_EQ(busy.exit_code, 1);
  EXPECT_NE(busy.output.find("is not empty and holds no comparison"), std::string::npos) << busy.output;
  EXPECT_EQ(read_file(tmp.str("busy/notes.txt")), "mine");
}

// Every variant's factors and config are checked before the first run trains: a factor that is no
// number, a key that is none, a value roformer refuses; an integer key is scaled exactly.
TEST(CompareScript, EveryVariantIsCheckedBeforeAnyRunTrains) {
  if (python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
  TempDir tmp;
  write_compare_inputs(tmp, 20, 10);
  auto run_variants = [&](const std::string& variants) {
    write_file(tmp.str("v.variants"), variants);
    return run_command(compare_runs_command(tmp, "--set tokenizer.input_sentence_size=1234569"));
  };
  const std::string first = "big | exact | tokenizer.input_sentence_size*=3 optimizer.lr*=0.5\n";
  for (const auto& [bad, says] : std::vector<std::pair<std::string, std::string>>{
           {"zero | none | optimizer.lr*=0", "variant 'zero' (--set optimizer.lr=0) does not resolve"},
           {"dash | typo | optimizer.lr*=1-2", "the factor of optimizer.lr, '1-2', is not a number"},
           {"typo | typo | optimizer.lrr*=2", "optimizer.lrr is not a numeric key of the config"}}) {
    SCOPED_TRACE(bad);
    const auto r = run_variants(first + bad + "\n");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("== variant big: --set tokenizer.input_sentence_size=3703707 --set optimizer.lr=0.00025"),
              std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(tmp.str("out/runs"))) << "no variant trained";
  }
}

// A variant may train at another length (its own data.max_seq_len, or train.phases) than the config
// every evaluation's length is a multiple of: the report's columns name the length each evaluation
// ran at, whichever run comes first, and its header says which lengths the runs trained at.
TEST(CompareScript, ColumnsNameTheEvaluatedLengthNotTheTrainedOne) {
  if (python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
  TempDir tmp;
  write_compare_inputs(tmp, 40, 20);
  write_file(tmp.str("v.variants"),
             "long | trained at 64 | data.max_seq_len=64 train.batch_size=2 model.max_position_embeddings=64\n"
             "base | trained at 32 |\n");
  const auto r = run_command(compare_runs_command(tmp, "--seeds 1 --lengths '1 2'"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& e : read_jsonl(tmp.str("out/evals.jsonl"))) {
    ASSERT_TRUE(e.contains("eval")) << e.dump();
    EXPECT_EQ(e["eval"]["seq_len"], 32 * e["mult"].get<int64_t>()) << e.dump();
    EXPECT_EQ(e["eval"]["train_seq_len"], e["variant"] == "long" ? 64 : 32) << e.dump();
  }
  const std::string md = read_file(tmp.str("out/results.md"));
  EXPECT_NE(md.find("| variant | valid loss @32 | MLM acc @32 | MLM acc @64 | loss @64 | train tokens/s |"),
            std::string::npos) << md;
  EXPECT_EQ(md.find("@128"), std::string::npos) << md;
  EXPECT_NE(md.find("trained at 32 or 64 tokens (a phased run counts its last phase's length)"), std::string::npos)
      << md;
}

// A stopped run is not a result: SIGTERM saves a checkpoint and exits 0 (docs/training.md), so the
// script checks that each run reached the steps it asked for before evaluating it, and stops naming
// the run, the step it reached and how to go on. Here a roformer whose `train` ends at step 2 of the
// 6 asked, exiting 0 as a signalled stop does.
TEST(CompareScript, ARunThatStoppedEarlyIsNotEvaluated) {
  if (python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
  TempDir tmp;
  write_compare_inputs(tmp, 20, 10);
  write_file(tmp.str("v.variants"), "base | the config |\n");
  fs::create_directories(tmp.str("bin"));
  write_file(tmp.str("bin/roformer"), "#!/usr/bin/env bash\n[ \"$1\" = train ] && exec " + roformer_bin() +
                                          " \"$@\" --set train.steps=2\nexec " + roformer_bin() + " \"$@\"\n");
  fs::permissions(tmp.str("bin/roformer"), fs::perms::owner_all);
  const auto r = run_command(compare_runs_command(tmp, "--seeds 1", tmp.str("bin")));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string run = tmp.str("out/runs/base-s1");
  EXPECT_NE(r.output.find(run + " ended at step 2 of the 6 steps asked (stopped by a signal?); run the same command "
                                "again to continue it (--resume auto), or remove " + run + " to train it anew"),
            std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("evaluating at"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(tmp.str("out/evals.jsonl")), "") << "no result recorded for the stopped run";
  // The real roformer continues the run from its step-2 checkpoint and the comparison completes.
  const auto resumed = run_command(compare_runs_command(tmp, "--seeds 1"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto evals = read_jsonl(tmp.str("out/evals.jsonl"));
  ASSERT_EQ(evals.size(), 1u);
  EXPECT_EQ(evals[0]["eval"]["step"], 6) << evals[0].dump();
}

// Each script's --help is its whole header comment (the lines after the shebang up to the first
// line of code, '# ' stripped) and nothing else: a fixed line range went stale as headers grew
// (gpu_check.sh's dropped its Env paragraph, compare_recipe.sh's printed `set -euo pipefail`).
TEST(ScriptHelp, IsTheWholeHeaderComment) {
  for (const std::string script : {"compare_runs.sh", "compare_positions.sh", "compare_recipe.sh", "gpu_check.sh"}) {
    SCOPED_TRACE(script);
    std::istringstream lines(read_file(source_dir() + "/scripts/" + script));
    std::string line, header;
    std::getline(lines, line);  // the shebang
    while (std::getline(lines, line) && !line.empty() && line[0] == '#')
      header += line.substr(line.rfind("# ", 0) == 0 ? 2 : 1) + "\n";
    ASSERT_GT(std::count(header.begin(), header.end(), '\n'), 10) << header;
    const auto r = run_command("bash " + source_dir() + "/scripts/" + script + " --help 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output, header);
  }
}

// scripts/setup.sh's configure step, with a `cmake` that fails after writing the state a failed
// CMake run leaves (CMakeCache.txt, CMakeFiles/): that state is removed so the next run configures
// from scratch, and a folder half-configured by someone else is named with the command to clear it.
TEST(SetupScript, AFailedConfigureLeavesNothingThatBreaksTheNextRun) {
  TempDir tmp;
  const std::string build = tmp.str("build");
  write_file(tmp.str("bin/cmake"),
             "#!/usr/bin/env bash\n"
             "while [ $# -gt 0 ]; do [ \"$1\" = -B ] && b=\"$2\"; shift; done\n"
             "mkdir -p \"$b/CMakeFiles\" && echo half >\"$b/CMakeCache.txt\"\n"
             "echo 'CMake Error: simulated failure'; exit 1\n");
  fs::permissions(tmp.str("bin/cmake"), fs::perms::owner_all);
  const std::string setup = "PATH=" + tmp.str("bin") + ":$PATH BUILD_DIR=" + build + " bash " + source_dir() +
                            "/scripts/setup.sh demo";
  auto failed = run_command(setup);
  EXPECT_EQ(failed.exit_code, 1) << failed.output;
  EXPECT_NE(failed.output.find("CMake Error: simulated failure"), std::string::npos) << failed.output;
  EXPECT_NE(failed.output.find("configure failed"), std::string::npos) << failed.output;
  EXPECT_FALSE(fs::exists(build + "/CMakeCache.txt")) << "the failed configure's state is removed";
  EXPECT_FALSE(fs::exists(build + "/CMakeFiles"));
  EXPECT_EQ(read_file(build + "/configure.log"), "CMake Error: simulated failure\n") << "its log is kept";

  // A folder left half-configured (a cache and no build.ninja) is not touched: the message says
  // what to remove.
  write_file(build + "/CMakeCache.txt", "half");
  auto half = run_command(setup);
  EXPECT_EQ(half.exit_code, 1) << half.output;
  EXPECT_NE(half.output.find("rm -rf " + build + "/CMakeCache.txt " + build + "/CMakeFiles"), std::string::npos)
      << half.output;
  EXPECT_EQ(read_file(build + "/CMakeCache.txt"), "half");
}

// scripts/container_check.sh refuses a scratch folder that exists before it installs, debootstraps
// or builds anything (it removes only what it made): one line naming the folder and -w; the
// folder's files stay as they were and no log is started beside it.
TEST(ContainerCheck, AnExistingScratchFolderIsRefusedAndLeftAlone) {
  if (geteuid() != 0) GTEST_SKIP() << "container_check.sh needs root (CI runs as root)";
  TempDir tmp;
  write_file(tmp.str("work/notes.txt"), "mine");
  auto r = run_command("bash " + source_dir() + "/scripts/container_check.sh -w " + tmp.str("work"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("work exists; give a new folder with -w"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_EQ(read_file(tmp.str("work/notes.txt")), "mine");
  EXPECT_FALSE(fs::exists(tmp.str("work.log")));
}

// After `make demo` alone, README's commands to look at a run work whatever Python is on PATH:
// plot_metrics.py runs itself again under the venv's Python when the caller's lacks matplotlib, and
// tensorboard.sh runs the venv's TensorBoard. A venv that is missing is named with what to run.
TEST(LookAtARun, PlotAndTensorBoardUseTheProjectVenv) {
  if (python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
  TempDir tmp;
  write_file(tmp.str("metrics.jsonl"),
             "{\"type\":\"train\",\"step\":10,\"loss\":7.0,\"loss_avg\":7.2,\"accuracy\":0.02,\"lr\":0.001}\n"
             "{\"type\":\"eval\",\"step\":10,\"loss\":6.9,\"accuracy\":0.03}\n");
  const std::string venv = fs::path(python()).parent_path().parent_path().string();
  const std::string env = "ROFORMER_VENV=" + venv + " ";
  // /usr/bin/python3 stands for a Python without the project's packages (Debian's has no matplotlib).
  const std::string system_python = fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  auto plot = run_command(env + system_python + " " + source_dir() + "/scripts/plot_metrics.py " +
                          tmp.str("metrics.jsonl"));
  EXPECT_EQ(plot.exit_code, 0) << plot.output;
  EXPECT_GT(fs::exists(tmp.str("metrics.png")) ? fs::file_size(tmp.str("metrics.png")) : 0u, 1000u) << plot.output;
  auto tb = run_command(env + "bash " + source_dir() + "/scripts/tensorboard.sh --version_tb");
  EXPECT_EQ(tb.exit_code, 0) << tb.output;
  EXPECT_NE(tb.output.find('.'), std::string::npos) << "a version number: " << tb.output;

  auto missing = run_command("ROFORMER_VENV=" + tmp.str("no-venv") + " bash " + source_dir() +
                             "/scripts/tensorboard.sh --logdir x");
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find("run `make demo`"), std::string::npos) << missing.output;
  if (system_python == "/usr/bin/python3" &&
      run_command("/usr/bin/python3 -c 'import matplotlib'").exit_code != 0) {  // the re-run is what plots
    missing = run_command("ROFORMER_VENV=" + tmp.str("no-venv") + " /usr/bin/python3 " + source_dir() +
                          "/scripts/plot_metrics.py " + tmp.str("metrics.jsonl"));
    EXPECT_EQ(missing.exit_code, 1) << missing.output;
    EXPECT_NE(missing.output.find("run `make demo`"), std::string::npos) << missing.output;
  }
}

// plot_metrics.py draws the learning rate of every step from the run's config.yaml (logging steps
// alone draw a short WSD run as a triangle): its formula is the trainer's, step for step, for every
// schedule type, with a warmup, a floor and a rounding of the WSD decay's start.
TEST(LookAtARun, ThePlottedScheduleIsTheTrainersSchedule) {
  if (python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
  TempDir tmp;
  const std::string script = R"PY(
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("plot", sys.argv[1])
plot = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plot)
print(json.dumps(plot.schedule_lr(plot.read_config(sys.argv[2]))))
)PY";
  write_file(tmp.str("curve.py"), script);
  struct Shape {
    int64_t warmup, steps;
    double fraction;  // 0.25 x 62 = 15.5: rounded half away from zero, as std::llround
  };
  // As configured, and a run shorter than its schedule (warmup 20 of 6 steps, a wsd decay of 0.3
  // steps): shortened alike.
  for (const Shape shape : {Shape{7, 62, 0.25}, Shape{20, 6, 0.05}})
    for (const std::string type : {"linear", "cosine", "wsd", "constant"}) {
      SCOPED_TRACE(type + " over " + std::to_string(shape.steps) + " steps");
      roformer::config::ScheduleConfig schedule;
      schedule.type = type;
      schedule.warmup_steps = shape.warmup;
      schedule.min_lr = 1e-5;
      schedule.decay_fraction = shape.fraction;
      const double peak = 3e-4;
      // config.yaml as the run writes it (sections, then indented keys; a comment line first).
      write_file(tmp.str("config.yaml"), "# resolved\noptimizer:\n  lr: 0.0003\nschedule:\n  type: " + type +
                                             "\n  warmup_steps: " + std::to_string(shape.warmup) +
                                             "\n  min_lr: 1.0e-05\n  decay_fraction: " + std::to_string(shape.fraction) +
                                             "\ntrain:\n  steps: " + std::to_string(shape.steps) + "\n");
      const auto r = run_command(python() + " " + tmp.str("curve.py") + " " + source_dir() +
                                 "/scripts/plot_metrics.py " + tmp.str("config.yaml"));
      ASSERT_EQ(r.exit_code, 0) << r.output;
      const json curve = json::parse(r.output.substr(r.output.find('[')));
      ASSERT_EQ(curve.size(), static_cast<size_t>(shape.steps));
      const roformer::train::LrSchedule trainer(schedule, peak, shape.steps);
      for (int64_t i = 0; i < shape.steps; ++i)
        EXPECT_NEAR(curve[i].get<double>(), trainer.lr(i), 1e-12) << "step " << i;
    }
}

// compare_report.py's verdict on the RoFormer paper's claim judges only what the seeds can tell: one
// seed gives no verdict, and a step counts for a side only when every seed of it is ahead.
TEST(CompareReport, TheVerdictNeedsTheSeedsSpread) {
  if (python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
  const std::string script = R"PY(
import importlib.util, sys
spec = importlib.util.spec_from_file_location("report", sys.argv[1])
report = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report)
run = lambda losses: {"curve": [(100 * (i + 1), l, 0.1) for i, l in enumerate(losses)]}
cases = {
    "one seed": {"rotary": [run([5.0, 4.0])], "absolute": [run([5.5, 4.5])]},
    "clear": {"rotary": [run([5.0, 4.0]), run([5.1, 4.1])], "absolute": [run([5.5, 4.5]), run([5.6, 4.6])]},
    "overlap": {"rotary": [run([5.0, 4.0]), run([5.7, 4.7])], "absolute": [run([5.5, 4.5]), run([5.6, 4.6])]},
    "part": {"rotary": [run([5.0, 4.0]), run([5.1, 4.7])], "absolute": [run([5.5, 4.5]), run([5.6, 4.6])]},
}
for name, variants in cases.items():
    print(name + ": " + report.verdict_positions(variants))
)PY";
  TempDir tmp;
  write_file(tmp.str("verdict.py"), script);
  const auto r = run_command(python() + " " + tmp.str("verdict.py") + " " + source_dir() + "/scripts/compare_report.py");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string expected :
       {"one seed: Rotary's mean validation loss (1 seed)", "**Not enough runs to judge the paper's claim",
        "clear: Rotary's mean validation loss (2 seeds)", "held here:** every rotary seed was below every absolute",
        "overlap: ", "**Not enough to judge the paper's claim", "part: ",
        "held only in part:** rotary was clearly ahead (every seed) at steps 100, absolute at none, and the two were "
        "within the seeds' spread at 200"})
    EXPECT_NE(r.output.find(expected), std::string::npos) << expected << "\n" << r.output;
  EXPECT_EQ(r.output.find("held here.**"), std::string::npos) << "the old one-seed verdict\n" << r.output;
}

// A kit of fake GPU test binaries for scripts/gpu_check.sh: each appends its name to tmp/order when it
// runs; test_gpu_step fails one case, test_gpu_dist ignores SIGTERM and hangs (the kill grace ends it).
void write_fake_kit(const TempDir& tmp) {
  fs::create_directories(tmp.path() / "kit/debs");
  const std::string order = tmp.str("order");
  auto script = [&](const std::string& path, const std::string& body) {
    write_file(tmp.str(path), "#!/bin/sh\necho \"$(basename \"$0\") $*\" >>" + order + "\n" + body);
    fs::permissions(tmp.path() / path, fs::perms::owner_all);
  };
  script("kit/bin/test_gpu_kernels", "echo '[  PASSED  ] 3 tests.'\n");
  script("kit/bin/test_gpu_step", "echo '[  FAILED  ] GpuStep.SomethingBroke'\nexit 1\n");
  script("kit/bin/test_gpu_dist", "trap '' TERM\nsleep 60\n");
  script("kit/bin/test_gpu_train", "echo '[  PASSED  ] 9 tests.'\n");
  script("fake-sanitizer", "echo '========= ERROR SUMMARY: 0 errors'\n");
  write_file(tmp.str("kit/bin/commit"), "abc1234\n");
}

// `scripts/gpu_check.sh kernels OUT` with the fake kit; `python3` on PATH runs `python` (the venv's).
CommandResult run_kernels_call(const TempDir& tmp, const std::string& python, const std::string& env = "") {
  write_file(tmp.str("pybin/python3"), "#!/bin/sh\nexec " + python + " \"$@\"\n");
  fs::permissions(tmp.path() / "pybin/python3", fs::perms::owner_all);
  return run_command("PATH=" + tmp.str("pybin") + ":$PATH GPU_KIT=" + tmp.str("kit") + " GPU_DEPS=" + tmp.str("deps") +
                     " BUILD_DIR=" + tmp.str("no-build") + " KERNELS_WORK=" + tmp.str("work") + " SANITIZER=" +
                     tmp.str("fake-sanitizer") + " OTHER_TEST_LIMIT=2 KILL_GRACE=1 " + env + " bash " + source_dir() +
                     "/scripts/gpu_check.sh kernels " + tmp.str("out") + " 2>&1");
}

std::vector<std::string> file_names(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// scripts/gpu_check.sh kernels --dry-run (issue 38's one device call) prints its plan from a kit
// without touching a GPU: the preflight, every GPU test binary of the kit under its limit with
// `timeout -k`, test_gpu_train last with its own budget, the sanitizer steps at 60 s each, the
// micro-benchmark, and the training step by default and with the fused entries, all four and each
// alone, at seq 512 and 128, inside a budget under 5 minutes; OUTDIR gets two files.
TEST(GpuCheckScript, KernelsDryRunPrintsTheOneCallPlan) {
  TempDir tmp;
  fs::create_directories(tmp.path() / "kit/bin");
  for (const char* name : {"test_gpu_kernels", "test_gpu_step", "test_gpu_train"}) {
    write_file(tmp.str(std::string("kit/bin/") + name), "#!/bin/sh\nexit 1\n");  // never run by a dry run
    fs::permissions(tmp.path() / "kit/bin" / name, fs::perms::owner_all);
  }
  fs::create_symlink(roformer_bin(), tmp.path() / "kit/bin/roformer");  // its dry run prints the kernels' floors
  write_file(tmp.str("kit/bin/commit"), "abc1234\n");
  auto r = run_command("GPU_KIT=" + tmp.str("kit") + " SANITIZER=compute-sanitizer ROFORMER_BIN=" + roformer_bin() +
                       " bash " + source_dir() +
                       "/scripts/gpu_check.sh kernels " + tmp.str("log") + " --dry-run 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* step : {"preflight: the device's torch is 2.11.0, libcudart.so.13 found",
                           "timeout -k 5 45 " /* test_gpu_kernels */, "kit/bin/test_gpu_kernels  >",
                           "kit/bin/test_gpu_step  >", "timeout -k 5 60 compute-sanitizer --tool memcheck",
                           "timeout -k 5 60 compute-sanitizer --tool initcheck", "roformer bench kernels --json kernels_bench.json",
                           "call's 270 s", "receives summary.md and logs.tar.gz",
                           "last, its own 60 s reserved from the budget: timeout -k 5 60 ",
                           "| rotary of q and k | (32, 512, 3, 12, 64) |", "step floor of these ops:"})
    EXPECT_NE(r.output.find(step), std::string::npos) << step << "\n" << r.output;
  // test_gpu_train after every other step (its 24 processes touch no fused kernel).
  const auto train = r.output.find("kit/bin/test_gpu_train");
  ASSERT_NE(train, std::string::npos) << r.output;
  EXPECT_GT(train, r.output.rfind("roformer bench")) << r.output;
  EXPECT_GT(train, r.output.find("kit/bin/test_gpu_step")) << r.output;
  for (const std::string seq : {"512", "128"}) {
    for (const std::string flag : {"--fused-all", "--fused-layer-norm", "--fused-rotary", "--fused-cross-entropy",
                                   "--fused-embedding"})
      EXPECT_NE(r.output.find("data.max_seq_len=" + seq + " --set model.max_position_embeddings=512 --set "
                              "model.vocab_size=32000 --synthetic --steps 10 --warmup 3 --json --run-dir "
                              "WORK/variants-bench " + flag),
                std::string::npos)
          << seq << " " << flag << "\n" << r.output;
  }
  EXPECT_NE(r.output.find("# default, seq 512"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("# default, seq 128"), std::string::npos) << r.output;
  // Issue 51's alternatives, right after the defaults and the fused ops at both lengths, the tanh GELU
  // lever beside them (the epilogues' reference).
  const auto epilogues = r.output.find("--gemm-epilogues --set model.hidden_act=gelu_tanh  >> variants.jsonl  # GEMM epilogues");
  ASSERT_NE(epilogues, std::string::npos) << r.output;
  const auto fused_alone = r.output.find("fused layer norm (Triton), seq 512");
  ASSERT_NE(fused_alone, std::string::npos) << r.output;
  EXPECT_LT(epilogues, fused_alone) << r.output;
  // ... and FP8 (train.fp8) at both lengths, before the fused ops alone.
  for (const std::string seq : {"512", "128"}) {
    const auto fp8 = r.output.find("--set train.fp8=dynamic  >> variants.jsonl  # FP8 linear layers (train.fp8 dynamic: "
                                   "_scaled_mm, per-tensor dynamic scaling), seq " + seq);
    ASSERT_NE(fp8, std::string::npos) << seq << "\n" << r.output;
    EXPECT_LT(fp8, fused_alone) << r.output;
  }
  EXPECT_NE(r.output.find("/variants-bench --set model.hidden_act=gelu_tanh  >> variants.jsonl  # tanh GELU, seq 512"),
            std::string::npos) << r.output;
  // Issue 39's levers, whose GPU savings docs/recipe.md predicts from the profile.
  for (const char* lever : {"/variants-bench --set model.bias=false", "--set model.hidden_act=gelu_tanh",
                            "--set model.hidden_dropout=0 --set model.attention_dropout=0"})
    EXPECT_NE(r.output.find(lever), std::string::npos) << lever << "\n" << r.output;
}

// The call itself (issue 51), on a fake kit: OUTDIR holds summary.md and logs.tar.gz only (a device
// gives back 8 files at most), the summary names the failed case and the step that hung and was
// killed, test_gpu_train runs last, and the exit status is 1.
TEST(GpuCheckScript, KernelsCallReturnsTwoFilesAndFailsWhenATestFails) {
  if (python().empty()) GTEST_SKIP() << "no Python configured (ROFORMER_PYTHON); run scripts/setup.sh";
  TempDir tmp;
  write_fake_kit(tmp);
  const auto r = run_kernels_call(tmp, python());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(file_names(tmp.path() / "out"), (std::vector<std::string>{"logs.tar.gz", "summary.md"})) << r.output;
  const std::string summary = read_file(tmp.str("out/summary.md"));
  for (const char* line : {"torch: 2.11.0", "libcudart.so.13: /", "| test_gpu_kernels | passed |",
                           "| test_gpu_step | FAILED (exit 1) |", "| test_gpu_dist | FAILED: TIMED OUT |",
                           "[  FAILED  ] GpuStep.SomethingBroke", "sanitizer_memcheck: ========= ERROR SUMMARY: 0 errors",
                           "| test_gpu_train | passed |", "result: 4 passed, 2 failed, 0 not run"})
    EXPECT_NE(summary.find(line), std::string::npos) << line << "\n" << summary;
  const auto order = read_file(tmp.str("order"));
  EXPECT_EQ(order.rfind("test_gpu_train"), order.find("test_gpu_train")) << order;
  EXPECT_GT(order.find("test_gpu_train"), order.find("fake-sanitizer --tool initcheck")) << order;
  const auto archive = run_command("tar -tzf " + tmp.str("out/logs.tar.gz"));
  for (const char* log : {"test_gpu_step.log", "test_gpu_dist.log", "sanitizer_memcheck.log", "preflight.txt"})
    EXPECT_NE(archive.output.find(log), std::string::npos) << log << "\n" << archive.output;
}

// The preflight stops the call before any test runs when the device's torch is not the 2.11.0 the
// kit was built against, and says so in the summary it returns.
TEST(GpuCheckScript, KernelsCallStopsFirstOnAnotherTorch) {
  TempDir tmp;
  write_fake_kit(tmp);
  write_file(tmp.str("fake-python"),
             "#!/bin/sh\necho '2.10.0+cu128 12.8'\n");  // what `import torch; print(version, cuda)` would print
  fs::permissions(tmp.path() / "fake-python", fs::perms::owner_all);
  const auto r = run_kernels_call(tmp, tmp.str("fake-python"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("STOP: the device's torch is 2.10.0+cu128, the kit was built against 2.11.0"),
            std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(tmp.str("order"))) << "no test ran: " << read_file(tmp.str("order"));
  EXPECT_NE(read_file(tmp.str("out/summary.md")).find("STOP: the device's torch is 2.10.0"), std::string::npos);
}

// pack --bin refuses a build of the CPU-only LibTorch before it downloads anything (the kit's tests
// would all skip): the check reads what CMake's cache really holds (C10_CUDA_LIBRARY).
TEST(GpuCheckScript, PackRefusesABuildWithoutTheCudaLibTorch) {
  TempDir tmp;
  write_file(tmp.str("build/roformer"), "#!/bin/sh\n");
  fs::permissions(tmp.path() / "build/roformer", fs::perms::owner_all);
  write_file(tmp.str("build/CMakeCache.txt"), "Torch_DIR:PATH=/x/torch/share/cmake/Torch\n");
  const std::string pack = "PACK_BUILD=" + tmp.str("build") + " GPU_KIT=" + tmp.str("kit") + " bash " + source_dir() +
                           "/scripts/gpu_check.sh pack --bin 2>&1";
  auto r = run_command(pack);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("configured against a CPU-only LibTorch (no C10_CUDA_LIBRARY"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(tmp.str("kit"))) << "nothing downloaded";
  // The CUDA LibTorch without the fused kernels is refused too, saying why configure left them out.
  write_file(tmp.str("build/CMakeCache.txt"), "C10_CUDA_LIBRARY:FILEPATH=/x/torch/lib/libc10_cuda.so\n");
  write_file(tmp.str("build/configure.log"), "-- Fused kernels: no (no ROFORMER_PYTHON); the fused ops run their ATen paths\n");
  r = run_command(pack);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("has no fused kernels (Fused kernels: no (no ROFORMER_PYTHON)"), std::string::npos) << r.output;
  // This checkout's own build, configured with the CUDA wheel and the kernels (scripts/setup.sh's
  // venv), passes the check.
  const std::string own = fs::path(roformer_bin()).parent_path().string();
  if (!fs::exists(own + "/configure.log") || read_file(own + "/configure.log").find("Fused kernels: yes") == std::string::npos)
    return;  // a build without them (another LibTorch): nothing more to compare
  const auto unfit = run_command("bash -c 'source <(sed -n \"/^kit_build_unfit()/,/^}/p\" " + source_dir() +
                                 "/scripts/gpu_check.sh); kit_build_unfit " + own + "'");
  EXPECT_EQ(unfit.output, "") << "this build is fit for a kit";
}
