/* libFuzzer target: the parser of the address set aord publishes next to its socket
 * (shim/pubfile.h, spec §2 step 2). The shim reads the file into every preloaded program,
 * so no content, hostile or cut, may crash or hang it. Checks, beside memory safety:
 * a parsed set keeps its limits (at most AOR_PUBFILE_MAX_ADDRS addresses, ports 1..65535),
 * and a lookup answers 0, 1 with a NUL-terminated host name, or 2 with "". */
#include "fuzz_util.h"
#include "preamble.h"
#include "pubfile.h"

static void check_match(const aor_pubset *s, const char *ip_text, int port,
                        const aor_hostlist *only) {
    aor_ip ip;
    FUZZ_CHECK(aor_ip_parse(ip_text, strlen(ip_text), &ip) == 0, "harness address parses");
    char host[AOR_HOST_MAX + 1];
    memset(host, 'x', sizeof host);
    int r = only ? aor_pubset_match_only(s, &ip, port, only, host, sizeof host)
                 : aor_pubset_match(s, &ip, port, host, sizeof host);
    FUZZ_CHECK(r >= 0 && r <= 2, "match answers 0, 1 or 2");
    if (r == 1)
        FUZZ_CHECK(strnlen(host, sizeof host) < sizeof host, "a matched host is NUL-terminated");
    if (r == 2)
        FUZZ_CHECK(host[0] == '\0', "several hosts: empty name");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* An exact-size heap copy: ASan sees any read past the end (no NUL is given). */
    char *buf = malloc(size ? size : 1);
    FUZZ_CHECK(buf != NULL, "out of memory in the harness");
    if (size)
        memcpy(buf, data, size);
    int nbad = -1;
    aor_pubset *s = aor_pubset_parse(buf, size, &nbad);
    if (s != NULL) {
        FUZZ_CHECK(nbad >= 0, "bad lines are counted");
        size_t n = aor_pubset_addr_count(s);
        FUZZ_CHECK(n <= AOR_PUBFILE_MAX_ADDRS, "at most AOR_PUBFILE_MAX_ADDRS addresses");
        for (size_t i = 0; i < n; i++) {
            int port = aor_pubset_addr_port(s, i);
            FUZZ_CHECK(port >= 1 && port <= 65535, "address ports in 1..65535");
        }
        const aor_hostlist *hosts = aor_pubset_hosts(s);
        FUZZ_CHECK(hosts != NULL, "a parsed set has a host list");
        static const char *const ips[] = {"127.0.0.1", "192.0.2.1", "::1", "2001:db8::1"};
        for (size_t i = 0; i < sizeof ips / sizeof ips[0]; i++) {
            check_match(s, ips[i], 443, NULL);
            check_match(s, ips[i], 8443, NULL);
            check_match(s, ips[i], 443, hosts);
        }
    }
    aor_pubset_free(s);
    free(buf);
    return 0;
}
