/* tinyhil serve kfd: the LD_PRELOAD side. docs/serve.md ("KFD") describes what it serves and the protocol.
 *
 * Path calls (open, stat, access, opendir, scandir, readlink, realpath, ...) on the served trees are redirected into
 * $TINYHIL_KFD_ROOT, a directory the server renders from MOCKKFD's topology, so reads, listings and fstat of
 * those files are ordinary file operations. Opening /dev/kfd or /dev/dri/renderD<n> asks the server (a Unix
 * SOCK_SEQPACKET socket at $TINYHIL_KFD_SOCKET); the descriptor the client gets is a real one (of /dev/null),
 * and ioctl / mmap / close on it are forwarded. mmap answers carry a memfd (SCM_RIGHTS) that the client maps
 * in place of the device, so loads and stores are plain memory operations. Built by tinyhil with the system
 * compiler; needs libc only. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

/* The protocol (little endian, native layout; docs/serve.md). */
enum { OP_OPEN = 1, OP_CLOSE = 2, OP_IOCTL = 3, OP_MMAP = 4 };
enum { OP_MEMREAD = 16, OP_MEMWRITE = 17, OP_DONE = 32 };
enum { ARG_READABLE = 1, ARG_WRITABLE = 2, ARG_USERPTR_FD = 4 };
struct request { uint32_t op, fd; uint64_t a, b, c; uint32_t len, flags; };
struct reply { uint32_t op; int32_t err; uint64_t a, b; uint32_t len, pad; };
#define MAX_PAYLOAD (64u << 10)
#define MAX_FDS 65536
#define MAX_IOCTL_BYTES 0x4000 /* _IOC_SIZE has 14 bits */
#define IOC_SIZE(req) (((req) >> 16) & 0x3fffu)
#define IOC_NR(req) ((req) & 0xffu)
#define IOC_TYPE(req) (((req) >> 8) & 0xffu)
#define KFD_IOC_TYPE 'K'
#define NR_ACQUIRE_VM 0x15
#define NR_ALLOC_MEMORY_OF_GPU 0x16
#define ALLOC_FLAGS_USERPTR (1u << 2)

static const char *const served[] = {"/dev/kfd", "/dev/dri", "/sys/devices/virtual/kfd", "/sys/class/kfd",
                                     "/sys/class/drm", "/sys/devices/tinyhil-pci"};

/* One connection per thread, so a thread blocked in WAIT_EVENTS holds up no other; the server groups a process's
 * connections by their peer's pid. A forked child starts with none (its parent's KFD process is not its own). */
static __thread int sock = -1;
static __thread pid_t sock_pid;
static __thread char *msg_buf; /* MAX_PAYLOAD bytes for messages, made on the thread's first request */
static unsigned char remote[MAX_FDS]; /* 1: the descriptor is a served device file */

