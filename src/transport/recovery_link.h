// RecoveryLink: where a rank of a communicator can be reached when the
// communicator's own links are gone. Communicator::shrink (recovery/shrink.cc)
// agrees on the survivors over these links, so they must outlive any failure
// of the transport: each rank listens on a socket of its own for as long as
// its communicator lives, and knows where every peer listens.
//
// A process communicator learns its peers' places through the store it was
// made over (bootstrap_over_store publishes them next to the host
// identities); the ranks of an in-process world share one
// RecoveryDirectory, which each fills in as its transport is made. Nothing
// is sent on a link before a shrink, and no thread serves it: peers that
// connect wait in the listener's backlog until this rank shrinks too.
#pragma once

#include "core/fd.h"
#include "net/socket.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace chorus {

// Where each rank of one communicator listens, and the communicator's
// token, which every agreement message carries (a stray connection from
// anything else is refused).
class RecoveryDirectory {
 public:
  RecoveryDirectory(int size, uint64_t token);
  int size() const { return static_cast<int>(places_.size()); }
  uint64_t token() const { return token_; }
  void set(int rank, const Endpoint& place);
  // Where `rank` listens; nullopt while it has not said (an in-process rank
  // whose communicator is not made yet).
  std::optional<Endpoint> get(int rank) const;

 private:
  const uint64_t token_;
  mutable std::mutex mu_;
  std::vector<std::optional<Endpoint>> places_;
};

// A fresh random token for a new communicator's directory.
uint64_t random_recovery_token();

// This rank's listener, and the directory of its communicator. Closing it
// (the communicator goes) refuses every later connection, which is how
// peers learn that this rank has left.
class RecoveryLink {
 public:
  // Listens on `address` (an ephemeral port) and enters the place in
  // `directory`.
  RecoveryLink(int rank, std::shared_ptr<RecoveryDirectory> directory, const std::string& address);
  int rank() const { return rank_; }
  int listener() const { return listener_.get(); }
  const Endpoint& place() const { return place_; }
  RecoveryDirectory& directory() const { return *directory_; }
  // The address it listens at: where a set-up point that this rank opens
  // for the survivors (recovery/shrink.cc) can listen too.
  const std::string& address() const { return address_; }
  // Shrink attempts made over this link, so that a retry never reads an
  // earlier attempt's messages.
  uint32_t next_attempt() { return ++attempts_; }

 private:
  int rank_;
  std::shared_ptr<RecoveryDirectory> directory_;
  std::string address_;
  Fd listener_;
  Endpoint place_;
  uint32_t attempts_ = 0;
};

}  // namespace chorus
