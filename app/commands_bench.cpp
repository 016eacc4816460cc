// `roformer bench`, the one measurement front (bench/): `bench -c CONFIG` times training steps under
// the kernel policy's alternatives (their flags come from model::kernel_alternatives()), `bench data`
// the data pipeline, `bench kernels` the fused kernels against their ATen paths. Argument parsing only.
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "app/commands.h"
#include "bench/data_bench.h"
#include "bench/kernels_bench.h"
#include "bench/step_bench.h"
#include "core/error.h"
#include "model/kernel_policy.h"

namespace roformer::app {

namespace {

// The kernel policy's alternatives, one flag per row of model::kernel_alternatives() (its name,
// help and choices), and --GROUP-all for each group of switches.
void add_kernel_alternative_flags(CLI::App& group, bench::StepBenchOptions& o) {
  auto* choices = &o.kernel_choices;
  for (const auto& row : model::kernel_alternatives()) {
    const std::string entry = row.entry;
    if (row.choices.empty())
      group.add_flag_callback(row.flag, [choices, entry] { choices->emplace_back(entry, ""); }, row.help);
    else
      group.add_option_function<std::string>(row.flag, [choices, entry](const std::string& v) {
        choices->emplace_back(entry, v);
      }, row.help)->default_str(row.choices.front());
  }
  for (const auto& name : model::kernel_alternative_groups()) {
    std::vector<std::string> members;
    for (const auto& row : model::kernel_alternatives())
      if (row.group == name) members.push_back(row.entry);
    group.add_flag_callback("--" + name + "-all", [choices, members] {
      for (const auto& entry : members) choices->emplace_back(entry, "");
    }, "All " + std::to_string(members.size()) + " --" + name + "-* ops");
  }
}

// "1,2,4" as thread counts of at least 1.
std::vector<int64_t> parse_threads_list(const std::string& list) {
  std::vector<int64_t> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');) {
    try {
      size_t used = 0;
      out.push_back(std::stoll(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw Error("--threads-list must be comma-separated integers, got " + list);
    }
    if (out.back() < 1) throw Error("--threads-list entries must be at least 1");
  }
  if (out.empty()) throw Error("--threads-list is empty");
  return out;
}

void add_data_bench(CLI::App& group) {
  auto o = std::make_shared<bench::DataBenchOptions>();
  o->input = "../shared/data/brown/train.txt";
  auto threads_list = std::make_shared<std::string>("1,2");
  auto* data = group.add_subcommand("data", "Prepare throughput per thread count and loader throughput (tokens/s)");
  data->add_option("--input", o->input, "Text to encode")->capture_default_str();
  data->add_option("--tokenizer", o->tokenizer,
                   "Tokenizer: .model, tokenizer.json or a directory (default: train a vocab-8000 one on --input)");
  data->add_option("--seq-len", o->seq_len, "T")->capture_default_str();
  data->add_option("--batch-size", o->batch_size, "B")->capture_default_str();
  data->add_option("--threads-list", *threads_list, "Comma-separated prepare thread counts")->capture_default_str();
  data->add_option("--seconds", o->seconds, "Seconds per loader measurement")->capture_default_str();
  data->callback([o, threads_list] {
    o->threads_list = parse_threads_list(*threads_list);
    bench::run_data_benchmark(*o);
  });
}

void add_kernels_bench(CLI::App& group) {
  auto o = std::make_shared<bench::KernelsBenchOptions>();
  auto* kernels = group.add_subcommand(
      "kernels", "Each fused kernel against its ATen path: bytes and floors; on a GPU with the kernels, us per call, "
                 "GB/s and GPU ops per call (docs/kernels.md)");
  kernels->add_flag("--dry-run", o->dry_run, "The fused ops' bytes and floors only: time nothing");
  kernels->add_option("--iters", o->iters, "Timed calls per path (the median is reported)")->capture_default_str();
  kernels->add_option("--warmup", o->warmup, "Calls before timing")->capture_default_str();
  kernels->add_option("--bandwidth", o->bandwidth, "Bytes per second of the floors (an H100 copies 3e12)")
      ->capture_default_str();
  kernels->add_option("--json", o->json, "Also write one JSON record per op to this file");
  kernels->callback([o] { bench::run_kernels_benchmark(*o); });
}

}  // namespace

void register_bench_commands(CLI::App& app) {
  auto o = std::make_shared<bench::StepBenchOptions>();
  auto* group = app.add_subcommand(
      "bench", "Benchmarks that print figures: `bench -c CONFIG` times training steps (tokens/s, MFU), `bench data` "
               "the data pipeline (prepare and loader tokens/s), `bench kernels` the fused kernels against their "
               "ATen paths");
  group->require_subcommand(0, 1);
  group->add_option("-c,--config", o->config_path, "YAML config to benchmark (the same step as `roformer train`)");
  group->add_option("--set", o->overrides, "Override a config key: section.key=value (repeatable)");
  group->add_option("--steps", o->steps, "Measured steps")->capture_default_str();
  group->add_option("--warmup", o->warmup, "Steps before measuring")->capture_default_str();
  group->add_flag("--json", o->json, "Print one JSON record instead of the table");
  group->add_option("--peak-tflops", o->peak_tflops,
                    "Peak TFLOP/s for MFU (default: known for H100/H200/A100; none on the CPU)");
  group->add_flag("--synthetic", o->synthetic, "Random token batches (needs model.vocab_size); no tokenizer or corpus");
  add_kernel_alternative_flags(*group, *o);
  // A value always: `--list-variants kernels` must not read as the `bench kernels` sub-mode.
  group->add_option("--list-variants", o->list_variants,
                    "Print the rows scripts/gpu_check.sh measures and run nothing: all (name|arguments) or kernels "
                    "(seq|name|arguments of its kernels call)")
      ->type_name("all|kernels");
  group->add_flag("--breakdown", o->breakdown, "CUDA: synchronize between the step's stages to time data/forward/backward/optimizer");
  group->add_option("--profile", o->profile,
                    "After the measured steps, profile --profile-steps more (CPU + CUDA) into this Chrome trace "
                    "(.json; summarize with scripts/profile_summary.py)");
  group->add_option("--profile-steps", o->profile_steps, "Steps in the --profile trace")->capture_default_str();
  group->add_option("--run-dir", o->run_dir, "Tokenizer and prepared-data cache (default: <train.run_dir>/bench)");
  add_data_bench(*group);
  add_kernels_bench(*group);
  group->callback([group, o] {
    if (!group->get_subcommands().empty()) return;  // `roformer bench data` or `bench kernels` ran instead
    bench::run_step_benchmark(*o);
  });
}

}  // namespace roformer::app
