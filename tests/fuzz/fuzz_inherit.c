/* libFuzzer target: the parser of the abstract names the shim binds to its daemon
 * connections (shim/inherit.h, spec §2 "works ... across fork/exec"). Every program that
 * preloads libaor.so may run it on a Unix socket it inherited, whose name anyone can
 * choose, so no name may crash it. Input: one mode byte, then either the raw bytes of a
 * sockaddr_un as getsockname returns it (mode even) or the text after "\0aor/1 " (mode
 * odd, to reach the fields). Checks, beside memory safety: a parsed name is an AF_INET or
 * AF_INET6 peer with the matching length and a port in 0..65535, and a name made again
 * from it parses to the same socket. */
#include "fuzz_util.h"
#include "inherit.h"

#include <netinet/in.h>

static void check_parsed(const aor_fdinfo *info) {
    FUZZ_CHECK(info->domain == AF_INET || info->domain == AF_INET6, "an IP domain");
    if (info->domain == AF_INET) {
        FUZZ_CHECK(info->peerlen == sizeof(struct sockaddr_in), "IPv4 peer length");
        FUZZ_CHECK(info->peer.in4.sin_family == AF_INET, "IPv4 peer family");
    } else {
        FUZZ_CHECK(info->peerlen == sizeof(struct sockaddr_in6), "IPv6 peer length");
        FUZZ_CHECK(info->peer.in6.sin6_family == AF_INET6, "IPv6 peer family");
    }
    /* Made again (as a redirect would) and parsed: the same socket. */
    struct sockaddr_un again;
    socklen_t n = aor_inherit_name(&again, info->domain, info->protocol,
                                   (const struct sockaddr *)&info->peer, info->peerlen);
    FUZZ_CHECK(n > 0 && n <= sizeof again, "a parsed socket can be named again");
    aor_fdinfo back;
    memset(&back, 0, sizeof back);
    FUZZ_CHECK(aor_inherit_parse(&again, n, &back) == 1, "a made name parses");
    FUZZ_CHECK(back.domain == info->domain && back.protocol == info->protocol &&
                   back.peerlen == info->peerlen &&
                   memcmp(&back.peer, &info->peer, info->peerlen) == 0,
               "round trip keeps domain, protocol and peer");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    unsigned mode = fuzz_take_byte(&data, &size);
    /* An exact-size heap copy of what the kernel would hand back: ASan sees any read past
     * the len the parser was given. */
    static const char prefix[] = "aor/1 ";
    size_t off = offsetof(struct sockaddr_un, sun_path);
    size_t len = (mode & 1) ? off + 1 + (sizeof prefix - 1) + size : size;
    if (len > sizeof(struct sockaddr_un))
        return 0; /* the kernel never returns more */
    unsigned char *buf = malloc(len ? len : 1);
    FUZZ_CHECK(buf != NULL, "out of memory in the harness");
    if (mode & 1) {
        sa_family_t fam = AF_UNIX;
        memcpy(buf, &fam, sizeof fam);
        buf[off] = '\0';
        memcpy(buf + off + 1, prefix, sizeof prefix - 1);
        if (size)
            memcpy(buf + off + 1 + (sizeof prefix - 1), data, size);
    } else if (size) {
        memcpy(buf, data, size);
    }
    /* The parser takes a whole sockaddr_un; only len bytes of it are meaningful. */
    struct sockaddr_un sun;
    memset(&sun, 0xA5, sizeof sun);
    memcpy(&sun, buf, len);
    aor_fdinfo info;
    memset(&info, 0, sizeof info);
    if (aor_inherit_parse(&sun, (socklen_t)len, &info) == 1)
        check_parsed(&info);
    free(buf);
    return 0;
}
