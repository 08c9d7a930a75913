// The replay driver: runs a fuzz target's LLVMFuzzerTestOneInput once on the
// empty input and on every file of the directories (or files) it is given, as
// the normal build's regression test of the target's seeds and kept crash
// inputs. A crash, a sanitizer report or an exception that escapes the target
// fails the test, exactly as it would under libFuzzer.
//
//   tcp_wire_replay fuzz/corpus/tcp_wire fuzz/crashes/tcp_wire
//
// Names starting with '.' (.gitkeep) are skipped; a directory that does not
// exist counts as empty (a target may have no kept crash inputs yet).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs_under(const fs::path& path) {
  std::vector<fs::path> files;
  if (fs::is_regular_file(path)) return {path};
  if (!fs::is_directory(path)) return files;
  for (const auto& entry : fs::recursive_directory_iterator(path))
    if (entry.is_regular_file() && entry.path().filename().string().rfind('.', 0) != 0)
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

void run_one(const std::vector<uint8_t>& bytes) {
  // An input of n bytes gets exactly n bytes of its own, so that AddressSanitizer
  // sees a read past its end.
  std::vector<uint8_t> copy(bytes);
  LLVMFuzzerTestOneInput(copy.empty() ? nullptr : copy.data(), copy.size());
}

}  // namespace

int main(int argc, char** argv) {
  run_one({});
  size_t count = 1;
  for (int i = 1; i < argc; ++i) {
    for (const fs::path& file : inputs_under(argv[i])) {
      std::ifstream in(file, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "cannot read %s\n", file.c_str());
        return 1;
      }
      const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                       std::istreambuf_iterator<char>());
      std::fprintf(stderr, "replay %s (%zu bytes)\n", file.c_str(), bytes.size());
      run_one(bytes);
      ++count;
    }
  }
  std::printf("replayed %zu inputs without a failure\n", count);
  return 0;
}
