/* Admission rules for client requests, applied before anything is routed or any state
 * changes (spec §8 "no open proxy", loopback-only sidecar; robustness against requests
 * aor cannot serve): methods, request-target form, a missing Host (HTTP/1.1), an
 * Expect other than 100-continue, and — on the sidecar — the Host,
 * Origin and Sec-Fetch-Site headers that browsers send, so a web page cannot spend the
 * user's keys through the sidecar (cross-site requests, DNS rebinding). */
#ifndef AOR_GUARD_H
#define AOR_GUARD_H

#include "http.h"

/* Checks req. sidecar: 1 for the loopback listener, 0 for shim connections. base_url: the
 * sidecar's URL as bound ("http://127.0.0.1:8787"), named in the hint of a refused proxy
 * request (CONNECT, an absolute-form target); NULL or "" when the sidecar is off.
 * Returns 0 when the request may go on; else the status to answer (400, 403, 405, 417) and
 * *why, text naming the problem: static, or a thread-local buffer valid until the next
 * call. Never changes req. */
int aor_guard_check(const aor_http_request *req, int sidecar, const char *base_url,
                    const char **why);

/* 1 when host (a Host header value or an Origin's host[:port]) names the loopback
 * interface: 127.0.0.0/8, localhost, [::1], each with an optional :port. */
int aor_guard_loopback_host(const char *host, size_t len);

#endif
