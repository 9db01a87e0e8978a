/*
 * member_id.c - the group members' client.id (member_id.h).
 */
#include "kafka/member_id.h"

#include <stdio.h>
#include <string.h>

void ks_member_id_format(const char *application, const char *instance, const char *query_addr,
                         char *buf, size_t len)
{
    snprintf(buf, len, "%s-%s%s%s", application, instance,
             query_addr ? KS_MEMBER_QUERY_MARK : "", query_addr ? query_addr : "");
}

const char *ks_member_id_parse(const char *id, char *process, size_t plen)
{
    const char *mark = strstr(id, KS_MEMBER_QUERY_MARK);
    size_t n = mark ? (size_t)(mark - id) : strlen(id);
    if (plen > 0)
        snprintf(process, plen, "%.*s", (int)n, id);
    if (!mark)
        return NULL;
    const char *addr = mark + strlen(KS_MEMBER_QUERY_MARK);
    return *addr ? addr : NULL;
}
