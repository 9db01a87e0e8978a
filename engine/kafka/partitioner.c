/*
 * partitioner.c - see partitioner.h.
 */
#include "kafka/partitioner.h"

#include <string.h>

#include <librdkafka/rdkafka.h>

/* Java's Utils.murmur2, in unsigned arithmetic (Java ints wrap). */
int32_t ks_kafka_murmur2(const void *data, size_t len)
{
    const unsigned char *d = data;
    const uint32_t m = 0x5bd1e995u;
    const int r = 24;
    uint32_t h = 0x9747b28cu ^ (uint32_t)len;
    size_t len4 = len / 4;
    for (size_t i = 0; i < len4; i++) {
        size_t i4 = i * 4;
        uint32_t k = (uint32_t)d[i4] | (uint32_t)d[i4 + 1] << 8 |
                     (uint32_t)d[i4 + 2] << 16 | (uint32_t)d[i4 + 3] << 24;
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    size_t tail = len & ~(size_t)3;
    switch (len % 4) {
    case 3:
        h ^= (uint32_t)d[tail + 2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)d[tail + 1] << 8;
        /* fall through */
    case 1:
        h ^= d[tail];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

int32_t ks_kafka_partition_for(const void *key, size_t key_len, int32_t partitions)
{
    if (partitions <= 0)
        return -1;
    uint32_t h = (uint32_t)ks_kafka_murmur2(key, key_len) & 0x7fffffffu;
    return (int32_t)(h % (uint32_t)partitions);
}

/* librdkafka's own, which ignore the topic and opaques for a key */
static int32_t crc32_partition(const void *key, size_t key_len, int32_t partitions)
{
    return rd_kafka_msg_partitioner_consistent(NULL, key, key_len, partitions, NULL, NULL);
}

static int32_t fnv1a_partition(const void *key, size_t key_len, int32_t partitions)
{
    return rd_kafka_msg_partitioner_fnv1a(NULL, key, key_len, partitions, NULL, NULL);
}

ks_kafka_partitioner ks_kafka_partitioner_find(const char *name)
{
    /* the _random variants differ only for records without a key */
    static const struct {
        const char *name;
        ks_kafka_partitioner fn;
    } known[] = {
        {"murmur2", ks_kafka_partition_for},   {"murmur2_random", ks_kafka_partition_for},
        {"consistent", crc32_partition},       {"consistent_random", crc32_partition},
        {"crc32", crc32_partition},            {"fnv1a", fnv1a_partition},
        {"fnv1a_random", fnv1a_partition},
    };
    for (size_t i = 0; name && i < sizeof known / sizeof known[0]; i++)
        if (strcmp(known[i].name, name) == 0)
            return known[i].fn;
    return NULL;
}
