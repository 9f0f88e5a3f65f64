/* Retry hint parsing (spec §4.3): Retry-After in every form, retry-after-ms, Google and
 * Go durations, RFC 3339, reset headers, precedence. */
#include "classify.h"
#include "fixtures.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define NOW 1800000000.0 /* Fri, 15 Jan 2027 08:00:00 GMT */
#define CAP 86400.0
#define EXPECT_CAP (-2.0)

/* Checks a hint against an expectation: -1 none, EXPECT_CAP (>= cap), else the value. */
static void check_hint(const char *what, const char *value, double got, double want) {
    int ok;
    if (want == EXPECT_CAP)
        ok = got >= CAP;
    else if (want < 0)
        ok = got == -1;
    else
        ok = fabs(got - want) < 1e-6;
    if (!ok)
        fail_msg("%s(\"%s\") = %.9g, want %s%.9g", what, value, got,
                 want == EXPECT_CAP ? ">= cap " : "", want == EXPECT_CAP ? CAP : want);
}

static void test_retry_after_fixture(void **state) {
    cJSON *root = fixture_load();
    assert_non_null(root);
    double now_epoch = cJSON_GetObjectItemCaseSensitive(root, "now_epoch")->valuedouble;
    const cJSON *v;
    int count = 0;
    cJSON_ArrayForEach(v, cJSON_GetObjectItemCaseSensitive(root, "retry_after_values")) {
        const char *value = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "value"));
        const char *rel = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(v, "relative_to"));
        double now = now_epoch;
        assert_non_null(value);
        if (rel && aor_http_date_parse(rel, now_epoch, &now) != 0)
            fail_msg("relative_to \"%s\" does not parse", rel);
        check_hint("aor_hint_retry_after", value, aor_hint_retry_after(value, now),
                   fixture_hint(v));
        count++;
    }
    assert_true(count >= 12);
    cJSON_Delete(root);
}

static void test_retry_after_table(void **state) {
    static const struct {
        const char *value;
        double want;
    } t[] = {
        {"7", 7},
        {" 7\t", 7}, /* OWS around the field value */
        {"007", 7},
        {"1", 1},
        {"0", -1},
        {"00", -1},
        {"-3", -1},
        {"+3", -1},
        {"1.5", -1},
        {"1e3", -1},
        {"120junk", -1},
        {"12 0", -1},
        {"", -1},
        {"   ", -1},
        {"86400", 86400},
        {"86401", EXPECT_CAP},
        {"999999999999999999999999999999", EXPECT_CAP},
        {"Fri, 15 Jan 2027 08:00:30 GMT", 30},
        {"fri, 15 jan 2027 08:00:30 gmt", 30},
        {"Fri, 15 Jan 2027 08:00:00 GMT", -1}, /* now: not > 0 */
        {"Fri, 15 Jan 2027 07:59:59 GMT", -1}, /* past */
        {"Fri, 15 Jan 2027 08:00:30 UTC", -1},
        {"Fri, 15 Jan 2027 08:00:30 GMT junk", -1},
        {"Fri, 15 Jan 2027 8:00:30 GMT", -1},
        {"Fri,15 Jan 2027 08:00:30 GMT", -1},
        {"Fri, 32 Jan 2027 08:00:30 GMT", -1},
        {"Mon, 29 Feb 2027 08:00:30 GMT", -1}, /* 2027 is not a leap year */
        {"Tue, 29 Feb 2028 08:00:00 GMT", 1835424000 - NOW},
        {"Fri, 15 Jan 2027 24:00:00 GMT", -1},
        {"Fri, 15 Jan 2027 08:60:00 GMT", -1},
        {"Fri, 15 Foo 2027 08:00:30 GMT", -1},
        {"Fry, 15 Jan 2027 08:00:30 GMT", -1},
        {"Friday, 15-Jan-27 08:00:30 GMT", 30},
        {"Fri, 15-Jan-27 08:00:30 GMT", -1},      /* RFC 850 needs the full day name */
        {"Friday, 15 Jan 2027 08:00:30 GMT", -1}, /* IMF-fixdate needs the short one */
        {"Sunday, 06-Nov-94 08:49:37 GMT", -1},   /* 1994: past */
        {"Fri Jan 15 08:00:30 2027", 30},
        {"Fri Jan 15 08:00:30 2027 ", 30},
        {"Sat Jan 16  8:00:00 2027", -1},
        {"Sat Jan 16 08:00:00 27", -1},
        {"Tue Feb  2 08:00:00 2027", 18 * 86400.0},
        {"Tue Feb 2 08:00:00 2027", -1},
        {"Fri, 31 Dec 9999 23:59:59 GMT", EXPECT_CAP},
        {NULL, -1},
    };
    size_t n = sizeof t / sizeof t[0];
    assert_true(n >= 25);
    for (size_t i = 0; i < n; i++)
        check_hint("aor_hint_retry_after", t[i].value ? t[i].value : "(null)",
                   aor_hint_retry_after(t[i].value, NOW), t[i].want);
}

