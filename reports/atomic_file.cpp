#include "clustersim/reports/atomic_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

namespace cs::reports {

namespace fs = std::filesystem;

void write_file_atomically(const fs::path& path, std::string_view content) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw std::runtime_error(fmt::format("cannot write {}: directory {} does not exist", path.string(), dir.string()));
  }
  std::string tmpl = (dir / ("." + path.filename().string() + ".tmp.XXXXXX")).string();
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) throw std::runtime_error(fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)));
  auto fail = [&](const char* what) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmpl.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: {} failed: {}", path.string(), what, std::strerror(err)));
  };
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write");
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd, 0644) != 0) fail("chmod");
  if (::fsync(fd) != 0) fail("fsync");
  if (::close(fd) != 0) {
    ::unlink(tmpl.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: close failed: {}", path.string(), std::strerror(errno)));
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmpl.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: rename failed: {}", path.string(), std::strerror(err)));
  }
}

}  // namespace cs::reports
