#include "store/file_store.h"

#include "core/check.h"
#include "core/fd.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

namespace chorus {

namespace {

std::string errno_text(int err) {
  return str_cat(std::strerror(err), " (errno ", err, ")");
}

// Reads a whole file; false when it does not exist.
bool read_file(const std::string& path, std::vector<uint8_t>& out) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT) return false;
    fail(ErrorCode::system, "FileStore: open ", path, ": ", errno_text(errno));
  }
  out.clear();
  uint8_t buf[65536];
  while (true) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n > 0) {
      out.insert(out.end(), buf, buf + n);
      continue;
    }
    if (n == 0) return true;
    if (errno != EINTR) fail(ErrorCode::system, "FileStore: read ", path, ": ", errno_text(errno));
  }
}

}  // namespace

FileStore::FileStore(std::string dir) : dir_(std::move(dir)) {
  if (dir_.empty()) fail(ErrorCode::invalid_argument, "FileStore: empty directory name");
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec || !std::filesystem::is_directory(dir_))
    fail(ErrorCode::system, "FileStore: cannot create directory '", dir_, "': ", ec.message());
}

std::string FileStore::path_of(const std::string& key) const {
  // Keys may hold '/' (PrefixStore) or anything else: escape all but
  // [A-Za-z0-9_-] so that every key is one flat, unambiguous file name.
  std::string name;
  name.reserve(key.size() + 8);
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '_' || c == '-') {
      name += static_cast<char>(c);
    } else {
      name += '.';
      name += kHex[c >> 4];
      name += kHex[c & 15];
    }
  }
  return dir_ + "/k_" + name;
}

bool FileStore::write_file(const std::string& path, const void* data, size_t bytes,
                           bool exclusive) const {
  // A unique temporary name per writer, then an atomic rename (or link) into place.
  std::random_device rd;
  const std::string tmp = str_cat(path, ".tmp.", ::getpid(), ".", rd());
  {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd.valid()) fail(ErrorCode::system, "FileStore: create ", tmp, ": ", errno_text(errno));
    const auto* p = static_cast<const uint8_t*>(data);
    while (bytes > 0) {
      const ssize_t n = ::write(fd.get(), p, bytes);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(ErrorCode::system, "FileStore: write ", tmp, ": ", errno_text(errno));
      p += n;
      bytes -= static_cast<size_t>(n);
    }
  }
  if (exclusive) {
    const int rc = ::link(tmp.c_str(), path.c_str());
    const int err = errno;
    ::unlink(tmp.c_str());
    if (rc == 0) return true;
    if (err == EEXIST) return false;
    fail(ErrorCode::system, "FileStore: link to ", path, ": ", errno_text(err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(ErrorCode::system, "FileStore: rename to ", path, ": ", errno_text(err));
  }
  return true;
}

void FileStore::check_aborted() const {
  std::vector<uint8_t> reason;
  if (read_file(dir_ + "/aborted", reason))
    fail(ErrorCode::peer_failure, "FileStore ", dir_,
         ": the store was aborted: ", std::string(reason.begin(), reason.end()));
}

void FileStore::abort(const std::string& reason) {
  write_file(dir_ + "/aborted", reason.data(), reason.size(), /*exclusive=*/true);
}

void FileStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  check_aborted();
  write_file(path_of(key), value.data(), value.size());
}

std::vector<uint8_t> FileStore::get(const std::string& key, Deadline deadline) {
  const std::string path = path_of(key);
  std::vector<uint8_t> value;
  auto backoff = std::chrono::microseconds(200);
  while (true) {
    check_aborted();
    if (read_file(path, value)) break;
    if (Clock::now() >= deadline)
      fail(ErrorCode::timeout, "FileStore ", dir_, ": timeout waiting for key '", key, "'");
    std::this_thread::sleep_for(std::min<Clock::duration>(backoff, deadline - Clock::now()));
    backoff = std::min(backoff * 2, std::chrono::microseconds(20'000));
  }
  return value;
}

void FileStore::wait(const std::vector<std::string>& keys, Deadline deadline) {
  for (const auto& k : keys) get(k, deadline);
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  check_aborted();
  const std::string path = path_of(key);
  const std::string lock_path = path + ".lock";
  Fd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!lock.valid())
    fail(ErrorCode::system, "FileStore: open ", lock_path, ": ", errno_text(errno));
  while (::flock(lock.get(), LOCK_EX) != 0)
    if (errno != EINTR)
      fail(ErrorCode::system, "FileStore: flock ", lock_path, ": ", errno_text(errno));
  // The counter is kept as decimal text, as TcpStore keeps it.
  std::vector<uint8_t> current;
  int64_t value = 0;
  if (read_file(path, current) && !current.empty()) {
    const char* b = reinterpret_cast<const char*>(current.data());
    const auto [end, ec] = std::from_chars(b, b + current.size(), value);
    if (ec != std::errc() || end != b + current.size()) {
      std::string shown;
      for (size_t i = 0; i < current.size() && i < 64; ++i)
        shown += current[i] >= 0x20 && current[i] < 0x7f ? static_cast<char>(current[i]) : '?';
      fail(ErrorCode::invalid_argument, "FileStore ", dir_, ": add on key '", key,
           "', which holds '", shown, current.size() > 64 ? "...'" : "'", ", not an integer");
    }
  }
  if (__builtin_add_overflow(value, delta, &value))
    fail(ErrorCode::invalid_argument, "FileStore ", dir_, ": add of ", delta, " on key '", key,
         "' overflows 64 bits");
  const std::string text = std::to_string(value);
  write_file(path, text.data(), text.size());
  ::flock(lock.get(), LOCK_UN);
  return value;
}

}  // namespace chorus
