// The layering rule of src/, as docs/DESIGN.md draws it: a folder may include
// only folders on lower layers. This test reads the layer list from
// docs/DESIGN.md (the lines "layer N: folder ..." of its Layers section) and
// every #include "..." line under src/, and fails on an include that runs up
// or sideways (a sideways or upward arrow is what closes a cycle between
// folders), and on a folder of src/ that the list does not place. It also
// checks the split into the runtime library and the developer library: the
// line "developer library: ..." of the same section names the folders that
// src/CMakeLists.txt compiles into chorus_dev (CHORUS_DEV_FOLDERS), and no
// runtime source includes one of them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
const fs::path kRoot = CHORUS_SOURCE_DIR;

// folder -> layer, from docs/DESIGN.md.
std::map<std::string, int> read_layers() {
  std::ifstream in(kRoot / "docs" / "DESIGN.md");
  std::map<std::string, int> layers;
  const std::regex line(R"(^layer (\d+): ([a-z_]+(?: [a-z_]+)*)(?:  .*)?$)");
  for (std::string s; std::getline(in, s);) {
    std::smatch m;
    if (!std::regex_match(s, m, line)) continue;
    std::istringstream folders(m[2].str());
    for (std::string f; folders >> f;) layers[f] = std::stoi(m[1].str());
  }
  return layers;
}

// The folders of the developer library, from docs/DESIGN.md's line
// "developer library: folder ..." and from src/CMakeLists.txt's
// set(CHORUS_DEV_FOLDERS ...).
std::set<std::string> words_after(const fs::path& file, const std::regex& line) {
  std::ifstream in(file);
  std::set<std::string> out;
  for (std::string s; std::getline(in, s);) {
    std::smatch m;
    if (!std::regex_match(s, m, line)) continue;
    std::istringstream words(m[1].str());
    for (std::string w; words >> w;) out.insert(w);
  }
  return out;
}
std::set<std::string> design_dev_folders() {
  return words_after(kRoot / "docs" / "DESIGN.md",
                     std::regex(R"(^developer library: ([a-z_]+(?: [a-z_]+)*)(?:  .*)?$)"));
}
std::set<std::string> cmake_dev_folders() {
  return words_after(kRoot / "src" / "CMakeLists.txt",
                     std::regex(R"(^set\(CHORUS_DEV_FOLDERS ([a-z_]+(?: [a-z_]+)*)\)$)"));
}

std::string names_below(const std::map<std::string, int>& layers, int layer) {
  std::string s;
  for (const auto& [f, l] : layers)
    if (l < layer) s += (s.empty() ? "" : ", ") + f;
  return s.empty() ? "nothing" : s;
}

TEST(Layering, DesignListsTheLayers) {
  const auto layers = read_layers();
  ASSERT_GE(layers.size(), 8u)
      << "docs/DESIGN.md has no layer list (lines \"layer N: folder ...\")";
  for (const auto& entry : fs::directory_iterator(kRoot / "src")) {
    if (!entry.is_directory()) continue;
    const std::string folder = entry.path().filename().string();
    EXPECT_TRUE(layers.count(folder))
        << "src/" << folder << "/ is on no layer: add it to the layer list in docs/DESIGN.md";
  }
}

// One #include "folder/..." of a source under src/.
struct Include {
  fs::path file;     // relative to src/
  std::string from;  // the folder of the file
  int line = 0;
  std::string target;  // what is included
  std::string to;      // its folder
};
// Every #include "folder/..." line of every .h and .cc under src/.
std::vector<Include> includes_of_src() {
  const std::regex include(R"re(^\s*#\s*include\s*"(([a-z_]+)/[^"]*)")re");
  std::vector<Include> out;
  for (const auto& entry : fs::recursive_directory_iterator(kRoot / "src")) {
    if (!entry.is_regular_file()) continue;
    const std::string ext = entry.path().extension().string();
    if (ext != ".h" && ext != ".cc") continue;
    const fs::path rel = fs::relative(entry.path(), kRoot / "src");
    std::ifstream in(entry.path());
    int number = 0;
    for (std::string s; std::getline(in, s);) {
      ++number;
      std::smatch m;
      if (std::regex_search(s, m, include))
        out.push_back({rel, rel.begin()->string(), number, m[1].str(), m[2].str()});
    }
  }
  return out;
}

TEST(Layering, NoIncludeRunsUpOrSideways) {
  const auto layers = read_layers();
  ASSERT_FALSE(layers.empty());
  size_t checked = 0;
  for (const Include& i : includes_of_src()) {
    if (!layers.count(i.from)) continue;  // reported by DesignListsTheLayers
    ++checked;
    if (i.to == i.from) continue;
    const auto it = layers.find(i.to);
    if (it == layers.end()) continue;  // not a folder of src/ (e.g. a test helper)
    const int lf = layers.at(i.from), lt = it->second;
    EXPECT_LT(lt, lf) << "src/" << i.file.string() << ":" << i.line << " includes \"" << i.target
                      << "\": " << i.from << " (layer " << lf
                      << ") may include only folders below it (" << names_below(layers, lf)
                      << "), and " << i.to << " is on layer " << lt
                      << ". See the Layers section of docs/DESIGN.md.";
  }
  EXPECT_GT(checked, 100u) << "found hardly any includes under src/";
}

TEST(Layering, DeveloperLibraryIsTheOneTheBuildMakes) {
  const auto layers = read_layers();
  const auto dev = design_dev_folders();
  ASSERT_FALSE(dev.empty()) << "docs/DESIGN.md has no line \"developer library: folder ...\"";
  EXPECT_EQ(dev, cmake_dev_folders())
      << "docs/DESIGN.md's developer library and src/CMakeLists.txt's CHORUS_DEV_FOLDERS differ";
  for (const auto& f : dev) EXPECT_TRUE(layers.count(f)) << f << " is on no layer";
}

TEST(Layering, RuntimeIncludesNoDeveloperFolder) {
  const auto dev = design_dev_folders();
  ASSERT_FALSE(dev.empty());
  size_t checked = 0;
  for (const Include& i : includes_of_src()) {
    if (dev.count(i.from)) continue;
    ++checked;
    if (dev.count(i.to))
      ADD_FAILURE() << "src/" << i.file.string() << ":" << i.line << " includes " << i.target
                    << ", which is in the developer library (chorus_dev, not installed): "
                       "the runtime library must not need it";
  }
  EXPECT_GT(checked, 100u);
}

}  // namespace