static void test_retry_after_too_long(void **state) {
    char v[AOR_HINT_MAX_VALUE + 10];
    memset(v, '1', sizeof v - 1);
    v[sizeof v - 1] = '\0';
    assert_true(aor_hint_retry_after(v, NOW) == -1);
}

static void test_http_date_forms(void **state) {
    double t = 0;
    assert_int_equal(aor_http_date_parse("Sun, 06 Nov 1994 08:49:37 GMT", NOW, &t), 0);
    assert_true(t == 784111777);
    assert_int_equal(aor_http_date_parse("Sunday, 06-Nov-94 08:49:37 GMT", NOW, &t), 0);
    assert_true(t == 784111777);
    assert_int_equal(aor_http_date_parse("Sun Nov  6 08:49:37 1994", NOW, &t), 0);
    assert_true(t == 784111777);
    /* two-digit year: not more than 50 years ahead of now (RFC 9110 §5.6.7) */
    double y2060 = 2840140800.0; /* 2060-01-01 */
    assert_int_equal(aor_http_date_parse("Friday, 01-Jan-00 00:00:00 GMT", y2060, &t), 0);
    assert_true(t == 4102444800.0); /* 2100, 40 years ahead */
    assert_int_equal(aor_http_date_parse("Wednesday, 01-Jan-70 00:00:00 GMT", NOW, &t), 0);
    assert_true(t == 3155760000.0); /* 2070: 43 years ahead of 2027, kept */
    assert_int_equal(aor_http_date_parse("Tuesday, 01-Jan-80 00:00:00 GMT", NOW, &t), 0);
    assert_true(t == 315532800.0); /* 2080 would be 53 years ahead: 1980 */
    /* 50 years and 30 s ahead is more than 50 years, in the year that is 50 on (QA) */
    assert_int_equal(aor_http_date_parse("Friday, 15-Jan-77 08:00:30 GMT", NOW, &t), 0);
    assert_true(t == NOW + 30 - 50 * 365.0 * 86400 - 12 * 86400); /* 1977: 12 leap days */
    assert_int_equal(aor_http_date_parse("Thursday, 14-Jan-77 08:00:00 GMT", NOW, &t), 0);
    assert_true(t > NOW); /* a day less than 50 years on: 2077, kept */
    t = 5;
    assert_int_equal(aor_http_date_parse("not a date", NOW, &t), -1);
    assert_true(t == 5); /* untouched on failure */
    assert_int_equal(aor_http_date_parse(NULL, NOW, &t), -1);
}

