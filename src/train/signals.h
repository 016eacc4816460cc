// SIGINT/SIGTERM handling for the training loop: the first signal asks the loop to finish its
// step, save a checkpoint and exit 0; a second one restores the default action (kills).
#pragma once

namespace roformer::train {

void install_stop_handlers();
bool stop_requested();
int stop_signal();          // the signal received, 0 if none

}  // namespace roformer::train
