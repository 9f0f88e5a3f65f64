/* On/off environment variables (envflag.h). */
#include "envflag.h"

#include <stddef.h>
#include <strings.h>

int aor_envflag_on(const char *value) {
    static const char *const off[] = {"0", "false", "no", "off"};
    if (value == NULL || value[0] == '\0')
        return 0;
    for (unsigned i = 0; i < sizeof off / sizeof off[0]; i++)
        if (strcasecmp(value, off[i]) == 0)
            return 0;
    return 1;
}
