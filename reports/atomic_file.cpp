#include "clustersim/reports/atomic_file.hpp"

#include <atomic>
#include <cerrno>
#include <memory>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "clustersim/common/input_error.hpp"

namespace cs::reports {

namespace fs = std::filesystem;

namespace {
constexpr std::size_t kBufferBytes = 1 << 20;

// The temporaries being written, so that Ctrl-C (SIGINT) or SIGTERM removes them before the
// process ends: an interrupted run leaves neither a partial target nor a stray temporary. Fixed
// slots, because a signal handler may only touch lock-free state and call async-signal-safe
// functions (unlink, signal, raise). SIGKILL cannot be caught: it can leave a hidden ".NAME.tmp.*"
// beside the target, never a partial target.
constexpr int kSlots = 64;
constexpr std::size_t kPathBytes = 4096;
std::atomic<bool> slot_used[kSlots];
char slot_path[kSlots][kPathBytes];

extern "C" void remove_temporaries(int sig) {
  for (int i = 0; i < kSlots; ++i) {
    if (slot_used[i].load()) ::unlink(slot_path[i]);
  }
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

int claim_slot(const std::string& path) {
  static std::once_flag installed;
  std::call_once(installed, [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      if (std::signal(sig, remove_temporaries) == SIG_IGN) std::signal(sig, SIG_IGN);  // keep an inherited "ignore"
    }
  });
  if (path.size() >= kPathBytes) return -1;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  for (int i = 0; i < kSlots; ++i) {
    if (!slot_used[i].load()) {
      std::memcpy(slot_path[i], path.c_str(), path.size() + 1);
      slot_used[i].store(true);
      return i;
    }
  }
  return -1;  // more than kSlots files at once: this one is not cleaned up on a signal
}

void release_slot(int slot) {
  if (slot >= 0) slot_used[slot].store(false);
}

// An output is renamed over its target: that replaces whatever the name held. A regular file (or
// nothing) is what an output replaces; a device, a FIFO, a socket or a symbolic link is refused
// (a probe's --trace /dev/null, run as root, replaced the machine's /dev/null with a regular file;
// a link was replaced, its target left as it was). A directory is refused by its writers.
void check_replaceable(const fs::path& path) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (ec || !fs::exists(st) || fs::is_regular_file(st) || fs::is_directory(st)) return;
  const char* what = fs::is_symlink(st)          ? "a symbolic link"
                     : fs::is_character_file(st) ? "a character device"
                     : fs::is_block_file(st)     ? "a block device"
                     : fs::is_fifo(st)           ? "a named pipe (FIFO)"
                     : fs::is_socket(st)         ? "a socket"
                                                 : "not a regular file";
  throw InputError(fmt::format("cannot write {}: it is {}, and clustersim writes its outputs as regular files, each to a temporary beside it renamed "
                               "over it, which would replace it: give the path of a file",
                               path.string(), what));
}
// A file that could not be created in a directory the user gave: bad input (exit status 2), as any
// other path; a full disk or too many open files is the machine's trouble (1).
[[noreturn]] void refuse_create(int err, const std::string& message) {
  if (err == ENOSPC || err == EDQUOT || err == EMFILE || err == ENFILE || err == ENOMEM) throw std::runtime_error(message);
  throw InputError(message);
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(fs::path path) : path_(std::move(path)) {
  check_replaceable(path_);
  const fs::path dir = path_.has_parent_path() ? path_.parent_path() : fs::path(".");
  std::error_code ec;
  // A path the user gave that cannot hold a file is bad input (exit status 2).
  if (!fs::is_directory(dir, ec)) {
    throw InputError(fmt::format("cannot write {}: {} {}", path_.string(), dir.string(), fs::exists(dir, ec) ? "is not a directory" : "(its directory) does not exist"));
  }
  temporary_ = (dir / fmt::format(".{}.tmp.XXXXXX", path_.filename().string())).string();
  fd_ = ::mkstemp(temporary_.data());
  if (fd_ < 0) {
    // The output is written beside itself first, then renamed: a directory that takes no new file
    // (read-only, or /proc) cannot hold it, whatever the file itself is.
    const int err = errno;
    refuse_create(err, fmt::format("cannot write {}: cannot create a file in {} to write it into first: {}", path_.string(), dir.string(), std::strerror(err)));
  }
  slot_ = claim_slot(temporary_);
  buffer_.reserve(kBufferBytes);
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temporary_.c_str());
  }
  release_slot(slot_);
}

