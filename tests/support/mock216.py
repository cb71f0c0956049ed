#!/usr/bin/env python3
"""librdkafka 2.16's mock cluster as a child process the tests drive.

The mock cluster is librdkafka's own in-process Kafka cluster; the one here
is the librdkafka bundled in the PyPI wheel confluent-kafka==2.16.1 (its
shared library exports every rd_kafka_mock_* function), reached through
ctypes. The rdkafka dev-dependency brings an older librdkafka (2.12), whose
mock serves ConsumerGroupHeartbeat differently.

    mock216.py [--brokers N]

Prints `bootstrap HOST:PORT,...` (broker ids 1..N in order) on stdout,
then reads one command a line on stdin and answers each with one line,
`ok [VALUE]` or `error MESSAGE`:

    topic NAME PARTITIONS              create a topic (replication 1)
    leader TOPIC PARTITION BROKER      move a partition's leader (-1: none)
    coordinator GROUP BROKER           place a group's coordinator
    down BROKER / up BROKER            a broker's sockets closed / open again
    rtt BROKER MILLIS                  delay a broker's answers
    apiversion KEY MIN MAX             the versions advertised for an API
    errors KEY CODE [CODE...]          answer the next requests of an API
                                       (any broker) with these error codes
    consumer_timing HEARTBEAT_MS SESSION_MS
                                       KIP-848 groups' heartbeat interval and
                                       session timeout
    requests                           `ok BROKER:KEY:MICROS ...`: every request
                                       since the start or the last `clear`
    clear                              forget the requests seen so far
    quit                               destroy the cluster and exit

The cluster answers every request from its own threads; this process only
waits on stdin. It exits at `quit` or when stdin closes (the test process
ended), so no cluster outlives its test.
"""

import argparse
import ctypes
import glob
import importlib.util
import os
import sys


def find_library():
    """The librdkafka shared library of the installed confluent-kafka."""
    explicit = os.environ.get("LAZYKAFKA_LIBRDKAFKA")
    if explicit:
        return explicit
    spec = importlib.util.find_spec("confluent_kafka")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("mock216.py: confluent-kafka is not installed in this Python")
    package = list(spec.submodule_search_locations)[0]
    # auditwheel puts the bundled libraries beside the package.
    candidates = sorted(
        glob.glob(os.path.join(os.path.dirname(package), "confluent_kafka.libs", "librdkafka*.so*"))
    )
    if not candidates:
        sys.exit(f"mock216.py: no librdkafka*.so* in {package}/../confluent_kafka.libs")
    return candidates[0]


def load(path):
    lib = ctypes.CDLL(path)
    p, i32, i16, c = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int16, ctypes.c_char_p
    sigs = {
        "rd_kafka_version_str": ([], c),
        "rd_kafka_conf_new": ([], p),
        "rd_kafka_conf_set": ([p, c, c, c, ctypes.c_size_t], ctypes.c_int),
        "rd_kafka_new": ([ctypes.c_int, p, c, ctypes.c_size_t], p),
        "rd_kafka_destroy": ([p], None),
        "rd_kafka_mock_cluster_new": ([p, ctypes.c_int], p),
        "rd_kafka_mock_cluster_destroy": ([p], None),
        "rd_kafka_mock_cluster_bootstraps": ([p], c),
        "rd_kafka_mock_group_initial_rebalance_delay_ms": ([p, i32], None),
        "rd_kafka_mock_topic_create": ([p, c, ctypes.c_int, ctypes.c_int], ctypes.c_int),
        "rd_kafka_mock_partition_set_leader": ([p, c, i32, i32], ctypes.c_int),
        "rd_kafka_mock_topic_set_error": ([p, c, ctypes.c_int], None),
        "rd_kafka_mock_coordinator_set": ([p, c, c, i32], ctypes.c_int),
        "rd_kafka_mock_broker_set_down": ([p, i32], ctypes.c_int),
        "rd_kafka_mock_broker_set_up": ([p, i32], ctypes.c_int),
        "rd_kafka_mock_broker_set_rtt": ([p, i32, ctypes.c_int], ctypes.c_int),
        "rd_kafka_mock_set_apiversion": ([p, i16, i16, i16], ctypes.c_int),
        "rd_kafka_mock_push_request_errors_array": (
            [p, i16, ctypes.c_size_t, ctypes.POINTER(ctypes.c_int)],
            None,
        ),
        "rd_kafka_mock_set_group_consumer_heartbeat_interval_ms": ([p, ctypes.c_int], None),
        "rd_kafka_mock_set_group_consumer_session_timeout_ms": ([p, ctypes.c_int], None),
        "rd_kafka_mock_start_request_tracking": ([p], None),
        "rd_kafka_mock_get_requests": ([p, ctypes.POINTER(ctypes.c_size_t)], ctypes.POINTER(p)),
        "rd_kafka_mock_request_id": ([p], i32),
        "rd_kafka_mock_request_api_key": ([p], i16),
        "rd_kafka_mock_request_timestamp": ([p], ctypes.c_int64),
        "rd_kafka_mock_request_destroy_array": ([ctypes.POINTER(p), ctypes.c_size_t], None),
        "rd_kafka_mock_clear_requests": ([p], None),
        "rd_kafka_err2str": ([ctypes.c_int], c),
    }
    for name, (args, res) in sigs.items():
        f = getattr(lib, name)
        f.argtypes = args
        f.restype = res
    return lib


