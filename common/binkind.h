/* What kind of executable a file is: dynamically linked ELF (LD_PRELOAD works), static
 * ELF (it cannot be preloaded), or something else. `aor run` uses it to fall back to
 * the sidecar base-URL variables for static programs (spec §2, last bullet).
 *
 * Rule (ELF, System V gABI "Program Header"): an ELF file with a PT_INTERP program
 * header is loaded by the dynamic linker, which honours LD_PRELOAD; one without
 * (ET_EXEC static, or static-pie ET_DYN) is not. 32- and 64-bit, both byte orders.
 * A dynamic one built by the Go toolchain (a PT_NOTE with the Go build-ID note) is a
 * kind of its own: the Go runtime makes its own system calls for its sockets, so the
 * shim's connect() never sees them (docs/shim.md; QA: `go build` with cgo available
 * makes a dynamic binary, which `aor run` preloaded and left unrouted, silently).
 * Every read is bounded: the ELF header, the program header table (at most
 * AOR_BINKIND_PHDR_MAX bytes) and the first AOR_BINKIND_NOTE_MAX bytes of each PT_NOTE
 * segment of a dynamic ELF, nothing else. */
#ifndef AOR_BINKIND_H
#define AOR_BINKIND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define AOR_BINKIND_PHDR_MAX (64 * 1024) /* bytes of program headers read at most */
#define AOR_BINKIND_NOTE_MAX 4096        /* bytes of a PT_NOTE segment read at most */

typedef enum {
    AOR_BIN_OTHER = 0, /* not ELF (a script, ...), or a malformed/truncated ELF file */
    AOR_BIN_DYNAMIC,   /* ELF with PT_INTERP: LD_PRELOAD works */
    AOR_BIN_STATIC,    /* ELF without PT_INTERP: statically linked */
    AOR_BIN_GO         /* ELF with PT_INTERP built by Go: its sockets bypass LD_PRELOAD */
} aor_binkind;

/* Reader used by aor_binkind_read: copies up to n bytes at offset off (bytes) into buf.
 * Returns the number of bytes copied (fewer at end of data), or -1 on error. */
typedef ssize_t (*aor_binkind_reader)(void *ctx, void *buf, size_t n, uint64_t off);

/* Classifies the image that `rd` reads. Never fails: unreadable, truncated or
 * inconsistent data (bad class/byte order/version, a program header entry size that
 * does not match the class, a table past AOR_BINKIND_PHDR_MAX or past the data,
 * e_phnum == PN_XNUM) is AOR_BIN_OTHER. */
aor_binkind aor_binkind_read(aor_binkind_reader rd, void *ctx);

/* Same for an image in memory (buf of len bytes; may be only the file's beginning). */
aor_binkind aor_binkind_of_buffer(const void *buf, size_t len);

/* Same for a file. Returns AOR_BIN_OTHER with errno set when the file cannot be opened
 * or read (errno 0 when it was read and is simply not a usable ELF file). */
aor_binkind aor_binkind_of_file(const char *path);

/* "dynamic", "static", "go" or "other". */
const char *aor_binkind_name(aor_binkind k);

#endif
