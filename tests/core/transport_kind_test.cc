// core/transport_kind.h: the one list of transport names, what each may be
// asked for by, the tuner's link classes, and the errors that list the names.
#include "core/transport_kind.h"

#include "core/config.h"

#include <chorus/error.h>
#include <chorus/init.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace chorus {
namespace {

TEST(TransportKind, NamesRoundTrip) {
  for (TransportKind k :
       {TransportKind::inproc, TransportKind::shm, TransportKind::tcp, TransportKind::shm_tcp})
    EXPECT_EQ(parse_transport_kind(to_string(k)), k) << to_string(k);
  EXPECT_EQ(to_string(TransportKind::shm_tcp), "shm+tcp");
  EXPECT_EQ(parse_transport_kind("carrier-pigeon"), std::nullopt);
  EXPECT_EQ(parse_transport_kind(""), std::nullopt);
  EXPECT_EQ(parse_transport_kind("SHM"), std::nullopt);
}

TEST(TransportKind, WhoMayAskForWhat) {
  EXPECT_EQ(transport_names(requestable_transports()), "inproc, shm, tcp");
  EXPECT_EQ(transport_names(process_transports()), "shm, tcp");
  EXPECT_EQ(transport_name_list(process_transports()), (std::vector<std::string>{"shm", "tcp"}));
  EXPECT_EQ(parse_transport_kind("inproc", requestable_transports()), TransportKind::inproc);
  EXPECT_EQ(parse_transport_kind("inproc", process_transports()), std::nullopt);
  EXPECT_EQ(parse_transport_kind("shm+tcp", requestable_transports()), std::nullopt);
}

TEST(TransportKind, TheCompositeIsTunedForItsTcpLinks) {
  EXPECT_EQ(link_class(TransportKind::inproc), "inproc");
  EXPECT_EQ(link_class(TransportKind::shm), "shm");
  EXPECT_EQ(link_class(TransportKind::tcp), "tcp");
  EXPECT_EQ(link_class(TransportKind::shm_tcp), "tcp");
}

std::string process_transport_error(const std::string& value) {
  try {
    parse_process_transport(value, "CHORUS_TRANSPORT='" + value + "'");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.what();
  }
  return "";
}

TEST(TransportKind, AProcessMayAskForShmOrTcpAndIsToldWhyNotOthers) {
  EXPECT_EQ(parse_process_transport("shm", "x"), TransportKind::shm);
  EXPECT_EQ(parse_process_transport("tcp", "x"), TransportKind::tcp);
  EXPECT_EQ(process_transport_error("carrier-pigeon"),
            "CHORUS_TRANSPORT='carrier-pigeon' is not one of shm, tcp");
  EXPECT_EQ(process_transport_error("shm+tcp"),
            "CHORUS_TRANSPORT='shm+tcp' is not one of shm, tcp");
  const std::string inproc = process_transport_error("inproc");
  EXPECT_EQ(inproc.rfind("CHORUS_TRANSPORT='inproc': inproc ranks are threads", 0), 0u) << inproc;
  EXPECT_NE(inproc.find("run_ranks"), std::string::npos) << inproc;
  EXPECT_NE(inproc.find("one of shm, tcp"), std::string::npos) << inproc;
}

// The configuration and init() take the same list: CHORUS_TRANSPORT accepts
// exactly the kinds a process may ask for.
TEST(TransportKind, TheConfigurationAcceptsExactlyTheProcessKinds) {
  for (TransportKind k : requestable_transports()) {
    const std::string name(to_string(k));
    const bool process = parse_transport_kind(name, process_transports()).has_value();
    if (process) {
      EXPECT_EQ(Config::from_env(env_from_map({{"CHORUS_TRANSPORT", name}})).transport, k);
    } else {
      EXPECT_THROW(Config::from_env(env_from_map({{"CHORUS_TRANSPORT", name}})), Error) << name;
    }
  }
  EXPECT_EQ(Config::from_env(env_from_map({})).transport, std::nullopt);
}

// init() refuses what CHORUS_TRANSPORT refuses, with the same reason, before
// it opens any store.
TEST(TransportKind, InitRefusesInprocSayingWhy) {
  InitOptions options;
  options.rank = 0;
  options.world_size = 1;
  options.store = "file:///nonexistent/chorus-store";
  options.transport = "inproc";
  try {
    init(options);
    FAIL() << "init accepted transport inproc";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("init: transport 'inproc': inproc ranks are threads", 0), 0u) << what;
  }
  options.transport = "udp";
  try {
    init(options);
    FAIL() << "init accepted transport udp";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "init: transport 'udp' is not one of shm, tcp");
  }
}

}  // namespace
}  // namespace chorus
