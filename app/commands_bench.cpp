// `roformer bench -c CONFIG`: training throughput of the real training step. Registered before
// the data commands, which add `roformer bench data` to the same group.
#include <memory>
#include <string>
#include <vector>

#include "app/commands.h"
#include "model/kernel_policy.h"
#include "train/bench.h"

namespace roformer::app {

namespace {

// The kernel policy's alternatives, one flag per row of model::kernel_alternatives() (its name,
// help and choices), and --GROUP-all for each group of switches.
void add_kernel_alternative_flags(CLI::App& bench, train::TrainBenchOptions& o) {
  auto* choices = &o.kernel_choices;
  for (const auto& row : model::kernel_alternatives()) {
    const std::string entry = row.entry;
    if (row.choices.empty())
      bench.add_flag_callback(row.flag, [choices, entry] { choices->emplace_back(entry, ""); }, row.help);
    else
      bench.add_option_function<std::string>(row.flag, [choices, entry](const std::string& v) {
        choices->emplace_back(entry, v);
      }, row.help)->default_str(row.choices.front());
  }
  for (const auto& group : model::kernel_alternative_groups()) {
    std::vector<std::string> members;
    for (const auto& row : model::kernel_alternatives())
      if (row.group == group) members.push_back(row.entry);
    bench.add_flag_callback("--" + group + "-all", [choices, members] {
      for (const auto& entry : members) choices->emplace_back(entry, "");
    }, "All " + std::to_string(members.size()) + " --" + group + "-* ops");
  }
}

}  // namespace

void register_bench_commands(CLI::App& app) {
  auto o = std::make_shared<train::TrainBenchOptions>();
  auto* bench = app.add_subcommand(
      "bench", "Benchmarks that print figures: `bench -c CONFIG` times training steps (tokens/s, MFU), `bench data` "
                 "the data pipeline (prepare and loader tokens/s)");
  bench->require_subcommand(0, 1);
  bench->add_option("-c,--config", o->config_path, "YAML config to benchmark (the same step as `roformer train`)");
  bench->add_option("--set", o->overrides, "Override a config key: section.key=value (repeatable)");
  bench->add_option("--steps", o->steps, "Measured steps")->capture_default_str();
  bench->add_option("--warmup", o->warmup, "Steps before measuring")->capture_default_str();
  bench->add_flag("--json", o->json, "Print one JSON record instead of the table");
  bench->add_option("--peak-tflops", o->peak_tflops,
                    "Peak TFLOP/s for MFU (default: known for H100/H200/A100; none on the CPU)");
  bench->add_flag("--synthetic", o->synthetic, "Random token batches (needs model.vocab_size); no tokenizer or corpus");
  add_kernel_alternative_flags(*bench, *o);
  bench->add_option("--list-variants", o->list_variants,
                    "Print the rows scripts/gpu_check.sh measures (name|arguments; `kernels`: seq|name|arguments "
                    "of its kernels call) and run nothing")
      ->expected(0, 1)
      ->default_str("all");
  bench->add_flag("--breakdown", o->breakdown, "CUDA: synchronize between the step's stages to time data/forward/backward/optimizer");
  bench->add_option("--profile", o->profile,
                    "After the measured steps, profile --profile-steps more (CPU + CUDA) into this Chrome trace "
                    "(.json; summarize with scripts/profile_summary.py)");
  bench->add_option("--profile-steps", o->profile_steps, "Steps in the --profile trace")->capture_default_str();
  bench->add_option("--run-dir", o->run_dir, "Tokenizer and prepared-data cache (default: <train.run_dir>/bench)");
  bench->callback([bench, o] {
    if (!bench->get_subcommands().empty()) return;  // `roformer bench data` ran instead
    train::run_train_benchmark(*o);
  });
}

}  // namespace roformer::app
