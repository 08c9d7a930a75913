// FileStore: a Store kept as one file per key in a directory, for ranks that
// share a file system (one host, or an NFS directory across hosts).
//
// set() writes a temporary file and renames it into place, so a reader sees
// either no file or the whole value. add() serializes through flock() on a
// per-key lock file. get() and wait() poll for the file with a short backoff
// until their deadline. Use a fresh directory per job: keys of an earlier job
// would be taken for this one's.
#pragma once

#include "store/store.h"

#include <string>

namespace chorus {

class FileStore final : public Store {
 public:
  // Creates `dir` (and its parents) when missing.
  explicit FileStore(std::string dir);

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key, Deadline deadline) override;
  void wait(const std::vector<std::string>& keys, Deadline deadline) override;
  int64_t add(const std::string& key, int64_t delta) override;

  const std::string& dir() const { return dir_; }

 private:
  std::string path_of(const std::string& key) const;
  void write_file(const std::string& path, const void* data, size_t bytes) const;

  std::string dir_;
};

}  // namespace chorus
