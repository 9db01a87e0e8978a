/* suites.h - every unit test suite, registered by runner.c. */
#ifndef KS_TEST_SUITES_H
#define KS_TEST_SUITES_H
void ks_test_register_plugin(void);
void ks_test_register_store(void);
void ks_test_register_config(void);
void ks_test_register_stateful(void);
void ks_test_register_driver(void);
void ks_test_register_query(void);
void ks_test_register_outbox(void);
void ks_test_register_windows(void);
void ks_test_register_reload(void);
void ks_test_register_mailbox(void);
void ks_test_register_kafka_conf(void);
void ks_test_register_json_valid(void);
void ks_test_register_http(void);
void ks_test_register_host_json(void);
void ks_test_register_json_ptr(void);
void ks_test_register_ops(void);
void ks_test_register_ops_examples(void);
void ks_test_register_serdes(void);
void ks_test_register_repartition(void);
void ks_test_register_cli(void);
void ks_test_register_joins(void);
void ks_test_register_stream_joins(void);
void ks_test_register_global_joins(void);
void ks_test_register_node_tables(void);
void ks_test_register_fk_joins(void);
void ks_test_register_restore_fold(void);
void ks_test_register_grow_plan(void);
void ks_test_register_array_grow(void);
#define KS_TEST_SUITES ks_test_register_plugin(); ks_test_register_store(); ks_test_register_config(); ks_test_register_stateful(); ks_test_register_driver(); ks_test_register_query(); ks_test_register_outbox(); ks_test_register_windows(); ks_test_register_reload(); ks_test_register_mailbox(); ks_test_register_kafka_conf(); ks_test_register_json_valid(); ks_test_register_json_ptr(); ks_test_register_ops(); ks_test_register_ops_examples(); ks_test_register_serdes(); ks_test_register_http(); ks_test_register_host_json(); ks_test_register_repartition(); ks_test_register_cli(); ks_test_register_joins(); ks_test_register_stream_joins(); ks_test_register_global_joins(); ks_test_register_fk_joins(); ks_test_register_node_tables(); ks_test_register_restore_fold(); ks_test_register_grow_plan(); ks_test_register_array_grow();
#endif
