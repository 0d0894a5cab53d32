// What a long command prints as it goes: durations people read at a glance,
// and what remains of work done at a steady pace. CAF-free, no state.
#pragma once

#include <string>

namespace rlx {

// "42 s", "3 min 05 s", "1 h 12 min"; "?" for a negative or non-finite value.
std::string human_duration(double seconds);

// Seconds left when `done` of `total` units took `elapsed_s`, at the pace
// so far; NaN before the first unit is done.
double remaining_s(double done, double total, double elapsed_s);

// "~3 min 05 s left", or "" when nothing can be said yet. With a time
// limit (`limit_s` > 0, from the same start) that comes sooner than the
// pace says, what the limit leaves.
std::string left_text(double done, double total, double elapsed_s, double limit_s = 0);

}  // namespace rlx
