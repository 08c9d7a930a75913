// ForwardingTransport: a Transport that passes every call on to an inner
// Transport it owns. A decorator derives from it and overrides only what it
// changes; everything else reaches the inner transport unchanged.
//
//   // Keeps `store` alive exactly as long as the transport made through it.
//   class Owning final : public ForwardingTransport {
//    public:
//     Owning(std::unique_ptr<Transport> t, std::shared_ptr<Store> s)
//         : ForwardingTransport(std::move(t)), store_(std::move(s)) {}
//     ~Owning() override { destroy_inner(); }  // before store_ goes
//    private:
//     std::shared_ptr<Store> store_;
//   };
#pragma once

#include "core/check.h"
#include "transport/transport.h"

#include <memory>

namespace chorus {

class ForwardingTransport : public Transport {
 public:
  // `inner` must not be null.
  explicit ForwardingTransport(std::unique_ptr<Transport> inner) : inner_(std::move(inner)) {
    CHORUS_CHECK(inner_ != nullptr);
    set_host_layout(inner_->host_layout());  // the hosts the inner one was given
    set_recovery_link(inner_->recovery_link());
  }

  TransportKind kind() const override { return inner_->kind(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  bool shares_memory() const override { return inner_->shares_memory(); }
  bool shares_cores() const override { return inner_->shares_cores(); }
  std::string address() const override { return inner_->address(); }
  void check_peer(int peer) override { inner_->check_peer(peer); }
  RequestId isend(int peer, const void* data, size_t bytes, const CallStamp& stamp) override {
    return inner_->isend(peer, data, bytes, stamp);
  }
  RequestId irecv(int peer, void* dst, size_t bytes, const Reducer* reducer, const CallStamp& stamp,
                  WriteMode store) override {
    return inner_->irecv(peer, dst, bytes, reducer, stamp, store);
  }
  std::optional<CallStamp> waiting_message(int peer) override {
    return inner_->waiting_message(peer);
  }
  void begin_call(const CallStamp& stamp) override { inner_->begin_call(stamp); }
  std::vector<PeerProgress> peer_progress(Deadline deadline) override {
    return inner_->peer_progress(deadline);
  }
  void wait_some(std::vector<RequestId>& done, Deadline deadline) override {
    inner_->wait_some(done, deadline);
  }
  void poll(std::vector<RequestId>& done) override { inner_->poll(done); }
  void abort(ErrorCode cause, const std::string& reason) override { inner_->abort(cause, reason); }
  void interrupt() override { inner_->interrupt(); }

 protected:
  Transport& inner() const { return *inner_; }
  // Destroys the inner transport now, for a subclass whose own members must
  // outlive it (its destructor calls this first). No call may follow.
  void destroy_inner() { inner_.reset(); }

 private:
  std::unique_ptr<Transport> inner_;
};

}  // namespace chorus
