// Fuzz target: the TcpStore server's side of the protocol, TcpStoreCore
// (src/store/tcp_store_core.h), with up to 8 clients at once, small caps and
// a clock of the input's choosing.
//
// Input: three header bytes, then steps.
//   byte 0   bit 0: the store holds kSecret (else it is open)
//   byte 1   the caps: 2 bits each for the key, value, queued reply and stored
//            bytes (kKeyCaps, kValueCaps, kQueueCaps, kStoredCaps)
//   byte 2   where the clock starts: byte * (Deadline::max() / 255), so that
//            255 starts within a few nanoseconds of the end of time
// Each step is one byte: its low 3 bits name a client slot (a slot without a
// client connects one first), the rest the action, with its operands after it:
//   send     n (1 byte), then n raw bytes for the client to send
//   hello    the client sends a valid hello (proof of kSecret included)
//   request  op, key, value, timeout (1 byte each; see encode_request), then
//            the value's bytes: the client sends one well-formed request
//   read     n (1 byte): the client reads n reply bytes (0: all of them)
//   tick     d (1 byte): the clock moves on (see advance), then expire()
//   drop     the connection goes away (disconnect)
// Bytes sent are fed to receive() at once, in the pieces the steps make.
//
// After every step the target checks, for every client, what the core promises
// (see check_all): the caps (stats, each client's queued bytes and all the
// bytes the core holds for it); the server hello; the answer to the hello
// (admitted with the server's proof exactly when the hello carried the proof of
// kSecret; a client never admitted gets no other reply); one reply per request,
// in order, of a status and size its op allows (a get's value is one that was
// set, or a counter; a timeout not before the get's own deadline; one abort
// reason for everyone); a client that is not waiting on a get has every
// complete request answered, and a malformed one closes it; a closed client
// gets no more output; a client without a hello by its deadline is closed at
// the next expire(); each close is reported once by take_closed(). A violated
// check aborts with its name; any exception escapes and counts as a crash.
#include "core/deadline.h"
#include "net/socket.h"
#include "store/tcp_store_core.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace {

using namespace chorus;
using namespace chorus::store_wire;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;

constexpr std::string_view kSecret = "fuzz secret";
constexpr std::array<size_t, 4> kKeyCaps = {4, 16, 64, 4096};
constexpr std::array<size_t, 4> kValueCaps = {8, 32, 256, 4096};
// At least the server hello, which is queued before any cap applies.
constexpr std::array<size_t, 4> kQueueCaps = {kServerHelloBytes, 96, 300, 5000};
constexpr std::array<size_t, 4> kStoredCaps = {16, 64, 512, 1 << 20};
constexpr size_t kSlots = 8;
constexpr int kMaxConnects = 32;
constexpr auto kAuthTime = std::chrono::seconds(10);

// Keys the request step picks from ("long" ones are over the smaller caps).
const std::array<std::string, 8> kKeys = {"",
                                          "a",
                                          "b",
                                          "counter",
                                          "chorus/comm0/addr/1",
                                          "0123456789abcdef",
                                          std::string(70, 'k'),
                                          std::string("z\0z", 3)};
// Values a set step may use instead of raw bytes: counters, almost counters.
const std::array<std::string, 12> kTexts = {"0",
                                            "-1",
                                            "9223372036854775807",
                                            "-9223372036854775808",
                                            "9223372036854775808",
                                            "12x",
                                            "",
                                            "-",
                                            "+1",
                                            "007",
                                            " 1",
                                            "99999999999999999999999"};
constexpr std::array<int64_t, 8> kDeltas = {1,         -1, 0,  INT64_MAX,
                                            INT64_MIN, 5,  -5, int64_t{1} << 40};

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "tcp_store: %s\n", what);
  std::abort();
}

std::string text(const std::vector<uint8_t>& v) {
  return {v.begin(), v.end()};
}

Deadline advance(Deadline t, nanoseconds d) {
  return d >= Deadline::max() - t ? Deadline::max() : t + d;
}

