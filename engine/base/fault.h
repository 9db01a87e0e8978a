/*
 * fault.h - deliberate crashes at named points, for the tests that prove
 * what survives a process death at each step of the commit sequence.
 *
 * KS_CRASH_AT=<point>[:<n>] makes the process SIGKILL itself the n-th time
 * (default 1) it reaches <point>. KS_PAUSE_AT=<point>:<ms> (1..10000)
 * sleeps that long at every visit instead: a slow restore, for the test of
 * what a query of a restoring task answers (test_rquery). Unset
 * (production): getenvs at first use, then a compare.
 */
#ifndef KS_FAULT_H
#define KS_FAULT_H

/* Points of the worker's commit sequence and of restore. */
#define KS_FAULT_BEFORE_FLUSH "before-flush"
#define KS_FAULT_BEFORE_OFFSETS "before-send-offsets"
#define KS_FAULT_BEFORE_COMMIT "before-kafka-commit"
#define KS_FAULT_AFTER_COMMIT "after-kafka-commit"
#define KS_FAULT_AFTER_STORES "after-store-commit"
#define KS_FAULT_DURING_RESTORE "during-restore"
/* Points of a state migration (task.c, host_api.c, committer.c), in order:
 * migrate() is about to run; a store write inside migrate() (":n" picks
 * the n-th write); migrate() returned and the new version is written, in
 * the open batch; the Kafka transaction holding the migration committed,
 * LMDB not yet; the LMDB transaction committed too. */
#define KS_FAULT_BEFORE_MIGRATE "before-migrate"
#define KS_FAULT_MID_MIGRATE "mid-migrate"
#define KS_FAULT_AFTER_MIGRATE "after-migrate"
#define KS_FAULT_MIGRATE_KAFKA_COMMITTED "after-migrate-kafka-commit"
#define KS_FAULT_MIGRATE_COMMITTED "after-migrate-commit"
/* Points of the outbox's requests consumer (outbox_requests.c). */
#define KS_FAULT_REQUESTS_HELD "outbox-requests-held"
#define KS_FAULT_REQUESTS_COMMITTED "outbox-requests-committed"
/* Points of the outbox dispatcher (dispatcher.c): a batch's rows are
 * DISPATCHING; its records handed to the producer, or acknowledged. */
#define KS_FAULT_DISPATCH_PRODUCED "outbox-dispatch-produced"
#define KS_FAULT_DISPATCH_ACKED "outbox-dispatch-acked"
/* Points of `kstreams grow-partitions` (grow_move.c, grow_partitions.c):
 * the moved keys are at the broker in an open transaction; the moves
 * committed, the sources not grown yet. */
#define KS_FAULT_GROW_BEFORE_COMMIT "grow-before-commit"
#define KS_FAULT_GROW_BEFORE_SOURCES "grow-before-sources"

/* Die with SIGKILL if KS_CRASH_AT names `point` and this is its n-th
 * visit. Thread-safe. */
void ks_fault_point(const char *point);

#endif /* KS_FAULT_H */
