// `roformer config print|defaults|from-hf`.
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "app/commands.h"
#include "core/config.h"
#include "tools/config_from_hf.h"
#include "train/run_config.h"

namespace roformer::app {

void register_config_commands(CLI::App& app) {
  auto* config = app.add_subcommand("config", "Print the resolved config or the reference of every key");
  config->require_subcommand(1);

  struct PrintArgs {
    std::string path;
    std::vector<std::string> overrides;
  };
  auto args = std::make_shared<PrintArgs>();
  auto* print = config->add_subcommand("print", "Print the resolved config (file + --set overrides), validated");
  print->add_option("-c,--config", args->path, "YAML config file")->required();
  print->add_option("--set", args->overrides, "Override a key: section.key=value (repeatable)");
  print->callback([args] { std::cout << config::to_yaml(train::load_run_config(args->path, args->overrides)); });

  auto markdown = std::make_shared<bool>(false);
  auto* defaults = config->add_subcommand("defaults", "Print every key with its default, type, range and meaning");
  defaults->add_flag("--markdown", *markdown, "Markdown table (docs/config.md is generated this way)");
  defaults->callback([markdown] { std::cout << config::defaults_reference(*markdown); });

  auto dir = std::make_shared<std::string>();
  auto* from_hf = config->add_subcommand(
      "from-hf", "Print a config whose model section is the weights' of a Hugging Face model directory (its "
                 "config.json), for train -c IT --init-from DIR");
  from_hf->add_option("dir", *dir, "A Hugging Face model directory (save_pretrained's, a Hub download) or a "
                                   "roformer export")->required();
  from_hf->callback([dir] { std::cout << tools::config_from_hf(*dir); });
}

}  // namespace roformer::app
