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

namespace {
constexpr std::size_t kBufferBytes = 1 << 20;
}

AtomicFileWriter::AtomicFileWriter(fs::path path) : path_(std::move(path)) {
  const fs::path dir = path_.has_parent_path() ? path_.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw std::runtime_error(fmt::format("cannot write {}: directory {} does not exist", path_.string(), dir.string()));
  }
  temporary_ = (dir / ("." + path_.filename().string() + ".tmp.XXXXXX")).string();
  fd_ = ::mkstemp(temporary_.data());
  if (fd_ < 0) throw std::runtime_error(fmt::format("cannot write {}: {}", path_.string(), std::strerror(errno)));
  buffer_.reserve(kBufferBytes);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temporary_.c_str());
  }
}

void AtomicFileWriter::fail(const char* what) {
  const int err = errno;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temporary_.c_str());
  throw std::runtime_error(fmt::format("cannot write {}: {} failed: {}", path_.string(), what, std::strerror(err)));
}

void AtomicFileWriter::put(std::string_view bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write");
    }
    done += static_cast<std::size_t>(n);
  }
}

void AtomicFileWriter::flush() {
  put(buffer_);
  buffer_.clear();
}

void AtomicFileWriter::write(std::string_view text) {
  if (fd_ < 0) throw std::logic_error("AtomicFileWriter::write after commit");
  if (buffer_.size() + text.size() > kBufferBytes) flush();
  if (text.size() > kBufferBytes) {
    put(text);
    return;
  }
  buffer_.append(text);
}

void AtomicFileWriter::commit() {
  if (fd_ < 0) throw std::logic_error("AtomicFileWriter::commit twice");
  flush();
  if (::fchmod(fd_, 0644) != 0) fail("chmod");
  if (::fsync(fd_) != 0) fail("fsync");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(temporary_.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: close failed: {}", path_.string(), std::strerror(err)));
  }
  if (::rename(temporary_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(temporary_.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: rename failed: {}", path_.string(), std::strerror(err)));
  }
}

void write_file_atomically(const fs::path& path, std::string_view content) {
  AtomicFileWriter w(path);
  w.write(content);
  w.commit();
}

}  // namespace cs::reports
