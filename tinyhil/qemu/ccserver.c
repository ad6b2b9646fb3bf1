/* tinyhil compile server: the guest side of tinyhil.qemu.
 *
 * Runs inside an aarch64 root file system (under qemu-user, or in a docker container) and compiles C to ELF
 * relocatable objects with libtcc, one request at a time, for as long as its stdin stays open.
 *
 * Built by tinyhil itself with the rootfs' own tcc, under qemu: this file is compiled together with tcc's library
 * (``#include "libtcc.c"`` from the tcc source tree, ONE_SOURCE build), because Debian's libtcc.a is built by gcc
 * with relocations (R_AARCH64_LDST32_ABS_LO12_NC) that tcc's own arm64 linker cannot link.
 *
 * Protocol, on stdin/stdout. Every message is a frame: a u32 little-endian payload length, then the payload.
 *   start-up  the server sends one reply {STATUS_OK, "tinyhil-ccserver <PROTOCOL_VERSION> tcc <TCC_VERSION>"}
 *   request   payload: C source text (no NUL bytes), at most MAX_FRAME_BYTES
 *   reply     payload: one status byte, then the object file (STATUS_OK) or the compiler's message (errors)
 * End of file on stdin ends the server with exit status 0; a broken frame ends it with status 2 after an
 * internal-error reply, because the byte stream can no longer be trusted.
 */
#include "libtcc.c"
#include <sys/mman.h>

/* tcc.h diverts malloc and free to catch its own stray uses; this file owns its allocations. */
#undef malloc
#undef free

#define PROTOCOL_VERSION 1
#define MAX_FRAME_BYTES (64u << 20)
#define MAX_MESSAGE_BYTES (64u << 10)
#define FRAME_HEADER_BYTES 4

enum { STATUS_OK = 0, STATUS_COMPILE_ERROR = 1, STATUS_INTERNAL_ERROR = 2 };
enum { READ_OK = 0, READ_EOF = 1, READ_BROKEN = -1 };

struct message {
    size_t len;
    char text[MAX_MESSAGE_BYTES];
};

static int read_exact(unsigned char *buf, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(0, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return got == 0 ? READ_EOF : READ_BROKEN;
        got += (size_t)r;
    }
    return READ_OK;
}

static int write_all(const unsigned char *buf, size_t n) {
    while (n) {
        ssize_t w = write(1, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

static void reply(int status, const void *payload, size_t n) {
    unsigned char header[FRAME_HEADER_BYTES + 1];
    size_t total = n + 1;
    header[0] = total & 0xff;
    header[1] = (total >> 8) & 0xff;
    header[2] = (total >> 16) & 0xff;
    header[3] = (total >> 24) & 0xff;
    header[4] = (unsigned char)status;
    if (write_all(header, sizeof header) || write_all(payload, n))
        exit(3); /* the host went away: nothing left to serve */
}

static void reply_text(int status, const char *text) { reply(status, text, strlen(text)); }

static void collect_message(void *opaque, const char *text) {
    struct message *m = opaque;
    size_t n = strlen(text);
    if (m->len + n + 2 > sizeof m->text)
        n = sizeof m->text - m->len - 2; /* keep the first messages: they name the first error */
    memcpy(m->text + m->len, text, n);
    m->len += n;
    m->text[m->len++] = '\n';
    m->text[m->len] = 0;
}

/* Compile ``source`` to an object file and send the reply. */
static void compile_one(const char *source) {
    static struct message m;
    char path[64];
    unsigned char *object;
    off_t size;
    int fd;
    TCCState *s = tcc_new();

    m.len = 0;
    m.text[0] = 0;
    if (!s) {
        reply_text(STATUS_INTERNAL_ERROR, "tcc_new() failed: out of memory");
        return;
    }
    tcc_set_error_func(s, &m, collect_message);
    tcc_set_output_type(s, TCC_OUTPUT_OBJ);
    if (tcc_compile_string(s, source) < 0) {
        reply(STATUS_COMPILE_ERROR, m.text, m.len);
        tcc_delete(s);
        return;
    }
    /* libtcc writes only to a named file: a memfd keeps the object off every file system. */
    fd = memfd_create("tinyhil-object", 0);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    if (fd < 0 || tcc_output_file(s, path) < 0) {
        collect_message(&m, fd < 0 ? "memfd_create() failed" : "tcc_output_file() failed");
        reply(STATUS_INTERNAL_ERROR, m.text, m.len);
    } else {
        size = lseek(fd, 0, SEEK_END);
        object = size > 0 ? malloc((size_t)size) : NULL;
        if (!object || pread(fd, object, (size_t)size, 0) != size)
            reply_text(STATUS_INTERNAL_ERROR, "reading the object back from its memfd failed");
        else
            reply(STATUS_OK, object, (size_t)size);
        free(object);
    }
    if (fd >= 0)
        close(fd);
    tcc_delete(s);
}

int main(void) {
    char banner[128];
    unsigned char header[FRAME_HEADER_BYTES];
    char *source;
    size_t n;
    int got;

    signal(SIGPIPE, SIG_IGN);
    snprintf(banner, sizeof banner, "tinyhil-ccserver %d tcc %s", PROTOCOL_VERSION, TCC_VERSION);
    reply_text(STATUS_OK, banner);
    for (;;) {
        got = read_exact(header, sizeof header);
        if (got == READ_EOF)
            return 0;
        if (got == READ_BROKEN) {
            reply_text(STATUS_INTERNAL_ERROR, "end of input inside a frame header");
            return 2;
        }
        n = header[0] | header[1] << 8 | header[2] << 16 | (size_t)header[3] << 24;
        if (n > MAX_FRAME_BYTES) {
            reply_text(STATUS_INTERNAL_ERROR, "request frame longer than MAX_FRAME_BYTES");
            return 2;
        }
        source = malloc(n + 1);
        if (!source) {
            reply_text(STATUS_INTERNAL_ERROR, "out of memory for the request");
            return 2;
        }
        if (read_exact((unsigned char *)source, n) != READ_OK) {
            reply_text(STATUS_INTERNAL_ERROR, "end of input inside a request frame");
            return 2;
        }
        source[n] = 0;
        if (memchr(source, 0, n))
            reply_text(STATUS_COMPILE_ERROR, "source contains a NUL byte; expected C source text");
        else
            compile_one(source);
        free(source);
    }
}
