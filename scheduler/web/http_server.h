// A small HTTP/1.1 server on the caller's io_context (Boost.Beast), for the
// head's web port: the dashboard, its JSON API and Prometheus' /metrics.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "rayx/status.h"

namespace rayx::web {

// What a handler sees of a request: only the headers rayx reads.
struct HttpRequest {
  std::string method;         // "GET", "POST", ...
  std::string target;         // path and query, as sent
  std::string authorization;  // the Authorization header
  std::string cookie;         // the Cookie header
  std::string content_type;
  std::string body;           // at most HttpServerOptions::max_body_bytes
  std::string peer;           // the client's address
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers

  static HttpResponse Text(int status, std::string body) {
    HttpResponse r;
    r.status = status;
    r.body = std::move(body);
    return r;
  }
};

struct HttpServerOptions {
  std::string host = "127.0.0.1";  // the address to bind
  uint16_t port = 0;               // 0 picks a free port (see port())
  // Bounds on what a client can make the server hold. Defaults: 64
  // connections, 8 KiB of headers, 4 KiB of body, 10 s to send a request.
  size_t max_connections = 64;
  uint32_t max_header_bytes = 8 * 1024;
  uint64_t max_body_bytes = 4 * 1024;
  int64_t request_timeout_ms = 10000;
};

// Accepts connections and answers each request with `handler`'s response.
// Everything runs on `io`'s thread (the handler too, so it may read state
// that thread owns without locks). A request over the bounds, or one not
// sent within the timeout, ends its connection (431/413 or a close); garbage
// ends it with 400. Neither affects other connections.
class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  HttpServer(boost::asio::io_context& io, HttpServerOptions options, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and starts accepting. Unavailable when the port is taken,
  // InvalidArgument for an address that is not one.
  Status Start();
  uint16_t port() const { return port_; }
  // Stops accepting and closes every open connection.
  void Stop();

  // What the server and its connections share (internal; http_server.cc).
  struct Shared;

 private:
  boost::asio::io_context& io_;
  HttpServerOptions options_;
  std::shared_ptr<Shared> shared_;
  uint16_t port_ = 0;
};

}  // namespace rayx::web
