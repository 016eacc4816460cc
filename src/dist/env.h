// Where this process sits in a distributed run, read from the launcher's environment.
//
//   torchrun:  RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT (all five required once RANK or
//              WORLD_SIZE is set).
//   SLURM srun: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, plus MASTER_ADDR and MASTER_PORT, which the
//              job script exports (SLURM gives no rendezvous address of its own; see docs/distributed.md).
//              A SLURM step with SLURM_NTASKS=1 is a single process.
//   neither:   a single process (rank 0 of 1), which trains exactly as without this module.
// torchrun's variables win over SLURM's when both are present (torchrun inside an allocation).
#pragma once

#include <functional>
#include <string>

namespace roformer::dist {

struct DistEnv {
  int rank = 0;             // global rank in [0, world_size)
  int world_size = 1;       // number of processes
  int local_rank = 0;       // rank within the node: the CUDA device this rank binds
  std::string master_addr;  // host of rank 0, which serves the rendezvous TCPStore
  int master_port = 0;      // its port
  std::string launcher = "none";  // none | torchrun | slurm

  bool distributed() const { return world_size > 1; }
  bool is_main() const { return rank == 0; }
};

// Reads the process environment. Throws roformer::Error naming the variable that is missing or malformed.
DistEnv detect_dist_env();
// The same, with a getenv replacement (tests).
DistEnv detect_dist_env(const std::function<const char*(const char*)>& getenv);

}  // namespace roformer::dist