// A tick of d: d * 10 ms up to 2 s, then powers of two from 2 s to the end
// of time.
nanoseconds tick_of(uint8_t d) {
  if (d <= 200) return milliseconds(10) * d;
  const int shift = std::min(63, 31 + (d - 201));
  return shift == 63 ? nanoseconds::max() : nanoseconds(int64_t{1} << shift);
}

// A request step's timeout byte t: t * 10 ms up to 2 s, then powers of two
// of milliseconds, and 255 the largest the wire can say.
uint64_t timeout_of(uint8_t t) {
  if (t <= 200) return uint64_t{10} * t;
  if (t == 255) return UINT64_MAX;
  return uint64_t{1} << std::min(63, 11 + (t - 201));
}

// The deadline of a get sent at `sent` with `timeout_ms`: the core may not
// answer it with a timeout before then (it handles the get no earlier).
Deadline get_deadline(Deadline sent, uint64_t timeout_ms) {
  const auto ms = static_cast<int64_t>(std::min<uint64_t>(timeout_ms, INT64_MAX));
  return deadline_after(milliseconds(ms), sent);
}

struct Input {
  const uint8_t* p;
  size_t n;
  bool empty() const { return n == 0; }
  uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  std::span<const uint8_t> take(size_t want) {
    const size_t k = std::min(want, n);
    std::span<const uint8_t> s(p, k);
    p += k;
    n -= k;
    return s;
  }
};

struct Request {
  uint8_t op;
  std::string key;
  std::vector<uint8_t> value;
  uint64_t timeout_ms;
  Deadline sent;  // when its last byte reached the core
};

struct Reply {
  uint8_t status;
  std::vector<uint8_t> payload;
  Deadline at;  // the step that queued it
};

// One client as the target sees it: what it sent, what the core queued for
// it (read or not), and what that must mean.
struct Slot {
  TcpStoreCore::ClientId id = 0;
  Nonce server_nonce{};
  Nonce client_nonce{};  // for the hello step
  Deadline auth_deadline{};
  std::vector<uint8_t> sent;  // every byte fed to receive()
  size_t framed = 0;          // of `sent`: bytes split into hello and requests
  bool hello_done = false;
  bool hello_valid = false;    // the hello carried the right magic, version and proof
  bool hello_magic = false;    // ... the right magic at least
  Nonce hello_client_nonce{};  // from the hello sent
  std::vector<Request> requests;
  bool malformed = false;       // a complete request header the core must refuse
  std::vector<uint8_t> stream;  // every reply byte the core queued, in order
  size_t read = 0;              // of `stream`: bytes the client read
  size_t parsed = 0;            // of `stream`: bytes split into hello and replies
  bool hello_seen = false;
  std::vector<Reply> replies;
  bool closed = false;          // the core closed it (receive's outcome or take_closed)
  bool close_reported = false;  // take_closed named it
  size_t stream_at_close = 0;   // read + queued when it was closed: never more
};

class Harness {
 public:
  Harness(bool secret, TcpStoreLimits limits, Deadline start)
      : secret_(secret ? std::string(kSecret) : std::string()),
        limits_(limits),
        core_(secret_, limits),
        now_(start),
        max_held_(std::max(kRequestHeaderBytes + limits.max_key_bytes + limits.max_value_bytes,
                           kClientHelloBytes) +
                  2 * limits.max_queued_reply_bytes) {}

  void run(Input& in) {
    while (!in.empty()) {
      const uint8_t step = in.byte();
      const size_t s = step & 7;
      switch ((step >> 3) % 6) {
        case 0:
          send(s, in.take(in.byte()));
          break;
        case 1:
          send_hello(s);
          break;
        case 2:
          send_request(s, in);
          break;
        case 3:
          read(s, in.byte());
          break;
        case 4:
          now_ = advance(now_, tick_of(in.byte()));
          core_.expire(now_);
          check_expired();
          break;
        case 5:
          drop(s);
          break;
      }
      check_all();
    }
  }

