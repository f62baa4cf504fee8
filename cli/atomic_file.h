// Atomic outputs of the `posenc` command line: every file it writes (tables,
// .npy, the tour, report pages and data, plot pages) goes through AtomicFile,
// and the report folder through AtomicDirectory. Both fill a temporary beside
// the target and rename it into place only once it is complete, so a failure
// leaves a previous output as it was (details above each class).
// Hand-written: neither the standard library nor fmt, CLI11 or nlohmann-json
// offers atomic replacement of a file.
#pragma once

#include <filesystem>
#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::cli {

enum class FileMode { kText, kBinary };

// AtomicFile writes to a temporary file beside the target (PATH.tmp-XXXXXX,
// created with mkstemp in the same directory, so rename(2) is atomic) and
// renames it over PATH only once every byte was written and flushed. Any
// failure -- the directory cannot be written, a write fails midway (disk
// full, a file-size limit), the command throws before Commit() -- removes the
// temporary file and leaves a previous PATH exactly as it was. Targets that
// are not regular files (/dev/null, /dev/stdout, a FIFO) cannot be renamed
// over: they are written directly. A symbolic link is followed: the file it
// points to is replaced and the link stays. New files get the mode an
// ordinary open would give (0666 & ~umask); a replaced file keeps its mode.
// Not done: fsync (the guarantee is against failures of the process, not a
// power cut), and locking against two processes writing one PATH (the last
// rename wins, each file whole).
class AtomicFile {
 public:
  // Creates the temporary file beside `path`; `arg` names the option in
  // messages ("-o"). Throws posenc::IoError when it cannot be created.
  AtomicFile(const std::string& path, std::string_view arg, FileMode mode = FileMode::kText);
  ~AtomicFile();  // removes the temporary file unless Commit() succeeded
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::ostream& stream() { return *out_; }
  // Flushes and closes the temporary file and renames it over the target.
  // Throws IoError naming the target (and removes the temporary file) if any
  // write failed or the rename fails.
  void Commit();
  // The temporary file's path ("" when the target is written directly).
  const std::string& temp_path() const { return temp_; }

 private:
  std::string path_;    // as given, for messages
  std::string target_;  // the file replaced (symlinks resolved)
  std::string temp_;    // "" when writing the target directly
  std::string arg_;
  std::unique_ptr<std::ofstream> out_;
  bool committed_ = false;
};

// Writes `bytes` to `path` through an AtomicFile.
void WriteFileAtomically(const std::string& path, std::string_view bytes, std::string_view arg,
                         FileMode mode = FileMode::kBinary);

// AtomicDirectory does the same for a folder: the caller fills DIR.tmp-XXXXXX
// and Commit() swaps it in place of DIR (renameat2 RENAME_EXCHANGE, then the
// old folder is removed). An existing DIR must hold only what a previous
// commit of the same kind wrote (`allowed` entries), so that a wrong -o never
// deletes unrelated files.
class AtomicDirectory {
 public:
  // Creates the parent folders of `dir` and an empty DIR.tmp-XXXXXX beside
  // it. Checks first that an existing `dir` is a folder holding only names
  // in `allowed` (top-level entries); IoError naming `arg` otherwise.
  AtomicDirectory(const std::string& dir, std::string_view arg, std::vector<std::string> allowed);
  ~AtomicDirectory();  // removes the temporary folder unless committed
  AtomicDirectory(const AtomicDirectory&) = delete;
  AtomicDirectory& operator=(const AtomicDirectory&) = delete;

  // Where to write the new contents.
  const std::filesystem::path& temp_dir() const { return temp_; }
  // Swaps the temporary folder in place of `dir` and removes the old one.
  void Commit();

 private:
  std::filesystem::path dir_;
  std::filesystem::path temp_;
  std::string arg_;
  bool committed_ = false;
};

}  // namespace posenc::cli
