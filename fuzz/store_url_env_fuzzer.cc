// Fuzz target: the environment parsers of src/core/config.h (Config::from_env,
// read_bootstrap_env, launcher_env_present) and the store URL parser of
// src/bootstrap/store_url.h (parse_store_url), through their lookup variants.
//
// Input: an environment as text, one NAME=VALUE per line (a line without '='
// is ignored; a later line for a name replaces an earlier one):
//   CHORUS_RANK=1
//   CHORUS_WORLD_SIZE=4
//   CHORUS_STORE=tcp://node0:29500
// Bad values must come back as chorus::Error and nothing else (only that is
// caught). What parses must make sense: a positive timeout, 1 to 64 tcp
// streams, a rank below the world size, a store URL with an absolute path or
// a host and a port from 1 to 65535.
#include "bootstrap/store_url.h"
#include "core/config.h"

#include <chorus/error.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>

namespace {

using namespace chorus;

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "store_url_env: %s\n", what);
  std::abort();
}

std::map<std::string, std::string, std::less<>> decode_env(std::string_view text) {
  std::map<std::string, std::string, std::less<>> vars;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    vars[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
  }
  return vars;
}

void check_store_url(const std::string& url) {
  try {
    const StoreUrl u = parse_store_url(url);
    if (u.kind == StoreUrl::Kind::file)
      require(!u.path.empty() && u.path[0] == '/', "a file:// store without an absolute path");
    else
      require(!u.host.empty() && u.port != 0, "a tcp:// store without a host or a port");
  } catch (const Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto vars = decode_env(std::string_view(reinterpret_cast<const char*>(data), size));
  const EnvLookup env = env_from_map(vars);
  try {
    const Config c = Config::from_env(env);
    require(c.timeout.count() > 0, "a timeout that is not positive");
    require(c.spin.count() >= 0, "a negative spin");
    // 0 is automatic (tcp_streams_for), whose answer is 1 to 64 too.
    require(c.tcp_streams <= 64, "tcp streams above 64");
    for (int world : {1, 256, 257, 1 << 20}) {
      const size_t streams = tcp_streams_for(c, world);
      require(streams >= 1 && streams <= 64, "tcp streams outside 1 to 64");
    }
  } catch (const Error&) {
  }
  try {
    const BootstrapEnv b = read_bootstrap_env(env);
    require(b.rank >= 0 && b.rank < b.world_size, "a rank outside [0, world size)");
    require(!b.store.empty(), "a bootstrap without a store");
    check_store_url(b.store);
  } catch (const Error&) {
  }
  launcher_env_present(env);
  if (auto it = vars.find("CHORUS_STORE"); it != vars.end()) check_store_url(it->second);
  return 0;
}
