// Each group of subcommands registers itself on the root CLI11 app. The app/ folder only parses
// arguments and calls the library (src/); every behaviour lives there.
#pragma once

#include <CLI/CLI.hpp>

namespace roformer::app {

void register_config_commands(CLI::App& app);
void register_train_commands(CLI::App& app);
void register_tool_commands(CLI::App& app);
void register_bench_commands(CLI::App& app);
void register_data_commands(CLI::App& app);

}  // namespace roformer::app
