#include "atomic_file.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "posenc/error.h"

namespace posenc::cli {
namespace {

namespace fs = std::filesystem;

std::string ErrnoText(int err) { return std::strerror(err); }

// The process umask, read without changing it (umask(2) can only set it).
mode_t CurrentUmask() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "Umask:") {
      std::string octal;
      status >> octal;
      return static_cast<mode_t>(std::stoul(octal, nullptr, 8) & 0777);
    }
    std::getline(status, key);
  }
  return 022;
}

// Follows a symbolic link to the file it names (relative links resolve
// against the link's folder); other paths are returned as given.
std::string ResolveTarget(const std::string& path) {
  std::error_code ec;
  if (!fs::is_symlink(fs::symlink_status(path, ec))) return path;
  const fs::path resolved = fs::weakly_canonical(fs::path(path), ec);
  return ec ? path : resolved.string();
}

}  // namespace

AtomicFile::AtomicFile(const std::string& path, std::string_view arg, FileMode mode)
    : path_(path), target_(ResolveTarget(path)), arg_(arg) {
  const auto open_mode = std::ios::out | std::ios::trunc |
                         (mode == FileMode::kBinary ? std::ios::binary : std::ios::out);
  struct stat st {};
  const bool exists = ::stat(target_.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) {
    throw IoError(arg_ + ": cannot write '" + path_ + "': it is a directory");
  }
  if (exists && !S_ISREG(st.st_mode)) {  // a device or FIFO: no rename possible
    out_ = std::make_unique<std::ofstream>(target_, open_mode);
    if (!*out_) throw IoError(arg_ + ": cannot open '" + path_ + "' for writing");
    return;
  }
  std::string templ = target_ + ".tmp-XXXXXX";
  const int fd = ::mkstemp(templ.data());
  if (fd < 0) {
    const int err = errno;
    throw IoError(arg_ + ": cannot open '" + path_ + "' for writing (" + ErrnoText(err) + ")");
  }
  ::fchmod(fd, exists ? (st.st_mode & 07777) : (0666 & ~CurrentUmask()));
  ::close(fd);
  temp_ = templ;
  out_ = std::make_unique<std::ofstream>(temp_, open_mode);
  if (!*out_) {
    ::unlink(temp_.c_str());
    throw IoError(arg_ + ": cannot open '" + path_ + "' for writing");
  }
}

AtomicFile::~AtomicFile() {
  if (committed_ || temp_.empty()) return;
  out_->close();
  ::unlink(temp_.c_str());
}

void AtomicFile::Commit() {
  out_->flush();
  const bool written = static_cast<bool>(*out_);
  out_->close();
  if (!written || !*out_) {
    if (!temp_.empty()) ::unlink(temp_.c_str());
    committed_ = true;  // nothing left to clean up
    throw IoError(arg_ + ": write to '" + path_ + "' failed" +
                  (temp_.empty() ? std::string() : " (the previous file, if any, is unchanged)"));
  }
  if (!temp_.empty() && std::rename(temp_.c_str(), target_.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_.c_str());
    committed_ = true;
    throw IoError(arg_ + ": cannot replace '" + path_ + "' (" + ErrnoText(err) + ")");
  }
  committed_ = true;
}

void WriteFileAtomically(const std::string& path, std::string_view bytes, std::string_view arg,
                         FileMode mode) {
  AtomicFile file(path, arg, mode);
  file.stream().write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  file.Commit();
}

// ---- AtomicDirectory --------------------------------------------------------

AtomicDirectory::AtomicDirectory(const std::string& dir, std::string_view arg,
                                 std::vector<std::string> allowed)
    : dir_(dir), arg_(arg) {
  std::error_code ec;
  // "out/" names the folder "out": drop trailing separators.
  while (dir_.has_relative_path() && !dir_.has_filename()) dir_ = dir_.parent_path();
  const fs::file_status st = fs::status(dir_, ec);
  const std::set<std::string> ok(allowed.begin(), allowed.end());
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) {
      throw IoError(arg_ + ": '" + dir + "' exists and is not a directory");
    }
    for (const auto& entry : fs::directory_iterator(dir_, ec)) {
      const std::string name = entry.path().filename().string();
      if (!ok.contains(name)) {
        throw IoError(arg_ + ": '" + dir + "' already holds '" + name +
                      "', which a previous run did not write; give a new or empty directory "
                      "(the whole directory is replaced)");
      }
    }
    if (ec) throw IoError(arg_ + ": cannot list '" + dir + "': " + ec.message());
  }
  const fs::path parent = dir_.has_parent_path() ? dir_.parent_path() : fs::path(".");
  fs::create_directories(parent, ec);
  if (ec) {
    throw IoError(arg_ + ": cannot create directory '" + parent.string() + "': " + ec.message());
  }
  std::string templ = (parent / (dir_.filename().string() + ".tmp-XXXXXX")).string();
  if (::mkdtemp(templ.data()) == nullptr) {
    const int err = errno;
    throw IoError(arg_ + ": cannot create a directory beside '" + dir + "' (" + ErrnoText(err) +
                  ")");
  }
  temp_ = templ;
  struct stat old {};
  const mode_t perms =
      ::stat(dir_.c_str(), &old) == 0 ? (old.st_mode & 07777) : (0777 & ~CurrentUmask());
  ::chmod(temp_.c_str(), perms);
}

AtomicDirectory::~AtomicDirectory() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(temp_, ec);
}

void AtomicDirectory::Commit() {
  std::error_code ec;
  committed_ = true;
  if (!fs::exists(dir_, ec)) {
    if (std::rename(temp_.c_str(), dir_.c_str()) == 0) return;
  } else if (::renameat2(AT_FDCWD, temp_.c_str(), AT_FDCWD, dir_.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(temp_, ec);  // now the previous contents
    return;
  } else if (errno == EINVAL || errno == ENOSYS) {
    // No atomic exchange on this file system: move the old folder aside first.
    std::string aside = dir_.string() + ".old-XXXXXX";
    if (::mkdtemp(aside.data()) != nullptr && std::rename(dir_.c_str(), aside.c_str()) == 0) {
      if (std::rename(temp_.c_str(), dir_.c_str()) == 0) {
        fs::remove_all(aside, ec);
        return;
      }
      std::rename(aside.c_str(), dir_.c_str());  // put the old one back
    }
    fs::remove(aside, ec);
  }
  const int err = errno;
  fs::remove_all(temp_, ec);
  throw IoError(arg_ + ": cannot replace directory '" + dir_.string() + "' (" + ErrnoText(err) +
                "); the previous contents are unchanged");
}

}  // namespace posenc::cli
