// FileStore: a Store kept as one file per key in a directory, for ranks that
// share a file system (one host, or an NFS directory across hosts).
//
// set() writes a temporary file and renames it into place, so a reader sees
// either no file or the whole value. add() serializes through flock() on a
// per-key lock file. get() and wait() poll for the file with a short backoff
// until their deadline. abort() writes the file "aborted" (first writer wins;
// no key maps to that name), which every operation checks first. Use a fresh
// directory per job: keys of an earlier job would be taken for this one's.
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
  void abort(const std::string& reason) override;

  const std::string& dir() const { return dir_; }

 private:
  std::string path_of(const std::string& key) const;
  // Writes a temporary file; renames it to `path`, or, with `exclusive`,
  // links it there unless `path` exists (false then).
  bool write_file(const std::string& path, const void* data, size_t bytes,
                  bool exclusive = false) const;
  // Throws Error(peer_failure) with the reason once the store was aborted.
  void check_aborted() const;

  std::string dir_;
};

}  // namespace chorus
