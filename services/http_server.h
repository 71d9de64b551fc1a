// A small HTTP server beside a process's gRPC one (issue 20): GET routes
// whose bodies a function makes at request time, e.g. the coordinator's
// /metrics. Built on cpp-httplib (Debian's libcpp-httplib-dev): a thread
// pool serves requests; nothing but GET is answered.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace tpuemu {

// What Prometheus scrapes (its text exposition format, version 0.0.4).
inline constexpr const char* kPrometheusTextType = "text/plain; version=0.0.4; charset=utf-8";

struct HttpRoute {
  std::string content_type;
  std::function<std::string()> body;
};

class HttpServer {
 public:
  // Serves `routes` (by path) on host:port (port 0: a free one).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& host, int port,
                                                           std::map<std::string, HttpRoute> routes);
  ~HttpServer();  // stops serving and joins its thread

  int port() const { return port_; }

 private:
  HttpServer() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace tpuemu
