#include "bootstrap/store_url.h"

#include "core/check.h"
#include "net/socket.h"

#include <tuple>

namespace chorus {

StoreUrl parse_store_url(std::string_view text) {
  const std::string url(text);
  StoreUrl out;
  if (url.rfind("file://", 0) == 0) {
    out.kind = StoreUrl::Kind::file;
    out.path = url.substr(7);
    if (out.path.empty() || out.path[0] != '/')
      fail(ErrorCode::invalid_argument, "store URL '", url,
           "': file:// needs an absolute path, e.g. file:///tmp/job42");
    return out;
  }
  if (url.rfind("tcp://", 0) == 0) {
    out.kind = StoreUrl::Kind::tcp;
    std::tie(out.host, out.port) = split_host_port(url.substr(6), str_cat("store URL '", url, "'"));
    if (out.port == 0)
      fail(ErrorCode::invalid_argument, "store URL '", url, "': port 0 cannot be agreed on");
    return out;
  }
  fail(ErrorCode::invalid_argument, "store URL '", url,
       "' is neither file:///path nor tcp://host:port");
}

}  // namespace chorus