void AtomicFileWriter::fail(const char* what) {
  const int err = errno;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temporary_.c_str());
  release_slot(slot_);
  slot_ = -1;
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

void AtomicFileWriter::sync() {
  if (fd_ < 0) throw std::logic_error("AtomicFileWriter::sync after commit");
  flush();
  if (::fsync(fd_) != 0) fail("fsync");
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
    release_slot(slot_);
    slot_ = -1;
    throw std::runtime_error(fmt::format("cannot write {}: close failed: {}", path_.string(), std::strerror(err)));
  }
  const int renamed = ::rename(temporary_.c_str(), path_.c_str());
  const int err = errno;
  if (renamed != 0) ::unlink(temporary_.c_str());
  release_slot(slot_);
  slot_ = -1;
  if (renamed != 0) throw std::runtime_error(fmt::format("cannot write {}: rename failed: {}", path_.string(), std::strerror(err)));
}

void make_output_directory(const fs::path& dir, std::string_view what) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) {
    throw InputError(fmt::format("{} {}: expected a directory to write into, found {}", what, dir.string(),
                                 ec ? fmt::format("none that can be created ({})", ec.message()) : "a file of that name"));
  }
}

void check_directory_writable(const fs::path& dir, std::string_view what) {
  std::string probe = (dir / ".clustersim-write-check.XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) {
    const int err = errno;
    refuse_create(err, fmt::format("{} {}: expected a directory clustersim can write into, but it cannot create a file there: {}", what, dir.string(),
                                   std::strerror(err)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

void write_file_atomically(const fs::path& path, std::string_view content) {
  AtomicFileWriter w(path);
  w.write(content);
  w.commit();
}

void check_targets(const fs::path& dir, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    std::error_code ec;
    if (fs::is_directory(dir / name, ec)) throw InputError(fmt::format("cannot write {}: a directory of that name is in the way", (dir / name).string()));
    check_replaceable(dir / name);
  }
}

void write_files_atomically(const fs::path& dir, const std::vector<std::string>& names, const std::function<void(std::size_t, AtomicFileWriter&)>& fill) {
  check_targets(dir, names);
  // Every temporary is written and synced before the first rename; a writer left uncommitted removes its own.
  std::vector<std::unique_ptr<AtomicFileWriter>> writers;
  for (std::size_t i = 0; i < names.size(); ++i) {
    writers.push_back(std::make_unique<AtomicFileWriter>(dir / names[i]));
    fill(i, *writers.back());
    writers.back()->sync();
  }
  // From the first rename on, an interrupt (Ctrl-C, SIGTERM, SIGHUP) waits until the command has
  // written the rest of its outputs: one stopping between two renames, or between a command's
  // results and its report, had left new files beside old ones (a probe's new summary.json beside
  // the last run's trace.json and report). main() lets it through at the end.
  hold_interrupts();
  for (auto& w : writers) w->commit();
}

namespace {
sigset_t interrupts() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, sig);
  return set;
}
}  // namespace

void hold_interrupts() {
  const sigset_t set = interrupts();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void release_interrupts() {
  const sigset_t set = interrupts();
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

void write_files_atomically(const fs::path& dir, const std::vector<OutputFile>& files) {
  std::vector<std::string> names;
  for (const OutputFile& f : files) names.push_back(f.name);
  write_files_atomically(dir, names, [&](std::size_t i, AtomicFileWriter& w) { w.write(files[i].content); });
}

}  // namespace cs::reports