#define REAL(ret, name, ...)                                                                                          \
    static ret (*real_##name)(__VA_ARGS__);                                                                           \
    static ret (*get_##name(void))(__VA_ARGS__) {                                                                     \
        if (!real_##name) real_##name = dlsym(RTLD_NEXT, #name);                                                      \
        return real_##name;                                                                                           \
    }
REAL(int, open, const char *, int, ...)
REAL(int, open64, const char *, int, ...)
REAL(int, openat, int, const char *, int, ...)
REAL(int, openat64, int, const char *, int, ...)
REAL(FILE *, fopen, const char *, const char *)
REAL(FILE *, fopen64, const char *, const char *)
REAL(int, close, int)
REAL(int, ioctl, int, unsigned long, ...)
REAL(void *, mmap, void *, size_t, int, int, int, off_t)
REAL(void *, mmap64, void *, size_t, int, int, int, off64_t)
REAL(int, stat, const char *, struct stat *)
REAL(int, stat64, const char *, struct stat64 *)
REAL(int, lstat, const char *, struct stat *)
REAL(int, lstat64, const char *, struct stat64 *)
REAL(int, fstatat, int, const char *, struct stat *, int)
REAL(int, fstatat64, int, const char *, struct stat64 *, int)
REAL(int, __xstat, int, const char *, struct stat *)
REAL(int, __xstat64, int, const char *, struct stat64 *)
REAL(int, __lxstat, int, const char *, struct stat *)
REAL(int, __lxstat64, int, const char *, struct stat64 *)
REAL(int, __fxstatat, int, int, const char *, struct stat *, int)
REAL(int, __fxstatat64, int, int, const char *, struct stat64 *, int)
REAL(int, statx, int, const char *, int, unsigned int, struct statx *)
REAL(int, access, const char *, int)
REAL(int, faccessat, int, const char *, int, int)
REAL(DIR *, opendir, const char *)
REAL(int, scandir, const char *, struct dirent ***, int (*)(const struct dirent *),
     int (*)(const struct dirent **, const struct dirent **))
REAL(int, scandir64, const char *, struct dirent64 ***, int (*)(const struct dirent64 *),
     int (*)(const struct dirent64 **, const struct dirent64 **))
REAL(ssize_t, getxattr, const char *, const char *, void *, size_t)
REAL(ssize_t, lgetxattr, const char *, const char *, void *, size_t)
REAL(ssize_t, listxattr, const char *, char *, size_t)
REAL(ssize_t, llistxattr, const char *, char *, size_t)
REAL(ssize_t, readlinkat, int, const char *, char *, size_t)
REAL(char *, realpath, const char *, char *)

/* --- paths ---------------------------------------------------------------------------------------------------- */
static int is_served(const char *path) {
    if (!path || path[0] != '/') return 0;
    for (size_t i = 0; i < sizeof served / sizeof *served; i++) {
        size_t n = strlen(served[i]);
        if (strncmp(path, served[i], n) == 0 && (path[n] == '\0' || path[n] == '/')) return 1;
    }
    return 0;
}

static int is_device(const char *path) {
    if (!path) return 0;
    if (strcmp(path, "/dev/kfd") == 0) return 1;
    const char *prefix = "/dev/dri/renderD";
    size_t n = strlen(prefix);
    if (strncmp(path, prefix, n) != 0 || !path[n]) return 0;
    for (const char *p = path + n; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    return 1;
}

/* The served files are read-only, whoever the client is (root ignores the files' modes): writing is EACCES. */
static int refuse_write(const char *path, int flags) {
    if (!is_served(path) || ((flags & O_ACCMODE) == O_RDONLY && !(flags & (O_CREAT | O_TRUNC)))) return 0;
    errno = EACCES;
    return 1;
}

/* The path as the client sees it, or its place under $TINYHIL_KFD_ROOT for the served trees. */
static const char *redirect(const char *path, char *buf) {
    const char *root = getenv("TINYHIL_KFD_ROOT");
    if (!root || !is_served(path)) return path;
    if ((size_t)snprintf(buf, PATH_MAX, "%s%s", root, path) >= PATH_MAX) return path;
    return buf;
}

/* --- the connection ------------------------------------------------------------------------------------------- */
static int connect_server(void) {
    if (sock >= 0 && sock_pid == getpid()) return 0;
    if (sock >= 0) { /* a forked child: the descriptors it inherited are its parent's (the server answers EBADF) */
        get_close()(sock);
        sock = -1;
    }
    if (!msg_buf && !(msg_buf = malloc(MAX_PAYLOAD))) return -ENOMEM;
    const char *path = getenv("TINYHIL_KFD_SOCKET");
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (!path || strlen(path) >= sizeof addr.sun_path) return -ENOENT;
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        int err = errno;
        get_close()(fd);
        return -err;
    }
    sock_pid = getpid();
    sock = fd;
    return 0;
}

static int send_msg(const void *head, size_t head_len, const void *data, size_t len, int pass_fd) {
    struct iovec iov[2] = {{(void *)head, head_len}, {(void *)data, len}};
    char control[CMSG_SPACE(sizeof(int))] = {0};
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
    if (pass_fd >= 0) {
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cmsg), &pass_fd, sizeof(int));
    }
    return sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* One message from the server: its header, up to cap payload bytes into data, and a passed descriptor (or -1). */
static int recv_msg(struct reply *head, void *data, size_t cap, int *passed) {
    struct iovec iov[2] = {{head, sizeof *head}, {data, cap}};
    char control[CMSG_SPACE(sizeof(int))];
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2, .msg_control = control, .msg_controllen = sizeof control};
    ssize_t n;
    do n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < (ssize_t)sizeof *head) return n < 0 ? -errno : -EPIPE;
    *passed = -1;
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    if (cmsg && cmsg->cmsg_type == SCM_RIGHTS) memcpy(passed, CMSG_DATA(cmsg), sizeof(int));
    return 0;
}

