// The head's web port: Boost.Beast does the HTTP; this file bounds it.
#include "web/http_server.h"

#include <exception>
#include <optional>
#include <unordered_map>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/logging.h"

namespace rayx::web {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

namespace http_detail {
class Connection;
}  // namespace http_detail
using http_detail::Connection;

struct HttpServer::Shared {
  Shared(boost::asio::io_context& io, HttpServerOptions o, Handler h)
      : options(std::move(o)), handler(std::move(h)), acceptor(io) {}
  HttpServerOptions options;
  Handler handler;
  tcp::acceptor acceptor;
  bool stopped = false;
  // The open connections, to close them on Stop (and to count them).
  std::unordered_map<Connection*, std::weak_ptr<Connection>> open;
};

namespace http_detail {

// Headers every answer carries: nothing is cached, nothing sniffed, the pages
// are never framed and load scripts from this port only.
void AddSafetyHeaders(http::response<http::string_body>& r) {
  r.set(http::field::cache_control, "no-store");
  r.set("X-Content-Type-Options", "nosniff");
  r.set("X-Frame-Options", "DENY");
  r.set("Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'");
  r.set("Referrer-Policy", "no-referrer");
}

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::shared_ptr<HttpServer::Shared> shared)
      : stream_(std::move(socket)), shared_(std::move(shared)) {
    boost::system::error_code ec;
    auto remote = stream_.socket().remote_endpoint(ec);
    if (!ec) peer_ = remote.address().to_string();
  }
  ~Connection() { shared_->open.erase(this); }

  void Start() { Read(); }
  void Close() {
    boost::system::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->header_limit(shared_->options.max_header_bytes);
    parser_->body_limit(shared_->options.max_body_bytes);
    stream_.expires_after(std::chrono::milliseconds(shared_->options.request_timeout_ms));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       self->OnRead(ec);
                     });
  }

  void OnRead(beast::error_code ec) {
    if (shared_->stopped) return;
    if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
        ec == boost::asio::error::operation_aborted) {
      return Close();
    }
    if (ec == http::error::header_limit) {
      return Write(HttpResponse::Text(431, "request headers too large\n"), false);
    }
    if (ec == http::error::body_limit) {
      return Write(HttpResponse::Text(413, "request body too large\n"), false);
    }
    if (ec) {
      // A request that is not HTTP gets a 400; a dropped connection nothing.
      if (ec.category() == http::make_error_code(http::error::bad_target).category()) {
        return Write(HttpResponse::Text(400, "malformed HTTP request\n"), false);
      }
      return Close();
    }
    const auto& message = parser_->get();
    HttpRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    request.authorization = std::string(message[http::field::authorization]);
    request.cookie = std::string(message[http::field::cookie]);
    request.content_type = std::string(message[http::field::content_type]);
    request.body = message.body();
    request.peer = peer_;
    HttpResponse response;
    try {
      response = shared_->handler(request);
    } catch (const std::exception& e) {
      RAYX_LOG(Error) << "web request " << request.method << " " << request.target
                      << " failed: " << e.what();
      response = HttpResponse::Text(500, "internal error\n");
    }
    Write(std::move(response), message.keep_alive());
  }

  void Write(HttpResponse answer, bool keep_alive) {
    response_ = {};
    response_.version(11);
    response_.result(static_cast<unsigned>(answer.status));
    response_.set(http::field::server, "rayx");
    response_.set(http::field::content_type, answer.content_type);
    AddSafetyHeaders(response_);
    for (auto& [name, value] : answer.headers) response_.set(name, value);
    response_.body() = std::move(answer.body);
    response_.keep_alive(keep_alive);
    response_.prepare_payload();
    stream_.expires_after(std::chrono::milliseconds(shared_->options.request_timeout_ms));
    http::async_write(stream_, response_,
                      [self = shared_from_this(), keep_alive](beast::error_code ec, size_t) {
                        if (ec || !keep_alive || self->shared_->stopped) return self->Close();
                        self->Read();
                      });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> response_;
  std::shared_ptr<HttpServer::Shared> shared_;
  std::string peer_;
};

void Accept(const std::shared_ptr<HttpServer::Shared>& shared) {
  shared->acceptor.async_accept([shared](beast::error_code ec, tcp::socket socket) {
    if (shared->stopped || ec == boost::asio::error::operation_aborted) return;
    if (!ec) {
      if (shared->open.size() >= shared->options.max_connections) {
        // Full: the newcomer is closed at once; open connections go on.
        boost::system::error_code ignored;
        socket.close(ignored);
      } else {
        auto connection = std::make_shared<Connection>(std::move(socket), shared);
        shared->open.emplace(connection.get(), connection);
        connection->Start();
      }
    }
    Accept(shared);
  });
}

}  // namespace http_detail

HttpServer::HttpServer(boost::asio::io_context& io, HttpServerOptions options, Handler handler)
    : io_(io), options_(options),
      shared_(std::make_shared<Shared>(io, std::move(options), std::move(handler))) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() {
  boost::system::error_code ec;
  auto address = boost::asio::ip::make_address(options_.host, ec);
  if (ec) {
    return Status::InvalidArgument("web port: '" + options_.host + "' is not an IP address");
  }
  tcp::endpoint endpoint(address, options_.port);
  auto& acceptor = shared_->acceptor;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(boost::asio::socket_base::max_listen_connections, ec);
  if (ec) {
    boost::system::error_code ignored;
    acceptor.close(ignored);
    return Status::Unavailable("web port: cannot listen on " + options_.host + ":" +
                               std::to_string(options_.port) + ": " + ec.message());
  }
  port_ = acceptor.local_endpoint(ec).port();
  http_detail::Accept(shared_);
  return Status::OK();
}

void HttpServer::Stop() {
  if (shared_->stopped) return;
  shared_->stopped = true;
  boost::system::error_code ignored;
  shared_->acceptor.close(ignored);
  std::vector<std::shared_ptr<Connection>> open;
  for (auto& [raw, weak] : shared_->open) {
    if (auto c = weak.lock()) open.push_back(std::move(c));
  }
  for (auto& c : open) c->Close();
}

}  // namespace rayx::web