 private:
  Slot* slot(size_t s) {
    if (slots_[s]) return &*slots_[s];
    if (connects_ >= kMaxConnects) return nullptr;
    ++connects_;
    Slot& c = slots_[s].emplace();
    c.server_nonce.fill(static_cast<uint8_t>(connects_));
    c.client_nonce.fill(static_cast<uint8_t>(0x80 + connects_));
    c.auth_deadline = deadline_after(kAuthTime, now_);
    c.id = core_.connect(c.server_nonce, c.auth_deadline);
    ids_.insert(c.id);
    return &c;
  }

  void send(size_t s, std::span<const uint8_t> bytes) {
    Slot* c = slot(s);
    if (!c) return;
    c->sent.insert(c->sent.end(), bytes.begin(), bytes.end());
    frame(*c);
    const auto outcome = core_.receive(c->id, bytes, now_);
    require(!outcome.close || !outcome.reason.empty(), "a close without a reason");
    if (outcome.close) mark_closed(*c);
    require(outcome.close == c->closed, "receive() says open for a closed client");
  }

  void send_hello(size_t s) {
    Slot* c = slot(s);
    if (!c) return;
    uint8_t h[kClientHelloBytes] = {};
    put_u32(h, kClientHelloMagic);
    put_u32(h + 4, kProtocolVersion);
    std::memcpy(h + 8, c->client_nonce.data(), kNonceBytes);
    if (!secret_.empty()) {
      const Mac p = client_proof(secret_, c->server_nonce, c->client_nonce);
      std::memcpy(h + 8 + kNonceBytes, p.data(), kMacBytes);
    }
    send(s, h);
  }

  // op: 1 + (byte & 3); key: kKeys[byte & 7]; value: for a set, raw bytes
  // (byte < 0xf0, that many) or kTexts[byte - 0xf0]; for an add, kDeltas[byte
  // & 7] (byte < 0x80) or 8 raw bytes; for an abort, that many raw bytes; none
  // for a get. timeout: timeout_of(byte).
  void send_request(size_t s, Input& in) {
    const auto op = static_cast<uint8_t>(1 + (in.byte() & 3));
    const std::string& key = kKeys[in.byte() & 7];
    const uint8_t v = in.byte();
    const uint64_t timeout_ms = timeout_of(in.byte());
    std::vector<uint8_t> value;
    if (op == op_set && v >= 0xf0) {
      const std::string& t = kTexts[(v - 0xf0) % kTexts.size()];
      value.assign(t.begin(), t.end());
    } else if (op == op_set || op == op_abort) {
      const auto raw = in.take(v);
      value.assign(raw.begin(), raw.end());
    } else if (op == op_add) {
      value.resize(8);
      if (v < 0x80) {
        put_u64(value.data(), static_cast<uint64_t>(kDeltas[v & 7]));
      } else {
        const auto raw = in.take(8);
        std::copy(raw.begin(), raw.end(), value.begin());
      }
    }
    send(s, encode_request(op, key, value, timeout_ms));
  }

  void read(size_t s, uint8_t n) {
    Slot* c = slot(s);
    if (!c) return;
    collect(*c, core_.output(c->id), core_.wants_input(c->id));  // before it is read
    const size_t queued = core_.output(c->id).size();
    const size_t k = n == 0 ? queued : std::min<size_t>(n, queued);
    if (n == 0) {
      require(core_.take_output(c->id).size() == k, "take_output() gave other than output()");
    } else {
      core_.sent(c->id, k);
    }
    c->read += k;
    require(core_.output(c->id).size() == queued - k, "sent() removed other than asked");
  }

  void drop(size_t s) {
    if (!slots_[s]) return;
    core_.disconnect(slots_[s]->id);
    slots_[s].reset();
  }

  void mark_closed(Slot& c) {
    if (c.closed) return;
    c.closed = true;
    c.stream_at_close = c.read + core_.output(c.id).size();
  }

