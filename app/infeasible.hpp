// Exit status 3: the command worked, but what the scenario asks for has no answer that runs.
#pragma once

#include <stdexcept>

namespace cs::app {

// Thrown after a command has printed and written its results when they say that nothing runs:
// `run` and `cost` of a training plan whose memory verdict is OOM (the figures are what the step
// would take on GPUs with the memory it needs, worth reading to see what overflows), `plan` of a
// training search in which no plan fits and keeps the constraints, and `plan` of an inference sizing
// in which no configuration meets the SLO. A script must not take such results for an answer (they
// had exited 0, the verdict one line of the output). main prints the message and exits 3.
class Infeasible : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline constexpr int kExitInfeasible = 3;

}  // namespace cs::app