class Cluster:
    def __init__(self, lib, brokers):
        self.lib = lib
        conf = lib.rd_kafka_conf_new()
        errstr = ctypes.create_string_buffer(512)
        # Warnings and errors only: not the notice that this handle has no
        # bootstrap servers.
        if lib.rd_kafka_conf_set(conf, b"log_level", b"4", errstr, len(errstr)) != 0:
            sys.exit(f"mock216.py: log_level: {errstr.value.decode()}")
        # A producer handle with no bootstrap servers connects nowhere; it
        # only hosts the mock cluster.
        self.rk = lib.rd_kafka_new(0, conf, errstr, len(errstr))
        if not self.rk:
            sys.exit(f"mock216.py: rd_kafka_new: {errstr.value.decode()}")
        self.mc = lib.rd_kafka_mock_cluster_new(self.rk, brokers)
        if not self.mc:
            sys.exit("mock216.py: rd_kafka_mock_cluster_new failed")
        # The first join of a classic group otherwise waits ~3 s.
        lib.rd_kafka_mock_group_initial_rebalance_delay_ms(self.mc, 0)
        lib.rd_kafka_mock_start_request_tracking(self.mc)

    def bootstraps(self):
        return self.lib.rd_kafka_mock_cluster_bootstraps(self.mc).decode()

    def check(self, err):
        if err:
            raise RuntimeError(self.lib.rd_kafka_err2str(err).decode())

    def run(self, words):
        lib, mc = self.lib, self.mc
        cmd, args = words[0], words[1:]
        if cmd == "topic":
            name, partitions = args
            self.check(lib.rd_kafka_mock_topic_create(mc, name.encode(), int(partitions), 1))
        elif cmd == "leader":
            topic, partition, broker = args
            self.check(
                lib.rd_kafka_mock_partition_set_leader(
                    mc, topic.encode(), int(partition), int(broker)
                )
            )
        elif cmd == "topic_error":
            topic, code = args
            lib.rd_kafka_mock_topic_set_error(mc, topic.encode(), int(code))
        elif cmd == "coordinator":
            group, broker = args
            self.check(lib.rd_kafka_mock_coordinator_set(mc, b"group", group.encode(), int(broker)))
        elif cmd == "down":
            self.check(lib.rd_kafka_mock_broker_set_down(mc, int(args[0])))
        elif cmd == "up":
            self.check(lib.rd_kafka_mock_broker_set_up(mc, int(args[0])))
        elif cmd == "rtt":
            broker, millis = args
            self.check(lib.rd_kafka_mock_broker_set_rtt(mc, int(broker), int(millis)))
        elif cmd == "apiversion":
            key, lo, hi = (int(a) for a in args)
            self.check(lib.rd_kafka_mock_set_apiversion(mc, key, lo, hi))
        elif cmd == "errors":
            key, codes = int(args[0]), [int(a) for a in args[1:]]
            if not codes:
                raise ValueError("errors: no error code")
            array = (ctypes.c_int * len(codes))(*codes)
            lib.rd_kafka_mock_push_request_errors_array(mc, key, len(codes), array)
        elif cmd == "consumer_timing":
            heartbeat, session = (int(a) for a in args)
            lib.rd_kafka_mock_set_group_consumer_heartbeat_interval_ms(mc, heartbeat)
            lib.rd_kafka_mock_set_group_consumer_session_timeout_ms(mc, session)
        elif cmd == "requests":
            n = ctypes.c_size_t(0)
            reqs = lib.rd_kafka_mock_get_requests(mc, ctypes.byref(n))
            out = [
                f"{lib.rd_kafka_mock_request_id(reqs[i])}:{lib.rd_kafka_mock_request_api_key(reqs[i])}"
                f":{lib.rd_kafka_mock_request_timestamp(reqs[i])}"
                for i in range(n.value)
            ]
            if reqs:
                lib.rd_kafka_mock_request_destroy_array(reqs, n.value)
            return " ".join(out)
        elif cmd == "clear":
            lib.rd_kafka_mock_clear_requests(mc)
        else:
            raise ValueError(f"unknown command {cmd!r}")
        return ""

    def destroy(self):
        self.lib.rd_kafka_mock_cluster_destroy(self.mc)
        self.lib.rd_kafka_destroy(self.rk)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brokers", type=int, default=3)
    options = parser.parse_args()
    lib = load(find_library())
    version = lib.rd_kafka_version_str().decode()
    print(f"mock216.py: librdkafka {version}", file=sys.stderr, flush=True)
    cluster = Cluster(lib, options.brokers)
    print(f"bootstrap {cluster.bootstraps()}", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "quit":
            break
        try:
            value = cluster.run(words)
            print(f"ok {value}".rstrip(), flush=True)
        except (RuntimeError, ValueError, TypeError) as e:
            print(f"error {e}", flush=True)
    cluster.destroy()
    print("ok", flush=True)


if __name__ == "__main__":
    main()