  // Splits what c sent into its hello and requests, as far as it is complete,
  // mirroring the checks the core makes.
  void frame(Slot& c) {
    while (!c.malformed) {
      const size_t avail = c.sent.size() - c.framed;
      const uint8_t* p = c.sent.data() + c.framed;
      if (!c.hello_done) {
        if (avail < kClientHelloBytes) return;
        c.hello_done = true;
        c.framed += kClientHelloBytes;
        c.hello_magic = get_u32(p) == kClientHelloMagic;
        std::memcpy(c.hello_client_nonce.data(), p + 8, kNonceBytes);
        Mac proof{};
        std::memcpy(proof.data(), p + 8 + kNonceBytes, kMacBytes);
        c.hello_valid = c.hello_magic && get_u32(p + 4) == kProtocolVersion &&
                        (secret_.empty() ||
                         proof == client_proof(secret_, c.server_nonce, c.hello_client_nonce));
        continue;
      }
      if (avail < kRequestHeaderBytes) return;
      const uint8_t op = p[4];
      const size_t key_len = get_u32(p + 5);
      const uint64_t value_len = get_u64(p + 9);
      if (get_u32(p) != kRequestMagic || op < op_set || op > op_abort ||
          key_len > limits_.max_key_bytes || value_len > limits_.max_value_bytes ||
          (op == op_get && value_len != 0) || (op == op_add && value_len != 8) ||
          (op == op_abort && value_len > kMaxAbortReasonBytes)) {
        c.malformed = true;
        return;
      }
      const size_t total = kRequestHeaderBytes + key_len + value_len;
      if (avail < total) return;
      Request r;
      r.op = op;
      r.key.assign(reinterpret_cast<const char*>(p + kRequestHeaderBytes), key_len);
      r.value.assign(p + kRequestHeaderBytes + key_len, p + total);
      r.timeout_ms = get_u64(p + 17);
      r.sent = now_;
      if (op == op_set) values_[r.key].insert(text(r.value));
      if (op == op_add) counters_.insert(r.key);
      if (op == op_abort) reasons_.insert(text(r.value));
      c.requests.push_back(std::move(r));
      c.framed += total;
    }
  }

  // Appends what the core queued for c since the last step to c.stream and
  // splits it into the hello and replies.
  void collect(Slot& c, std::span<const uint8_t> out, bool wants_input) {
    const size_t seen = c.read + out.size();
    if (seen < c.stream.size()) {
      // Queued replies are dropped only by a close.
      require(out.empty(), "queued replies shrank without being dropped");
      require(!wants_input, "replies dropped from a client that is not closed");
      mark_closed(c);
      c.stream.resize(c.read);
      c.parsed = std::min(c.parsed, c.read);
      return;
    }
    require(
        std::equal(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(c.stream.size() - c.read),
                   c.stream.begin() + static_cast<std::ptrdiff_t>(c.read)),
        "queued replies changed");
    c.stream.insert(c.stream.end(),
                    out.begin() + static_cast<std::ptrdiff_t>(c.stream.size() - c.read), out.end());
    if (!c.hello_seen) {
      if (c.stream.size() < kServerHelloBytes) return;
      const uint8_t* h = c.stream.data();
      require(get_u32(h) == kServerHelloMagic && get_u32(h + 4) == kProtocolVersion,
              "a server hello with a bad magic or version");
      require(get_u32(h + 8) == (secret_.empty() ? 0 : kFlagSecretRequired),
              "a server hello with the wrong flags");
      require(std::memcmp(h + 12, c.server_nonce.data(), kNonceBytes) == 0,
              "a server hello without its nonce");
      c.hello_seen = true;
      c.parsed = kServerHelloBytes;
    }
    while (c.stream.size() - c.parsed >= kResponseHeaderBytes) {
      const uint8_t* h = c.stream.data() + c.parsed;
      const uint64_t len = get_u64(h + 1);
      if (c.stream.size() - c.parsed - kResponseHeaderBytes < len) break;
      c.replies.push_back(
          {h[0], std::vector<uint8_t>(h + kResponseHeaderBytes, h + kResponseHeaderBytes + len),
           now_});
      c.parsed += kResponseHeaderBytes + len;
      new_replies_.push_back({&c, c.replies.size() - 1});
    }
  }

