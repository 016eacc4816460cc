// Console and file logging through spdlog. The model never logs; the trainer and commands do.
#pragma once

#include <string>

namespace roformer {

// Console sink on stderr at the given level (trace|debug|info|warn|error). Idempotent.
void setup_logging(const std::string& level = "info");
// In a data-parallel run, ranks other than 0 log warnings and errors only, prefixed "[rank R]"
// (rank 0 logs as a single process does). Applies now and to later setup_logging() calls.
void set_log_rank(int rank);
// Also write every message (at info and above) to `path`, appending.
void add_log_file(const std::string& path);
// The first failed write to a file of add_log_file ("cannot write 'PATH': no space left on the
// device"), or "" while every write succeeded. A run that keeps a log checks it and stops.
std::string log_file_failure();

}  // namespace roformer
