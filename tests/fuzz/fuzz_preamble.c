/* libFuzzer target: the shim -> daemon preamble parser (common/preamble.h, spec §7).
 * Input: the bytes a shim connection starts with. Checks, beside memory safety: a parsed
 * preamble has sane fields and survives aor_preamble_format + parse unchanged; a prefix of
 * a valid preamble asks for more bytes; bytes after the newline change nothing. */
#include "fuzz_util.h"
#include "preamble.h"

#include <arpa/inet.h>

static void check_fields(const aor_preamble *p) {
    unsigned char addr[sizeof(struct in6_addr)];
    size_t hl = strnlen(p->host, sizeof p->host);
    FUZZ_CHECK(hl <= AOR_HOST_MAX, "host is NUL-terminated and at most AOR_HOST_MAX bytes");
    FUZZ_CHECK(fuzz_printable(p->host, sizeof p->host), "host is printable");
    FUZZ_CHECK(strnlen(p->ip, sizeof p->ip) < sizeof p->ip, "ip is NUL-terminated");
    FUZZ_CHECK(inet_pton(AF_INET, p->ip, addr) == 1 || inet_pton(AF_INET6, p->ip, addr) == 1,
               "ip is an address");
    FUZZ_CHECK(p->port >= 1 && p->port <= 65535, "port in 1..65535");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* The parser takes a byte buffer that is not NUL-terminated: give it an exact-size
     * heap copy so ASan sees any read past the end. */
    char *buf = malloc(size ? size : 1);
    FUZZ_CHECK(buf != NULL, "out of memory in the harness");
    if (size)
        memcpy(buf, data, size);

    aor_preamble p;
    const char *err = NULL;
    int r = aor_preamble_parse(buf, size, &p, &err);
    FUZZ_CHECK(r >= -1, "result is -1, 0 or a length");
    if (r == -1)
        FUZZ_CHECK(err != NULL && *err != '\0', "a malformed preamble names the problem");
    if (r == 0)
        FUZZ_CHECK(size < AOR_PREAMBLE_MAX, "need-more only below AOR_PREAMBLE_MAX");
    if (r > 0) {
        size_t n = (size_t)r;
        FUZZ_CHECK(n <= size && n <= AOR_PREAMBLE_MAX, "length within the input and the cap");
        FUZZ_CHECK(buf[n - 1] == '\n', "length ends at the newline");
        check_fields(&p);

        /* Only the line counts: parsing exactly the line gives the same preamble. */
        aor_preamble q;
        FUZZ_CHECK(aor_preamble_parse(buf, n, &q, NULL) == r, "same result on the line alone");
        FUZZ_CHECK(memcmp(&p, &q, sizeof p) == 0, "same fields on the line alone");

        /* A shim may deliver the line in pieces: every prefix asks for more bytes. */
        size_t cuts[3] = {0, n / 2, n - 1};
        for (size_t i = 0; i < 3; i++) {
            char *part = malloc(cuts[i] ? cuts[i] : 1);
            FUZZ_CHECK(part != NULL, "out of memory in the harness");
            if (cuts[i])
                memcpy(part, buf, cuts[i]);
            FUZZ_CHECK(aor_preamble_parse(part, cuts[i], &q, NULL) == 0,
                       "a prefix of a valid preamble needs more bytes");
            free(part);
        }

        /* What the shim would write for these fields parses back to the same fields. */
        char line[AOR_PREAMBLE_MAX + 1];
        int w = aor_preamble_format(line, sizeof line, p.host, p.ip, p.port);
        FUZZ_CHECK(w > 0 && (size_t)w <= AOR_PREAMBLE_MAX, "parsed fields can be formatted");
        FUZZ_CHECK(aor_preamble_parse(line, (size_t)w, &q, NULL) == w, "formatted line parses");
        FUZZ_CHECK(strcmp(p.host, q.host) == 0 && strcmp(p.ip, q.ip) == 0 && p.port == q.port,
                   "format + parse round trip keeps the fields");
    }
    free(buf);
    return 0;
}
