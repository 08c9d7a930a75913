// RecoveryDirectory and RecoveryLink (recovery_link.h).
#include "transport/recovery_link.h"

#include "core/check.h"

#include <random>

namespace chorus {

RecoveryDirectory::RecoveryDirectory(int size, uint64_t token)
    : token_(token), places_(static_cast<size_t>(size)) {}

void RecoveryDirectory::set(int rank, const Endpoint& place) {
  CHORUS_CHECK(rank >= 0 && rank < size());
  std::lock_guard lock(mu_);
  places_[static_cast<size_t>(rank)] = place;
}

std::optional<Endpoint> RecoveryDirectory::get(int rank) const {
  if (rank < 0 || rank >= size()) return std::nullopt;
  std::lock_guard lock(mu_);
  return places_[static_cast<size_t>(rank)];
}

uint64_t random_recovery_token() {
  std::random_device device;
  return (uint64_t{device()} << 32) | device();
}

RecoveryLink::RecoveryLink(int rank, std::shared_ptr<RecoveryDirectory> directory,
                           const std::string& address)
    : rank_(rank),
      directory_(std::move(directory)),
      address_(address.empty() ? "127.0.0.1" : address) {
  CHORUS_CHECK(directory_ != nullptr);
  place_ = resolve(address_, 0, "the recovery address");
  listener_ = listen_on(place_, "the recovery link");
  place_.addr.sin_port = htons(local_port(listener_.get()));
  directory_->set(rank_, place_);
}

}  // namespace chorus
