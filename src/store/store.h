// Store: the rendezvous key-value service ranks use to find each other.
//
// Keys are strings, values are bytes. Every operation takes a deadline; a wait
// past it throws Error(timeout) naming the key, and a store that cannot be
// reached throws Error(peer_failure). Implementations: FileStore (a directory
// on a shared file system) and TcpStore (one server, many clients).
//
// Aborting: a process whose start-up fails calls abort(reason); from then on
// every operation on the store, in every process, waits included, throws
// Error(peer_failure) carrying that reason, so that all ranks fail at once
// instead of waiting for keys that will never come. The first reason wins.
//
// Namespacing: PrefixStore wraps a store so that each communicator (and each
// transport inside it) uses its own key space.
#pragma once

#include "core/deadline.h"

#include <chorus/error.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace chorus {

class Store {
 public:
  virtual ~Store() = default;
  // Sets key to value (overwrites).
  virtual void set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // Value of key; waits for it to be set until the deadline.
  virtual std::vector<uint8_t> get(const std::string& key, Deadline deadline) = 0;
  // Waits until every key is set.
  virtual void wait(const std::vector<std::string>& keys, Deadline deadline) = 0;
  // Atomically adds delta to the integer stored at key (0 when unset) and
  // returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Marks the whole store (not a prefix of it) failed with `reason`.
  virtual void abort(const std::string& reason) = 0;
};

// Prepends "prefix/" to every key of `base` (which must outlive it).
class PrefixStore final : public Store {
 public:
  PrefixStore(std::shared_ptr<Store> base, std::string prefix)
      : base_(std::move(base)), prefix_(std::move(prefix) + "/") {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    base_->set(prefix_ + key, value);
  }
  std::vector<uint8_t> get(const std::string& key, Deadline deadline) override {
    return base_->get(prefix_ + key, deadline);
  }
  void wait(const std::vector<std::string>& keys, Deadline deadline) override {
    std::vector<std::string> full;
    full.reserve(keys.size());
    for (const auto& k : keys) full.push_back(prefix_ + k);
    base_->wait(full, deadline);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    return base_->add(prefix_ + key, delta);
  }
  void abort(const std::string& reason) override { base_->abort(reason); }

 private:
  std::shared_ptr<Store> base_;
  std::string prefix_;
};

}  // namespace chorus
