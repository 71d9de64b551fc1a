#include "client/credentials_command.h"

#include <iostream>
#include <memory>
#include <string>

#include "services/credentials.h"

namespace tpuemu {

void AddCredentialsCommand(CLI::App& app, int* exit_code) {
  auto* credentials = app.add_subcommand("credentials", "make a pod's TLS certificates and tokens");
  credentials->require_subcommand(1);
  struct Options {
    std::string dir;
    int uid = -1;
  };
  auto o = std::make_shared<Options>();
  auto* create = credentials->add_subcommand(
      "create", "make a CA, the members' certificate and the admin and read tokens in DIR");
  create->footer(
      "Files (each 0600, in a 0700 directory): ca.pem, ca-key.pem, member.pem, member-key.pem (the coordinator's\n"
      "and workers' mutual TLS), admin.token (every call) and read.token (calls that change nothing).\n"
      "The pod's processes take DIR as --tls-dir (TPUEMU_TLS_DIR); clients take TPUEMU_TLS_CA=DIR/ca.pem\n"
      "and TPUEMU_TOKEN_FILE=DIR/admin.token or read.token. Examples:\n"
      "  tpuemu credentials create ./tpuemu-credentials --uid 10001    # for docker compose\n"
      "  # for Kubernetes: every file but ca-key.pem, which no pod needs (keep it to sign again)\n"
      "  kubectl create secret generic tpuemu-credentials $(for f in ca.pem member.pem member-key.pem \\\n"
      "      admin.token read.token; do echo --from-file=./tpuemu-credentials/$f; done)\n"
      "docs/security.md");
  create->add_option("DIR", o->dir, "a new or empty directory")
      ->required()
      ->check(CLI::Validator(
          [](std::string& dir) { return dir.empty() ? "'': give the directory to make" : ""; }, "DIR"));
  create->add_option("--uid", o->uid,
                     "give the files to this user and group id: the image's user (10001) reads them from a\n"
                     "bind mount under docker compose")
      ->check(CLI::Range(0, 2147483647).description("a user id, 0 or more"));
  create->callback([o, exit_code] {
    if (auto made = CreateCredentials(o->dir, o->uid); !made.ok()) {
      std::cerr << "error: " << made.message() << "\n";
      *exit_code = 2;
      return;
    }
    std::cout << "made " << o->dir << ": ca.pem, member.pem, member-key.pem, admin.token, read.token (and ca-key.pem)\n"
              << "next: start the pod's processes with --tls-dir " << o->dir << ", then\n"
              << "  export TPUEMU_TLS_CA=" << o->dir << "/ca.pem TPUEMU_TOKEN_FILE=" << o->dir << "/admin.token\n";
  });
}

}  // namespace tpuemu
