// Folders named PREFIX<pid>... that a process made for itself and removes when done: those of a
// process that no longer runs (killed, or interrupted before its clean-up) are left-overs.
#pragma once

#include <filesystem>
#include <string>

namespace roformer::core {

// Removes the entries of `dir` named prefix + a process id (+ anything) whose process is gone; a
// live process's are kept. Errors are ignored: a left-over that cannot be removed stays.
void remove_dead_process_entries(const std::filesystem::path& dir, const std::string& prefix);

}  // namespace roformer::core
