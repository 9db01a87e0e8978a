/*
 * itest.h - helpers of the integration tests: a real broker (started by
 * scripts/kafka.sh; address in $KS_BOOTSTRAP, default 127.0.0.1:9092), real
 * `kstreams run` processes, and read_committed readers of their outputs.
 */
#ifndef KS_ITEST_H
#define KS_ITEST_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct it_msg {
    char *key; /* NUL-terminated copies (NULL for a null key/value) */
    size_t key_len;
    char *value;
    size_t value_len;
    int32_t partition;
    int64_t offset;
    int64_t timestamp; /* the record's timestamp (ms), -1 when none */
    char *headers; /* "name=value\n" per header, or NULL */
} it_msg;

typedef struct it_msgs {
    it_msg *items;
    size_t count;
    size_t cap;
} it_msgs;

const char *it_bootstrap(void);
/* Run `scripts/kafka.sh COMMAND` (e.g. "restart", "stop-keep", "start") for
 * the broker of it_bootstrap(), output discarded; its exit status. */
int it_broker_ctl(const char *command);
/* "<base>-<pid>-<n>": topics and applications unique to this run. */
void it_unique(char *buf, size_t len, const char *base);
/* A fresh temp directory (under /tmp); caller frees nothing. */
void it_tempdir(char *buf, size_t len);
/* Create a topic with replication 1; 0 or -1 (a message on stderr). */
int it_create_topic(const char *topic, int partitions);
/* Same with a replication factor (-1: the broker's default) and configs
 * (NULL or NULL-terminated name, value pairs). */
int it_create_topic_with(const char *topic, int partitions, int replication,
                         const char *const *configs);
/* A producer for admin and metadata calls that never auto-creates a topic
 * by asking for it; the caller destroys it. NULL on error. */
rd_kafka_t *it_admin_client(void);
/* The low (log start) and high watermarks of partitions 0..n-1 of `topic`
 * into lo[] and hi[] (either may be NULL); 0, or -1 (a message on stderr). */
int it_watermarks(const char *topic, int n, int64_t *lo, int64_t *hi);
/* DeleteRecords: move the log start of partitions 0..n-1 of `topic` to
 * before[p] (a value < 0 leaves that partition alone); 0, or -1 (a
 * message on stderr). */
int it_delete_records(const char *topic, int n, const int64_t *before);
/* Set the topic's configs to the NULL-terminated name, value pairs (an
 * AlterConfigs request: configs not named go back to the broker's
 * defaults); 0, or -1 (a message on stderr). */
int it_alter_topic(const char *topic, const char *const *configs);
/* Delete every record of partitions 0..n-1 of a compacted topic (a
 * changelog), as an operator would: cleanup.policy=compact,delete first
 * (the broker refuses DeleteRecords on a compact-only topic: "Policy
 * violation", Kafka 4.1.1), then DeleteRecords up to the high watermarks,
 * written to hi[] (the new log starts). 0, or -1 (a message on stderr). */
int it_empty_changelog(const char *topic, int n, int64_t *hi);
/* Delete `topic` (DeleteTopics) and wait until the broker no longer lists
 * it (30 s at most). 0, or -1 (a message on stderr). */
int it_delete_topic(const char *topic);
/* Produce n records made by `make` (fills key/value, NUL-terminated, and
 * may set *partition, -1 for the default partitioner); waits for delivery. */
typedef void (*it_make_fn)(int i, char *key, size_t klen, char *value, size_t vlen,
                           int32_t *partition, void *arg);
int it_produce(const char *topic, int n, it_make_fn make, void *arg);
/* Read `topic` from the beginning with read_committed until `expect`
 * records arrived and nothing more came for `idle_ms`, or `max_ms` passed. */
int it_consume(const char *topic, size_t expect, int idle_ms, int max_ms, it_msgs *out);
void it_msgs_free(it_msgs *m);

/* Check the outputs of a count: per key, the int64 values must be exactly
 * 1..want[k]. A key is "<prefix><k>" read with sscanf(key, key_fmt, &k)
 * (key_fmt has one %d, e.g. "k%d"), 0 <= k < keys. Counts into the four
 * outputs: *foreign, outputs with no such key or a value that is not 8
 * bytes; per key, *repeats, values not above the last one in sequence;
 * *gaps, values past the next one (the sequence goes on from there);
 * *wrong_keys, keys whose last value in sequence is not want[k]. All zero
 * when every key's outputs are exactly 1..want[k], in order. Asserts
 * nothing: the caller does. */
