// Launching a data-parallel job the way torchrun does, for tests: one process per rank with RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1 and MASTER_PORT set (any launcher variables of the
// test's own environment removed), output to a log file, every wait bounded. Used by test_dist
// (tests/dist_worker.cpp) and test_train_dist (`roformer train`).
#pragma once

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

extern char** environ;

namespace roformer::test {

using Clock = std::chrono::steady_clock;

// A port that was free a moment ago (bind port 0 on loopback, read it back, close).
inline int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return -1;
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

// One launched rank: stdout and stderr go to a file.
struct Proc {
  pid_t pid = -1;
  std::string log;
  int exit_code = -1;  // 128 + signal when killed
  bool exited = false;
  std::string output() const { return read_file(log); }
};

// Launches `binary args...`; rank < 0 launches a single process (no distributed variables).
// extra_env entries are "KEY=VALUE".
inline Proc launch_rank(const std::string& binary, const std::vector<std::string>& args, int rank, int world, int port,
                        const std::string& log, const std::vector<std::string>& extra_env = {}) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    if (key == "RANK" || key == "WORLD_SIZE" || key == "LOCAL_RANK" || key == "MASTER_ADDR" || key == "MASTER_PORT" ||
        key.rfind("SLURM_", 0) == 0)
      continue;
    env.push_back(kv);
  }
  if (rank >= 0) {
    env.push_back("RANK=" + std::to_string(rank));
    env.push_back("WORLD_SIZE=" + std::to_string(world));
    env.push_back("LOCAL_RANK=" + std::to_string(rank));
    env.push_back("MASTER_ADDR=127.0.0.1");
    env.push_back("MASTER_PORT=" + std::to_string(port));
  }
  env.push_back("OMP_NUM_THREADS=1");
  env.insert(env.end(), extra_env.begin(), extra_env.end());
  std::vector<std::string> argv_s{binary};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv, envp;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  Proc p;
  p.log = log;
  const int rc = posix_spawn(&p.pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) ADD_FAILURE() << "posix_spawn " << argv[0] << " failed: " << rc;
  return p;
}

// Waits for p until the deadline; kills it (and fails) if it is still running then.
inline bool wait_until(Proc& p, Clock::time_point deadline) {
  while (!p.exited) {
    int status = 0;
    const pid_t r = waitpid(p.pid, &status, WNOHANG);
    if (r == p.pid) {
      p.exited = true;
      p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return true;
    }
    if (Clock::now() >= deadline) {
      kill(p.pid, SIGKILL);
      waitpid(p.pid, &status, 0);
      p.exited = true;
      p.exit_code = -1;
      ADD_FAILURE() << "rank process " << p.pid << " still running at its deadline; killed. Output:\n" << p.output();
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// Launches `world` ranks of `binary` with the same arguments (logs DIR/<log_prefix>rank<r>.log) and
// waits for all (bounded).
inline std::vector<Proc> run_ranks(const std::string& binary, const std::vector<std::string>& args, int world,
                                   const TempDir& dir, std::chrono::seconds limit, const std::string& log_prefix = "") {
  const int port = free_port();
  EXPECT_GT(port, 0);
  std::vector<Proc> procs;
  for (int r = 0; r < world; ++r)
    procs.push_back(launch_rank(binary, args, r, world, port, dir.str(log_prefix + "rank" + std::to_string(r) + ".log")));
  const auto deadline = Clock::now() + limit;
  for (auto& p : procs) wait_until(p, deadline);
  return procs;
}

inline bool wait_for_text(const Proc& p, const std::string& text, Clock::time_point deadline) {
  while (Clock::now() < deadline) {
    if (p.output().find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

}  // namespace roformer::test
