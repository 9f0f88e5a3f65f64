/* Unit tests for common/binkind.c: `aor run` tells static programs (no PT_INTERP) from
 * dynamic ones (spec §2, last bullet; System V gABI program headers). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binkind.h"

#define IMG_MAX 4096

typedef struct {
    unsigned char b[IMG_MAX];
    size_t len;
    int big;
} img;

static void put(img *m, size_t off, uint64_t v, int width) {
    assert_true(off + (size_t)width <= IMG_MAX);
    for (int i = 0; i < width; i++) {
        int shift = m->big ? 8 * (width - 1 - i) : 8 * i;
        m->b[off + (size_t)i] = (unsigned char)(v >> shift);
    }
}

/* An executable image: ELF header, then `n` program headers of the given types. */
static void make(img *m, int is64, int big, const uint32_t *types, size_t n) {
    memset(m, 0, sizeof *m);
    m->big = big;
    memcpy(m->b, ELFMAG, SELFMAG);
    m->b[EI_CLASS] = is64 ? ELFCLASS64 : ELFCLASS32;
    m->b[EI_DATA] = big ? ELFDATA2MSB : ELFDATA2LSB;
    m->b[EI_VERSION] = EV_CURRENT;
    size_t eh = is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
    size_t ph = is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
    if (is64) {
        put(m, offsetof(Elf64_Ehdr, e_type), ET_EXEC, 2);
        put(m, offsetof(Elf64_Ehdr, e_phoff), eh, 8);
        put(m, offsetof(Elf64_Ehdr, e_phentsize), ph, 2);
        put(m, offsetof(Elf64_Ehdr, e_phnum), n, 2);
    } else {
        put(m, offsetof(Elf32_Ehdr, e_type), ET_EXEC, 2);
        put(m, offsetof(Elf32_Ehdr, e_phoff), eh, 4);
        put(m, offsetof(Elf32_Ehdr, e_phentsize), ph, 2);
        put(m, offsetof(Elf32_Ehdr, e_phnum), n, 2);
    }
    for (size_t i = 0; i < n; i++)
        put(m, eh + i * ph, types[i], 4);
    m->len = eh + n * ph;
}

static const uint32_t DYN[] = {PT_PHDR, PT_INTERP, PT_LOAD, PT_DYNAMIC};
static const uint32_t STAT[] = {PT_LOAD, PT_LOAD, PT_NOTE, PT_TLS, PT_GNU_STACK};

static void test_all_classes_and_byte_orders(void **state) {
    img m;
    for (int is64 = 0; is64 <= 1; is64++)
        for (int big = 0; big <= 1; big++) {
            make(&m, is64, big, DYN, 4);
            assert_int_equal(aor_binkind_of_buffer(m.b, m.len), AOR_BIN_DYNAMIC);
            make(&m, is64, big, STAT, 5);
            assert_int_equal(aor_binkind_of_buffer(m.b, m.len), AOR_BIN_STATIC);
        }
}

/* PT_INTERP anywhere in the table counts, also as the last entry. */
static void test_interp_last(void **state) {
    const uint32_t t[] = {PT_LOAD, PT_LOAD, PT_INTERP};
    img m;
    make(&m, 1, 0, t, 3);
    assert_int_equal(aor_binkind_of_buffer(m.b, m.len), AOR_BIN_DYNAMIC);
}

/* Puts a PT_NOTE program header (entry i of image m, class is64) for a note at off:
 * owner name (namesz with its NUL), type; returns the note's size. */
static size_t put_note(img *m, int is64, size_t i, size_t off, const char *name, uint32_t namesz,
                       uint32_t type) {
    size_t eh = is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr);
    size_t ph = is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr);
    size_t e = eh + i * ph;
    size_t size = 12 + ((namesz + 3u) & ~3u) + 8;
    put(m, e, PT_NOTE, 4);
    if (is64) {
        put(m, e + offsetof(Elf64_Phdr, p_offset), off, 8);
        put(m, e + offsetof(Elf64_Phdr, p_filesz), size, 8);
    } else {
        put(m, e + offsetof(Elf32_Phdr, p_offset), off, 4);
        put(m, e + offsetof(Elf32_Phdr, p_filesz), size, 4);
    }
    put(m, off, namesz, 4);
    put(m, off + 4, 8, 4);
    put(m, off + 8, type, 4);
    memcpy(m->b + off + 12, name, strlen(name));
    if (m->len < off + size)
        m->len = off + size;
    return size;
}

/* A dynamic program with the Go toolchain's build-ID note (owner "Go", type 4) is Go:
 * the shim cannot see its sockets (QA). Other notes, and a static Go program (the
 * sidecar already), are not; a note segment that lies past the data or holds a bad size
 * is read no further. */
static void test_go_note(void **state) {
    const uint32_t t[] = {PT_PHDR, PT_INTERP, PT_LOAD, PT_NULL};
    img m;
    for (int is64 = 0; is64 <= 1; is64++)
        for (int big = 0; big <= 1; big++) {
            make(&m, is64, big, t, 4);
            put_note(&m, is64, 3, 512, "Go", 4, 4);
            assert_int_equal(aor_binkind_of_buffer(m.b, m.len), AOR_BIN_GO);
            make(&m, is64, big, t, 4);
            put_note(&m, is64, 3, 512, "GNU", 4, 3); /* NT_GNU_BUILD_ID */
            assert_int_equal(aor_binkind_of_buffer(m.b, m.len), AOR_BIN_DYNAMIC);
            make(&m, is64, big, t, 4);
            put_note(&m, is64, 3, 512, "Go", 4, 1); /* Go's other notes */
            assert_int_equal(aor_binkind_of_buffer(m.b, m.len), AOR_BIN_DYNAMIC);
        }
    const uint32_t st[] = {PT_LOAD, PT_NULL};
    make(&m, 1, 0, st, 2);
    put_note(&m, 1, 1, 512, "Go", 4, 4);
    assert_int_equal(aor_binkind_of_buffer(m.b, m.len), AOR_BIN_STATIC);
    /* Past the data: dynamic, not read. A namesz larger than the segment: dynamic. */
    make(&m, 1, 0, t, 4);
    size_t n = put_note(&m, 1, 3, 512, "Go", 4, 4);
    assert_int_equal(aor_binkind_of_buffer(m.b, 512 + n - 1), AOR_BIN_DYNAMIC);
    put(&m, 512, 0xfffffff0u, 4);
    assert_int_equal(aor_binkind_of_buffer(m.b, m.len), AOR_BIN_DYNAMIC);
    assert_string_equal(aor_binkind_name(AOR_BIN_GO), "go");
}

