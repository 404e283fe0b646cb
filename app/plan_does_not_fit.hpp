// Exit status 3: a training plan that was simulated but does not fit in its GPUs' memory.
#pragma once

#include <stdexcept>

namespace cs::app {

// Thrown by `run` and `cost` after they have printed and written their results for a plan whose
// memory verdict is OOM: the figures are what the step would take on GPUs with the memory it needs,
// worth reading to see what overflows, but a script must not take them for a plan that runs (they
// had exited 0, the verdict one line of the memory table). main prints the message and exits 3.
class PlanDoesNotFit : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr int kExitPlanDoesNotFit = 3;

}  // namespace cs::app
