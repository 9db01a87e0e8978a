/*
 * keyed.c - record checks and store-failure verdicts shared by the count,
 * aggregate and reduce modules (compiled into each; see keyed.h).
 */
#include "keyed.h"

/* Log the 1st dropped record, then every LOG_EVERY-th. */
#define LOG_EVERY 1000

void ks_keyed_init(ks_keyed *k, const ks_host_api *host, const char *who)
{
    *k = (ks_keyed){.host = host, .who = who};
}

int ks_keyed_check(ks_keyed *k, ks_ctx *ctx, const ks_record *rec, ks_verdict *verdict)
{
    const ks_host_api *host = k->host;
    if (!rec->key || rec->key_len == 0) {
        if (k->null_keys++ % LOG_EVERY == 0)
            host->log(ctx, KS_LOG_WARN,
                      "%s: dropped a record without a key (%s[%d]@%lld); "
                      "%llu so far",
                      k->who, rec->topic ? rec->topic : "-", (int)rec->partition,
                      (long long)rec->offset, (unsigned long long)k->null_keys);
        host->metric_add(ctx, "null_keys", 1);
        *verdict = KS_OK;
        return 1;
    }
    if (!rec->value) {
        k->null_values++;
        host->metric_add(ctx, "null_values", 1);
        *verdict = KS_OK;
        return 1;
    }
    if (rec->key_len > KS_KEYED_KEY_MAX) {
        if (k->big_keys++ % LOG_EVERY == 0)
            host->log(ctx, KS_LOG_WARN,
                      "%s: key of %zu bytes is over the store's %d-byte "
                      "limit (%s[%d]@%lld); %llu so far",
                      k->who, rec->key_len, KS_KEYED_KEY_MAX,
                      rec->topic ? rec->topic : "-", (int)rec->partition,
                      (long long)rec->offset, (unsigned long long)k->big_keys);
        *verdict = KS_SKIP;
        return 1;
    }
    return 0;
}

ks_verdict ks_keyed_store_failed(const ks_keyed *k, ks_ctx *ctx, const char *what, int rc)
{
    const ks_host_api *host = k->host;
    if (rc == KS_ERR_STORE_FULL) {
        host->log(ctx, KS_LOG_ERROR,
                  "%s: the store of node '%s' is full; raise `map_size` of "
                  "that store under `stores:` in the pipeline YAML",
                  k->who, host->node_name(ctx));
        return KS_FATAL;
    }
    host->log(ctx, KS_LOG_WARN, "%s: store %s failed (error %d); retrying", k->who,
              what, rc);
    return KS_RETRY;
}
