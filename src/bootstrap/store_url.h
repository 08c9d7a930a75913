// Store URLs: "file:///dir" names a FileStore directory, "tcp://host:port" a
// TcpStore server. parse_store_url only reads the text (no name resolution,
// no file system), so it can be tested and fuzzed on its own; open_store
// (bootstrap.h) opens what it describes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace chorus {

struct StoreUrl {
  enum class Kind { file, tcp };
  Kind kind = Kind::file;
  std::string path;   // file: the directory, absolute
  std::string host;   // tcp: the server's name or address, not empty
  uint16_t port = 0;  // tcp: from 1 to 65535
};

// Splits a store URL into its parts; a malformed one throws
// Error(invalid_argument) naming it:
//   parse_store_url("tcp://node0:29500")  -> {tcp, "", "node0", 29500}
//   parse_store_url("file:///tmp/job42")  -> {file, "/tmp/job42"}
StoreUrl parse_store_url(std::string_view url);

}  // namespace chorus
