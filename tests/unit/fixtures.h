/* Loads tests/fixtures/provider-answers.json for the unit tests (header-only, static).
 * Path: $AOR_FIXTURES (the JSON file, or a directory that holds provider-answers.json),
 * else tests/fixtures/provider-answers.json relative to the current directory (tests run
 * from the repo root). */
#ifndef AOR_TEST_FIXTURES_H
#define AOR_TEST_FIXTURES_H

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIXTURE_MAX_BYTES (4 * 1024 * 1024)

/* Returns the parsed fixture file (caller cJSON_Delete's it), or NULL after printing why
 * on stderr. */
static cJSON *fixture_load(void) {
    char path[4096];
    const char *env = getenv("AOR_FIXTURES");
    int w;
    if (env && *env) {
        size_t n = strlen(env);
        if (n > 5 && strcmp(env + n - 5, ".json") == 0)
            w = snprintf(path, sizeof path, "%s", env);
        else
            w = snprintf(path, sizeof path, "%s/provider-answers.json", env);
    } else {
        w = snprintf(path, sizeof path, "tests/fixtures/provider-answers.json");
    }
    if (w < 0 || (size_t)w >= sizeof path) {
        fprintf(stderr, "fixture path too long\n");
        return NULL;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s (run from the repo root or set AOR_FIXTURES)\n", path);
        return NULL;
    }
    char *buf = malloc(FIXTURE_MAX_BYTES);
    size_t n = buf ? fread(buf, 1, FIXTURE_MAX_BYTES, f) : 0;
    fclose(f);
    if (!buf || n == 0 || n == FIXTURE_MAX_BYTES) {
        fprintf(stderr, "cannot read %s (empty, too big or out of memory)\n", path);
        free(buf);
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLength(buf, n);
    free(buf);
    if (!root)
        fprintf(stderr, "%s is not valid JSON\n", path);
    return root;
}

/* Expected hint of a fixture entry: -1 for null, -2 for "cap", else the number. */
static double fixture_hint(const cJSON *entry) {
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(entry, "hint_s");
    if (cJSON_IsNumber(h))
        return h->valuedouble;
    if (cJSON_IsString(h) && strcmp(h->valuestring, "cap") == 0)
        return -2;
    return -1;
}

#endif