void it_check_count_sequences(const it_msgs *out, const long *want, int keys,
                              const char *key_fmt, long *gaps, long *repeats,
                              long *foreign, int *wrong_keys);

/* Read `topic` like it_consume until every key k of a count with
 * want[k] > 0 has shown the value want[k] (the key format as below). */
int it_consume_counts(const char *topic, const long *want, int keys, const char *key_fmt,
                      int idle_ms, int max_ms, it_msgs *out);

/* The same check for a count whose record cache folds updates (the
 * default, docs/stores.md): per key the values must rise strictly and end
 * at want[k]. *repeats counts values not above the key's last one or above
 * want[k] (a duplicate, or an update that was never input); *folded the
 * updates folded away (values skipped), which is no error; *foreign and
 * *wrong_keys as above. */
void it_check_count_folded(const it_msgs *out, const long *want, int keys,
                           const char *key_fmt, long *folded, long *repeats, long *foreign,
                           int *wrong_keys);

/* Write a file from a format. 0 or -1. */
int it_write_file(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Path of the built kstreams binary. */
const char *it_kstreams(void);
/* Run `kstreams ARGS` (shell words): stdout into out (outlen bytes at
 * most, NUL-terminated), stderr into the file errpath (replaced). The
 * exit status, -1 when it did not exit. */
int it_kstreams_run(const char *args, char *out, size_t outlen, const char *errpath);
/* Start `kstreams run yaml --instance instance` with stderr/stdout to log. */
pid_t it_engine_start(const char *yaml, const char *instance, const char *log);
/* Same, with one extra environment variable "NAME=VALUE" (may be NULL). */
pid_t it_engine_start_env(const char *yaml, const char *instance, const char *log,
                          const char *env);
/* Wait up to timeout_ms for the process to end by itself; returns its exit
 * status (128+signal when killed by a signal), or -1 if it still runs. */
int it_engine_wait(pid_t pid, int timeout_ms);
/* SIGTERM and wait up to timeout_ms; returns the exit status, or -1 when
 * it had to be killed. */
int it_engine_stop(pid_t pid, int timeout_ms);
/* SIGKILL and reap. */
void it_engine_kill(pid_t pid);
/* Count lines of `log` containing `needle`. */
int it_log_count(const char *log, const char *needle);
/* Sum of the integer that follows `prefix` on every line of log that
 * contains it (e.g. "records replayed" counts). */
long it_log_sum_before(const char *log, const char *prefix, const char *suffix);
/* One HTTP/1.1 request to 127.0.0.1:port on a fresh connection; returns
 * the status code, -1 when nothing answers. The response body goes to
 * resp (truncated to resplen - 1; resp may be NULL). */
int it_http(int port, const char *method, const char *path, const char *body, char *resp,
            size_t resplen);
/* Wait up to timeout_ms until GET path on port answers at all; 0 or -1. */
int it_http_wait(int port, const char *path, int timeout_ms);
/* A loopback port the kernel says is free right now; 0 on error. */
int it_free_port(void);

/* The first of `span` consecutive loopback ports that are free now, below
 * the kernel's ephemeral range (32768 and up), so that no client connection
 * of the broker or the tests can take one later; derived from the pid so
 * that concurrent runs pick different ones. 0 if none is found. */
int it_port_base(int span);

/* GET /metrics from 127.0.0.1:port: a malloc'd body (the caller frees it),
 * or NULL. */
char *it_metrics_scrape(int port);
/* Sum of every sample of `family` in `text` whose labels contain `match`
 * (NULL: all); *samples (when not NULL) says how many there were. */
double it_metrics_sum(const char *text, const char *family, const char *match, int *samples);
/* Sleep ms milliseconds. */
void it_sleep_ms(int ms);
int64_t it_now_ms(void);

/* Run the CUnit suite `suite` of `cases` (NULL-terminated by name), print
 * CUnit's summary and "<suite>: N passed, N failed"; exit status 0/1. */
typedef struct it_case {
    const char *name;
    void (*fn)(void);
} it_case;
/* Run the cases (only those whose name contains $KS_IT_ONLY when set). */
int it_main(const char *suite, const it_case *cases);

#endif
