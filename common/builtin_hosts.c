/* The built-in intercepted hosts (spec §2). */
#include "builtin_hosts.h"

#include <stddef.h>

const char *const aor_builtin_hosts[] = {"api.openai.com",
                                         "api.anthropic.com",
                                         "generativelanguage.googleapis.com",
                                         "openrouter.ai",
                                         "api.mistral.ai",
                                         "api.groq.com",
                                         "api.deepseek.com",
                                         "api.x.ai",
                                         "api.together.xyz",
                                         "api.fireworks.ai",
                                         NULL};
