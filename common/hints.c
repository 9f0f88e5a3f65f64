/* Retry hints (spec §4.3): Retry-After, retry-after-ms, provider reset headers, Gemini
 * RetryInfo. Hand-written parsers over bounded spans: every accepted form is matched
 * exactly, anything left over makes the value junk. No strptime/timegm (locale and TZ
 * free). Contract and precedence rules: classify.h. */
#include "classify.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* A bounded piece of text being parsed. */
typedef struct {
    const char *p;
    const char *end;
} cur;

/* Sets *c to value without leading/trailing SP/HTAB. Returns -1 for NULL, empty or a
 * value longer than AOR_HINT_MAX_VALUE. */
static int cur_init(cur *c, const char *value) {
    if (!value)
        return -1;
    size_t n = strnlen(value, AOR_HINT_MAX_VALUE + 1);
    if (n > AOR_HINT_MAX_VALUE)
        return -1;
    const char *b = value, *e = value + n;
    while (b < e && (*b == ' ' || *b == '\t'))
        b++;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    if (b == e)
        return -1;
    c->p = b;
    c->end = e;
    return 0;
}

static int is_digit(char ch) {
    return ch >= '0' && ch <= '9';
}

static double saturate(double s) {
    return s > AOR_HINT_SATURATE_S ? AOR_HINT_SATURATE_S : s;
}

static double positive_or_none(double s) {
    return s > 0 ? saturate(s) : -1;
}

/* Reads exactly `n` digits into *out. */
static int eat_ndigits(cur *c, int n, int *out) {
    int v = 0;
    if (c->end - c->p < n)
        return -1;
    for (int i = 0; i < n; i++) {
        if (!is_digit(c->p[i]))
            return -1;
        v = v * 10 + (c->p[i] - '0');
    }
    c->p += n;
    *out = v;
    return 0;
}

static int eat_char(cur *c, char ch) {
    if (c->p >= c->end || *c->p != ch)
        return -1;
    c->p++;
    return 0;
}

/* Reads a decimal "D+", "D+.D*" or ".D+" (allow_frac) or "D+" into *out. Length is
 * bounded by AOR_HINT_MAX_VALUE so the double can't overflow. */
static int eat_decimal(cur *c, int allow_frac, double *out) {
    double v = 0;
    int digits = 0;
    while (c->p < c->end && is_digit(*c->p)) {
        v = v * 10 + (*c->p - '0');
        c->p++;
        digits++;
    }
    if (allow_frac && c->p < c->end && *c->p == '.') {
        c->p++;
        double scale = 0.1;
        while (c->p < c->end && is_digit(*c->p)) {
            v += (*c->p - '0') * scale;
            scale /= 10;
            c->p++;
            digits++;
        }
    }
    if (digits == 0)
        return -1;
    *out = v;
    return 0;
}

/* Reads the run of ASCII letters at the cursor; it must be exactly one of `names`
 * (case-insensitive). Sets *idx. */
