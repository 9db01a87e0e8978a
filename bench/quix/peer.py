#!/usr/bin/env python3
"""bench/quix/peer.py - the Quix Streams peer of bench/run.sh.

    peer.py count|window BOOTSTRAP APP_ID INPUT OUTPUT eos|alo STATE_DIR COMMIT_MS
            [WINDOW_MS GRACE_MS]

The same work as kstreams' count node and bench/kstreams-java's Peer:
  count   a count per key of the input (key: string, value: bytes, not
          read); every update goes to OUTPUT as key -> 8-byte big-endian
          count (kstreams' int64, Java's LongSerializer)
  window  a count per key and tumbling window of WINDOW_MS with GRACE_MS
          of grace (Quix: tumbling_window(...).count()
          .current(closing_strategy="partition"): the window's count after
          every input record, windows closed by the partition's stream
          time); OUTPUT key
          "<key>@<window start ms>" (as the Java peer writes it), value the
          8-byte big-endian count

Settings that matter for the comparison: processing_guarantee
"exactly-once" or "at-least-once", commit_interval COMMIT_MS, the input
read from the earliest offset, the producer's linger.ms 5 (as kstreams and
the Java peer), RocksDB state with changelog topics (Quix's default).
Everything else is Quix Streams' default. One process, one thread (Quix
has no stream threads). SIGTERM stops it (Quix handles the signal).
"""
import struct
import sys

from quixstreams import Application
from quixstreams.models.serializers import Serializer


class Int64BE(Serializer):
    """A count (or {"n": count}) as 8 bytes, big-endian, signed."""

    def __call__(self, value, ctx):
        if isinstance(value, dict):
            value = value["n"]
        return struct.pack(">q", value)


def count(value, key, timestamp, headers, state):
    n = state.get("n", 0) + 1
    state.set("n", n)
    return n


def main(argv):
    if len(argv) < 9 or argv[1] not in ("count", "window") or argv[6] not in ("eos", "alo"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 64
    mode, bootstrap, app_id, inp, out, g, state_dir = argv[1:8]
    commit_ms = int(argv[8])
    size_ms = int(argv[9]) if len(argv) > 9 else 60000
    grace_ms = int(argv[10]) if len(argv) > 10 else 0

    app = Application(
        broker_address=bootstrap,
        consumer_group=app_id,
        auto_offset_reset="earliest",
        processing_guarantee="exactly-once" if g == "eos" else "at-least-once",
        commit_interval=commit_ms / 1000.0,
        state_dir=state_dir,
        producer_extra_config={"linger.ms": 5},
        loglevel="INFO",
    )
    src = app.topic(inp, key_deserializer="str", value_deserializer="bytes")
    dst = app.topic(out, key_serializer="str", value_serializer=Int64BE())
    sdf = app.dataframe(src)
    if mode == "count":
        sdf = sdf.apply(count, stateful=True, metadata=True)
        sdf.to_topic(dst)
    else:
        # "partition": stream time per partition, as Kafka Streams and
        # kstreams keep it (Quix's default, "key", keeps one per key)
        window = sdf.tumbling_window(duration_ms=size_ms, grace_ms=grace_ms).count()
        sdf = window.current(closing_strategy="partition")
        sdf = sdf.apply(lambda v, key, ts, headers: {"k": f"{key}@{v['start']}", "n": v["value"]},
                        metadata=True)
        sdf.to_topic(dst, key=lambda v: v["k"])
    app.run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
