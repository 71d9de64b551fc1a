#include "services/http_server.h"

#include "absl/strings/str_cat.h"
#include "httplib.h"

namespace tpuemu {

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& host, int port,
                                                              std::map<std::string, HttpRoute> routes) {
  std::unique_ptr<HttpServer> http(new HttpServer());
  http->server_ = std::make_unique<httplib::Server>();
  httplib::Server& server = *http->server_;
  // Requests are a line and a few headers: anything slow or large is not one.
  server.set_read_timeout(5, 0);
  server.set_write_timeout(5, 0);
  server.set_payload_max_length(64 * 1024);
  for (auto& [path, route] : routes) {
    server.Get(path, [route](const httplib::Request&, httplib::Response& res) {
      res.set_content(route.body(), route.content_type.c_str());
    });
  }
  const int bound = port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (bound < 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve HTTP on ", host, ":", port,
                                               ": the port is taken or the address is not this host's"));
  }
  http->port_ = bound;
  http->thread_ = std::thread([&server] { server.listen_after_bind(); });
  return http;
}

HttpServer::~HttpServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace tpuemu