/* Scripts and other files are "other": aor run keeps LD_PRELOAD for them. */
static void test_not_elf(void **state) {
    const char *sh = "#!/bin/sh\necho hi\n";
    assert_int_equal(aor_binkind_of_buffer(sh, strlen(sh)), AOR_BIN_OTHER);
    assert_int_equal(aor_binkind_of_buffer("", 0), AOR_BIN_OTHER);
    assert_int_equal(aor_binkind_of_buffer(NULL, 100), AOR_BIN_OTHER);
    assert_int_equal(aor_binkind_of_buffer("\177ELF", 4), AOR_BIN_OTHER);
}

/* Malformed headers never read out of bounds and are "other". */
static void test_malformed(void **state) {
    img m;
    make(&m, 1, 0, STAT, 5);
    /* Program headers cut off. */
    assert_int_equal(aor_binkind_of_buffer(m.b, m.len - 1), AOR_BIN_OTHER);
    assert_int_equal(aor_binkind_of_buffer(m.b, sizeof(Elf64_Ehdr) - 1), AOR_BIN_OTHER);
    /* Bad class, byte order, version. */
    make(&m, 1, 0, STAT, 5);
    m.b[EI_CLASS] = 3;
    assert_int_equal(aor_binkind_of_buffer(m.b, m.len), AOR_BIN_OTHER);
    make(&m, 1, 0, STAT, 5);
    m.b[EI_DATA] = 0;
    assert_int_equal(aor_binkind_of_buffer(m.b, m.len), AOR_BIN_OTHER);
    make(&m, 1, 0, STAT, 5);
    m.b[EI_VERSION] = 0;
    assert_int_equal(aor_binkind_of_buffer(m.b, m.len), AOR_BIN_OTHER);
    /* Entry size that does not match the class. */
    make(&m, 1, 0, STAT, 5);
    put(&m, offsetof(Elf64_Ehdr, e_phentsize), sizeof(Elf32_Phdr), 2);
    assert_int_equal(aor_binkind_of_buffer(m.b, m.len), AOR_BIN_OTHER);
    /* No program headers, PN_XNUM, a table over the cap, an offset that overflows. */
    make(&m, 1, 0, STAT, 0);
    assert_int_equal(aor_binkind_of_buffer(m.b, m.len), AOR_BIN_OTHER);
    make(&m, 1, 0, STAT, 5);
    put(&m, offsetof(Elf64_Ehdr, e_phnum), PN_XNUM, 2);
    assert_int_equal(aor_binkind_of_buffer(m.b, m.len), AOR_BIN_OTHER);
    make(&m, 1, 0, STAT, 5);
    put(&m, offsetof(Elf64_Ehdr, e_phnum), AOR_BINKIND_PHDR_MAX / sizeof(Elf64_Phdr) + 1, 2);
    assert_int_equal(aor_binkind_of_buffer(m.b, m.len), AOR_BIN_OTHER);
    make(&m, 1, 0, STAT, 5);
    put(&m, offsetof(Elf64_Ehdr, e_phoff), UINT64_MAX - 8, 8);
    assert_int_equal(aor_binkind_of_buffer(m.b, m.len), AOR_BIN_OTHER);
    make(&m, 0, 1, STAT, 5);
    put(&m, offsetof(Elf32_Ehdr, e_phoff), 0xfffffff0u, 4);
    assert_int_equal(aor_binkind_of_buffer(m.b, m.len), AOR_BIN_OTHER);
}

/* Files: this test program is dynamically linked; a written static image reads as
 * static through the file reader; a missing file is "other" with errno. */
static void test_files(void **state) {
    assert_int_equal(aor_binkind_of_file("/proc/self/exe"), AOR_BIN_DYNAMIC);
    errno = 0;
    assert_int_equal(aor_binkind_of_file("/nonexistent/aor-binkind"), AOR_BIN_OTHER);
    assert_int_equal(errno, ENOENT);

    char path[] = "/tmp/aor-binkind-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    img m;
    make(&m, 1, 0, STAT, 5);
    assert_int_equal(write(fd, m.b, m.len), (ssize_t)m.len);
    assert_int_equal(aor_binkind_of_file(path), AOR_BIN_STATIC);
    assert_int_equal(ftruncate(fd, 10), 0);
    errno = 0;
    assert_int_equal(aor_binkind_of_file(path), AOR_BIN_OTHER);
    assert_int_equal(errno, 0);
    close(fd);
    unlink(path);
    assert_string_equal(aor_binkind_name(AOR_BIN_STATIC), "static");
    assert_string_equal(aor_binkind_name(AOR_BIN_DYNAMIC), "dynamic");
    assert_string_equal(aor_binkind_name(AOR_BIN_OTHER), "other");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_classes_and_byte_orders),
        cmocka_unit_test(test_interp_last),
        cmocka_unit_test(test_not_elf),
        cmocka_unit_test(test_go_note),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