/* Copy between this process's memory and a buffer without faulting on a bad address (EFAULT instead). */
static int copy_self(void *local, uint64_t address, size_t n, int to_address) {
    struct iovec mine = {local, n}, theirs = {(void *)(uintptr_t)address, n};
    ssize_t done = to_address ? process_vm_writev(getpid(), &mine, 1, &theirs, 1, 0)
                              : process_vm_readv(getpid(), &mine, 1, &theirs, 1, 0);
    if (done == (ssize_t)n) return 0;
    if (done < 0 && (errno == ENOSYS || errno == EPERM)) { /* no cross-memory attach here: trust the pointer */
        if (to_address) memcpy((void *)(uintptr_t)address, local, n);
        else memcpy(local, (void *)(uintptr_t)address, n);
        return 0;
    }
    return -EFAULT;
}

/* Send a request and serve the server's reads and writes of our memory until its answer comes. */
static int transact(struct request *req, const void *data, int pass_fd, struct reply *rep, void *out, size_t cap,
                    int *passed) {
    int err = send_msg(req, sizeof *req, data, req->len, pass_fd);
    while (!err) {
        struct reply in;
        int fd = -1;
        err = recv_msg(&in, msg_buf, MAX_PAYLOAD, &fd);
        if (err) break;
        if (in.op == OP_DONE) {
            *rep = in;
            if (in.len && in.len <= cap) memcpy(out, msg_buf, in.len);
            *passed = fd;
            return 0;
        }
        struct reply answer = {.op = in.op};
        if (in.op == OP_MEMREAD && in.b <= MAX_PAYLOAD) {
            answer.err = copy_self(msg_buf, in.a, in.b, 0);
            answer.len = answer.err ? 0 : (uint32_t)in.b;
        } else if (in.op == OP_MEMWRITE && in.len <= MAX_PAYLOAD) {
            answer.err = copy_self(msg_buf, in.a, in.len, 1);
        } else {
            answer.err = -EINVAL;
        }
        err = send_msg(&answer, sizeof answer, msg_buf, answer.len, -1);
    }
    return err;
}

/* --- device files --------------------------------------------------------------------------------------------- */
static int device_open(const char *path, int flags) {
    char buf[PATH_MAX];
    if (get_access()(redirect(path, buf), F_OK) < 0) return -1; /* no such device in MOCKKFD: ENOENT */
    int fd = get_open()("/dev/null", O_RDWR | (flags & O_CLOEXEC));
    if (fd < 0) return -1;
    if (fd >= MAX_FDS) {
        get_close()(fd);
        errno = EMFILE;
        return -1;
    }
    int err = connect_server();
    struct reply rep = {0};
    int passed = -1;
    if (!err) {
        struct request req = {.op = OP_OPEN, .fd = (uint32_t)fd, .a = (uint32_t)flags, .len = strlen(path) + 1};
        err = transact(&req, path, -1, &rep, NULL, 0, &passed);
    }
    if (!err) err = rep.err;
    if (!err) remote[fd] = 1;
    if (err) {
        get_close()(fd);
        errno = -err;
        return -1;
    }
    return fd;
}

