// UDT4 (Debian's libudt-dev) at both ends of a bulk transfer, for
// `strata bench paper001` and the interop test that keeps it working.
// Compiled at run time by strata-bench (peers/udt.rs):
//   g++ -O2 udt_peer.cpp -o udt_peer -ludt -lpthread
//
//   udt_peer recv PORT BYTES [FILE]      listens on PORT, prints "ready",
//                                        receives BYTES (into FILE if given)
//   udt_peer send HOST PORT BYTES [FILE] sends BYTES (from FILE if given,
//                                        else a pattern), closes with linger
//
// The receiver prints, once BYTES have arrived:
//   received bytes=N seconds=S retransmitted=R naks=K half_bytes=H half_seconds=T
// timed from the accept to the last byte (H bytes had arrived at T, the
// first read past half of BYTES); the sender prints
//   sent bytes=N seconds=S retransmitted=R naks=K
// UDT's send and receive buffers are raised (64 MB, flow window 64k
// packets) so a long fat pipe is never limited by them; its congestion
// control is UDT's default (DAIMD rate control).
#include <udt/udt.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

static const int BUF = 1 << 20;

static int fail(const char* what) {
  std::fprintf(stderr, "udt_peer: %s: %s\n", what,
               UDT::getlasterror().getErrorMessage());
  return 1;
}

static void tune(UDTSOCKET u) {
  int big = 64 << 20, udp = 8 << 20, fc = 65536;
  UDT::setsockopt(u, 0, UDT_SNDBUF, &big, sizeof big);
  UDT::setsockopt(u, 0, UDT_RCVBUF, &big, sizeof big);
  UDT::setsockopt(u, 0, UDP_SNDBUF, &udp, sizeof udp);
  UDT::setsockopt(u, 0, UDP_RCVBUF, &udp, sizeof udp);
  UDT::setsockopt(u, 0, UDT_FC, &fc, sizeof fc);
}

static double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

static void report(const char* what, long long bytes, double secs,
                   UDTSOCKET u, long long half_bytes, double half_secs) {
  UDT::TRACEINFO perf;
  std::memset(&perf, 0, sizeof perf);
  UDT::perfmon(u, &perf, false);
  long long retx = perf.pktRetransTotal;
  long long naks = perf.pktRecvNAKTotal + perf.pktSentNAKTotal;
  std::printf(
      "%s bytes=%lld seconds=%.6f retransmitted=%lld naks=%lld half_bytes=%lld "
      "half_seconds=%.6f\n",
      what, bytes, secs, retx, naks, half_bytes, half_secs);
  std::fflush(stdout);
}

static int receive(const char* port, long long want, const char* file) {
  UDTSOCKET l = UDT::socket(AF_INET, SOCK_STREAM, 0);
  tune(l);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(std::atoi(port));
  a.sin_addr.s_addr = INADDR_ANY;
  if (UDT::bind(l, (sockaddr*)&a, sizeof a) == UDT::ERROR) return fail("bind");
  if (UDT::listen(l, 1) == UDT::ERROR) return fail("listen");
  std::printf("ready\n");
  std::fflush(stdout);
  sockaddr_in peer{};
  int len = sizeof peer;
  UDTSOCKET u = UDT::accept(l, (sockaddr*)&peer, &len);
  if (u == UDT::INVALID_SOCK) return fail("accept");
  auto t0 = std::chrono::steady_clock::now();
  std::ofstream out;
  if (file) out.open(file, std::ios::binary | std::ios::trunc);
  std::vector<char> buf(BUF);
  long long got = 0, half_bytes = 0;
  double half_secs = 0;
  while (got < want) {
    int n = UDT::recv(u, buf.data(), BUF, 0);
    if (n == UDT::ERROR) return fail("recv");
    if (file) out.write(buf.data(), n);
    got += n;
    if (half_bytes == 0 && got >= want / 2) {
      half_bytes = got;
      half_secs = since(t0);
    }
  }
  double secs = since(t0);
  if (file) out.close();
  report("received", got, secs, u, half_bytes, half_secs);
  UDT::close(u);
  UDT::close(l);
  return 0;
}

static int send(const char* host, const char* port, long long want,
                const char* file) {
  addrinfo hints{}, *res;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (getaddrinfo(host, port, &hints, &res) != 0) {
    std::fprintf(stderr, "udt_peer: bad address %s:%s\n", host, port);
    return 1;
  }
  UDTSOCKET u = UDT::socket(AF_INET, SOCK_STREAM, 0);
  tune(u);
  if (UDT::connect(u, res->ai_addr, res->ai_addrlen) == UDT::ERROR)
    return fail("connect");
  freeaddrinfo(res);
  std::ifstream in;
  if (file) in.open(file, std::ios::binary);
  std::vector<char> buf(BUF);
  for (int i = 0; i < BUF; i++) buf[i] = (char)(i % 251);
  auto t0 = std::chrono::steady_clock::now();
  long long sent = 0;
  while (sent < want) {
    int chunk = (int)std::min<long long>(BUF, want - sent);
    if (file) {
      in.read(buf.data(), chunk);
      if (in.gcount() != chunk) {
        std::fprintf(stderr, "udt_peer: %s is shorter than %lld bytes\n", file,
                     want);
        return 1;
      }
    }
    int off = 0;
    while (off < chunk) {
      int n = UDT::send(u, buf.data() + off, chunk - off, 0);
      if (n == UDT::ERROR) return fail("send");
      off += n;
    }
    sent += chunk;
  }
  // The default linger makes close wait until the receiver has it all.
  UDT::close(u);
  std::printf("sent bytes=%lld seconds=%.6f\n", sent, since(t0));
  std::fflush(stdout);
  return 0;
}

int main(int argc, char** argv) {
  UDT::startup();
  int rc = 2;
  if (argc >= 4 && !std::strcmp(argv[1], "recv"))
    rc = receive(argv[2], std::atoll(argv[3]), argc > 4 ? argv[4] : nullptr);
  else if (argc >= 5 && !std::strcmp(argv[1], "send"))
    rc = send(argv[2], argv[3], std::atoll(argv[4]), argc > 5 ? argv[5] : nullptr);
  else
    std::fprintf(stderr,
                 "usage: udt_peer recv PORT BYTES [FILE] | send HOST PORT BYTES [FILE]\n");
  UDT::cleanup();
  return rc;
}