static int eat_name(cur *c, const char *const *names, int count, int *idx) {
    const char *b = c->p;
    while (c->p < c->end && ((*c->p | 0x20) >= 'a' && (*c->p | 0x20) <= 'z'))
        c->p++;
    size_t n = (size_t)(c->p - b);
    for (int i = 0; i < count; i++) {
        if (strlen(names[i]) == n && strncasecmp(names[i], b, n) == 0) {
            *idx = i;
            return 0;
        }
    }
    return -1;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* Year of a Unix time (H. Hinnant's civil_from_days, year part). */
static int64_t year_of(double t) {
    if (!(t > -1e15 && t < 1e15))
        t = 0; /* NaN or absurd clock: any century will do */
    int64_t z = (int64_t)(t / 86400.0);
    if (t < 0 && (double)z * 86400.0 != t)
        z--;
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    return yoe + era * 400 + (m <= 2);
}

static int days_in_month(int64_t y, int m) {
    static const int dm[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
        return 29;
    return dm[m - 1];
}

/* Validates the fields and turns them into Unix seconds. */
static int make_time(int64_t y, int mon, int d, int h, int mi, int s, double *out) {
    if (mon < 1 || mon > 12 || d < 1 || d > days_in_month(y, mon) || h > 23 || mi > 59 || s > 60)
        return -1;
    *out = (double)days_from_civil(y, mon, d) * 86400.0 + h * 3600.0 + mi * 60.0 + s;
    return 0;
}

/* "HH:MM:SS" */
static int eat_clock(cur *c, int *h, int *mi, int *s) {
    if (eat_ndigits(c, 2, h) || eat_char(c, ':') || eat_ndigits(c, 2, mi) || eat_char(c, ':') ||
        eat_ndigits(c, 2, s))
        return -1;
    return 0;
}

static const char *const wkday[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
static const char *const weekday[] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                      "Friday", "Saturday", "Sunday"};
static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/* ", DD Mon YYYY HH:MM:SS GMT" after the day name (IMF-fixdate). */
static int imf_rest(cur *c, double *out) {
    int d, mon, y, h, mi, s;
    if (eat_char(c, ',') || eat_char(c, ' ') || eat_ndigits(c, 2, &d) || eat_char(c, ' ') ||
        eat_name(c, months, 12, &mon) || eat_char(c, ' ') || eat_ndigits(c, 4, &y) ||
        eat_char(c, ' ') || eat_clock(c, &h, &mi, &s) || eat_char(c, ' '))
        return -1;
    int gmt;
    static const char *const gmt_name[] = {"GMT"};
    if (eat_name(c, gmt_name, 1, &gmt) || c->p != c->end)
        return -1;
    return make_time(y, mon + 1, d, h, mi, s, out);
}

/* ", DD-Mon-YY HH:MM:SS GMT" after the full day name (RFC 850). */
static int rfc850_rest(cur *c, double now, double *out) {
    int d, mon, yy, h, mi, s;
    if (eat_char(c, ',') || eat_char(c, ' ') || eat_ndigits(c, 2, &d) || eat_char(c, '-') ||
        eat_name(c, months, 12, &mon) || eat_char(c, '-') || eat_ndigits(c, 2, &yy) ||
        eat_char(c, ' ') || eat_clock(c, &h, &mi, &s) || eat_char(c, ' '))
        return -1;
    int gmt;
    static const char *const gmt_name[] = {"GMT"};
    if (eat_name(c, gmt_name, 1, &gmt) || c->p != c->end)
        return -1;
    /* RFC 9110 §5.6.7: a two-digit year more than 50 years in the future is the most
     * recent past year with those digits; we use the window [Y-49, Y+50]. */
    int64_t cy = year_of(now);
    int64_t y = cy - (cy % 100) + yy;
    if (y > cy + 50)
        y -= 100;
    else if (y <= cy - 50)
        y += 100;
    if (make_time(y, mon + 1, d, h, mi, s, out) != 0)
        return -1;
    /* the year window is by calendar year; "more than 50 years" is by the time itself
     * (QA: 15-Jan-77 08:00:30 seen at 2027-01-15 08:00:00 was 2077, 50 years and 30 s on) */
    if (*out - now > 50 * 365.2425 * 86400)
        return make_time(y - 100, mon + 1, d, h, mi, s, out);
    return 0;
}

/* " Mon DD HH:MM:SS YYYY" or " Mon  D HH:MM:SS YYYY" after the day name (asctime). */
static int asctime_rest(cur *c, double *out) {
    int d, mon, y, h, mi, s;
    if (eat_char(c, ' ') || eat_name(c, months, 12, &mon) || eat_char(c, ' '))
        return -1;
    if (c->p < c->end && *c->p == ' ') {
        c->p++;
        if (eat_ndigits(c, 1, &d))
            return -1;
    } else if (eat_ndigits(c, 2, &d)) {
        return -1;
    }
    if (eat_char(c, ' ') || eat_clock(c, &h, &mi, &s) || eat_char(c, ' ') ||
        eat_ndigits(c, 4, &y) || c->p != c->end)
        return -1;
    return make_time(y, mon + 1, d, h, mi, s, out);
}

int aor_http_date_parse(const char *value, double now, double *out) {
    cur c;
    if (cur_init(&c, value))
        return -1;
    cur save = c;
    int idx;
    if (eat_name(&c, wkday, 7, &idx) == 0) {
        if (c.p < c.end && *c.p == ',')
            return imf_rest(&c, out);
        return asctime_rest(&c, out);
    }
    c = save;
    if (eat_name(&c, weekday, 7, &idx) == 0)
        return rfc850_rest(&c, now, out);
    return -1;
}

int aor_rfc3339_parse(const char *value, double *out) {
    cur c;
    int y, mon, d, h, mi, s;
    if (cur_init(&c, value))
        return -1;
    if (eat_ndigits(&c, 4, &y) || eat_char(&c, '-') || eat_ndigits(&c, 2, &mon) ||
        eat_char(&c, '-') || eat_ndigits(&c, 2, &d))
        return -1;
    if (c.p >= c.end || (*c.p != 'T' && *c.p != 't' && *c.p != ' '))
        return -1;
    c.p++;
    if (eat_clock(&c, &h, &mi, &s))
        return -1;
    double frac = 0;
    if (c.p < c.end && *c.p == '.') {
        c.p++;
        double scale = 0.1;
        if (c.p >= c.end || !is_digit(*c.p))
            return -1;
        while (c.p < c.end && is_digit(*c.p)) {
            frac += (*c.p - '0') * scale;
            scale /= 10;
            c.p++;
        }
    }
    int offset = 0;
    if (c.p < c.end && (*c.p == 'Z' || *c.p == 'z')) {
        c.p++;
    } else if (c.p < c.end && (*c.p == '+' || *c.p == '-')) {
        int sign = *c.p == '-' ? -1 : 1, oh, om;
        c.p++;
        if (eat_ndigits(&c, 2, &oh) || eat_char(&c, ':') || eat_ndigits(&c, 2, &om) || oh > 23 ||
            om > 59)
            return -1;
        offset = sign * (oh * 3600 + om * 60);
    } else {
        return -1;
    }
    if (c.p != c.end)
        return -1;
    double t;
    if (make_time(y, mon, d, h, mi, s, &t))
        return -1;
    *out = t + frac - offset;
    return 0;
}

double aor_hint_retry_after(const char *value, double now) {
    cur c;
    if (cur_init(&c, value))
        return -1;
    if (is_digit(*c.p)) {
        double v;
        if (eat_decimal(&c, 0, &v) || c.p != c.end)
            return -1; /* "1.5", "120junk" */
        return positive_or_none(v);
    }
    double t;
    if (aor_http_date_parse(value, now, &t))
        return -1;
    return positive_or_none(t - now);
}

double aor_hint_retry_after_ms(const char *value) {
    cur c;
    double v;
    if (cur_init(&c, value) || eat_decimal(&c, 1, &v) || c.p != c.end)
        return -1;
    return positive_or_none(v / 1000.0);
}

double aor_hint_duration(const char *value) {
    cur c;
    double v;
    if (cur_init(&c, value) || eat_decimal(&c, 1, &v) || eat_char(&c, 's') || c.p != c.end)
        return -1;
    return positive_or_none(v);
}

/* A Go duration's seconds, >= 0, or -1 when it is not one. */
static double go_duration(const char *value) {
    static const struct {
        const char *unit;
        double seconds;
    } units[] = {
        /* longer units sharing a first letter come first ("ms" before "m") */
        {"ns", 1e-9}, {"us", 1e-6}, {"\xc2\xb5s", 1e-6}, {"\xce\xbcs", 1e-6},
        {"ms", 1e-3}, {"s", 1},     {"m", 60},           {"h", 3600},
    };
    cur c;
    double total = 0;
    if (cur_init(&c, value))
        return -1;
    while (c.p < c.end) {
        double v;
        if (eat_decimal(&c, 1, &v))
            return -1;
        size_t i, left = (size_t)(c.end - c.p);
        for (i = 0; i < sizeof units / sizeof units[0]; i++) {
            size_t ul = strlen(units[i].unit);
            if (ul <= left && memcmp(c.p, units[i].unit, ul) == 0) {
                c.p += ul;
                total += v * units[i].seconds;
                break;
            }
        }
        if (i == sizeof units / sizeof units[0])
            return -1; /* missing or unknown unit */
    }
    return total;
}

double aor_hint_go_duration(const char *value) {
    double s = go_duration(value);
    return s < 0 ? -1 : positive_or_none(s);
}

double aor_hint_go_duration_reset(const char *value) {
    double s = go_duration(value);
    return s > 0 ? saturate(s) : s;
}

int aor_hint_is_reset_header(const char *name) {
    if (!name)
        return 0;
    size_t n = strlen(name);
    if (strcasecmp(name, "x-ratelimit-reset") == 0 ||
        strncasecmp(name, "x-ratelimit-reset-", 18) == 0)
        return 1;
    return n > 26 && strncasecmp(name, "anthropic-ratelimit-", 20) == 0 &&
           strcasecmp(name + n - 6, "-reset") == 0;
}

double aor_hint_reset(const char *value, double now) {
    cur c;
    if (cur_init(&c, value))
        return -1;
    cur num = c;
    double v;
    if (eat_decimal(&num, 1, &v) == 0 && num.p == num.end) {
        if (v >= 1e11)
            return positive_or_none(v / 1000.0 - now); /* epoch ms (OpenRouter) */
        if (v >= 1e9)
            return positive_or_none(v - now); /* epoch seconds */
        return positive_or_none(v);           /* delta seconds */
    }
    double t;
    if (aor_rfc3339_parse(value, &t) == 0)
        return positive_or_none(t - now);
    return aor_hint_go_duration(value);
}

/* Value of the last header called `name`, or NULL. */
static const char *last_header(const aor_header *hdrs, size_t n, const char *name) {
    const char *v = NULL;
    for (size_t i = 0; i < n; i++)
        if (hdrs[i].name && hdrs[i].value && strcasecmp(hdrs[i].name, name) == 0)
            v = hdrs[i].value;
    return v;
}

/* Last valid hint among headers called `name`, parsed by `ms` or Retry-After rules. */
static double last_valid(const aor_header *hdrs, size_t n, const char *name, int ms, double now) {
    double best = -1;
    for (size_t i = 0; i < n; i++) {
        if (!hdrs[i].name || !hdrs[i].value || strcasecmp(hdrs[i].name, name) != 0)
            continue;
        double h =
            ms ? aor_hint_retry_after_ms(hdrs[i].value) : aor_hint_retry_after(hdrs[i].value, now);
        if (h > 0)
            best = h;
    }
    return best;
}

/* 1 when the *-remaining header that goes with reset header `name` says 0. */
static int window_exhausted(const aor_header *hdrs, size_t n, const char *name) {
    char rem[AOR_HINT_MAX_VALUE];
    size_t len = strlen(name);
    int w;
    if (len >= sizeof rem - 16)
        return 0;
    if (strncasecmp(name, "anthropic-", 10) == 0) /* anthropic-ratelimit-X-reset */
        w = snprintf(rem, sizeof rem, "%.*s-remaining", (int)(len - 6), name);
    else if (len == 17) /* x-ratelimit-reset */
        w = snprintf(rem, sizeof rem, "x-ratelimit-remaining");
    else /* x-ratelimit-reset-X */
        w = snprintf(rem, sizeof rem, "x-ratelimit-remaining-%s", name + 18);
    if (w < 0 || (size_t)w >= sizeof rem)
        return 0;
    const char *v = last_header(hdrs, n, rem);
    cur c;
    double d;
    return v && cur_init(&c, v) == 0 && eat_decimal(&c, 1, &d) == 0 && c.p == c.end && d == 0;
}

/* The reset of the exhausted window that resets last; with no exhausted window, the
 * earliest reset of any. When a window says it is exhausted but its reset is no hint
 * (now, past, junk), the other windows' resets do not stand in for it (QA: a requests
 * window at 0 resetting a second ago took the tokens window's hour): no hint. */
static double pick_reset(const aor_header *hdrs, size_t n, double now) {
    double max_exhausted = -1, min_any = -1;
    int any_exhausted = 0;
    /* An exhausted window without a reset header of its own counts too: its reset is not
     * known, and another window's must not stand in for it (QA). */
    for (size_t i = 0; i < n && !any_exhausted; i++) {
        const char *nm = hdrs[i].name;
        size_t l = nm ? strlen(nm) : 0;
        int remaining = (l > 20 && strncasecmp(nm, "anthropic-ratelimit-", 20) == 0 &&
                         strcasecmp(nm + l - 10, "-remaining") == 0) ||
                        (l >= 21 && strncasecmp(nm, "x-ratelimit-remaining", 21) == 0 &&
                         (l == 21 || nm[21] == '-'));
        cur c;
        double d;
        any_exhausted = remaining && hdrs[i].value && cur_init(&c, hdrs[i].value) == 0 &&
                        eat_decimal(&c, 1, &d) == 0 && c.p == c.end && d == 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (!hdrs[i].value || !aor_hint_is_reset_header(hdrs[i].name))
            continue;
        if (window_exhausted(hdrs, n, hdrs[i].name))
            any_exhausted = 1;
        double h = aor_hint_reset(hdrs[i].value, now);
        if (h <= 0)
            continue;
        int later = 0; /* a later valid header of the same name wins */
        for (size_t j = i + 1; j < n && !later; j++)
            later = hdrs[j].name && hdrs[j].value && strcasecmp(hdrs[j].name, hdrs[i].name) == 0 &&
                    aor_hint_reset(hdrs[j].value, now) > 0;
        if (later)
            continue;
        if (window_exhausted(hdrs, n, hdrs[i].name) && h > max_exhausted)
            max_exhausted = h;
        if (min_any < 0 || h < min_any)
            min_any = h;
    }
    return any_exhausted ? max_exhausted : min_any;
}

/* Last valid RetryInfo.retryDelay in error.details of a JSON body. */
static double pick_body(const char *body, size_t len) {
    if (!body || len == 0)
        return -1;
    cJSON *root =
        cJSON_ParseWithLength(body, len > AOR_CLASSIFY_MAX_BODY ? AOR_CLASSIFY_MAX_BODY : len);
    if (!root)
        return -1;
    const cJSON *top = cJSON_IsArray(root) ? cJSON_GetArrayItem(root, 0) : root;
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(top, "error");
    const cJSON *details = cJSON_GetObjectItemCaseSensitive(err, "details");
    const cJSON *item;
    double best = -1;
    if (!cJSON_IsArray(details))
        details = NULL;
    cJSON_ArrayForEach(item, details) {
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(item, "@type"));
        const char *delay =
            cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(item, "retryDelay"));
        size_t tl = type ? strlen(type) : 0;
        if (!delay || tl < 20 || strcmp(type + tl - 20, "google.rpc.RetryInfo") != 0)
            continue;
        double h = aor_hint_duration(delay);
        if (h > 0)
            best = h;
    }
    cJSON_Delete(root);
    return best;
}

double aor_hint_pick(const aor_header *hdrs, size_t nhdrs, const char *body, size_t len, double now,
                     unsigned flags) {
    double h = -1;
    if (!hdrs)
        nhdrs = 0;
    if (flags & AOR_HINT_HEADERS) {
        h = last_valid(hdrs, nhdrs, "retry-after-ms", 1, now);
        if (h < 0)
            h = last_valid(hdrs, nhdrs, "retry-after", 0, now);
    }
    if (h < 0 && (flags & AOR_HINT_RESETS))
        h = pick_reset(hdrs, nhdrs, now);
    if (h < 0 && (flags & AOR_HINT_BODY))
        h = pick_body(body, len);
    return h;
}

double aor_hint_from_answer(aor_dialect d, const aor_header *hdrs, size_t nhdrs, const char *body,
                            size_t len, double now) {
    return aor_hint_pick(hdrs, nhdrs, body, len, now, AOR_HINT_ALL);
}
