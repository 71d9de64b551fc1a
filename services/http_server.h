// A small HTTP server beside a process's gRPC one (issue 20): GET routes
// whose answers a function makes at request time, e.g. the coordinator's
// /metrics and its web view (web/). Built on cpp-httplib (Debian's
// libcpp-httplib-dev): a thread pool serves requests; nothing but GET is
// answered.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace tpuemu {

// What Prometheus scrapes (its text exposition format, version 0.0.4).
inline constexpr const char* kPrometheusTextType = "text/plain; version=0.0.4; charset=utf-8";

struct HttpRequest {
  std::vector<std::string> groups;            // the route pattern's capture groups
  std::map<std::string, std::string> params;  // the query string's
};

struct HttpResponse {
  int status = 200;
  std::string content_type;
  std::string body;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

// Whether a request's token (its Authorization: Bearer header, ?token=, or
// the cookie tpuemu_token_PORT) may read; null: every request may (a
// plaintext pod).
using HttpTokenCheck = std::function<bool(const std::string& token)>;

// A route whose answer never depends on the request.
HttpHandler Constant(std::string content_type, std::function<std::string()> body);

class HttpServer {
 public:
  // Serves `routes` on host:port (port 0: a free one). A route's key is a
  // path or a regular expression matching whole paths; its groups reach
  // the handler. Other paths get 404. With `accepts`, a request without a
  // token it accepts gets 401; one that brought it as ?token= (a browser's
  // first page) gets it back as a cookie, so the page's own requests and
  // links carry it.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& host, int port,
                                                           std::map<std::string, HttpHandler> routes,
                                                           HttpTokenCheck accepts = nullptr);
  ~HttpServer();  // stops serving and joins its thread

  int port() const { return port_; }

 private:
  HttpServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace tpuemu
