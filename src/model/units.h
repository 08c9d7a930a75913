// Parsing and printing of the physical units the cost model, the simulator and
// their tools speak: times ("2us"), bandwidths ("25GB/s"), sizes ("64M"),
// reduction rates ("0.1ns" per byte).
//
// Decimal prefixes for bandwidth (1 GB/s = 1e9 B/s, as link vendors quote it);
// binary prefixes for sizes (4K = 4096 B, as buffer sizes are chosen).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace chorus {

// "2us", "1.5ms", "300ns", "0.25s" -> seconds. A bare number is seconds.
// Throws Error(invalid_argument) naming `what` and the text on bad input.
double parse_time(std::string_view text, std::string_view what = "time");

// "25GB/s", "100MB/s", "1e9B/s", "12.5KB/s" -> bytes per second (> 0).
// A bare number is bytes per second.
double parse_bandwidth(std::string_view text, std::string_view what = "bandwidth");

// "8", "4K", "64M", "1G" (K = 1024), optional trailing "B" -> bytes.
size_t parse_size(std::string_view text, std::string_view what = "size");

// 1.5e-6 -> "1.5us"; picks s, ms, us or ns so that the number is >= 1.
std::string format_time(double seconds);
// 4096 -> "4K", 3000 -> "3000", 1 << 20 -> "1M": the largest binary prefix
// that divides exactly.
std::string format_size(size_t bytes);
// 25e9 -> "25GB/s".
std::string format_bandwidth(double bytes_per_second);

}  // namespace chorus
