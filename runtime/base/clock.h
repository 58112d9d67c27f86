// Wall time for the runners' statistics: the monotonic clock and seconds since a point of it.
#pragma once

#include <chrono>

namespace vrun {

using Clock = std::chrono::steady_clock;
inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace vrun
