/* Executable kind from the ELF program headers (see binkind.h). */
#include "binkind.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Field readers in the file's byte order. */
static uint16_t rd16(const unsigned char *p, int big) {
    return big ? (uint16_t)(p[0] << 8 | p[1]) : (uint16_t)(p[1] << 8 | p[0]);
}

static uint32_t rd32(const unsigned char *p, int big) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | p[big ? i : 3 - i];
    return v;
}

static uint64_t rd64(const unsigned char *p, int big) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[big ? i : 7 - i];
    return v;
}

/* Reads exactly n bytes at off; 0, or -1 when fewer were available. */
static int read_exact(aor_binkind_reader rd, void *ctx, void *buf, size_t n, uint64_t off) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = rd(ctx, (char *)buf + got, n - got, off + got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

/* 1 when the PT_NOTE segment at off (size bytes, at most AOR_BINKIND_NOTE_MAX read)
 * holds the Go toolchain's build-ID note: owner "Go", type 4 (the Go linker's
 * ELF_NOTE_GOBUILDID_TAG, section .note.go.buildid). Notes: namesz, descsz, type (32-bit
 * words), then the name and the descriptor, each padded to 4 bytes (gABI "Note
 * Section"). */
static int note_says_go(aor_binkind_reader rd, void *ctx, uint64_t off, uint64_t size, int big) {
    unsigned char buf[AOR_BINKIND_NOTE_MAX];
    size_t n = size < sizeof buf ? (size_t)size : sizeof buf;
    if (n < 12 || read_exact(rd, ctx, buf, n, off) != 0)
        return 0;
    for (size_t at = 0; at + 12 <= n;) {
        uint32_t namesz = rd32(buf + at, big), descsz = rd32(buf + at + 4, big);
        uint32_t type = rd32(buf + at + 8, big);
        if (namesz > n || descsz > n)
            return 0;
        size_t name_at = at + 12, next = name_at + ((namesz + 3u) & ~3u) + ((descsz + 3u) & ~3u);
        if (name_at + namesz > n)
            return 0;
        /* "Go" with its NUL, with or without the padding counted in namesz */
        if (type == 4 && (namesz == 3 || namesz == 4) &&
            memcmp(buf + name_at, "Go\0\0", namesz) == 0)
            return 1;
        if (next <= at)
            return 0;
        at = next;
    }
    return 0;
}

aor_binkind aor_binkind_read(aor_binkind_reader rd, void *ctx) {
    unsigned char eh[sizeof(Elf64_Ehdr)];
    memset(eh, 0, sizeof eh);
    if (read_exact(rd, ctx, eh, EI_NIDENT, 0) != 0)
        return AOR_BIN_OTHER;
    if (memcmp(eh, ELFMAG, SELFMAG) != 0 || eh[EI_VERSION] != EV_CURRENT)
        return AOR_BIN_OTHER;
    int is64 = eh[EI_CLASS] == ELFCLASS64;
    if (!is64 && eh[EI_CLASS] != ELFCLASS32)
        return AOR_BIN_OTHER;
    int big = eh[EI_DATA] == ELFDATA2MSB;
    if (!big && eh[EI_DATA] != ELFDATA2LSB)
        return AOR_BIN_OTHER;
    size_t ehsize = is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
    if (read_exact(rd, ctx, eh + EI_NIDENT, ehsize - EI_NIDENT, EI_NIDENT) != 0)
        return AOR_BIN_OTHER;

    uint64_t phoff;
    uint16_t phentsize, phnum;
    size_t want_ent;
    if (is64) {
        phoff = rd64(eh + offsetof(Elf64_Ehdr, e_phoff), big);
        phentsize = rd16(eh + offsetof(Elf64_Ehdr, e_phentsize), big);
        phnum = rd16(eh + offsetof(Elf64_Ehdr, e_phnum), big);
        want_ent = sizeof(Elf64_Phdr);
    } else {
        phoff = rd32(eh + offsetof(Elf32_Ehdr, e_phoff), big);
        phentsize = rd16(eh + offsetof(Elf32_Ehdr, e_phentsize), big);
        phnum = rd16(eh + offsetof(Elf32_Ehdr, e_phnum), big);
        want_ent = sizeof(Elf32_Phdr);
    }
    /* No program headers: not something the kernel can execute. PN_XNUM moves the count
     * into section 0; no real executable needs that many, so it is "other". */
    if (phnum == 0 || phnum == PN_XNUM || phentsize != want_ent || phoff == 0)
        return AOR_BIN_OTHER;
    size_t table = (size_t)phnum * phentsize;
    if (table > AOR_BINKIND_PHDR_MAX || phoff > UINT64_MAX - table)
        return AOR_BIN_OTHER;
    unsigned char *ph = malloc(table);
    if (!ph)
        return AOR_BIN_OTHER;
    aor_binkind kind = AOR_BIN_OTHER;
    if (read_exact(rd, ctx, ph, table, phoff) != 0)
        goto out_ph;
    kind = AOR_BIN_STATIC;
    for (size_t i = 0; i < phnum; i++) {
        /* p_type is the first 32-bit field of both Elf32_Phdr and Elf64_Phdr. */
        if (rd32(ph + i * phentsize, big) == PT_INTERP) {
            kind = AOR_BIN_DYNAMIC;
            break;
        }
    }
    for (size_t i = 0; kind == AOR_BIN_DYNAMIC && i < phnum; i++) {
        const unsigned char *e = ph + i * phentsize;
        if (rd32(e, big) != PT_NOTE)
            continue;
        uint64_t off = is64 ? rd64(e + offsetof(Elf64_Phdr, p_offset), big)
                            : rd32(e + offsetof(Elf32_Phdr, p_offset), big);
        uint64_t size = is64 ? rd64(e + offsetof(Elf64_Phdr, p_filesz), big)
                             : rd32(e + offsetof(Elf32_Phdr, p_filesz), big);
        if (note_says_go(rd, ctx, off, size, big))
            kind = AOR_BIN_GO;
    }
out_ph:
    free(ph);
    return kind;
}

typedef struct {
    const unsigned char *p;
    size_t len;
} mem_ctx;

static ssize_t mem_read(void *ctx, void *buf, size_t n, uint64_t off) {
    const mem_ctx *m = ctx;
    if (off >= m->len)
        return 0;
    size_t avail = m->len - (size_t)off;
    if (n > avail)
        n = avail;
    memcpy(buf, m->p + off, n);
    return (ssize_t)n;
}

aor_binkind aor_binkind_of_buffer(const void *buf, size_t len) {
    mem_ctx m = {buf, buf ? len : 0};
    return aor_binkind_read(mem_read, &m);
}

static ssize_t fd_read(void *ctx, void *buf, size_t n, uint64_t off) {
    int fd = *(const int *)ctx;
    if (off > (uint64_t)INT64_MAX)
        return -1;
    ssize_t r;
    do
        r = pread(fd, buf, n, (off_t)off);
    while (r < 0 && errno == EINTR);
    return r;
}

aor_binkind aor_binkind_of_file(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return AOR_BIN_OTHER;
    errno = 0;
    aor_binkind k = aor_binkind_read(fd_read, &fd);
    int e = errno;
    close(fd);
    errno = k == AOR_BIN_OTHER ? e : 0;
    return k;
}

const char *aor_binkind_name(aor_binkind k) {
    switch (k) {
    case AOR_BIN_DYNAMIC:
        return "dynamic";
    case AOR_BIN_STATIC:
        return "static";
    case AOR_BIN_GO:
        return "go";
    default:
        return "other";
    }
}
