// Every output file is written atomically: the text goes to a temporary file beside the target,
// is flushed to disk, then renamed over the target, so a reader never sees a partial file and an
// interrupted run leaves the previous file (or none) behind. On SIGINT, SIGTERM or SIGHUP the
// temporaries being written are removed before the process ends.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace cs::reports {

// Creates `dir` and its parents for an output's files; a failure (no permission, a file in the
// way) is bad input (cs::InputError) naming `what` (the option or the output) and the reason.
void make_output_directory(const std::filesystem::path& dir, std::string_view what);
// Throws InputError (`what` names the option) unless a file can be created in `dir`, which exists:
// a read-only directory, or one of /proc's, before a command does its work rather than after.
void check_directory_writable(const std::filesystem::path& dir, std::string_view what);

// Throws std::runtime_error naming the path and the system's reason on failure.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);

// One output's files in `dir` (empty: each name a path of its own), all or none: each is written to its temporary first, and they are
// renamed into place only when every one is written and no target is a directory, so a failure
// leaves none of this run's files beside older ones. Throws std::runtime_error as above.
struct OutputFile {
  std::string name;
  std::string content;
};
void write_files_atomically(const std::filesystem::path& dir, const std::vector<OutputFile>& files);
// Interrupts (SIGINT, SIGTERM, SIGHUP) wait from the first rename of a set of outputs until
// release_interrupts(), which main() calls once the command is done: its outputs are then all of
// one run. A held interrupt then ends the process as it would have (status 130 for Ctrl-C).
void hold_interrupts();
void release_interrupts();
// Throws std::runtime_error as write_files_atomically would if a directory is in the way of one of
// `names`: for a command that writes two sets of files, checked for the second before the first.
void check_targets(const std::filesystem::path& dir, const std::vector<std::string>& names);

// The same for a file too large to hold in memory: write() appends (buffered), commit() flushes,
// syncs and renames. A writer destroyed without commit() removes its temporary file, so the
// target is untouched. Throws std::runtime_error as above.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(std::filesystem::path path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(std::string_view text);
  // Writes out the buffered text and syncs it to disk, so that a commit() after it only renames.
  void sync();
  void commit();

 private:
  void flush();
  void put(std::string_view bytes);
  [[noreturn]] void fail(const char* what);

  std::filesystem::path path_;
  std::string temporary_;
  std::string buffer_;
  int fd_ = -1;
  int slot_ = -1;  // in the table of temporaries removed on a signal
};

// write_files_atomically for files too large to build in memory: `fill(i, writer)` streams file i
// (names[i]) into its writer; the same all-or-none guarantee.
void write_files_atomically(const std::filesystem::path& dir, const std::vector<std::string>& names,
                            const std::function<void(std::size_t, AtomicFileWriter&)>& fill);

}  // namespace cs::reports
