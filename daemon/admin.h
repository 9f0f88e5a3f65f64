/* Local routes of the sidecar listener (spec §8): GET /healthz, GET /metrics,
 * GET /admin, GET /admin/api/state, POST /admin/api/backoff/reset?provider=NAME,
 * POST /admin/api/backoff/clear, POST /admin/api/clock/advance?s=N (fake clock only).
 * Admin routes need the token of $XDG_STATE_HOME/aor/admin.token as a bearer token or
 * the aor_admin cookie. */
#ifndef AOR_ADMIN_H
#define AOR_ADMIN_H

#include "conn.h"
#include "daemon.h"
#include "http.h"

/* 1 when the request target url (as received; its path is the part before '?' or '#';
 * NULL means "/") is a local route (not proxied). No copy of the path is made. */
int aor_admin_is_local(const char *url);

/* Answers a local route into c's output and calls aor_conn_response_done. Takes req. */
void aor_admin_handle(aor_daemon *d, aor_conn *c, aor_http_request *req);

/* Creates (0600) or reads the admin token into d->admin_token. Returns 0 or -1 with a
 * message in err. */
int aor_admin_token_init(aor_daemon *d, char *err, size_t errlen);

#endif
