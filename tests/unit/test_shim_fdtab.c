/* Unit tests: shim/fdtab.c (table of redirected fds) and, through the hooks linked into
 * this test, shim/fdhooks.c and shim/sockview.c (spec §2 bookkeeping and TCP view). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fdtab.h"

static int reset(void **state)
{
    aor_fdtab_reset();
    return 0;
}

static aor_fdinfo info_for(int fd, const char *ip, int port)
{
    aor_fdinfo i;
    struct stat st;
    memset(&i, 0, sizeof(i));
    i.ino = 12345;
    if (fd >= 0 && fstat(fd, &st) == 0)
        i.ino = (unsigned long)st.st_ino;
    i.domain = AF_INET;
    i.protocol = IPPROTO_TCP;
    i.peer.in4.sin_family = AF_INET;
    i.peer.in4.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, ip, &i.peer.in4.sin_addr);
    i.peerlen = sizeof(i.peer.in4);
    i.local_port = 40000;
    i.nodelay = 1;
    i.keepidle = 7200;
    return i;
}

static void test_set_get_clear(void **state)
{
    aor_fdinfo in = info_for(-1, "1.2.3.4", 443), out;
    assert_int_equal(aor_fdtab_any(), 0);
    assert_int_equal(aor_fdtab_get(7, &out), 0);
    assert_int_equal(aor_fdtab_set(7, &in), 0);
    assert_int_equal(aor_fdtab_any(), 1);
    assert_int_equal(aor_fdtab_marked(7), 1);
    assert_int_equal(aor_fdtab_marked(8), 0);
    assert_int_equal(aor_fdtab_get(7, &out), 1);
    assert_int_equal(out.ino, 12345);
    assert_int_equal(ntohs(out.peer.in4.sin_port), 443);
    aor_fdtab_clear(7);
    assert_int_equal(aor_fdtab_get(7, &out), 0);
    aor_fdtab_clear(-1); /* ignored */
    aor_fdtab_clear(1 << 20);
}

static void test_bad_args(void **state)
{
    aor_fdinfo in = info_for(-1, "1.2.3.4", 443);
    errno = 0;
    assert_int_equal(aor_fdtab_set(-1, &in), -1);
    assert_int_equal(errno, EBADF);
    assert_int_equal(aor_fdtab_set(1 << 24, &in), -1);
    in.ino = 0;
    errno = 0;
    assert_int_equal(aor_fdtab_set(3, &in), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(aor_fdtab_reserve(-5), -1);
}

static void test_grows(void **state)
{
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    int high = rl.rlim_cur > 5000 ? 4999 : (int)rl.rlim_cur - 1;
    aor_fdinfo a = info_for(-1, "1.2.3.4", 443), b = info_for(-1, "5.6.7.8", 8443), out;
    assert_int_equal(aor_fdtab_set(3, &a), 0);
    assert_int_equal(aor_fdtab_set(high, &b), 0); /* grows; entry 3 survives */
    assert_int_equal(aor_fdtab_get(3, &out), 1);
    assert_int_equal(ntohs(out.peer.in4.sin_port), 443);
    assert_int_equal(aor_fdtab_get(high, &out), 1);
    assert_int_equal(ntohs(out.peer.in4.sin_port), 8443);
}

static void test_copy_and_range(void **state)
{
    aor_fdinfo a = info_for(-1, "1.2.3.4", 443), out;
    assert_int_equal(aor_fdtab_set(10, &a), 0);
    assert_int_equal(aor_fdtab_copy(10, 11), 0);
    assert_int_equal(aor_fdtab_get(11, &out), 1);
    assert_int_equal(aor_fdtab_set(12, &a), 0);
    assert_int_equal(aor_fdtab_copy(13, 12), 0); /* from an unmarked fd: clears */
    assert_int_equal(aor_fdtab_marked(12), 0);
    assert_int_equal(aor_fdtab_set(20, &a), 0);
    aor_fdtab_clear_range(11, 19);
    assert_int_equal(aor_fdtab_marked(10), 1);
    assert_int_equal(aor_fdtab_marked(11), 0);
    assert_int_equal(aor_fdtab_marked(20), 1);
    aor_fdtab_clear_range(0, ~0u);
    assert_int_equal(aor_fdtab_marked(10), 0);
    assert_int_equal(aor_fdtab_marked(20), 0);
}

static void test_tcpopt(void **state)
{
    aor_fdinfo a = info_for(-1, "1.2.3.4", 443), out;
    aor_fdtab_set(5, &a);
    aor_fdtab_set_tcpopt(5, TCP_NODELAY, 0);
    aor_fdtab_set_tcpopt(5, TCP_KEEPIDLE, 30);
    aor_fdtab_set_tcpopt(6, TCP_KEEPIDLE, 99); /* unmarked: ignored */
    aor_fdtab_get(5, &out);
    assert_int_equal(out.nodelay, 0);
    assert_int_equal(out.keepidle, 30);
    assert_int_equal(aor_fdtab_marked(6), 0);
}

/* An entry is trusted only while the fd is the same Unix socket. */
static void test_checked_detects_reuse(void **state)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    aor_fdinfo a = info_for(sv[0], "1.2.3.4", 443), out;
    assert_int_equal(aor_fdtab_set(sv[0], &a), 0);
    assert_int_equal(aor_fdtab_get_checked(sv[0], &out), 1);
    /* replaced behind the shim's back (a raw dup3 would do the same) */
    int other = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(other >= 0);
    assert_int_equal((int)syscall_dup3_helper(other, sv[0]), sv[0]);
    errno = 1234;
    assert_int_equal(aor_fdtab_get_checked(sv[0], &out), 0);
    assert_int_equal(errno, 1234); /* kept */
    assert_int_equal(aor_fdtab_marked(sv[0]), 0); /* the stale entry is gone */
    close(other);
    close(sv[0]);
    close(sv[1]);
}
