/* Allocation-free scan of a JSON request body for one top-level string member (the
 * routing "model", spec §5.1), so that a large body that is only forwarded is not parsed
 * into a tree on every request (docs/performance.md). Strict RFC 8259 grammar; anything
 * unusual is left to a full parser (cJSON) by the caller. */
#ifndef AOR_JSONSCAN_H
#define AOR_JSONSCAN_H

#include <stddef.h>

/* Deepest nesting the scanner follows; deeper texts give -1 (the caller's parser decides). */
#define AOR_JSONSCAN_MAX_DEPTH 512

/* Looks for the top-level member named `key` in text[0..len) (key: plain ASCII without
 * '"' or '\\'; NULL or such a key gives -1).
 * Returns
 *    1  text is one valid JSON object (optional UTF-8 BOM, RFC 8259 whitespace, nothing
 *       after the object) whose one member named key has a string value without
 *       escapes: *val (into text) and *vlen (bytes) are the characters between its quotes;
 *    0  text is one valid JSON object and has no member named key, or its value is not a
 *       string (*val = NULL, *vlen = 0);
 *   -1  anything else, undecided: a key named twice (parsers differ on which counts),
 *       not valid JSON by the strict rules here, not an object,
 *       a top-level key or the value with escapes, an escaped UTF-16 surrogate, a raw
 *       control character, nesting deeper than AOR_JSONSCAN_MAX_DEPTH, bytes after the
 *       object, NULL arguments. Use a full parser then.
 * Where it answers 0 or 1, cJSON (cJSON_ParseWithLength + GetObjectItemCaseSensitive)
 * gives the same answer. Reads every byte once; allocates nothing; can't fail otherwise. */
int aor_json_top_string(const char *text, size_t len, const char *key, const char **val,
                        size_t *vlen);

#endif
