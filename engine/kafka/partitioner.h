/*
 * partitioner.h - the partition a Kafka producer with librdkafka's
 * "murmur2_random" partitioner (the engine's, and Java's default for keyed
 * records) picks for a key: which task holds the key's state. Used by the
 * query server and the test driver.
 */
#ifndef KS_KAFKA_PARTITIONER_H
#define KS_KAFKA_PARTITIONER_H

#include <stddef.h>
#include <stdint.h>

/* Java's org.apache.kafka.common.utils.Utils.murmur2 (seed 0x9747b28c) of
 * len bytes, as a Java int. */
int32_t ks_kafka_murmur2(const void *data, size_t len);

/* (murmur2(key) & 0x7fffffff) % partitions, or -1 when partitions <= 0. */
int32_t ks_kafka_partition_for(const void *key, size_t key_len, int32_t partitions);

/* A producer's partitioner for keyed records: the partition of key (len
 * bytes) among partitions (> 0). */
typedef int32_t (*ks_kafka_partitioner)(const void *key, size_t key_len, int32_t partitions);

/* The partitioner a producer configured with `name` uses for keyed
 * records: "murmur2" or "murmur2_random" (Java's default, and the
 * engine's), "consistent", "consistent_random" (librdkafka's default) or
 * "crc32" (both CRC-32 of the key), "fnv1a" or "fnv1a_random". NULL for
 * any other name. Static: never freed. */
ks_kafka_partitioner ks_kafka_partitioner_find(const char *name);

#endif /* KS_KAFKA_PARTITIONER_H */
