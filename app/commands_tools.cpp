// `roformer eval | fill-mask | inspect | export`: using a trained checkpoint.
#include <memory>
#include <string>
#include <vector>

#include "app/commands.h"
#include "core/error.h"
#include "tools/eval.h"
#include "tools/export_hf.h"
#include "tools/fill_mask.h"
#include "tools/inspect.h"

namespace roformer::app {
namespace {

// A count option that must be at least `least` (CLI::PositiveNumber would print its range as 0 to
// 1.797e308); 0 or a negative count is refused, never read as "the default".
CLI::Validator at_least(int64_t least) {
  return CLI::Validator(
      [least](std::string& value) -> std::string {
        try {
          size_t used = 0;
          if (std::stoll(value, &used) >= least && used == value.size()) return "";
        } catch (const std::exception&) {
        }
        return "must be a whole number of at least " + std::to_string(least) + ", got '" + value + "'";
      },
      "INT >= " + std::to_string(least), "at least " + std::to_string(least));
}
const CLI::Validator kAtLeastOne = at_least(1);

// A fraction in (0, 1]: 0 would predict nothing (and must not mean "the default").
const CLI::Validator kFraction(
    [](std::string& value) -> std::string {
      try {
        size_t used = 0;
        const double v = std::stod(value, &used);
        if (used == value.size() && v > 0 && v <= 1) return "";
      } catch (const std::exception&) {
      }
      return "must be a number in (0, 1], got '" + value + "'";
    },
    "(0, 1]", "fraction");

}  // namespace

void register_tool_commands(CLI::App& app) {
  {
    auto req = std::make_shared<tools::EvalRequest>();
    auto* cmd = app.add_subcommand("eval", "MLM accuracy (top-1/top-5), loss and perplexity of a checkpoint");
    cmd->add_option("--checkpoint", req->checkpoint, "Checkpoint directory, or a run directory (its newest one)")
        ->required();
    cmd->add_option("--data", req->data, "Text, JSONL or Parquet files (.gz/.zst too), folders, glob patterns, or prepared "
                    "directories (default: the run's validation files)");
    cmd->add_option("--text-field", req->text_field, "JSONL field / Parquet column holding the text (default: the run's data.text_field)");
    cmd->add_option("--mask-prob", req->mask_prob, "Fraction of positions predicted, 80/10/10 (default: the run's eval.mask_prob, 0.15 unless set)")
        ->check(kFraction);
    cmd->add_option("--seed", req->seed, "Seed of the masks (fixed: figures compare across runs)")->capture_default_str();
    cmd->add_option("--batch-size", req->batch_size, "Sequences per batch (does not change the figures)")
        ->check(kAtLeastOne)->capture_default_str();
    cmd->add_option("--max-sequences", req->max_sequences, "Evaluate only the first N sequences (default: all)")
        ->check(kAtLeastOne);
    cmd->add_option("--seq-len", req->seq_len,
                    "Tokens per evaluated sequence (default: the run's data.max_seq_len; at most "
                    "model.max_position_embeddings with a learned absolute position table; rotary extends its "
                    "table, relative buckets cover any distance)")
        ->check(at_least(3));
    cmd->add_option("--device", req->device, "auto, cpu, cuda or cuda:N")->capture_default_str();
    cmd->add_flag("--json", req->json, "One JSON record on stdout instead of the table (which then goes to stderr)");
    cmd->callback([req] { tools::run_eval(*req); });
  }
  {
    auto req = std::make_shared<tools::FillMaskRequest>();
    auto* cmd = app.add_subcommand("fill-mask", "Top-k predictions for every [MASK] in each TEXT argument (none: "
                                                "one text per line of stdin)");
    cmd->add_option("--checkpoint", req->checkpoint, "Checkpoint directory, or a run directory")->required();
    // The texts are the arguments left over, taken verbatim: a positional option would apply CLI11's
    // list syntax ("[MASK], [MASK]" split at the comma, "[a]" unbracketed).
    cmd->allow_extras();
    cmd->add_option("--top-k", req->top_k, "Predictions per mask")->check(kAtLeastOne)->capture_default_str();
    cmd->add_option("--device", req->device, "auto, cpu, cuda or cuda:N")->capture_default_str();
    cmd->add_flag("--json", req->json, "One JSON record per text");
    cmd->callback([req, cmd] {
      req->texts = cmd->remaining();
      for (const auto& text : req->texts)
        if (text.rfind("--", 0) == 0 && text.find(' ') == std::string::npos)
          throw Error("fill-mask: unknown option " + text + " (see roformer fill-mask --help)");
      tools::run_fill_mask(*req);
    });
  }
  {
    auto path = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    auto* cmd = app.add_subcommand("inspect", "Step, tokens, config, parameters, metrics and integrity of a checkpoint");
    cmd->add_option("path", *path, "Checkpoint directory, or a run directory (its newest checkpoint)")->required();
    cmd->add_flag("--json", *json, "One JSON record");
    cmd->callback([path, json] {
      if (tools::run_inspect(*path, *json) != 0) throw CLI::RuntimeError(1);
    });
  }
  {
    auto checkpoint = std::make_shared<std::string>();
    auto out = std::make_shared<std::string>();
    auto format = std::make_shared<std::string>("hf");
    auto force = std::make_shared<bool>(false);
    auto* cmd = app.add_subcommand(
        "export", "Export a checkpoint for Hugging Face transformers (RoFormerForMaskedLM; BertForMaskedLM for "
                  "model.position absolute, DebertaV2ForMaskedLM for disentangled)");
    cmd->add_option("--checkpoint", *checkpoint, "Checkpoint directory, or a run directory")->required();
    cmd->add_option("--format", *format, "Output format")->check(CLI::IsMember({"hf"}))->capture_default_str();
    cmd->add_option("--out", *out, "Output directory (new or empty; never a checkpoint)")->required();
    cmd->add_flag("--force", *force, "Replace the export files in a non-empty --out directory");
    // Each option writes into its shared string while the command line is parsed, after this scope
    // has ended: the callback holds every one of them (format too, though "hf" is all it can be).
    cmd->callback([checkpoint, out, format, force] { tools::export_hf(*checkpoint, *out, *force); });
  }
}

}  // namespace roformer::app
