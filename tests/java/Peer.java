// Peer: a small command-line test peer built on Apache Kafka's own Java client
// (org.apache.kafka:kafka-clients, nothing else but the JDK).
//
// The Rust integration tests under tests/ run it as a child process so that
// lazykafka can be checked against the reference client on a real cluster:
// Java produces what Rust consumes and consumes what Rust produced, Java and
// Rust consumers share a group, and Java does the admin chores a test needs
// (topics, reassignments, leader elections, configs, quotas, ACLs, offsets).
//
// Output is JSON lines on stdout: one object per line, flushed after each
// line. Diagnostics go to stderr. The exit status is 0 on success and 1 on any
// failure, after printing {"event":"error","message":"..."}.
//
// Build and run:
//   javac -d CLASSES -cp 'LIBS/*' tests/java/Peer.java
//   java -cp 'CLASSES:LIBS/*' Peer MODE ... --bootstrap HOST:PORT[,...]
// See USAGE below for the modes and their options.

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.CreateTopicsResult;
import org.apache.kafka.clients.admin.DescribeClusterOptions;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.ElectionNotNeededException;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class Peer {
    static final String USAGE = String.join("\n",
        "usage: Peer MODE [ACTION] --bootstrap HOST:PORT[,...] [--property key=value]... [options]",
        "  wait-cluster --brokers N [--timeout-ms T]",
        "  create-topic --topic T [--partitions P] [--replication R] [--config k=v]... [--if-not-exists]",
        "  produce --topic T --count N [--start I] [--partition P] [--key-prefix K] [--value-prefix V]",
        "          [--acks all|1|0] [--idempotent true|false]",
        "          [--transactional-id ID [--transactions commit:N,abort:N,...]]",
        "  partitions --topic T --keys N [--key-prefix K]",
        "  consume --topic T[,T2...] [--group G] [--count N] [--timeout-ms T] [--idle-ms I]",
        "          [--from-beginning] [--commit auto|sync|none] [--isolation read_committed|read_uncommitted]",
        "  admin elect-leaders --type preferred|unclean --topic T --partition P",
        "  admin reassign --topic T --partition P --replicas 2,3,1",
        "  admin describe-topic --topic T",
        "  admin delete-topic --topic T [--if-exists]",
        "  admin set-quota (--user U | --client-id C)... [--producer-byte-rate X] [--consumer-byte-rate Y]",
        "          [--request-percentage Z] [--remove]",
        "  admin alter-config (--topic T | --broker ID) [--set k=v]... [--delete k]...",
        "  admin acl (--add | --remove) --principal User:X --operation OP",
        "          (--topic T | --group G | --transactional-id ID | --cluster)",
        "          [--pattern literal|prefixed] [--permission allow|deny] [--host H]",
        "  admin list-offsets --topic T [--isolation read_committed|read_uncommitted]",
        "  admin describe-group --group G",
        "  serve   (admin steps and create-topic from stdin, one per line, arguments tab-separated)",
        "  census-consumer --topic T --count N [--group G] [--timeout-ms T]   (pauses: see censusConsumer)",
        "  census-producer --topic T --count N [--partitions P] [--value-bytes B]   (pauses: see censusProducer)");

    /** The real stdout; System.out is pointed at stderr so only JSON lines reach stdout. */
    static final PrintStream OUT =
        new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);

    public static void main(String[] argv) {
        System.setOut(System.err);
        int code = 0;
        try {
            run(argv);
        } catch (Throwable t) {
            reportFailure(t);
            code = 1;
        }
        OUT.flush();
        System.err.flush();
        System.exit(code);
    }

    /** An error event for a failure (and its stack trace on stderr, unless it is a Failure). */
    static void reportFailure(Throwable t) {
        Throwable cause = unwrap(t);
        if (!(cause instanceof Failure)) {
            cause.printStackTrace(System.err);
        }
        emit("event", "error", "message", describe(cause));
    }

    static void run(String[] argv) throws Exception {
        if (argv.length == 0 || argv[0].equals("--help")) {
            throw new Failure(USAGE);
        }
        String mode = argv[0];
        switch (mode) {
            case "wait-cluster":
                waitCluster(parse(argv, 1, mode, "brokers timeout-ms", ""));
                break;
            case "create-topic":
                createTopic(parse(argv, 1, mode, "topic partitions replication config", "if-not-exists"));
                break;
            case "produce":
                produce(parse(argv, 1, mode, "topic count start partition key-prefix value-prefix acks"
                    + " idempotent transactional-id transactions", ""));
                break;
            case "partitions":
                partitions(parse(argv, 1, mode, "topic keys key-prefix", ""));
                break;
            case "consume":
                consume(parse(argv, 1, mode, "topic group count timeout-ms idle-ms commit isolation",
                    "from-beginning"));
                break;
            case "admin":
                admin(argv);
                break;
            case "serve":
                serve();
                break;
            case "census-consumer":
                censusConsumer(parse(argv, 1, mode, "topic group count timeout-ms", ""));
                break;
            case "census-producer":
                censusProducer(parse(argv, 1, mode, "topic count partitions value-bytes", ""));
                break;
            default:
                throw new Failure("unknown mode '" + mode + "'\n" + USAGE);
        }
    }

    // ---------------------------------------------------------------- modes

    /**
     * serve: the admin steps and create-topic, one per line of stdin (the arguments of the one-shot
     * command, separated by tabs), each answered by its events and then {"event":"served","ok":...};
     * ends at the end of stdin. One JVM for all of a test process's admin steps: a JVM's start costs
     * more CPU than most steps.
     */
    static final String SERVED_MARK = "-- served --";

    static void serve() throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String[] args = line.split("\t", -1);
            boolean ok = true;
            try {
                if (!args[0].equals("admin") && !args[0].equals("create-topic")) {
                    throw new Failure("serve runs admin steps and create-topic only, not " + args[0]);
                }
                run(args);
            } catch (Throwable t) {
                reportFailure(t);
                ok = false;
            }
            // The step's end on stderr too, so that its reader knows it has
            // the step's stack trace, if any.
            System.err.println(SERVED_MARK);
            System.err.flush();
            emit("event", "served", "ok", ok);
        }
    }

    static void waitCluster(Opts o) throws Exception {
        int want = o.intOf("brokers", null);
        long timeoutMs = o.longOf("timeout-ms", 60000L);
        long deadline = System.currentTimeMillis() + timeoutMs;
        String last = "no answer";
        Admin admin = null;
        try {
            while (true) {
                long left = deadline - System.currentTimeMillis();
                if (left <= 0) {
                    throw new Failure("cluster did not report " + want + " brokers within "
                        + timeoutMs + " ms (last: " + last + ")");
                }
                try {
                    if (admin == null) {
                        admin = newAdmin(o);
                    }
                    int callMs = (int) Math.max(1, Math.min(left, 5000));
                    DescribeClusterResult r = admin.describeCluster(new DescribeClusterOptions().timeoutMs(callMs));
                    Collection<Node> nodes = r.nodes().get();
                    if (nodes.size() >= want) {
                        Node controller = r.controller().get();
                        emit("event", "cluster", "brokers", nodes.size(),
                            "controller", controller == null ? null : controller.id(),
                            "cluster_id", r.clusterId().get());
                        return;
                    }
                    last = "saw " + nodes.size() + " brokers";
                } catch (Exception e) {
                    Throwable cause = unwrap(e);
                    if (cause instanceof ConfigException) {
                        throw e;
                    }
                    last = describe(cause);
                }
                Thread.sleep(Math.max(0, Math.min(500, deadline - System.currentTimeMillis())));
            }
        } finally {
            if (admin != null) {
                admin.close(Duration.ofSeconds(5));
            }
        }
    }

    static void createTopic(Opts o) throws Exception {
        String topic = o.need("topic");
        Optional<Integer> partitions = Optional.ofNullable(o.intOrNull("partitions"));
        Optional<Short> replication = Optional.ofNullable(o.intOrNull("replication")).map(Integer::shortValue);
        NewTopic newTopic = new NewTopic(topic, partitions, replication).configs(keyValues(o.all("config"), "--config"));
        try (Admin admin = newAdmin(o)) {
            CreateTopicsResult r = admin.createTopics(List.of(newTopic));
            try {
                r.all().get();
                emit("event", "created", "topic", topic, "topic_id", r.topicId(topic).get().toString());
            } catch (ExecutionException e) {
                if (e.getCause() instanceof TopicExistsException && o.has("if-not-exists")) {
                    emit("event", "created", "topic", topic, "existed", true);
                } else {
                    throw e;
                }
            }
        }
    }

    static void produce(Opts o) throws Exception {
        String topic = o.need("topic");
        Integer partition = o.intOrNull("partition");
        long start = o.longOf("start", 0L);
        String keyPrefix = o.get("key-prefix", "key-");
        String valuePrefix = o.get("value-prefix", "value-");
        String txId = o.get("transactional-id");

        // Transaction steps: [commit?, n] pairs; without --transactions one committed transaction.
        List<Object[]> steps = new ArrayList<>();
        long count;
        if (txId == null) {
            if (o.get("transactions") != null) {
                throw new Failure("--transactions needs --transactional-id");
            }
            count = o.longOf("count", null);
        } else if (o.get("transactions") == null) {
            count = o.longOf("count", null);
            steps.add(new Object[] {true, count});
        } else {
            count = 0;
            for (String step : o.need("transactions").split(",")) {
                String[] parts = step.trim().split(":");
                if (parts.length != 2 || !(parts[0].equals("commit") || parts[0].equals("abort"))) {
                    throw new Failure("bad --transactions step '" + step + "' (want commit:N or abort:N)");
                }
                long n = parseLong(parts[1], "--transactions");
                steps.add(new Object[] {parts[0].equals("commit"), n});
                count += n;
            }
            Long given = o.longOrNull("count");
            if (given != null && given != count) {
                throw new Failure("--count " + given + " does not match the " + count + " records of --transactions");
            }
        }

        Properties p = baseProperties(o);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        applyUserProperties(p, o);
        String acks = o.get("acks");
        if (acks != null) {
            oneOf(acks, "--acks", "all", "-1", "1", "0");
            p.put("acks", acks);
        }
        String idempotent = o.get("idempotent");
        if (idempotent != null) {
            oneOf(idempotent, "--idempotent", "true", "false");
            p.put("enable.idempotence", idempotent);
        }
        if (txId != null) {
            p.put("transactional.id", txId);
        }

        AtomicLong failed = new AtomicLong();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            long next = start;
            if (txId == null) {
                for (; next < start + count; next++) {
                    send(producer, topic, partition, keyPrefix + next, valuePrefix + next, failed);
                }
                producer.flush();
            } else {
                producer.initTransactions();
                for (Object[] step : steps) {
                    boolean commit = (Boolean) step[0];
                    long n = (Long) step[1];
                    producer.beginTransaction();
                    for (long end = next + n; next < end; next++) {
                        send(producer, topic, partition, keyPrefix + next, valuePrefix + next, failed);
                    }
                    producer.flush();
                    if (commit) {
                        producer.commitTransaction();
                        emit("event", "committed", "count", n);
                    } else {
                        producer.abortTransaction();
                        emit("event", "aborted", "count", n);
                    }
                }
            }
        }
        emit("event", "done", "count", count, "failed", failed.get());
        if (failed.get() > 0) {
            throw new Failure(failed.get() + " of " + count + " records failed");
        }
    }

    /** Sends one record; the callback prints "delivered" or "failed". */
    static void send(KafkaProducer<String, String> producer, String topic, Integer partition,
                     String key, String value, AtomicLong failed) {
        try {
            producer.send(new ProducerRecord<>(topic, partition, key, value), (md, err) -> {
                if (err == null) {
                    emit("event", "delivered", "topic", md.topic(), "partition", md.partition(),
                        "offset", md.offset(), "key", key, "value", value);
                } else {
                    failed.incrementAndGet();
                    emit("event", "failed", "key", key, "error", describe(err));
                }
            });
        } catch (RuntimeException e) {
            failed.incrementAndGet();
            emit("event", "failed", "key", key, "error", describe(unwrap(e)));
        }
    }

    static void partitions(Opts o) throws Exception {
        String topic = o.need("topic");
        int keys = o.intOf("keys", null);
        String keyPrefix = o.get("key-prefix", "key-");
        Properties p = baseProperties(o);
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        applyUserProperties(p, o);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (int i = 0; i < keys; i++) {
                futures.add(producer.send(new ProducerRecord<>(topic, keyPrefix + i, "")));
            }
            for (int i = 0; i < keys; i++) {
                emit("key", keyPrefix + i, "partition", futures.get(i).get().partition());
            }
        }
        emit("event", "done", "count", keys);
    }

    static void consume(Opts o) throws Exception {
        List<String> topics = List.of(o.need("topic").split(","));
        String group = o.get("group");
        Long count = o.longOrNull("count");
        long timeoutMs = o.longOf("timeout-ms", 60000L);
        Long idleMs = o.longOrNull("idle-ms");
        boolean fromBeginning = o.has("from-beginning");
        String commit = o.get("commit", group == null ? "none" : "auto");
        oneOf(commit, "--commit", "auto", "sync", "none");
        if (group == null && !commit.equals("none")) {
            throw new Failure("--commit " + commit + " needs --group");
        }
        String isolation = o.get("isolation");
        if (isolation != null) {
            oneOf(isolation, "--isolation", "read_committed", "read_uncommitted");
        }

        Properties p = baseProperties(o);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.put("auto.offset.reset", "earliest");
        applyUserProperties(p, o);
        if (group != null) {
            p.put("group.id", group);
            p.put("enable.auto.commit", String.valueOf(commit.equals("auto")));
        }
        if (isolation != null) {
            p.put("isolation.level", isolation);
        }

        AtomicBoolean stop = new AtomicBoolean();
        long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
        // When the idle clock started (nanoTime): at (each) assignment and at each record; 0 = not yet.
        long[] idleSince = {0};
        long seen = 0;
        boolean timedOut = false;
        // Processed, refused by a commit during a rebalance (--commit sync).
        Map<TopicPartition, OffsetAndMetadata> uncommitted = new HashMap<>();

        KafkaConsumer<String, String> consumer = new KafkaConsumer<>(p);
        try {
            if (group != null) {
                Set<TopicPartition> everAssigned = new HashSet<>();
                consumer.subscribe(topics, new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                        emit("event", "assigned", "partitions", partitionList(parts),
                            "assignment", partitionList(consumer.assignment()));
                        if (fromBeginning) {
                            List<TopicPartition> fresh = new ArrayList<>();
                            for (TopicPartition tp : parts) {
                                if (everAssigned.add(tp)) {
                                    fresh.add(tp);
                                }
                            }
                            consumer.seekToBeginning(fresh);
                        }
                        idleSince[0] = System.nanoTime();
                    }

                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                        emit("event", "revoked", "partitions", partitionList(parts));
                    }

                    @Override
                    public void onPartitionsLost(Collection<TopicPartition> parts) {
                        emit("event", "lost", "partitions", partitionList(parts));
                    }
                });
            } else {
                List<TopicPartition> all = new ArrayList<>();
                for (String topic : topics) {
                    List<PartitionInfo> infos = consumer.partitionsFor(topic);
                    if (infos == null || infos.isEmpty()) {
                        throw new Failure("topic " + topic + " not found");
                    }
                    for (PartitionInfo info : infos) {
                        all.add(new TopicPartition(info.topic(), info.partition()));
                    }
                }
                consumer.assign(all);
                if (fromBeginning) {
                    consumer.seekToBeginning(all);
                }
                emit("event", "assigned", "partitions", partitionList(all), "assignment", partitionList(all));
                idleSince[0] = System.nanoTime();
            }

            // "stop" on stdin, or stdin's end, stops the consumer cleanly.
            Thread stdinWatch = new Thread(() -> {
                try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
                        // keep reading
                    }
                } catch (IOException e) {
                    // treat like end of input
                }
                stop.set(true);
                consumer.wakeup();
            }, "peer-stdin");
            stdinWatch.setDaemon(true);
            stdinWatch.start();

            while (!stop.get()) {
                long now = System.nanoTime();
                if (now - deadline >= 0) {
                    timedOut = true;
                    break;
                }
                if (idleMs != null && idleSince[0] != 0 && now - idleSince[0] >= idleMs * 1_000_000L) {
                    break;
                }
                ConsumerRecords<String, String> records;
                try {
                    long waitMs = Math.max(0, Math.min(200, (deadline - now) / 1_000_000L));
                    records = consumer.poll(Duration.ofMillis(waitMs));
                } catch (WakeupException e) {
                    continue; // the loop condition sees stop
                }
                Map<TopicPartition, OffsetAndMetadata> processed = new HashMap<>();
                Map<TopicPartition, OffsetAndMetadata> unprocessed = new HashMap<>();
                for (ConsumerRecord<String, String> r : records) {
                    TopicPartition tp = new TopicPartition(r.topic(), r.partition());
                    if (count != null && seen >= count) {
                        unprocessed.putIfAbsent(tp, new OffsetAndMetadata(r.offset(), r.leaderEpoch(), ""));
                        continue;
                    }
                    emit("event", "record", "topic", r.topic(), "partition", r.partition(), "offset", r.offset(),
                        "key", r.key(), "value", r.value(), "leader_epoch", r.leaderEpoch());
                    seen++;
                    processed.put(tp, new OffsetAndMetadata(r.offset() + 1, r.leaderEpoch(), ""));
                }
                if (!records.isEmpty()) {
                    idleSince[0] = System.nanoTime();
                }
                // Records fetched past --count are not ours: rewind so that neither
                // auto commit (on close) nor anyone else counts them as consumed.
                for (Map.Entry<TopicPartition, OffsetAndMetadata> e : unprocessed.entrySet()) {
                    consumer.seek(e.getKey(), e.getValue());
                }
                if (commit.equals("sync")) {
                    // Java refuses a commit while a cooperative rebalance is under
                    // way (RebalanceInProgressException: poll, then commit again):
                    // what it refused is committed after the next poll, for the
                    // partitions still assigned then.
                    uncommitted.putAll(processed);
                    uncommitted.keySet().retainAll(consumer.assignment());
                    if (!uncommitted.isEmpty()) {
                        try {
                            try {
                                consumer.commitSync(uncommitted);
                            } catch (WakeupException e) {
                                consumer.commitSync(uncommitted); // the wakeup is spent; commit for real
                            }
                            uncommitted.clear();
                        } catch (RebalanceInProgressException e) {
                            emit("event", "commit-refused", "error", describe(e));
                        }
                    }
                }
                if (count != null && seen >= count) {
                    break;
                }
            }
            if (timedOut && count != null) {
                emit("event", "timeout", "seen", seen);
            }
            if (group != null) {
                // The group's own counters (JoinGroups, rebalances), for
                // `cargo bench --bench rebalance`.
                List<Object> counters = new ArrayList<>(List.of("event", "group-metrics"));
                for (var e : consumer.metrics().entrySet()) {
                    String name = e.getKey().name();
                    if (e.getKey().group().equals("consumer-coordinator-metrics")
                            && (name.equals("join-total") || name.equals("rebalance-total")
                                || name.equals("sync-total"))) {
                        counters.add(name);
                        counters.add(((Number) e.getValue().metricValue()).longValue());
                    }
                }
                emit(counters.toArray());
            }
        } finally {
            consumer.close();
        }
        emit("event", "closed", "seen", seen);
        if (timedOut && count != null) {
            throw new Failure("timed out after " + timeoutMs + " ms with " + seen + " of " + count + " records");
        }
    }

    // ---------------------------------------------------------------- census (benches/compare)
    //
    // census-consumer and census-producer: a client that pauses at named points, so that a parent
    // (`cargo bench --bench compare`) can count its sockets, threads and memory from outside at
    // each. A pause prints one event and waits for a line on stdin (its end counts as a line):
    //   consumer: "subscribed" (created and subscribed, or assigned without --group; not polled)
    //             | polls until --count records, "consumed" (with its timings) | polls on until a
    //             line | close(), "closed" | exits after a line.
    //   producer: "created" | sends --count records (record i to partition i % P with
    //             --partitions), flush(), "sent" | idles until a line | close(), "closed" | exits
    //             after a line.
    // Keys and values are bytes: only the values' lengths are looked at.

    static void censusConsumer(Opts o) throws Exception {
        List<String> topics = List.of(o.need("topic").split(","));
        String group = o.get("group");
        long count = o.longOf("count", null);
        long timeoutMs = o.longOf("timeout-ms", 180000L);
        Properties p = baseProperties(o);
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        if (group != null) {
            p.put("group.id", group);
        }
        applyUserProperties(p, o);
        Lines lines = new Lines();
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        try {
            if (group != null) {
                consumer.subscribe(topics);
            } else {
                // partitionsFor asks for metadata: without a group the pause comes after it.
                List<TopicPartition> all = new ArrayList<>();
                for (String topic : topics) {
                    for (PartitionInfo info : consumer.partitionsFor(topic)) {
                        all.add(new TopicPartition(info.topic(), info.partition()));
                    }
                }
                consumer.assign(all);
            }
            emit("event", "subscribed");
            lines.await();
            long start = System.nanoTime();
            long deadline = start + timeoutMs * 1_000_000L;
            long first = 0;
            long last = start;
            long seen = 0;
            long bytes = 0;
            while (seen < count && System.nanoTime() - deadline < 0) {
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(100));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    if (first == 0) {
                        first = System.nanoTime();
                    }
                    seen++;
                    bytes += r.value() == null ? 0 : r.value().length;
                }
                if (!records.isEmpty()) {
                    last = System.nanoTime();
                }
            }
            emit("event", "consumed", "records", seen, "bytes", bytes, "timed_out", seen < count,
                "first_record_ms", first == 0 ? null : (first - start) / 1e6,
                "elapsed_ms", (last - start) / 1e6);
            while (!lines.ready()) {
                consumer.poll(Duration.ofMillis(100));
            }
        } finally {
            consumer.close();
        }
        emit("event", "closed");
        lines.await();
    }

    static void censusProducer(Opts o) throws Exception {
        String topic = o.need("topic");
        long count = o.longOf("count", null);
        Integer partitions = o.intOrNull("partitions");
        int valueBytes = o.intOf("value-bytes", 100);
        Properties p = baseProperties(o);
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        applyUserProperties(p, o);
        byte[][] values = new byte[64][valueBytes];
        for (int v = 0; v < values.length; v++) {
            for (int i = 0; i < valueBytes; i++) {
                values[v][i] = (byte) ('a' + (v * 7 + i * i) % 26);
            }
        }
        Lines lines = new Lines();
        AtomicLong delivered = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        AtomicLong first = new AtomicLong();
        AtomicLong last = new AtomicLong();
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        try {
            emit("event", "created");
            lines.await();
            long start = System.nanoTime();
            for (long i = 0; i < count; i++) {
                Integer partition = partitions == null ? null : (int) (i % partitions);
                producer.send(new ProducerRecord<>(topic, partition, null, values[(int) (i % values.length)]),
                    (md, err) -> {
                        long now = System.nanoTime();
                        if (err != null) {
                            failed.incrementAndGet();
                            return;
                        }
                        if (delivered.getAndIncrement() == 0) {
                            first.set(now);
                        }
                        last.set(now);
                    });
            }
            producer.flush();
            long n = delivered.get();
            emit("event", "sent", "records", n, "failed", failed.get(), "bytes", n * valueBytes,
                "first_delivery_ms", n == 0 ? null : (first.get() - start) / 1e6,
                "elapsed_ms", n == 0 ? null : (last.get() - start) / 1e6);
            lines.await();
        } finally {
            producer.close();
        }
        emit("event", "closed");
        lines.await();
    }

    /** The lines of stdin, read by a thread of their own; its end counts as a line, again and again. */
    static final class Lines {
        private static final String END = new String("end of input");
        private final LinkedBlockingQueue<String> queue = new LinkedBlockingQueue<>();

        Lines() {
            Thread reader = new Thread(() -> {
                try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = in.readLine()) != null) {
                        queue.add(line);
                    }
                } catch (IOException e) {
                    // treat like end of input
                }
                queue.add(END);
            }, "peer-stdin");
            reader.setDaemon(true);
            reader.start();
        }

        /** Waits for the next line. */
        void await() throws InterruptedException {
            String line = queue.take();
            if (line == END) {
                queue.add(END);
            }
        }

        /** Whether a line came (taking it), without waiting. */
        boolean ready() {
            String line = queue.poll();
            if (line == END) {
                queue.add(END);
            }
            return line != null;
        }
    }

    // ---------------------------------------------------------------- admin

    static void admin(String[] argv) throws Exception {
        if (argv.length < 2 || argv[1].startsWith("--")) {
            throw new Failure("admin needs an action\n" + USAGE);
        }
        String action = argv[1];
        String what = "admin " + action;
        switch (action) {
            case "elect-leaders":
                electLeaders(parse(argv, 2, what, "type topic partition", ""));
                break;
            case "reassign":
                reassign(parse(argv, 2, what, "topic partition replicas", ""));
                break;
            case "describe-topic":
                describeTopic(parse(argv, 2, what, "topic", ""));
                break;
            case "delete-topic":
                deleteTopic(parse(argv, 2, what, "topic", "if-exists"));
                break;
            case "set-quota":
                setQuota(parse(argv, 2, what,
                    "user client-id producer-byte-rate? consumer-byte-rate? request-percentage?", "remove"));
                break;
            case "alter-config":
                alterConfig(parse(argv, 2, what, "topic broker set delete", ""));
                break;
            case "acl":
                acl(parse(argv, 2, what, "principal operation topic group transactional-id pattern permission host",
                    "add remove cluster"));
                break;
            case "list-offsets":
                listOffsets(parse(argv, 2, what, "topic isolation", ""));
                break;
            case "describe-group":
                describeGroup(parse(argv, 2, what, "group", ""));
                break;
            default:
                throw new Failure("unknown admin action '" + action + "'\n" + USAGE);
        }
    }

    static void electLeaders(Opts o) throws Exception {
        String type = o.get("type", "preferred");
        oneOf(type, "--type", "preferred", "unclean");
        ElectionType electionType = type.equals("preferred") ? ElectionType.PREFERRED : ElectionType.UNCLEAN;
        TopicPartition tp = new TopicPartition(o.need("topic"), o.intOf("partition", null));
        try (Admin admin = newAdmin(o)) {
            Map<TopicPartition, Optional<Throwable>> result =
                admin.electLeaders(electionType, Set.of(tp)).partitions().get();
            Optional<Throwable> err = result.getOrDefault(tp, Optional.empty());
            emit("event", "elected", "topic", tp.topic(), "partition", tp.partition(),
                "error", err.map(Peer::describe).orElse(null));
            if (err.isPresent() && !(err.get() instanceof ElectionNotNeededException)) {
                throw new Failure("election for " + tp + " failed: " + describe(err.get()));
            }
        }
    }

    static void reassign(Opts o) throws Exception {
        TopicPartition tp = new TopicPartition(o.need("topic"), o.intOf("partition", null));
        List<Integer> replicas = new ArrayList<>();
        for (String id : o.need("replicas").split(",")) {
            replicas.add((int) parseLong(id.trim(), "--replicas"));
        }
        long deadline = System.currentTimeMillis() + 60000;
        try (Admin admin = newAdmin(o)) {
            admin.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(replicas))))
                .all().get();
            while (true) {
                Map<TopicPartition, PartitionReassignment> ongoing =
                    admin.listPartitionReassignments(Set.of(tp)).reassignments().get();
                if (!ongoing.containsKey(tp)) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new Failure("reassignment of " + tp + " still in progress after 60 s: " + ongoing.get(tp));
                }
                Thread.sleep(250);
            }
            // Wait until the metadata we can see shows the new replica list too.
            while (true) {
                TopicPartitionInfo info = describePartitions(admin, tp.topic()).get(tp.partition());
                if (info != null && nodeIds(info.replicas()).equals(replicas)) {
                    emit("event", "reassigned", "topic", tp.topic(), "partition", tp.partition(),
                        "replicas", nodeIds(info.replicas()), "isr", nodeIds(info.isr()),
                        "leader", info.leader() == null ? null : info.leader().id());
                    return;
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new Failure("reassignment of " + tp + " done but metadata shows " + info);
                }
                Thread.sleep(250);
            }
        }
    }

    static void describeTopic(Opts o) throws Exception {
        String topic = o.need("topic");
        try (Admin admin = newAdmin(o)) {
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            for (TopicPartitionInfo info : d.partitions()) {
                emit("event", "partition", "topic", topic, "partition", info.partition(),
                    "leader", info.leader() == null ? null : info.leader().id(),
                    "replicas", nodeIds(info.replicas()), "isr", nodeIds(info.isr()),
                    "elr", nodeIds(info.elr()));
            }
            emit("event", "topic", "topic", topic, "topic_id", d.topicId().toString(),
                "partitions", d.partitions().size(), "internal", d.isInternal());
        }
    }

    static void deleteTopic(Opts o) throws Exception {
        String topic = o.need("topic");
        try (Admin admin = newAdmin(o)) {
            try {
                admin.deleteTopics(List.of(topic)).all().get();
                emit("event", "deleted", "topic", topic);
            } catch (ExecutionException e) {
                if (e.getCause() instanceof UnknownTopicOrPartitionException && o.has("if-exists")) {
                    emit("event", "deleted", "topic", topic, "existed", false);
                } else {
                    throw e;
                }
            }
        }
    }

    static void setQuota(Opts o) throws Exception {
        Map<String, String> entity = new LinkedHashMap<>();
        if (o.get("user") != null) {
            entity.put(ClientQuotaEntity.USER, defaultEntity(o.get("user")));
        }
        if (o.get("client-id") != null) {
            entity.put(ClientQuotaEntity.CLIENT_ID, defaultEntity(o.get("client-id")));
        }
        if (entity.isEmpty()) {
            throw new Failure("set-quota needs --user and/or --client-id");
        }
        boolean remove = o.has("remove");
        List<ClientQuotaAlteration.Op> ops = new ArrayList<>();
        Map<String, Object> shown = new LinkedHashMap<>();
        for (String name : List.of("producer-byte-rate", "consumer-byte-rate", "request-percentage")) {
            if (!o.has(name)) {
                continue;
            }
            String key = name.replace('-', '_');
            Double value = remove ? null : Double.valueOf(parseDouble(o.get(name), "--" + name));
            ops.add(new ClientQuotaAlteration.Op(key, value));
            shown.put(key, value);
        }
        if (ops.isEmpty()) {
            throw new Failure("set-quota needs at least one of --producer-byte-rate, --consumer-byte-rate,"
                + " --request-percentage");
        }
        try (Admin admin = newAdmin(o)) {
            admin.alterClientQuotas(List.of(new ClientQuotaAlteration(new ClientQuotaEntity(entity), ops)))
                .all().get();
        }
        emit("event", "quota", "entity", entity, "removed", remove, "quotas", shown);
    }

    static void alterConfig(Opts o) throws Exception {
        ConfigResource resource;
        if (o.get("topic") != null && o.get("broker") == null) {
            resource = new ConfigResource(ConfigResource.Type.TOPIC, o.get("topic"));
        } else if (o.get("broker") != null && o.get("topic") == null) {
            resource = new ConfigResource(ConfigResource.Type.BROKER, o.get("broker"));
        } else {
            throw new Failure("alter-config needs exactly one of --topic and --broker");
        }
        List<AlterConfigOp> ops = new ArrayList<>();
        for (Map.Entry<String, String> e : keyValues(o.all("set"), "--set").entrySet()) {
            ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue()), AlterConfigOp.OpType.SET));
        }
        for (String key : o.all("delete")) {
            ops.add(new AlterConfigOp(new ConfigEntry(key, ""), AlterConfigOp.OpType.DELETE));
        }
        if (ops.isEmpty()) {
            throw new Failure("alter-config needs --set or --delete");
        }
        try (Admin admin = newAdmin(o)) {
            admin.incrementalAlterConfigs(Map.of(resource, ops)).all().get();
        }
        emit("event", "altered", "resource", resource.type().name().toLowerCase(), "name", resource.name(),
            "set", keyValues(o.all("set"), "--set"), "deleted", o.all("delete"));
    }

    static void acl(Opts o) throws Exception {
        if (o.has("add") == o.has("remove")) {
            throw new Failure("acl needs exactly one of --add and --remove");
        }
        String principal = o.need("principal");
        AclOperation operation = AclOperation.fromString(o.need("operation"));
        if (operation == AclOperation.UNKNOWN || operation == AclOperation.ANY) {
            throw new Failure("bad --operation " + o.get("operation"));
        }
        ResourceType type = null;
        String name = null;
        int given = 0;
        if (o.get("topic") != null) {
            type = ResourceType.TOPIC;
            name = o.get("topic");
            given++;
        }
        if (o.get("group") != null) {
            type = ResourceType.GROUP;
            name = o.get("group");
            given++;
        }
        if (o.get("transactional-id") != null) {
            type = ResourceType.TRANSACTIONAL_ID;
            name = o.get("transactional-id");
            given++;
        }
        if (o.has("cluster")) {
            type = ResourceType.CLUSTER;
            name = "kafka-cluster";
            given++;
        }
        if (given != 1) {
            throw new Failure("acl needs exactly one of --topic, --group, --transactional-id, --cluster");
        }
        String pattern = o.get("pattern", "literal");
        oneOf(pattern, "--pattern", "literal", "prefixed");
        String permission = o.get("permission", "allow");
        oneOf(permission, "--permission", "allow", "deny");
        AclBinding binding = new AclBinding(
            new ResourcePattern(type, name, pattern.equals("literal") ? PatternType.LITERAL : PatternType.PREFIXED),
            new AccessControlEntry(principal, o.get("host", "*"), operation,
                permission.equals("allow") ? AclPermissionType.ALLOW : AclPermissionType.DENY));
        try (Admin admin = newAdmin(o)) {
            if (o.has("add")) {
                admin.createAcls(List.of(binding)).all().get();
                emit("event", "acl", "action", "added", "binding", binding.toString());
            } else {
                Collection<AclBinding> deleted = admin.deleteAcls(List.of(binding.toFilter())).all().get();
                emit("event", "acl", "action", "removed", "count", deleted.size(), "binding", binding.toString());
            }
        }
    }

    static void listOffsets(Opts o) throws Exception {
        String topic = o.need("topic");
        String isolation = o.get("isolation");
        ListOffsetsOptions options = new ListOffsetsOptions();
        if (isolation != null) {
            oneOf(isolation, "--isolation", "read_committed", "read_uncommitted");
            options = new ListOffsetsOptions(isolation.equals("read_committed")
                ? IsolationLevel.READ_COMMITTED : IsolationLevel.READ_UNCOMMITTED);
        }
        try (Admin admin = newAdmin(o)) {
            Map<Integer, TopicPartitionInfo> parts = describePartitions(admin, topic);
            Map<TopicPartition, OffsetSpec> earliest = new HashMap<>();
            Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
            for (int p : parts.keySet()) {
                earliest.put(new TopicPartition(topic, p), OffsetSpec.earliest());
                latest.put(new TopicPartition(topic, p), OffsetSpec.latest());
            }
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> lo =
                admin.listOffsets(earliest, options).all().get();
            Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> hi =
                admin.listOffsets(latest, options).all().get();
            for (int p : parts.keySet()) {
                TopicPartition tp = new TopicPartition(topic, p);
                emit("event", "offsets", "topic", topic, "partition", p,
                    "earliest", lo.get(tp).offset(), "latest", hi.get(tp).offset());
            }
        }
    }

    static void describeGroup(Opts o) throws Exception {
        String group = o.need("group");
        try (Admin admin = newAdmin(o)) {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all().get().get(group);
            List<Object> members = new ArrayList<>();
            for (MemberDescription m : d.members()) {
                members.add(obj("member_id", m.consumerId(), "group_instance_id", m.groupInstanceId(),
                    "client_id", m.clientId(), "host", m.host(),
                    "assignment", partitionList(m.assignment().topicPartitions())));
            }
            emit("event", "group", "group", group, "state", String.valueOf(d.groupState()),
                "type", String.valueOf(d.type()), "assignor", d.partitionAssignor(),
                "coordinator", d.coordinator() == null ? null : d.coordinator().id(),
                "group_epoch", d.groupEpoch(), "members", members);
            Map<TopicPartition, OffsetAndMetadata> offsets =
                admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get();
            List<TopicPartition> tps = new ArrayList<>(offsets.keySet());
            tps.sort(TP_ORDER);
            for (TopicPartition tp : tps) {
                OffsetAndMetadata om = offsets.get(tp);
                if (om == null) {
                    continue;
                }
                emit("event", "committed", "topic", tp.topic(), "partition", tp.partition(),
                    "offset", om.offset(), "leader_epoch", om.leaderEpoch(), "metadata", om.metadata());
            }
        }
    }

    // ---------------------------------------------------------------- helpers

    static Admin newAdmin(Opts o) {
        Properties p = baseProperties(o);
        applyUserProperties(p, o);
        return Admin.create(p);
    }

    static Properties baseProperties(Opts o) {
        Properties p = new Properties();
        p.put("bootstrap.servers", o.need("bootstrap"));
        return p;
    }

    static void applyUserProperties(Properties p, Opts o) {
        p.putAll(keyValues(o.all("property"), "--property"));
    }

    static Map<Integer, TopicPartitionInfo> describePartitions(Admin admin, String topic) throws Exception {
        TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
        Map<Integer, TopicPartitionInfo> parts = new java.util.TreeMap<>();
        for (TopicPartitionInfo info : d.partitions()) {
            parts.put(info.partition(), info);
        }
        return parts;
    }

    static List<Integer> nodeIds(List<Node> nodes) {
        List<Integer> ids = new ArrayList<>();
        if (nodes != null) {
            for (Node n : nodes) {
                ids.add(n.id());
            }
        }
        return ids;
    }

    static final Comparator<TopicPartition> TP_ORDER =
        Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);

    /** [[topic, partition], ...] sorted, for JSON. */
    static List<Object> partitionList(Collection<TopicPartition> parts) {
        List<TopicPartition> sorted = new ArrayList<>(parts);
        sorted.sort(TP_ORDER);
        List<Object> out = new ArrayList<>();
        for (TopicPartition tp : sorted) {
            out.add(List.of(tp.topic(), tp.partition()));
        }
        return out;
    }

    static String defaultEntity(String name) {
        return name.equals("<default>") ? null : name;
    }

    static Map<String, String> keyValues(List<String> items, String option) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String item : items) {
            int eq = item.indexOf('=');
            if (eq <= 0) {
                throw new Failure(option + " wants key=value, got '" + item + "'");
            }
            out.put(item.substring(0, eq), item.substring(eq + 1));
        }
        return out;
    }

    static void oneOf(String value, String option, String... allowed) {
        for (String a : allowed) {
            if (a.equals(value)) {
                return;
            }
        }
        throw new Failure(option + " must be one of " + String.join("|", allowed) + ", got '" + value + "'");
    }

    static long parseLong(String s, String option) {
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new Failure(option + " wants a number, got '" + s + "'");
        }
    }

    static double parseDouble(String s, String option) {
        try {
            return Double.parseDouble(s);
        } catch (NumberFormatException | NullPointerException e) {
            throw new Failure(option + " wants a number, got '" + s + "'");
        }
    }

    static Throwable unwrap(Throwable t) {
        while ((t instanceof ExecutionException || t instanceof CompletionException) && t.getCause() != null) {
            t = t.getCause();
        }
        return t;
    }

    /** "<exception class>: <message>", with the cause if there is one; a Failure is just its message. */
    static String describe(Throwable t) {
        if (t instanceof Failure) {
            return t.getMessage();
        }
        String s = t.getClass().getName() + ": " + t.getMessage();
        Throwable cause = t.getCause();
        if (cause != null && cause != t) {
            s += " (caused by " + cause.getClass().getName() + ": " + cause.getMessage() + ")";
        }
        return s;
    }

    /** A failure with a message meant for the user; printed without class name or stack trace. */
    static final class Failure extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Failure(String message) {
            super(message);
        }
    }

    // ---------------------------------------------------------------- arguments

    static final class Opts {
        final Map<String, List<String>> values = new HashMap<>();
        final Set<String> flags = new HashSet<>();

        boolean has(String name) {
            return flags.contains(name) || values.containsKey(name);
        }

        List<String> all(String name) {
            return values.getOrDefault(name, List.of());
        }

        String get(String name) {
            List<String> l = values.get(name);
            return l == null ? null : l.get(l.size() - 1);
        }

        String get(String name, String dflt) {
            String v = get(name);
            return v == null ? dflt : v;
        }

        String need(String name) {
            String v = get(name);
            if (v == null) {
                throw new Failure("missing --" + name);
            }
            return v;
        }

        Long longOrNull(String name) {
            String v = get(name);
            return v == null ? null : parseLong(v, "--" + name);
        }

        /** The option's number, else dflt; a null dflt makes the option required. */
        long longOf(String name, Long dflt) {
            Long v = longOrNull(name);
            if (v == null && dflt == null) {
                throw new Failure("missing --" + name);
            }
            return v == null ? dflt : v;
        }

        Integer intOrNull(String name) {
            Long v = longOrNull(name);
            return v == null ? null : Math.toIntExact(v);
        }

        int intOf(String name, Integer dflt) {
            return Math.toIntExact(longOf(name, dflt == null ? null : (long) dflt));
        }
    }

    /**
     * Parses "--name value" and "--flag" options from argv[from..]. valueNames and flagNames are
     * space-separated; a value name ending in '?' may be given without a value. --bootstrap
     * (required) and --property are accepted everywhere. Unknown options are an error.
     */
    static Opts parse(String[] argv, int from, String what, String valueNames, String flagNames) {
        Set<String> required = new HashSet<>();
        Set<String> optional = new HashSet<>();
        for (String n : ("bootstrap property " + valueNames).trim().split("\\s+")) {
            if (n.endsWith("?")) {
                optional.add(n.substring(0, n.length() - 1));
            } else {
                required.add(n);
            }
        }
        Set<String> flags = new HashSet<>(List.of(flagNames.trim().split("\\s+")));
        Opts o = new Opts();
        for (int i = from; i < argv.length; i++) {
            String arg = argv[i];
            String name = arg.startsWith("--") ? arg.substring(2) : null;
            if (name == null) {
                throw new Failure(what + ": unexpected argument '" + arg + "'");
            } else if (flags.contains(name) && !name.isEmpty()) {
                o.flags.add(name);
            } else if (required.contains(name)) {
                if (i + 1 >= argv.length) {
                    throw new Failure(what + ": " + arg + " needs a value");
                }
                o.values.computeIfAbsent(name, k -> new ArrayList<>()).add(argv[++i]);
            } else if (optional.contains(name)) {
                boolean hasValue = i + 1 < argv.length && !argv[i + 1].startsWith("--");
                o.values.computeIfAbsent(name, k -> new ArrayList<>()).add(hasValue ? argv[++i] : null);
            } else {
                throw new Failure(what + ": unknown option '" + arg + "'");
            }
        }
        o.need("bootstrap");
        return o;
    }

    // ---------------------------------------------------------------- JSON output

    /** Prints one JSON object built from key, value, key, value, ... and flushes. */
    static synchronized void emit(Object... keysAndValues) {
        StringBuilder sb = new StringBuilder();
        writeJson(sb, obj(keysAndValues));
        sb.append('\n');
        OUT.print(sb);
        OUT.flush();
    }

    static Map<String, Object> obj(Object... keysAndValues) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i + 1 < keysAndValues.length; i += 2) {
            m.put((String) keysAndValues[i], keysAndValues[i + 1]);
        }
        return m;
    }

    static void writeJson(StringBuilder sb, Object v) {
        if (v instanceof Optional) {
            v = ((Optional<?>) v).orElse(null);
        }
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Boolean || v instanceof Integer || v instanceof Long || v instanceof Short) {
            sb.append(v);
        } else if (v instanceof Number) {
            double d = ((Number) v).doubleValue();
            sb.append(Double.isFinite(d) ? String.valueOf(d) : "null");
        } else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                writeString(sb, String.valueOf(e.getKey()));
                sb.append(':');
                writeJson(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Iterable) {
            sb.append('[');
            boolean first = true;
            for (Object item : (Iterable<?>) v) {
                if (!first) {
                    sb.append(',');
                }
                first = false;
                writeJson(sb, item);
            }
            sb.append(']');
        } else {
            writeString(sb, v.toString());
        }
    }

    static void writeString(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20 || c == 0x7f || c == 0x2028 || c == 0x2029) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        sb.append('"');
    }
}
