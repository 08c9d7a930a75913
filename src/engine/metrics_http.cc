// MetricsServer (engine/metrics_http.h) over cpp-httplib. This is the one
// file that includes httplib.h: CMake gives it the library's compile
// definitions (src/CMakeLists.txt), which decide its classes' layout.
#include "engine/metrics_http.h"

#include "core/check.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>

namespace chorus::detail {

struct MetricsServer::State {
  httplib::Server server;
  std::thread thread;
  std::atomic<bool> returned{false};  // listen_after_bind returned
};

MetricsServer::MetricsServer(const std::string& address, int port,
                             std::function<std::string()> render)
    : state_(std::make_unique<State>()) {
  httplib::Server& server = state_->server;
  server.Get("/metrics",
             [render = std::move(render)](const httplib::Request&, httplib::Response& response) {
               response.set_content(render(), "text/plain; version=0.0.4; charset=utf-8");
             });
  const std::string host = address.empty() ? "0.0.0.0" : address;
  if (port == 0) {
    port_ = server.bind_to_any_port(host);
    if (port_ <= 0) fail(ErrorCode::system, "cannot listen on ", host, " (any port)");
  } else {
    if (!server.bind_to_port(host, port))
      fail(ErrorCode::system, "cannot listen on ", host, ":", port,
           " (in use, or not an address of this host)");
    port_ = port;
  }
  state_->thread = std::thread([state = state_.get()] {
    state->server.listen_after_bind();
    state->returned = true;
  });
}

MetricsServer::~MetricsServer() {
  // stop() ends a server that runs; one stopped before its thread began to
  // listen would listen for ever. Wait for it to run (or to have failed).
  while (!state_->server.is_running() && !state_->returned)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  state_->server.stop();
  if (state_->thread.joinable()) state_->thread.join();
}

}  // namespace chorus::detail
