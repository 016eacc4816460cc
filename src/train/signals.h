// SIGINT/SIGTERM/SIGHUP (a closed terminal) handling for the training loop: the first signal asks the loop to finish its
// step (a single process with train.grad_accum > 1 gives the step up at the next micro-batch
// instead, rewound so the resume repeats it), save a checkpoint and exit 0; a second one restores the default action (kills), except
// while a checkpoint is being saved: then the save completes whatever further signals arrive
// (SIGKILL aside), and the run stops right after it.
#pragma once

namespace roformer::train {

void install_stop_handlers();
bool stop_requested();
int stop_signal();          // the signal received, 0 if none

// Marks a checkpoint save in progress for the handlers (see above), for as long as it lives.
class SaveInProgress {
 public:
  SaveInProgress();
  ~SaveInProgress();
  SaveInProgress(const SaveInProgress&) = delete;
  SaveInProgress& operator=(const SaveInProgress&) = delete;
};

}  // namespace roformer::train
