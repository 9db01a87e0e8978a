/*
 * table.c - tables applied to their stores (table.h).
 */
#include "runtime/table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "runtime/serde.h"

/* Key and value as the store keeps them: timestamp, then value. The
 * caller frees *buf. 0 or KS_ERR_NOMEM. */
static int encode(const ks_bytes *value, int64_t ts, unsigned char **buf, ks_bytes *out)
{
    *buf = malloc(KS_TABLE_TS_LEN + value->len);
    if (!*buf)
        return KS_ERR_NOMEM;
    ks_int64_encode(ts, *buf);
    if (value->len)
        memcpy(*buf + KS_TABLE_TS_LEN, value->data, value->len);
    *out = (ks_bytes){*buf, KS_TABLE_TS_LEN + value->len};
    return 0;
}

/* Put or delete key in db (in the open write transaction). */
static int write_one(ks_store_db *db, ks_bytes key, const ks_bytes *value, int64_t ts)
{
    if (!value)
        return ks_store_del(db, key);
    unsigned char *buf;
    ks_bytes enc;
    int rc = encode(value, ts, &buf, &enc);
    if (rc == 0)
        rc = ks_store_put(db, key, enc);
    free(buf);
    return rc;
}

ks_verdict ks_table_apply(ks_task *task, const ks_topo_node *source, const ks_record *rec)
{
    int store = source->source->table_store;
    if (!rec->key || rec->key_len == 0) {
        ks_debug(task->where, "table %s: record at offset %lld has no key: ignored",
                 source->name, (long long)rec->offset);
        return KS_OK;
    }
    if (rec->key_len > KS_KEY_MAX) {
        ks_warn(task->where, "table %s: key of %zu bytes at offset %lld is over the store's "
                             "limit of %d bytes",
                source->name, rec->key_len, (long long)rec->offset, KS_KEY_MAX);
        return KS_SKIP;
    }
    ks_bytes key = {rec->key, rec->key_len};
    ks_bytes val = {rec->value, rec->value_len};
    int rc = ks_task_begin(task);
    if (rc == 0)
        rc = write_one(task->dbs[store], key, rec->value ? &val : NULL, rec->timestamp);
    if (rc != 0)
        return KS_RETRY;
    if (rec->offset > task->changelog_hi[store])
        task->changelog_hi[store] = rec->offset;
    return KS_OK;
}

const ks_cfg_source *ks_table_of_store(const ks_pipeline *p, int store)
{
    for (size_t s = 0; s < p->source_count; s++)
        if (p->sources[s].table && p->sources[s].table_store == store)
            return &p->sources[s];
    return NULL;
}

/* 1 when the worker would have applied the record: a key the store takes,
 * and key and value in the table's serdes (else it was poison: skipped,
 * dead-lettered, or the engine stopped before committing past it). */
static int applicable(const ks_cfg_source *t, ks_bytes key, const ks_bytes *value)
{
    const char *why;
    return t && key.len > 0 && key.len <= KS_KEY_MAX &&
           ks_serde_check(t->key_serde, key.data, key.len, &why) == 0 &&
           (!value || ks_serde_check(t->value_serde, value->data, value->len, &why) == 0);
}

int ks_table_restore_put(ks_task *task, int store, ks_bytes key, const ks_bytes *value,
                         int64_t timestamp, int64_t offset)
{
    int rc = ks_store_begin(task->env);
    if (rc == 0 && applicable(ks_table_of_store(task->topo->pipeline, store), key, value))
        rc = write_one(task->dbs[store], key, value, timestamp);
    if (rc == 0 && offset > task->changelog_hi[store])
        task->changelog_hi[store] = offset;
    return rc;
}

void ks_store_changelog(const ks_topology *t, int store, char *buf, size_t len)
{
    const ks_cfg_source *table = ks_table_of_store(t->pipeline, store);
    if (table)
        snprintf(buf, len, "%s", table->topic);
    else
        ks_changelog_topic(t, t->pipeline->stores[store].name, buf, len);
}

void ks_table_release_global_reads(ks_task *task)
{
    if (!task->io.global)
        return;
    for (size_t i = 0; task->live && i < task->topo->node_count; i++) {
        struct ks_ctx *ctx = task->live[i];
        for (size_t s = 0; ctx && ctx->stores && s < ctx->node->store_count; s++)
            ks_global_reader_reset(&ctx->stores[s].global);
    }
}
