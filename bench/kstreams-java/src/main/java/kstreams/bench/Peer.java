package kstreams.bench;

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.StateRestoreListener;

import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * The Kafka Streams side of bench/run.sh: the same topologies as the
 * kstreams pipelines it is compared with.
 *
 *   count   stream(input).groupByKey().count().toStream().to(output)
 *           key: string, value: int64 (LongSerializer: 8 bytes big-endian,
 *           the same bytes kstreams' count writes)
 *   window  stream(input).groupByKey()
 *             .windowedBy(TimeWindows.ofSizeAndGrace(size, grace)).count()
 *             .toStream().map(key@start -> key, count).to(output)
 *   rekey   stream(input).groupBy((k, v) -> v's "customer", Grouped.as("rekey"))
 *             .count().toStream().to(output)   (the value parsed with
 *           Jackson's ObjectMapper.readTree, as an application would)
 *   join    stream(input).join(table(input + "-customers"), pair).to(output)
 *   sjoin   stream(input).join(stream(input + "-payments"), pair,
 *             JoinWindows.ofTimeDifferenceAndGrace(window, grace)).to(output)
 *   fk      table(input).join(table(input + "-customers"),
 *             v -> v's "customer", pair).toStream().to(output)
 *           (the foreign-key join, KIP-213)
 *           pair: {"left":<order>,"right":<customer or payment>}, the two
 *           values' bytes copied in, as kstreams' `joiner: pair` writes it
 *
 * For rekey, join and sjoin the topology is built with
 * topology.optimization=all: the table reuses its source topic as its
 * changelog (as kstreams' tables do) and repartition topics are merged.
 *
 * Settings that matter for the comparison: processing.guarantee as given
 * (exactly_once_v2 or at_least_once), commit.interval.ms as given (100 in
 * the benchmark), one stream thread, default RocksDB stores and the default
 * record cache (-Dkstreams.bench.cache.bytes=N sets its size). Everything
 * else is Kafka Streams' default.
 *
 * usage: Peer count|window|rekey|join|sjoin|fk BOOTSTRAP APP_ID INPUT OUTPUT eos|alo STATE_DIR
 *             COMMIT_MS [WINDOW_MS GRACE_MS] [NAME=VALUE...]
 *   (sjoin: the join window each way; NAME=VALUE: more Kafka Streams or
 *   client settings, e.g. num.standby.replicas=1, group.instance.id=a,
 *   session.timeout.ms=6000, as bench/failover.sh passes them)
 * Prints one "restored store S partition P: N records replayed; since the
 * first restore began: X s" line per restored partition (a StateRestoreListener) and
 * "state RUNNING" when the instance runs, each after the time (UTC, ms) it
 * was printed. Stops on SIGTERM.
 */
public final class Peer {
    private static final byte[] LEFT = "{\"left\":".getBytes(java.nio.charset.StandardCharsets.UTF_8);
    private static final byte[] RIGHT = ",\"right\":".getBytes(java.nio.charset.StandardCharsets.UTF_8);

    /** the value's "customer" member as text (null when absent: the record is dropped) */
    private static String customer(ObjectMapper json, byte[] v) {
        try {
            com.fasterxml.jackson.databind.JsonNode c = json.readTree(v).get("customer");
            return c == null || c.isNull() ? null : c.asText();
        } catch (java.io.IOException e) {
            return null;
        }
    }

    /** {"left":L,"right":R} */
    private static byte[] pair(byte[] l, byte[] r) {
        byte[] o = new byte[LEFT.length + l.length + RIGHT.length + r.length + 1];
        int n = 0;
        System.arraycopy(LEFT, 0, o, n, LEFT.length);
        n += LEFT.length;
        System.arraycopy(l, 0, o, n, l.length);
        n += l.length;
        System.arraycopy(RIGHT, 0, o, n, RIGHT.length);
        n += RIGHT.length;
        System.arraycopy(r, 0, o, n, r.length);
        n += r.length;
        o[n] = '}';
        return o;
    }

    /** the line after the current time, as kstreams' log lines: 2026-12-04T13:50:49.302Z ... */
    private static void say(String line) {
        System.out.println(java.time.Instant.now().truncatedTo(java.time.temporal.ChronoUnit.MILLIS)
                           + " " + line);
    }

    public static void main(String[] argv) throws Exception {
        /* NAME=VALUE arguments are settings; the rest are positional */
        java.util.List<String> pos = new java.util.ArrayList<>();
        Properties extra = new Properties();
        for (String a : argv) {
            int eq = a.indexOf('=');
            if (eq > 0)
                extra.put(a.substring(0, eq), a.substring(eq + 1));
            else
                pos.add(a);
        }
        String[] args = pos.toArray(new String[0]);
        if (args.length < 8) {
            System.err.println("usage: Peer count|window|rekey|join|sjoin|fk BOOTSTRAP APP_ID INPUT OUTPUT eos|alo "
                               + "STATE_DIR COMMIT_MS [WINDOW_MS GRACE_MS] [NAME=VALUE...]");
            System.exit(64);
        }
        String mode = args[0];
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, args[2]);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[1]);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG,
              args[5].equals("eos") ? StreamsConfig.EXACTLY_ONCE_V2 : StreamsConfig.AT_LEAST_ONCE);
        p.put(StreamsConfig.STATE_DIR_CONFIG, args[6]);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, Integer.parseInt(args[7]));
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.ByteArraySerde.class);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        /* the same producer batching the kstreams engine uses (linger 5 ms) */
        p.put(StreamsConfig.producerPrefix(ProducerConfig.LINGER_MS_CONFIG), 5);
        /* -Dkstreams.bench.cache.bytes=N: the record cache's size (bench/run.sh
         * passes BENCH_CACHE_BYTES so both systems run with the same) */
        String cache = System.getProperty("kstreams.bench.cache.bytes");
        if (cache != null)
            p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, Long.parseLong(cache));
        p.putAll(extra);

        StreamsBuilder b = new StreamsBuilder();
        /* fk reads the input as a table, the other modes as a stream */
        KStream<String, byte[]> in = mode.equals("fk") ? null
            : b.stream(args[3], Consumed.with(Serdes.String(), Serdes.ByteArray()));
        if (mode.equals("count")) {
            in.groupByKey().count().toStream()
              .to(args[4], Produced.with(Serdes.String(), Serdes.Long()));
        } else if (mode.equals("window")) {
            long size = args.length > 8 ? Long.parseLong(args[8]) : 60000;
            long grace = args.length > 9 ? Long.parseLong(args[9]) : 0;
            in.groupByKey()
              .windowedBy(TimeWindows.ofSizeAndGrace(Duration.ofMillis(size), Duration.ofMillis(grace)))
              .count().toStream()
              .map((wk, n) -> KeyValue.pair(wk.key() + "@" + wk.window().start(), n))
              .to(args[4], Produced.with(Serdes.String(), Serdes.Long()));
        } else if (mode.equals("rekey")) {
            ObjectMapper json = new ObjectMapper();
            in.groupBy((k, v) -> customer(json, v),
                       Grouped.with("rekey", Serdes.String(), Serdes.ByteArray()))
              .count().toStream()
              .to(args[4], Produced.with(Serdes.String(), Serdes.Long()));
        } else if (mode.equals("join")) {
            KTable<String, byte[]> customers =
                b.table(args[3] + "-customers", Consumed.with(Serdes.String(), Serdes.ByteArray()));
            in.join(customers, Peer::pair)
              .to(args[4], Produced.with(Serdes.String(), Serdes.ByteArray()));
        } else if (mode.equals("sjoin")) {
            long window = args.length > 8 ? Long.parseLong(args[8]) : 300000;
            long grace = args.length > 9 ? Long.parseLong(args[9]) : 60000;
            KStream<String, byte[]> payments =
                b.stream(args[3] + "-payments", Consumed.with(Serdes.String(), Serdes.ByteArray()));
            in.join(payments, Peer::pair,
                    JoinWindows.ofTimeDifferenceAndGrace(Duration.ofMillis(window),
                                                         Duration.ofMillis(grace)),
                    StreamJoined.with(Serdes.String(), Serdes.ByteArray(), Serdes.ByteArray()))
              .to(args[4], Produced.with(Serdes.String(), Serdes.ByteArray()));
        } else if (mode.equals("fk")) {
            ObjectMapper json = new ObjectMapper();
            KTable<String, byte[]> orders =
                b.table(args[3], Consumed.with(Serdes.String(), Serdes.ByteArray()));
            KTable<String, byte[]> customers =
                b.table(args[3] + "-customers", Consumed.with(Serdes.String(), Serdes.ByteArray()));
            orders.join(customers, v -> customer(json, v), Peer::pair).toStream()
                  .to(args[4], Produced.with(Serdes.String(), Serdes.ByteArray()));
        } else {
            System.err.println("unknown mode " + mode);
            System.exit(64);
        }

        if (!mode.equals("count") && !mode.equals("window"))
            p.put(StreamsConfig.TOPOLOGY_OPTIMIZATION_CONFIG, StreamsConfig.OPTIMIZE);
        KafkaStreams ks = new KafkaStreams(b.build(p), p);
        ks.setGlobalStateRestoreListener(new StateRestoreListener() {
            /* partitions restore interleaved: time from the first start */
            private long started = -1;
            @Override
            public synchronized void onRestoreStart(TopicPartition tp, String store, long start,
                                                    long end) {
                if (started < 0)
                    started = System.nanoTime();
            }
            @Override
            public void onBatchRestored(TopicPartition tp, String store, long end, long n) {
            }
            @Override
            public synchronized void onRestoreEnd(TopicPartition tp, String store, long n) {
                double s = (System.nanoTime() - started) / 1e9;
                say(String.format("restored store %s partition %d: %d records replayed; since the first restore began: %.3f s",
                                  store, tp.partition(), n, s));
            }
        });
        CountDownLatch done = new CountDownLatch(1);
        ks.setStateListener((now, before) -> {
            say("state " + now);
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING)
                done.countDown();
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            ks.close(Duration.ofSeconds(30));
            done.countDown();
        }));
        ks.start();
        done.await();
        if (ks.state() == KafkaStreams.State.ERROR)
            System.exit(1);
    }
}
