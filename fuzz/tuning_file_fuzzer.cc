// Fuzz target: the tuning-file parser, tuning_from_json (src/tune/tuning_file.h).
//
// Input: the text of a tuning file. Bad text must come back as chorus::Error
// and nothing else: the target catches chorus::Error only, so any other
// exception escapes and libFuzzer reports it. A table that parses must write
// (tuning_to_json) and parse back to the same table.
#include "tune/tuning_file.h"

#include <chorus/error.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "tuning_file: %s\n", what);
  std::abort();
}

bool same_links(const chorus::TuningTable& a, const chorus::TuningTable& b) {
  if (a.links.size() != b.links.size()) return false;
  for (auto ia = a.links.begin(), ib = b.links.begin(); ia != a.links.end(); ++ia, ++ib)
    if (ia->first != ib->first || ia->second.name != ib->second.name ||
        ia->second.alpha != ib->second.alpha || ia->second.beta != ib->second.beta)
      return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  chorus::TuningTable table;
  try {
    table = chorus::tuning_from_json(text, "fuzz input");
  } catch (const chorus::Error&) {
    return 0;
  }
  const std::string written = chorus::tuning_to_json(table);
  chorus::TuningTable again;
  try {
    again = chorus::tuning_from_json(written, "written table");
  } catch (const chorus::Error& e) {
    std::fprintf(stderr, "%s\n%s\n", written.c_str(), e.what());
    require(false, "a table that parsed does not parse once written");
  }
  require(same_links(table, again) && table.rules == again.rules && table.gamma == again.gamma &&
              table.ports == again.ports,
          "a table written and parsed back differs");
  return 0;
}