  // The reply `k` of c (0: the hello's answer) against what c sent.
  void check_reply(Slot& c, size_t k) {
    const Reply& r = c.replies[k];
    if (k == 0) {
      require(c.hello_done, "a reply before the hello");
      require(c.hello_magic, "a reply to a hello with a bad magic");
      if (c.hello_valid) {
        require(r.status == status_ok, "a valid hello refused");
        if (secret_.empty()) {
          require(r.payload.empty(), "an open store sent a proof");
        } else {
          const Mac p = server_proof(secret_, c.server_nonce, c.hello_client_nonce);
          require(r.payload == std::vector<uint8_t>(p.begin(), p.end()),
                  "the admission answer is not the server's proof");
        }
      } else {
        require(r.status == status_refused, "a hello without the secret's proof admitted");
        require(!r.payload.empty(), "a refusal without a reason");
      }
      return;
    }
    require(c.replies[0].status == status_ok, "a reply to a client that was never admitted");
    require(k - 1 < c.requests.size(), "more replies than requests");
    const Request& q = c.requests[k - 1];
    if (r.status == status_aborted) {
      require(q.op != op_abort, "an abort answered aborted");
      require(reasons_.count(text(r.payload)) == 1, "an abort reason nobody sent");
      if (!reason_) reason_ = text(r.payload);
      require(*reason_ == text(r.payload), "two different abort reasons");
      return;
    }
    switch (q.op) {
      case op_set:
      case op_abort:
        require(r.status == status_ok && r.payload.empty(),
                "a set or abort answered other than ok");
        break;
      case op_get:
        if (r.status == status_timeout) {
          require(r.payload.empty(), "a timeout with a payload");
          require(r.at >= get_deadline(q.sent, q.timeout_ms),
                  "a get timed out before its deadline");
          break;
        }
        require(r.status == status_ok, "a get answered other than ok, timeout or aborted");
        // (a counter's text may be longer than a small value cap)
        require(r.payload.size() <= std::max<size_t>(limits_.max_value_bytes, 20),
                "a get's value over the value cap");
        require(values_[q.key].count(text(r.payload)) == 1 ||
                    (counters_.count(q.key) == 1 && is_counter(r.payload)),
                "a get's value that was never set for its key");
        break;
      case op_add:
        if (r.status == status_bad) {
          require(!r.payload.empty(), "a bad add without a reason");
          break;
        }
        require(r.status == status_ok && r.payload.size() == 8,
                "an add answered other than ok or bad");
        break;
    }
  }

  static bool is_counter(const std::vector<uint8_t>& v) {
    int64_t x = 0;
    const char* b = reinterpret_cast<const char*>(v.data());
    const auto [end, ec] = std::from_chars(b, b + v.size(), x);
    return ec == std::errc() && end == b + v.size() && std::to_string(x).size() == v.size();
  }

  // What a client that is still open must look like.
  void check_open(Slot& c, size_t queued, bool wants_input) {
    const bool waiting = !wants_input;
    require(queued <= limits_.max_queued_reply_bytes, "queued replies over the cap");
    if (!c.hello_done) {
      require(!waiting && c.replies.empty(), "a client without a hello waits or has replies");
      return;
    }
    require(c.hello_magic, "a hello with a bad magic left the client open");
    require(c.replies.size() >= 1 && c.replies[0].status == status_ok,
            "an open client whose hello is not answered ok");
    const size_t answered = c.replies.size() - 1;
    if (waiting) {
      require(answered < c.requests.size() && c.requests[answered].op == op_get,
              "a client waits without an unanswered get");
    } else {
      require(answered == c.requests.size(), "a complete request left unanswered");
      require(!c.malformed, "a malformed request left the client open");
    }
  }

