#include "services/http_server.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "httplib.h"

namespace tpuemu {

HttpHandler Constant(std::string content_type, std::function<std::string()> body) {
  return [content_type = std::move(content_type), body = std::move(body)](const HttpRequest&) {
    return HttpResponse{200, content_type, body()};
  };
}

namespace {

// The cookie a browser keeps the token in, named by the port: cookies are
// kept per host, not per port, and one pod's token must not be sent to
// another pod's (or anybody's) server on the same host.
std::string CookieName(int port) { return absl::StrCat("tpuemu_token_", port); }

// The request's token and whether it came in the query string. A token in
// the address wins over a cookie: it is what the user just opened.
std::pair<std::string, bool> TokenOf(const httplib::Request& req, const std::string& cookie_name) {
  const std::string authorization = req.get_header_value("Authorization");
  if (absl::StartsWithIgnoreCase(authorization, "Bearer ")) return {authorization.substr(7), false};  // RFC 7235
  if (req.has_param("token")) return {req.get_param_value("token"), true};
  for (absl::string_view cookie : absl::StrSplit(req.get_header_value("Cookie"), ';')) {
    cookie = absl::StripAsciiWhitespace(cookie);
    if (absl::ConsumePrefix(&cookie, absl::StrCat(cookie_name, "="))) return {std::string(cookie), false};
  }
  return {"", false};
}

// The few statuses cpp-httplib answers by itself, in words.
const char* ErrorReason(int status) {
  switch (status) {
    case 400: return "bad request: not HTTP this server reads";
    case 413: return "payload too large: a request here has no body";
    case 414: return "URI too long";
    case 416: return "range not satisfiable";
    case 431: return "request header fields too large";
    default: return "error";
  }
}

// Threads serving the HTTP port (see Start).
constexpr size_t kHttpThreads = 32;

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& host, int port,
                                                              std::map<std::string, HttpHandler> routes,
                                                              HttpTokenCheck accepts) {
  std::unique_ptr<HttpServer> http(new HttpServer());
  http->server_ = std::make_unique<httplib::Server>();
  httplib::Server& server = *http->server_;
  // Requests are a line and a few headers: anything slow or large is not
  // one. A connection that sends nothing holds a thread for the read
  // timeout, so the pool is larger than the pages need (its threads only
  // wait) and the timeouts short: 40 silent connections held /metrics for
  // 25 s with 8 threads and 5 s.
  server.new_task_queue = [] { return new httplib::ThreadPool(kHttpThreads); };
  server.set_read_timeout(2, 0);
  server.set_write_timeout(5, 0);
  server.set_keep_alive_timeout(2);
  server.set_payload_max_length(64 * 1024);
  // No SO_REUSEPORT, which cpp-httplib sets by default: with it a second
  // server (another pod's, or a worker given the coordinator's port) binds
  // the same port without an error and takes a share of its requests, so
  // scrapes and the web view land on either at random (services/server.cc
  // says the same of gRPC's listeners).
  server.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // Read once bound (port 0 is a free one): the server listens only after.
  auto cookie_name = std::make_shared<std::string>();
  for (auto& [pattern, handler] : routes) {
    server.Get(pattern, [handler, accepts, cookie_name](const httplib::Request& req, httplib::Response& res) {
      if (accepts) {
        const auto [token, from_query] = TokenOf(req, *cookie_name);
        if (!accepts(token)) {
          res.status = 401;
          res.set_content(token.empty() ? "no token: send Authorization: Bearer TOKEN (the pod's read or admin token; "
                                          "Prometheus: authorization.credentials_file), or open /?token=TOKEN once "
                                          "in a browser (docs/security.md)\n"
                                        : "the token was not accepted: it is not this pod's read or admin token\n",
                          "text/plain; charset=utf-8");
          return;
        }
        if (from_query) {
          res.set_header("Set-Cookie", absl::StrCat(*cookie_name, "=", token, "; Path=/; HttpOnly; SameSite=Strict"));
        }
      }
      HttpRequest request;
      for (size_t i = 1; i < req.matches.size(); ++i) request.groups.push_back(req.matches[i].str());
      for (const auto& [key, value] : req.params) request.params.emplace(key, value);
      HttpResponse response;
      try {
        response = handler(request);
      } catch (const std::exception& e) {  // a bug, answered as one rather than with an empty page
        response = {500, "text/plain; charset=utf-8", absl::StrCat("internal error: ", e.what(), "\n")};
      }
      res.status = response.status;
      res.set_content(std::move(response.body), response.content_type.c_str());
    });
  }
  // A method other than GET: 405, with the methods there are.
  const auto only_get = [](const httplib::Request& req, httplib::Response& res) {
    res.status = 405;
    res.set_header("Allow", "GET, HEAD");
    res.set_content(absl::StrCat(req.method, " ", req.path, ": only GET (and HEAD) is served here\n"),
                    "text/plain; charset=utf-8");
  };
  server.Post(".*", only_get).Put(".*", only_get).Patch(".*", only_get).Delete(".*", only_get).Options(".*", only_get);
  // Every error in words: cpp-httplib answers its own (no route, a request
  // it cannot parse, too large) with an empty body.
  server.set_error_handler(httplib::Server::HandlerWithResponse([only_get](const httplib::Request& req,
                                                                          httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    // A method refused before routing (a POST without a length).
    if (!req.method.empty() && req.method != "GET" && req.method != "HEAD") {
      only_get(req, res);
      return httplib::Server::HandlerResponse::Handled;
    }
    res.set_content(res.status == 404 ? absl::StrCat("no page ", req.path, " here (docs/web-view.md lists them)\n")
                                      : absl::StrCat("the request was refused (HTTP ", res.status, " ",
                                                     ErrorReason(res.status), "): send a GET of a page that "
                                                     "docs/web-view.md lists, with a token\n"),
                    "text/plain; charset=utf-8");
    return httplib::Server::HandlerResponse::Handled;
  }));
  // An IPv6 address as --listen writes it ("[::1]") is bound without its brackets.
  std::string address = host;
  if (address.size() > 2 && address.front() == '[' && address.back() == ']') {
    address = address.substr(1, address.size() - 2);
  }
  const int bound =
      port == 0 ? server.bind_to_any_port(address) : (server.bind_to_port(address, port) ? port : -1);
  if (bound < 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve HTTP on ", host, ":", port,
                                               ": the port is taken or the address is not this host's"));
  }
  http->port_ = bound;
  *cookie_name = CookieName(bound);
  http->thread_ = std::thread([&server] { server.listen_after_bind(); });
  return http;
}

HttpServer::~HttpServer() {
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace tpuemu
