// Launcher environment parsing (see env.h).
#include "dist/env.h"

#include <cerrno>
#include <cstdlib>

#include "core/error.h"

namespace roformer::dist {

namespace {

using Getenv = std::function<const char*(const char*)>;

bool has(const Getenv& getenv, const char* name) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0';
}

std::string require(const Getenv& getenv, const char* name, const std::string& launcher, const std::string& hint) {
  if (!has(getenv, name))
    throw Error(std::string("distributed launch (") + launcher + "): environment variable " + name +
                " is not set. ---> HINT: " + hint);
  return getenv(name);
}

int parse_int(const std::string& text, const char* name, long lo, long hi) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || *end != '\0' || v < lo || v > hi)
    throw Error(std::string("environment variable ") + name + "=" + text + " is not an integer in [" +
                std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return static_cast<int>(v);
}

void check_rank(const DistEnv& env, const char* rank_name, const char* size_name) {
  if (env.rank >= env.world_size)
    throw Error(std::string("environment variable ") + rank_name + "=" + std::to_string(env.rank) +
                " is not below " + size_name + "=" + std::to_string(env.world_size));
}

}  // namespace

DistEnv detect_dist_env() {
  return detect_dist_env([](const char* name) -> const char* { return std::getenv(name); });
}

DistEnv detect_dist_env(const Getenv& getenv) {
  DistEnv env;
  constexpr long kMaxRanks = 1 << 20;
  if (has(getenv, "RANK") || has(getenv, "WORLD_SIZE")) {
    const std::string hint =
        "launch with `torchrun --nproc-per-node=N --no-python roformer train ...`, which sets RANK, WORLD_SIZE, "
        "LOCAL_RANK, MASTER_ADDR and MASTER_PORT, or unset RANK and WORLD_SIZE to train as a single process";
    env.launcher = "torchrun";
    env.world_size = parse_int(require(getenv, "WORLD_SIZE", env.launcher, hint), "WORLD_SIZE", 1, kMaxRanks);
    env.rank = parse_int(require(getenv, "RANK", env.launcher, hint), "RANK", 0, kMaxRanks);
    env.local_rank = parse_int(require(getenv, "LOCAL_RANK", env.launcher, hint), "LOCAL_RANK", 0, kMaxRanks);
    env.master_addr = require(getenv, "MASTER_ADDR", env.launcher, hint);
    env.master_port = parse_int(require(getenv, "MASTER_PORT", env.launcher, hint), "MASTER_PORT", 1, 65535);
    check_rank(env, "RANK", "WORLD_SIZE");
    return env;
  }
  if (has(getenv, "SLURM_PROCID") && has(getenv, "SLURM_NTASKS")) {
    const int ntasks = parse_int(getenv("SLURM_NTASKS"), "SLURM_NTASKS", 1, kMaxRanks);
    if (ntasks == 1) return env;  // a one-task step: single process
    const std::string hint =
        "SLURM gives no rendezvous address: export MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" "
        "| head -n 1) and MASTER_PORT=<free port> in the job script before `srun roformer train ...`";
    env.launcher = "slurm";
    env.world_size = ntasks;
    env.rank = parse_int(getenv("SLURM_PROCID"), "SLURM_PROCID", 0, kMaxRanks);
    env.local_rank = parse_int(require(getenv, "SLURM_LOCALID", env.launcher, hint), "SLURM_LOCALID", 0, kMaxRanks);
    env.master_addr = require(getenv, "MASTER_ADDR", env.launcher, hint);
    env.master_port = parse_int(require(getenv, "MASTER_PORT", env.launcher, hint), "MASTER_PORT", 1, 65535);
    check_rank(env, "SLURM_PROCID", "SLURM_NTASKS");
    return env;
  }
  return env;
}

}  // namespace roformer::dist
