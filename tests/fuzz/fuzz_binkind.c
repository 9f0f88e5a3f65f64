/* libFuzzer target: the executable-kind reader (common/binkind.h), which `aor run` runs
 * on the program it is asked to start: ELF header, program headers, and the PT_NOTE
 * segments of a dynamic ELF (the Go build-ID note). Checks, beside memory safety: the
 * result is one of the kinds; the same bytes give the same kind; a kind other than
 * "other" needs at least an ELF header's bytes. */
#include "binkind.h"
#include "fuzz_util.h"

#include <elf.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* Exact-size heap copy: a read one byte past the input is an ASan report. */
    unsigned char *buf = malloc(size ? size : 1);
    FUZZ_CHECK(buf != NULL, "out of memory in the harness");
    if (size)
        memcpy(buf, data, size);
    aor_binkind k = aor_binkind_of_buffer(buf, size);
    FUZZ_CHECK(k == AOR_BIN_OTHER || k == AOR_BIN_DYNAMIC || k == AOR_BIN_STATIC || k == AOR_BIN_GO,
               "a known kind");
    FUZZ_CHECK(aor_binkind_of_buffer(buf, size) == k, "the same bytes give the same kind");
    FUZZ_CHECK(k == AOR_BIN_OTHER || size >= sizeof(Elf32_Ehdr), "an ELF header was read");
    FUZZ_CHECK(strcmp(aor_binkind_name(k), "") != 0, "a name");
    free(buf);
    return 0;
}