static void test_retry_after_ms(void **state) {
    static const struct {
        const char *value;
        double want;
    } t[] = {{"1500", 1.5}, {"1500.5", 1.5005}, {" 20 ", 0.02}, {"0", -1},   {"-5", -1},
             {"abc", -1},   {"", -1},           {"20ms", -1},   {"1,5", -1}, {NULL, -1}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        check_hint("aor_hint_retry_after_ms", t[i].value ? t[i].value : "(null)",
                   aor_hint_retry_after_ms(t[i].value), t[i].want);
}

static void test_google_duration(void **state) {
    static const struct {
        const char *value;
        double want;
    } t[] = {{"19s", 19}, {"3.700s", 3.7}, {"0.5s", 0.5}, {"52758s", 52758}, {"0s", -1},
             {"19", -1},  {"-1s", -1},     {"s", -1},     {"1.5ss", -1},     {"19 s", -1}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        check_hint("aor_hint_duration", t[i].value, aor_hint_duration(t[i].value), t[i].want);
}

static void test_go_duration(void **state) {
    static const struct {
        const char *value;
        double want;
    } t[] = {{"6m0s", 360},
             {"1.5s", 1.5},
             {"20ms", 0.02},
             {"1h2m3.5s", 3723.5},
             {"250us", 250e-6},
             {"250\xc2\xb5s", 250e-6},
             {"7m12.183s", 432.183},
             {"0s", -1},
             {"6m0", -1},
             {"-1s", -1},
             {"1x", -1},
             {"", -1},
             {"m", -1}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        check_hint("aor_hint_go_duration", t[i].value, aor_hint_go_duration(t[i].value), t[i].want);
}

static void test_rfc3339(void **state) {
    double t = 0;
    assert_int_equal(aor_rfc3339_parse("2027-01-15T08:00:12Z", &t), 0);
    assert_true(t == NOW + 12);
    assert_int_equal(aor_rfc3339_parse("2027-01-15T08:00:12.5Z", &t), 0);
    assert_true(t == NOW + 12.5);
    assert_int_equal(aor_rfc3339_parse("2027-01-15T09:00:12+01:00", &t), 0);
    assert_true(t == NOW + 12);
    assert_int_equal(aor_rfc3339_parse("2027-01-15t08:00:12z", &t), 0);
    assert_true(t == NOW + 12);
    t = 1;
    assert_int_equal(aor_rfc3339_parse("2027-01-15T08:00:12", &t), -1);
    assert_int_equal(aor_rfc3339_parse("2027-13-15T08:00:12Z", &t), -1);
    assert_int_equal(aor_rfc3339_parse("2027-01-15T08:00:12Zjunk", &t), -1);
    assert_int_equal(aor_rfc3339_parse("2027-01-15T08:00:12.Z", &t), -1);
    assert_true(t == 1);
}

static void test_reset_values(void **state) {
    static const struct {
        const char *value;
        double want;
    } t[] = {{"1800000012000", 12},        /* OpenRouter: epoch ms */
             {"1800000012", 12},           /* epoch seconds */
             {"12", 12},                   /* delta seconds */
             {"6m0s", 360},                /* OpenAI */
             {"2027-01-15T08:00:12Z", 12}, /* Anthropic */
             {"1799999990000", -1},        /* past */
             {"2027-01-15T07:00:00Z", -1},
             {"junk", -1},
             {"0", -1}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        check_hint("aor_hint_reset", t[i].value, aor_hint_reset(t[i].value, NOW), t[i].want);
    assert_true(aor_hint_is_reset_header("x-ratelimit-reset-requests"));
    assert_true(aor_hint_is_reset_header("X-RateLimit-Reset"));
    assert_true(aor_hint_is_reset_header("anthropic-ratelimit-tokens-reset"));
    assert_false(aor_hint_is_reset_header("anthropic-ratelimit-tokens-remaining"));
    assert_false(aor_hint_is_reset_header("x-ratelimit-remaining-requests"));
    assert_false(aor_hint_is_reset_header("retry-after"));
    assert_false(aor_hint_is_reset_header(NULL));
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void test_pick_precedence(void **state) {
    const aor_header ms_ra[] = {{"Retry-After", "2"}, {"retry-after-ms", "1500"}};
    assert_true(aor_hint_pick(ms_ra, N(ms_ra), NULL, 0, NOW, AOR_HINT_ALL) == 1.5);
    const aor_header bad_ms[] = {{"retry-after-ms", "junk"}, {"retry-after", "2"}};
    assert_true(aor_hint_pick(bad_ms, N(bad_ms), NULL, 0, NOW, AOR_HINT_ALL) == 2);
    const aor_header ra_reset[] = {{"x-ratelimit-reset-requests", "6m0s"}, {"retry-after", "7"}};
    assert_true(aor_hint_pick(ra_reset, N(ra_reset), NULL, 0, NOW, AOR_HINT_ALL) == 7);
    const aor_header reset_only[] = {{"x-ratelimit-reset-requests", "6m0s"}};
    assert_true(aor_hint_pick(reset_only, 1, NULL, 0, NOW, AOR_HINT_ALL) == 360);
    assert_true(aor_hint_pick(reset_only, 1, NULL, 0, NOW, AOR_HINT_HEADERS) == -1);
    const char *body = "{\"error\":{\"code\":429,\"details\":[{\"@type\":"
                       "\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"19s\"}]}}";
    assert_true(aor_hint_pick(reset_only, 1, body, strlen(body), NOW, AOR_HINT_ALL) == 360);
    assert_true(aor_hint_pick(NULL, 0, body, strlen(body), NOW, AOR_HINT_ALL) == 19);
    assert_true(aor_hint_pick(NULL, 0, body, strlen(body), NOW, AOR_HINT_HEADERS) == -1);
    assert_true(aor_hint_from_answer(AOR_DIALECT_GEMINI, NULL, 0, body, strlen(body), NOW) == 19);
    /* Gemini streams errors as a JSON array */
    const char *arr = "[{\"error\":{\"details\":[{\"@type\":"
                      "\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"3.5s\"}]}}]";
    assert_true(aor_hint_pick(NULL, 0, arr, strlen(arr), NOW, AOR_HINT_ALL) == 3.5);
}

static void test_pick_latest_wins(void **state) {
    const aor_header two[] = {{"Retry-After", "5"}, {"retry-after", "9"}};
    assert_true(aor_hint_pick(two, N(two), NULL, 0, NOW, AOR_HINT_ALL) == 9);
    const aor_header last_bad[] = {{"Retry-After", "5"}, {"retry-after", "junk"}};
    assert_true(aor_hint_pick(last_bad, N(last_bad), NULL, 0, NOW, AOR_HINT_ALL) == 5);
    const aor_header resets[] = {{"x-ratelimit-reset", "1800000030000"},
                                 {"x-ratelimit-reset", "1800000010000"}};
    assert_true(aor_hint_pick(resets, N(resets), NULL, 0, NOW, AOR_HINT_ALL) == 10);
    const char *body = "{\"error\":{\"details\":["
                       "{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":"
                       "\"4s\"},{\"@type\":\"type.googleapis.com/google.rpc.RetryInfo\","
                       "\"retryDelay\":\"8s\"}]}}";
    assert_true(aor_hint_pick(NULL, 0, body, strlen(body), NOW, AOR_HINT_ALL) == 8);
}

static void test_pick_reset_windows(void **state) {
    /* the exhausted window decides, and all exhausted windows must reset */
    const aor_header oa[] = {{"x-ratelimit-remaining-requests", "0"},
                             {"x-ratelimit-reset-requests", "6m0s"},
                             {"x-ratelimit-remaining-tokens", "100"},
                             {"x-ratelimit-reset-tokens", "2s"}};
    assert_true(aor_hint_pick(oa, N(oa), NULL, 0, NOW, AOR_HINT_RESETS) == 360);
    const aor_header an[] = {{"anthropic-ratelimit-requests-remaining", "10"},
                             {"anthropic-ratelimit-requests-reset", "2027-01-15T08:01:00Z"},
                             {"anthropic-ratelimit-tokens-remaining", "0"},
                             {"anthropic-ratelimit-tokens-reset", "2027-01-15T08:00:12Z"}};
    assert_true(aor_hint_pick(an, N(an), NULL, 0, NOW, AOR_HINT_RESETS) == 12);
    /* nothing says 0: the earliest reset */
    const aor_header none[] = {{"x-ratelimit-reset-requests", "6m0s"},
                               {"x-ratelimit-reset-tokens", "2s"}};
    assert_true(aor_hint_pick(none, N(none), NULL, 0, NOW, AOR_HINT_RESETS) == 2);
    const aor_header or_[] = {{"X-RateLimit-Remaining", "0"},
                              {"X-RateLimit-Reset", "1800000045000"}};
    assert_true(aor_hint_pick(or_, N(or_), NULL, 0, NOW, AOR_HINT_ALL) == 45);
    /* QA: an exhausted window whose reset is past, now or junk is no hint; the window
     * that is not exhausted does not stand in for it (it gave 3600 s and 518.4 s) */
    const aor_header past[] = {{"anthropic-ratelimit-requests-remaining", "0"},
                               {"anthropic-ratelimit-requests-reset", "2027-01-15T07:59:59Z"},
                               {"anthropic-ratelimit-tokens-remaining", "50000"},
                               {"anthropic-ratelimit-tokens-reset", "2027-01-15T09:00:00Z"}};
    assert_true(aor_hint_pick(past, N(past), NULL, 0, NOW, AOR_HINT_RESETS) == -1);
    const aor_header zero[] = {{"x-ratelimit-remaining-tokens", "0"},
                               {"x-ratelimit-reset-tokens", "0s"},
                               {"x-ratelimit-remaining-requests", "9999"},
                               {"x-ratelimit-reset-requests", "8m38.4s"}};
    assert_true(aor_hint_pick(zero, N(zero), NULL, 0, NOW, AOR_HINT_RESETS) == -1);
    const aor_header junk[] = {{"x-ratelimit-remaining-tokens", "0"},
                               {"x-ratelimit-reset-tokens", "soon"},
                               {"x-ratelimit-reset-requests", "8m"}};
    assert_true(aor_hint_pick(junk, N(junk), NULL, 0, NOW, AOR_HINT_RESETS) == -1);
    /* ... nor when the exhausted window has no reset header at all */
    const aor_header none_reset[] = {{"anthropic-ratelimit-requests-remaining", "0"},
                                     {"anthropic-ratelimit-tokens-remaining", "5000"},
                                     {"anthropic-ratelimit-tokens-reset", "2027-01-15T09:00:00Z"}};
    assert_true(aor_hint_pick(none_reset, N(none_reset), NULL, 0, NOW, AOR_HINT_RESETS) == -1);
    /* one exhausted window with a usable reset still decides */
    const aor_header one[] = {{"x-ratelimit-remaining-tokens", "0"},
                              {"x-ratelimit-reset-tokens", "0s"},
                              {"x-ratelimit-remaining-requests", "0"},
                              {"x-ratelimit-reset-requests", "20s"}};
    assert_true(aor_hint_pick(one, N(one), NULL, 0, NOW, AOR_HINT_RESETS) == 20);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retry_after_fixture),  cmocka_unit_test(test_retry_after_table),
        cmocka_unit_test(test_retry_after_too_long), cmocka_unit_test(test_http_date_forms),
        cmocka_unit_test(test_retry_after_ms),       cmocka_unit_test(test_google_duration),
        cmocka_unit_test(test_go_duration),          cmocka_unit_test(test_rfc3339),
        cmocka_unit_test(test_reset_values),         cmocka_unit_test(test_pick_precedence),
        cmocka_unit_test(test_pick_latest_wins),     cmocka_unit_test(test_pick_reset_windows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