static int is_remote(int fd) { return fd >= 0 && fd < MAX_FDS && remote[fd]; }

/* USERPTR memory becomes shared: the range is copied into a memfd mapped over itself, which the server maps too. */
static int share_userptr(uint64_t address, uint64_t size) {
    long page = sysconf(_SC_PAGESIZE);
    size = (size + page - 1) & ~(uint64_t)(page - 1);
    if (!address || address % page || !size) return -1;
    int fd = memfd_create("tinyhil-kfd-userptr", MFD_CLOEXEC);
    if (fd < 0) return -1;
    void *copy = get_mmap()(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ftruncate(fd, size) < 0 || copy == MAP_FAILED || copy_self(copy, address, size, 0) ||
        get_mmap()((void *)(uintptr_t)address, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
            MAP_FAILED) {
        if (copy != MAP_FAILED) munmap(copy, size);
        get_close()(fd);
        return -1;
    }
    munmap(copy, size);
    return fd;
}

static int remote_ioctl(int fd, unsigned long request, void *arg) {
    char data[MAX_IOCTL_BYTES];
    uint32_t size = IOC_SIZE(request), flags = 0;
    if (size && copy_self(data, (uintptr_t)arg, size, 0) == 0) {
        flags |= ARG_READABLE;
        if (copy_self(data, (uintptr_t)arg, size, 1) == 0) flags |= ARG_WRITABLE;
    }
    int userptr = -1;
    struct request req = {.op = OP_IOCTL, .fd = (uint32_t)fd, .a = request};
    if (IOC_TYPE(request) == KFD_IOC_TYPE && IOC_NR(request) == NR_ALLOC_MEMORY_OF_GPU && size >= 40 &&
        (flags & ARG_READABLE)) {
        uint64_t bytes, address;
        uint32_t alloc_flags;
        memcpy(&bytes, data + 8, 8);
        memcpy(&address, data + 24, 8);
        memcpy(&alloc_flags, data + 36, 4);
        if (alloc_flags & ALLOC_FLAGS_USERPTR && (userptr = share_userptr(address, bytes)) >= 0) {
            flags |= ARG_USERPTR_FD;
            req.b = address;
        }
    }
    req.flags = flags;
    req.len = flags & ARG_READABLE ? size : 0;
    struct reply rep = {0};
    int passed = -1;
    int err = connect_server();
    if (!err) err = transact(&req, data, userptr, &rep, data, sizeof data, &passed);
    if (userptr >= 0) get_close()(userptr);
    if (passed >= 0) get_close()(passed);
    if (!err && rep.len && (flags & ARG_WRITABLE) && copy_self(data, (uintptr_t)arg, rep.len, 1)) err = -EFAULT;
    if (!err) err = rep.err;
    if (err) {
        errno = -err;
        return -1;
    }
    return (int)rep.a;
}

static void *remote_mmap(void *address, size_t length, int prot, int flags, int fd, off64_t offset) {
    struct request req = {.op = OP_MMAP, .fd = (uint32_t)fd, .a = length, .b = (uint64_t)offset};
    struct reply rep = {0};
    int passed = -1;
    int err = connect_server();
    if (!err) err = transact(&req, NULL, -1, &rep, NULL, 0, &passed);
    if (!err) err = rep.err;
    if (!err && passed < 0) err = -EIO;
    if (err) {
        if (passed >= 0) get_close()(passed);
        errno = -err;
        return MAP_FAILED;
    }
    void *mapped = get_mmap()(address, length, prot, flags, passed, (off_t)rep.a);
    int saved = errno;
    get_close()(passed);
    errno = saved;
    return mapped;
}

/* --- the interposed calls ------------------------------------------------------------------------------------- */
static mode_t mode_arg(int flags, va_list ap) {
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? va_arg(ap, mode_t) : 0;
}

#define OPEN_LIKE(name)                                                                                               \
    int name(const char *path, int flags, ...) {                                                                      \
        va_list ap;                                                                                                   \
        va_start(ap, flags);                                                                                          \
        mode_t mode = mode_arg(flags, ap);                                                                            \
        va_end(ap);                                                                                                   \
        if (is_device(path)) return device_open(path, flags);                                                         \
        if (refuse_write(path, flags)) return -1;                                                                     \
        char buf[PATH_MAX];                                                                                           \
        return get_##name()(redirect(path, buf), flags, mode);                                                        \
    }
OPEN_LIKE(open)
OPEN_LIKE(open64)

#define OPENAT_LIKE(name)                                                                                             \
    int name(int dirfd, const char *path, int flags, ...) {                                                           \
        va_list ap;                                                                                                   \
        va_start(ap, flags);                                                                                          \
        mode_t mode = mode_arg(flags, ap);                                                                            \
        va_end(ap);                                                                                                   \
        if (is_device(path)) return device_open(path, flags);                                                         \
        if (refuse_write(path, flags)) return -1;                                                                     \
        char buf[PATH_MAX];                                                                                           \
        return get_##name()(dirfd, redirect(path, buf), flags, mode);                                                 \
    }
OPENAT_LIKE(openat)
OPENAT_LIKE(openat64)

int __open_2(const char *path, int flags) { return open(path, flags); }
int __open64_2(const char *path, int flags) { return open64(path, flags); }
int __openat_2(int dirfd, const char *path, int flags) { return openat(dirfd, path, flags); }
int __openat64_2(int dirfd, const char *path, int flags) { return openat64(dirfd, path, flags); }

#define PATH_CALL(ret, name, params, path, ...)                                                                       \
    ret name params {                                                                                                 \
        char buf[PATH_MAX];                                                                                           \
        const char *redirected = redirect(path, buf);                                                                 \
        return get_##name()(__VA_ARGS__);                                                                             \
    }
#define FOPEN_LIKE(name)                                                                                              \
    FILE *name(const char *path, const char *mode) {                                                                  \
        if (is_served(path) && strpbrk(mode, "wa+") && refuse_write(path, O_WRONLY)) return NULL;                     \
        char buf[PATH_MAX];                                                                                           \
        return get_##name()(redirect(path, buf), mode);                                                               \
    }
FOPEN_LIKE(fopen)
FOPEN_LIKE(fopen64)
PATH_CALL(int, stat, (const char *path, struct stat *st), path, redirected, st)
PATH_CALL(int, stat64, (const char *path, struct stat64 *st), path, redirected, st)
/* A served device node is a link to /dev/null in the served tree; calls that would show the link itself (lstat,
 * AT_SYMLINK_NOFOLLOW, readlink) see the character device a device node is. */
#define FOLLOW(path, flags) (is_device(path) ? (flags) & ~AT_SYMLINK_NOFOLLOW : (flags))
int lstat(const char *path, struct stat *st) {
    char buf[PATH_MAX];
    return is_device(path) ? stat(path, st) : get_lstat()(redirect(path, buf), st);
}
int lstat64(const char *path, struct stat64 *st) {
    char buf[PATH_MAX];
    return is_device(path) ? stat64(path, st) : get_lstat64()(redirect(path, buf), st);
}
PATH_CALL(int, fstatat, (int dirfd, const char *path, struct stat *st, int flags), path, dirfd, redirected, st,
          FOLLOW(path, flags))
PATH_CALL(int, fstatat64, (int dirfd, const char *path, struct stat64 *st, int flags), path, dirfd, redirected, st,
          FOLLOW(path, flags))
PATH_CALL(int, __xstat, (int ver, const char *path, struct stat *st), path, ver, redirected, st)
PATH_CALL(int, __xstat64, (int ver, const char *path, struct stat64 *st), path, ver, redirected, st)
int __lxstat(int ver, const char *path, struct stat *st) {
    char buf[PATH_MAX];
    return is_device(path) ? __xstat(ver, path, st) : get___lxstat()(ver, redirect(path, buf), st);
}
int __lxstat64(int ver, const char *path, struct stat64 *st) {
    char buf[PATH_MAX];
    return is_device(path) ? __xstat64(ver, path, st) : get___lxstat64()(ver, redirect(path, buf), st);
}
PATH_CALL(int, __fxstatat, (int ver, int dirfd, const char *path, struct stat *st, int flags), path, ver, dirfd,
          redirected, st, FOLLOW(path, flags))
PATH_CALL(int, __fxstatat64, (int ver, int dirfd, const char *path, struct stat64 *st, int flags), path, ver, dirfd,
          redirected, st, FOLLOW(path, flags))
PATH_CALL(int, statx, (int dirfd, const char *path, int flags, unsigned int mask, struct statx *st), path, dirfd,
          redirected, FOLLOW(path, flags), mask, st)
PATH_CALL(ssize_t, getxattr, (const char *path, const char *name, void *value, size_t size), path, redirected, name,
          value, size)
PATH_CALL(ssize_t, lgetxattr, (const char *path, const char *name, void *value, size_t size), path, redirected, name,
          value, size)
PATH_CALL(ssize_t, listxattr, (const char *path, char *list, size_t size), path, redirected, list, size)
PATH_CALL(ssize_t, llistxattr, (const char *path, char *list, size_t size), path, redirected, list, size)
PATH_CALL(int, access, (const char *path, int mode), path, redirected, mode)
PATH_CALL(int, faccessat, (int dirfd, const char *path, int mode, int flags), path, dirfd, redirected, mode, flags)
PATH_CALL(DIR *, opendir, (const char *path), path, redirected)
PATH_CALL(int, scandir,
          (const char *path, struct dirent ***list, int (*keep)(const struct dirent *),
           int (*order)(const struct dirent **, const struct dirent **)),
          path, redirected, list, keep, order)
PATH_CALL(int, scandir64,
          (const char *path, struct dirent64 ***list, int (*keep)(const struct dirent64 *),
           int (*order)(const struct dirent64 **, const struct dirent64 **)),
          path, redirected, list, keep, order)
ssize_t readlink(const char *path, char *out, size_t size) { return readlinkat(AT_FDCWD, path, out, size); }
ssize_t readlinkat(int dirfd, const char *path, char *out, size_t size) {
    if (is_device(path)) { /* a device node is no link */
        errno = EINVAL;
        return -1;
    }
    char buf[PATH_MAX];
    return get_readlinkat()(dirfd, redirect(path, buf), out, size);
}

char *realpath(const char *path, char *resolved) {
    char buf[PATH_MAX];
    const char *redirected = redirect(path, buf);
    char *result = get_realpath()(redirected, resolved);
    const char *root = getenv("TINYHIL_KFD_ROOT");
    size_t n = root ? strlen(root) : 0;
    if (result && redirected != path && strncmp(result, root, n) == 0 && result[n] == '/')
        memmove(result, result + n, strlen(result + n) + 1);
    return result;
}

int close(int fd) {
    if (is_remote(fd)) {
        remote[fd] = 0;
        if (connect_server() == 0) {
            struct request req = {.op = OP_CLOSE, .fd = (uint32_t)fd};
            struct reply rep;
            int passed = -1;
            transact(&req, NULL, -1, &rep, NULL, 0, &passed);
        }
    }
    return get_close()(fd);
}

int ioctl(int fd, unsigned long request, ...) {
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    if (is_remote(fd)) return remote_ioctl(fd, request, arg);
    return get_ioctl()(fd, request, arg);
}

void *mmap(void *address, size_t length, int prot, int flags, int fd, off_t offset) {
    if (is_remote(fd)) return remote_mmap(address, length, prot, flags, fd, offset);
    return get_mmap()(address, length, prot, flags, fd, offset);
}

void *mmap64(void *address, size_t length, int prot, int flags, int fd, off64_t offset) {
    if (is_remote(fd)) return remote_mmap(address, length, prot, flags, fd, offset);
    return get_mmap64()(address, length, prot, flags, fd, offset);
}
