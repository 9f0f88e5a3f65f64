/* On/off environment variables of aor (AOR_STRICT, AOR_NO_TRUST, AOR_DISABLE, AOR_DEBUG
 * for the shim), read the same way by libaor.so and `aor run`.
 * Source: spec §9 "Environment" (documented in docs/shim.md). */
#ifndef AOR_ENVFLAG_H
#define AOR_ENVFLAG_H

/* 1 when value turns a flag on: set, non-empty and not one of "0", "false", "no", "off"
 * (ASCII case-insensitive, blanks around ignored, as users write them: AOR_STRICT=false
 * and AOR_STRICT=" 0" mean off). NULL, "" and only blanks are 0.
 * No allocation, no error. */
int aor_envflag_on(const char *value);

#endif
