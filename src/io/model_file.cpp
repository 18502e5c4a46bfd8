#include "io/model_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common.hpp"

namespace pd {

namespace {

const char* kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    return "not a regular file";
}

}  // namespace

int open_regular_file(const std::filesystem::path& path, const std::string& hint) {
    int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) fail("cannot open {}: {}{}", path.string(), std::strerror(errno), hint);
    struct stat st {};
    int rc = ::fstat(fd, &st);
    int err = errno;
    if (rc != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        if (rc != 0) fail("cannot stat {}: {}", path.string(), std::strerror(err));
        fail("{} is {}, where a regular file belongs", path.string(), kind_of(st.st_mode));
    }
    return fd;
}

std::string read_regular_file(const std::filesystem::path& path, std::size_t max_bytes, const std::string& hint) {
    int fd = open_regular_file(path, hint);
    struct stat st {};
    ::fstat(fd, &st);
    if (std::size_t(st.st_size) > max_bytes) {
        ::close(fd);
        fail("{} is {} bytes, more than the {} this kit reads from such a file", path.string(), st.st_size,
             max_bytes);
    }
    std::string text(std::size_t(st.st_size), '\0');
    std::size_t got = 0;
    while (got < text.size()) {
        ssize_t n = ::read(fd, text.data() + got, text.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += std::size_t(n);
    }
    ::close(fd);
    text.resize(got);  // a file that shrank while read is read as it is now
    return text;
}

}  // namespace pd
