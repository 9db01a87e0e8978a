/*
 * partitioner.c - see partitioner.h.
 */
#include "kafka/partitioner.h"

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
