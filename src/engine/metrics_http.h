// The HTTP export of CHORUS_METRICS=[ADDRESS]:PORT (engine/metrics.h):
// GET /metrics answers with the Prometheus text, served by cpp-httplib
// (Debian's libcpp-httplib-dev) on a thread of its own.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace chorus::detail {

class MetricsServer {
 public:
  // Binds `address` ("" = every address) and `port` (0: any free port) now,
  // or throws Error(system) saying why; then serves on its thread, each
  // request answered with render().
  MetricsServer(const std::string& address, int port, std::function<std::string()> render);
  // Stops the server and joins its thread.
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  int port() const { return port_; }

 private:
  struct State;
  std::unique_ptr<State> state_;
  int port_ = 0;
};

}  // namespace chorus::detail
