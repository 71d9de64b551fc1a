#include "services/credentials.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace tpuemu {
namespace {

template <class T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using Key = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using Cert = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using Bio = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;

const char* const kFiles[] = {"ca.pem", "ca-key.pem", "member.pem", "member-key.pem", "admin.token", "read.token"};

absl::Status OpenSslError(const std::string& what) {
  return absl::InternalError(absl::StrCat("making the pod's credentials: ", what, " failed (OpenSSL)"));
}

std::string Random(int bytes) {
  std::vector<unsigned char> buf(bytes);
  RAND_bytes(buf.data(), bytes);
  return absl::BytesToHexString(std::string(buf.begin(), buf.end()));
}

bool AddExtension(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

// A certificate for `name` with `key`, signed by issuer_key (self-signed when
// issuer is null), valid for ten years.
Cert MakeCert(const std::string& name, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key, bool ca) {
  Cert cert(X509_new());
  if (!cert) return nullptr;
  X509_set_version(cert.get(), 2);
  std::vector<unsigned char> serial(16);
  RAND_bytes(serial.data(), static_cast<int>(serial.size()));
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial.data(), static_cast<int>(serial.size()), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 10L * 365 * 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* subject = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("tpuemu"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(name.c_str()), -1,
                             -1, 0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  const bool ok =
      ca ? AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:TRUE") &&
               AddExtension(cert.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign") &&
               AddExtension(cert.get(), signer, NID_subject_key_identifier, "hash")
         : AddExtension(cert.get(), signer, NID_basic_constraints, "critical,CA:FALSE") &&
               AddExtension(cert.get(), signer, NID_key_usage, "critical,digitalSignature,keyEncipherment") &&
               AddExtension(cert.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth") &&
               AddExtension(cert.get(), signer, NID_subject_alt_name, absl::StrCat("DNS:", name).c_str()) &&
               AddExtension(cert.get(), signer, NID_authority_key_identifier, "keyid:always");
  if (!ok || X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0) return nullptr;
  return cert;
}

std::string Pem(X509* cert) {
  Bio bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, len);
}

std::string Pem(EVP_PKEY* key) {
  Bio bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  const long len = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, len);
}

// Written whole or not at all: a new file, then renamed into place.
absl::Status WriteFile(const std::string& dir, const std::string& name, const std::string& text, int uid) {
  const std::string path = absl::StrCat(dir, "/", name), temp = path + ".new";
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::UnavailableError(absl::StrCat(temp, ": ", std::strerror(errno)));
  const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const bool owned = uid < 0 || fchown(fd, uid, uid) == 0;
  const bool synced = fsync(fd) == 0;
  close(fd);
  if (!written || !owned || !synced || rename(temp.c_str(), path.c_str()) != 0) {
    unlink(temp.c_str());
    return absl::UnavailableError(absl::StrCat(path, ": could not write it", owned ? "" : " (chown)", ": ",
                                               std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CreateCredentials(const std::string& dir, int uid) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::UnavailableError(absl::StrCat(dir, ": cannot make the directory: ", std::strerror(errno)));
  }
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, " is not a directory (a file, or a link to nothing): give a new or empty directory"));
  }
  // Before the chown: a directory that holds other files is the user's, not
  // the credentials' (and the secrets would sit among them); one this user
  // cannot list may hold anything.
  std::filesystem::directory_iterator entries(dir, error);
  if (error) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": cannot list it (", error.message(),
                                                   "): give a new or empty directory this user can read"));
  }
  if (entries != std::filesystem::directory_iterator()) {
    return absl::AlreadyExistsError(absl::StrCat(
        dir, " is not empty (it holds ", entries->path().filename().string(),
        "): give a new or empty directory; credentials are made once per pod, into a directory of their own"));
  }
  // An empty directory made by someone else may let others in (0777): the
  // secrets' directory is its owner's alone, as a new one is made.
  if (chmod(dir.c_str(), 0700) != 0) {
    return absl::UnavailableError(absl::StrCat(dir, ": cannot make it its owner's alone (chmod 0700): ",
                                               std::strerror(errno)));
  }
  if (uid >= 0 && chown(dir.c_str(), uid, uid) != 0) {
    return absl::UnavailableError(absl::StrCat(dir, ": cannot give it to user ", uid, ": ", std::strerror(errno)));
  }
  Key ca_key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  Key member_key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"));
  if (!ca_key || !member_key) return OpenSslError("making a key");
  Cert ca = MakeCert(absl::StrCat("tpuemu pod CA ", Random(4)), ca_key.get(), nullptr, nullptr, true);
  if (!ca) return OpenSslError("making the CA's certificate");
  Cert member = MakeCert(kClusterName, member_key.get(), ca.get(), ca_key.get(), false);
  if (!member) return OpenSslError("making the members' certificate");
  const std::pair<const char*, std::string> files[] = {
      {"ca-key.pem", Pem(ca_key.get())},   {"member-key.pem", Pem(member_key.get())},
      {"member.pem", Pem(member.get())},   {"admin.token", Random(32) + "\n"},
      {"read.token", Random(32) + "\n"},   {"ca.pem", Pem(ca.get())},  // last: its presence says the set is whole
  };
  for (const auto& [name, text] : files) {
    if (auto s = WriteFile(dir, name, text, uid); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CheckCredentials(const std::string& dir) {
  for (const char* file : kFiles) {
    if (std::string(file) == "ca-key.pem") continue;  // no process needs it
    if (access(absl::StrCat(dir, "/", file).c_str(), R_OK) != 0) {
      return absl::NotFoundError(absl::StrCat(dir, "/", file, ": ", std::strerror(errno),
                                              "; make a pod's credentials with `tpuemu credentials create DIR`"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tpuemu
