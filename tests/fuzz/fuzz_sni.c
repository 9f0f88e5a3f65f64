/* libFuzzer target: the ClientHello SNI reader (daemon/sni.h, spec §2).
 * Input: the raw bytes a client sends first (TLS records). Checks, beside memory safety:
 * the result is one of the documented values; a found name fits the buffer, is lower case
 * and printable; the parser is streaming-safe: a prefix of a hello that parses is never
 * malformed (it asks for more or already gives the same answer); a small name buffer
 * never overflows (exact-size heap buffers, so ASan sees any write past the end). */
#include "fuzz_util.h"
#include "sni.h"

#define HOST_CAP 256

static int parse_copy(const uint8_t *data, size_t len, char *host, size_t hostlen) {
    unsigned char *buf = malloc(len ? len : 1);
    FUZZ_CHECK(buf != NULL, "out of memory in the harness");
    if (len)
        memcpy(buf, data, len);
    int r = aor_sni_parse(buf, len, host, hostlen);
    free(buf);
    FUZZ_CHECK(r == 1 || r == 0 || r == -1 || r == -2, "result is 1, 0, -1 or -2");
    if (r == -2)
        FUZZ_CHECK(len < AOR_SNI_MAX_HELLO, "need-more only below AOR_SNI_MAX_HELLO");
    if (r == 1) {
        size_t n = strnlen(host, hostlen);
        FUZZ_CHECK(n > 0 && n < hostlen, "name is non-empty and NUL-terminated in the buffer");
        FUZZ_CHECK(fuzz_printable(host, hostlen), "name is printable");
        for (size_t i = 0; i < n; i++)
            FUZZ_CHECK(host[i] < 'A' || host[i] > 'Z', "name is lower case");
    }
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *host = malloc(HOST_CAP);
    FUZZ_CHECK(host != NULL, "out of memory in the harness");
    int r = parse_copy(data, size, host, HOST_CAP);

    /* A tiny name buffer: a longer name is malformed, never an overflow. */
    char *small = malloc(8);
    FUZZ_CHECK(small != NULL, "out of memory in the harness");
    int rs = parse_copy(data, size, small, 8);
    if (r == 1 && strlen(host) < 8)
        FUZZ_CHECK(rs == 1 && strcmp(host, small) == 0, "short name found with a small buffer");
    free(small);

    /* The daemon calls the parser as bytes arrive: a prefix of a hello that parses must
     * not be called malformed. */
    if (r >= 0 && size > 0) {
        size_t cuts[3] = {1, size / 2, size - 1};
        char *ph = malloc(HOST_CAP);
        FUZZ_CHECK(ph != NULL, "out of memory in the harness");
        for (size_t i = 0; i < 3; i++) {
            if (cuts[i] >= size)
                continue;
            int rp = parse_copy(data, cuts[i], ph, HOST_CAP);
            FUZZ_CHECK(rp == -2 || rp == r, "a prefix of a parseable hello needs more bytes or "
                                            "gives the same answer");
            if (rp == 1)
                FUZZ_CHECK(strcmp(ph, host) == 0, "a prefix gives the same name");
        }
        free(ph);
    }
    free(host);
    return 0;
}
