/* On/off environment variables (envflag.h). */
#include "envflag.h"

#include <stddef.h>
#include <string.h>
#include <strings.h>

int aor_envflag_on(const char *value) {
    static const char *const off[] = {"0", "false", "no", "off"};
    if (value == NULL)
        return 0;
    size_t n = strlen(value), start = strspn(value, " \t");
    while (n > start && (value[n - 1] == ' ' || value[n - 1] == '\t'))
        n--;
    if (n == start)
        return 0; /* empty, or only blanks */
    for (unsigned i = 0; i < sizeof off / sizeof off[0]; i++)
        if (n - start == strlen(off[i]) && strncasecmp(value + start, off[i], n - start) == 0)
            return 0;
    return 1;
}