  void check_all() {
    // Closes first: a client the core closed may have lost its replies.
    for (const auto& [id, reason] : core_.take_closed()) {
      require(!reason.empty(), "a close without a reason");
      require(ids_.count(id) == 1, "a close of a client that never was");
      Slot* c = nullptr;
      for (auto& s : slots_)
        if (s && s->id == id) c = &*s;
      if (!c) continue;  // disconnected since
      require(!c->close_reported, "a close reported twice");
      require(!core_.wants_input(id), "a closed client still wants input");
      c->close_reported = true;
      mark_closed(*c);
    }
    size_t live = 0, queued = 0;
    std::array<size_t, kSlots> slot_queued{};
    std::array<bool, kSlots> slot_wants{};
    for (size_t i = 0; i < kSlots; ++i) {
      auto& s = slots_[i];
      if (!s) continue;
      ++live;
      const auto out = core_.output(s->id);
      slot_queued[i] = out.size();
      slot_wants[i] = core_.wants_input(s->id);
      queued += out.size();
      require(core_.held_bytes(s->id) <= max_held_,
              "a client holds more than a request and twice the reply cap");
      if (s->closed) {
        require(s->read + out.size() <= s->stream_at_close, "output for a closed client");
        require(!slot_wants[i], "a closed client wants input");
      }
      collect(*s, out, slot_wants[i]);
    }
    // Counters first, so that a get answered in the same step as the add
    // that set its value finds it.
    for (const auto& [c, k] : new_replies_) {
      const Reply& r = c->replies[k];
      if (k > 0 && k - 1 < c->requests.size() && c->requests[k - 1].op == op_add &&
          r.status == status_ok && r.payload.size() == 8) {
        const auto v = static_cast<int64_t>(get_u64(r.payload.data()));
        values_[c->requests[k - 1].key].insert(std::to_string(v));
      }
    }
    for (const auto& [c, k] : new_replies_) check_reply(*c, k);
    new_replies_.clear();
    for (size_t i = 0; i < kSlots; ++i)
      if (slots_[i] && !slots_[i]->closed) check_open(*slots_[i], slot_queued[i], slot_wants[i]);
    const auto st = core_.stats();
    require(st.clients == live, "stats: clients");
    require(st.queued_bytes == queued, "stats: queued bytes");
    require(st.peak_client_queued_bytes <= limits_.max_queued_reply_bytes,
            "stats: a client's queued replies passed the cap");
    require(st.stored_bytes <= limits_.max_stored_bytes, "stats: stored bytes over the cap");
    require(st.buffered_request_bytes <=
                live * (kRequestHeaderBytes + limits_.max_key_bytes + limits_.max_value_bytes),
            "stats: buffered request bytes over one request per client");
    require(st.admitted <= static_cast<size_t>(connects_) &&
                st.closed <= static_cast<size_t>(connects_),
            "stats: more admitted or closed than connected");
    require(st.told_of_abort <= st.admitted, "stats: told of the abort without being admitted");
    require(!reason_ || core_.aborted(), "answered aborted by a store that is not");
  }

  // After expire(now_): no client without a complete hello outlives its deadline.
  void check_expired() {
    for (auto& s : slots_)
      if (s && !s->hello_done && s->auth_deadline <= now_)
        require(!core_.wants_input(s->id), "a client without a hello outlived its deadline");
  }

  std::string secret_;
  TcpStoreLimits limits_;
  TcpStoreCore core_;
  Deadline now_;
  size_t max_held_;  // what held_bytes() promises for one client
  std::array<std::optional<Slot>, kSlots> slots_;
  std::set<TcpStoreCore::ClientId> ids_;
  int connects_ = 0;
  // Values and reasons as byte strings.
  std::map<std::string, std::set<std::string>> values_;  // every value set, per key
  std::set<std::string> counters_;                       // keys an add was sent for
  std::set<std::string> reasons_;                        // every abort reason sent
  std::optional<std::string> reason_;                    // the one the core answers with
  std::vector<std::pair<Slot*, size_t>> new_replies_;    // this step's
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  Input in{data + 3, size - 3};
  TcpStoreLimits limits;
  limits.max_key_bytes = kKeyCaps[data[1] & 3];
  limits.max_value_bytes = kValueCaps[(data[1] >> 2) & 3];
  limits.max_queued_reply_bytes = kQueueCaps[(data[1] >> 4) & 3];
  limits.max_stored_bytes = kStoredCaps[(data[1] >> 6) & 3];
  const Deadline start{
      Deadline::duration(Deadline::max().time_since_epoch().count() / 255 * data[2])};
  Harness h((data[0] & 1) != 0, limits, start);
  h.run(in);
  return 0;
}
