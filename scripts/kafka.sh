#!/usr/bin/env bash
# Installs and runs a real Apache Kafka cluster on loopback: three KRaft
# nodes (each broker and controller at once, one JVM each, small heaps),
# for the tests and for trying the examples by hand.
#
#   scripts/kafka.sh start        install when missing, start, wait, set up
#   scripts/kafka.sh stop         stop every process this script started
#   scripts/kafka.sh env          the variables the tests read (eval them)
#   scripts/kafka.sh status       which brokers run
#   scripts/kafka.sh kill N       SIGKILL broker N (node id 1..3)
#   scripts/kafka.sh shutdown N   stop broker N cleanly (controlled shutdown)
#   scripts/kafka.sh restart N    start broker N again (after kill/shutdown)
#   scripts/kafka.sh diagnose N   whether broker N runs, and its log's last
#                                 errors and lines (for a test that waits on it)
#   scripts/kafka.sh peer ARGS    run the Java client peer (tests/java/Peer.java)
#   scripts/kafka.sh tool CLASS ARGS   run a Kafka tool's main class
#   scripts/kafka.sh install      only resolve the jars and compile the peer
#
# What it installs: Apache Kafka $KAFKA_VERSION (below, the one place the
# version is written) with `mvn` from Maven Central, into the git-ignored
# .kafka/<version>/lib, reused when present; the Java peer compiled there.
# Nothing is downloaded from anywhere else. It needs Java 17 or newer, mvn
# and openssl.
#
# The cluster (docs/testing.md says what each part is for):
# - listeners on free loopback ports, per broker:
#   PLAINTEXT        no authentication (the ANONYMOUS principal, a super user);
#   SASL_SSL         SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN over TLS; the
#                    brokers advertise `localhost`, their certificate names
#                    `localhost` only (so a client that dials 127.0.0.1
#                    fails the host-name check), signed by a CA made at start;
#   OAUTH            SASL_PLAINTEXT with OAUTHBEARER (the broker's unsecured
#                    JWT validator: the token's `sub` is the principal);
#   REAUTH           SASL_PLAINTEXT with SCRAM-SHA-512 and PLAIN whose sessions
#                    last $REAUTH_MS ms (KIP-368: clients re-authenticate);
# - users (SCRAM made at format time, PLAIN in the broker's JAAS): admin and
#   alice, super users; restricted, who may only read and describe topics
#   and groups whose names start with `allowed-` (StandardAuthorizer);
# - broker.rack rack-N on broker N, the rack-aware replica selector
#   (KIP-392), both group protocols (classic and consumer, KIP-848) with
#   short KIP-848 session timeouts for the tests, share groups (KIP-932)
#   when the release has them, group.initial.rebalance.delay.ms=0.
#
# Files: .kafka/run/ holds this run (configs, data, logs brokerN.log, pids,
# tls/, env); it is wiped by `start`. With LAZYKAFKA_KAFKA_RUN_DIR set to
# another directory, every command acts on a second cluster kept there.
set -euo pipefail

KAFKA_VERSION=4.4.0
REAUTH_MS=10000
HEAP_OPTS=${LAZYKAFKA_KAFKA_HEAP:--Xms128m -Xmx512m}

root=$(cd "$(dirname "$0")/.." && pwd)
home="$root/.kafka"
lib="$home/$KAFKA_VERSION/lib"
peer_classes="$home/$KAFKA_VERSION/peer"
# LAZYKAFKA_KAFKA_RUN_DIR runs a second cluster beside the first.
run=${LAZYKAFKA_KAFKA_RUN_DIR:-$home/run}
bin="$home/bin"
java=${JAVA:-java}
if [ -n "${JAVA_HOME:-}" ] && [ -z "${JAVA:-}" ]; then java="$JAVA_HOME/bin/java"; fi
javac="$(dirname "$(command -v "$java")")/javac"

say() { printf 'kafka.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

# --- install ---------------------------------------------------------------
install() {
    # One install at a time (two clusters may start at once).
    mkdir -p "$home"
    exec 9>"$home/.install.lock"
    flock 9
    if [ ! -f "$lib/.complete" ]; then
        command -v mvn >/dev/null || die "mvn is not installed (Debian package maven)"
        say "resolving Apache Kafka $KAFKA_VERSION with mvn into $lib"
        rm -rf "$lib"
        mkdir -p "$lib"
        mvn -q -B -Dstyle.color=never -f "$root/scripts/kafka/pom.xml" dependency:copy-dependencies \
            -Dkafka.version="$KAFKA_VERSION" -DoutputDirectory="$lib" >&2 ||
            die "mvn could not resolve Apache Kafka $KAFKA_VERSION (see above)"
        touch "$lib/.complete"
    fi
    local src="$root/tests/java/Peer.java"
    if [ -f "$src" ] && { [ ! -f "$peer_classes/Peer.class" ] || [ "$src" -nt "$peer_classes/Peer.class" ]; } || [ "$src" -nt "$peer_classes/Peer.class" ]; then
        say "compiling the Java peer ($src)"
        rm -rf "$peer_classes"
        mkdir -p "$peer_classes"
        "$javac" -nowarn -d "$peer_classes" -cp "$lib/*" "$src" >&2
    fi
    write_wrappers
    flock -u 9
    exec 9>&-
}

# The tools as commands: .kafka/bin/kafka-topics and the like, and
# .kafka/bin/java-peer, each a java command line with the jars.
write_wrappers() {
    mkdir -p "$bin"
    cat >"$bin/kafka-run-class" <<EOF
#!/usr/bin/env bash
# Runs a main class of Apache Kafka $KAFKA_VERSION (written by scripts/kafka.sh).
exec "$java" -Xmx256m -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile="$home/tools-log4j2.properties" -cp "$lib/*" "\$@"
EOF
    cat >"$bin/java-peer" <<EOF
#!/usr/bin/env bash
# The Java client as a test peer: tests/java/Peer.java (written by scripts/kafka.sh).
exec "$java" -Xmx256m -XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile="$home/tools-log4j2.properties" -cp "$peer_classes:$lib/*" Peer "\$@"
EOF
    local name class
    while read -r name class; do
        printf '#!/usr/bin/env bash\nexec "%s/kafka-run-class" %s "$@"\n' "$bin" "$class" >"$bin/$name"
    done <<'EOF'
kafka-topics org.apache.kafka.tools.TopicCommand
kafka-configs org.apache.kafka.tools.ConfigCommand
kafka-acls org.apache.kafka.tools.AclCommand
kafka-leader-election org.apache.kafka.tools.LeaderElectionCommand
kafka-reassign-partitions org.apache.kafka.tools.reassign.ReassignPartitionsCommand
kafka-features org.apache.kafka.tools.FeatureCommand
kafka-broker-api-versions org.apache.kafka.tools.BrokerApiVersionsCommand
kafka-console-producer org.apache.kafka.tools.ConsoleProducer
kafka-console-consumer org.apache.kafka.tools.consumer.ConsoleConsumer
kafka-consumer-groups org.apache.kafka.tools.consumer.group.ConsumerGroupCommand
kafka-storage kafka.tools.StorageTool
EOF
    chmod +x "$bin"/*
    # Tools and the peer log warnings to stderr only: their stdout is read.
    cat >"$home/tools-log4j2.properties" <<'EOF'
status = error
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
EOF
}

# --- the cluster -------------------------------------------------------------
# free_ports N: N loopback ports that bind now, chosen below the kernel's
# ephemeral range (ip_local_port_range), so that no outgoing connection (the
# brokers' own, among them) takes one as its local port before its broker
# binds it, and none that another cluster under .kafka/ has chosen (they
# start at once; the choice is made under a lock and kept in $run/ports).
free_ports() {
    mkdir -p "$home"
    exec 8>"$home/.ports.lock"
    flock 8
    python3 - "$1" "$home" "$run" <<'PY' | tee "$run/ports"
import glob, os, random, socket, sys
count, home, run = int(sys.argv[1]), sys.argv[2], os.path.realpath(sys.argv[3])
taken = set()
for f in glob.glob(os.path.join(home, "*", "ports")):
    if os.path.realpath(os.path.dirname(f)) != run:
        taken.update(int(p) for p in open(f).read().split())
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 0
candidates = list(range(10000, low)) if low > 12000 else []
random.shuffle(candidates)
chosen = []
for port in candidates:
    if len(chosen) == count:
        break
    if port in taken:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        chosen.append(port)
    except OSError:
        pass
    finally:
        s.close()
socks = []
while len(chosen) < count:  # no range below the ephemeral one: the kernel's choice
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
    chosen.append(s.getsockname()[1])
print(" ".join(map(str, chosen)))
PY
    flock -u 8
    exec 8>&-
}

make_tls() {
    local d="$run/tls"
    mkdir -p "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=lazykafka test CA" \
        -keyout "$d/ca.key" -out "$d/ca.pem" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
        -keyout "$d/broker.key" -out "$d/broker.csr" 2>/dev/null
    printf 'subjectAltName=DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$d/broker.ext"
    openssl x509 -req -in "$d/broker.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
        -days 30 -extfile "$d/broker.ext" -out "$d/broker.pem" 2>/dev/null
    # Kafka's PEM key store: the unencrypted PKCS#8 key, then the chain.
    openssl pkcs8 -topk8 -nocrypt -in "$d/broker.key" -out "$d/broker.pk8"
    cat "$d/broker.pk8" "$d/broker.pem" >"$d/broker-keystore.pem"
}

write_config() {
    local n=$1
    local plain_jaas='org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" user_alice="alice-secret" user_restricted="restricted-secret";'
    local scram_jaas='org.apache.kafka.common.security.scram.ScramLoginModule required;'
    cat >"$run/broker$n.properties" <<EOF
# Broker $n of the test cluster (written by scripts/kafka.sh).
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:${plain[$n]},SASL_SSL://127.0.0.1:${sasl_ssl[$n]},OAUTH://127.0.0.1:${oauth[$n]},REAUTH://127.0.0.1:${reauth[$n]},CONTROLLER://127.0.0.1:${controller[$n]}
advertised.listeners=PLAINTEXT://127.0.0.1:${plain[$n]},SASL_SSL://localhost:${sasl_ssl[$n]},OAUTH://127.0.0.1:${oauth[$n]},REAUTH://127.0.0.1:${reauth[$n]}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,OAUTH:SASL_PLAINTEXT,REAUTH:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$run/data$n
broker.rack=rack-$n
replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector

num.partitions=3
default.replication.factor=3
offsets.topic.replication.factor=3
offsets.topic.num.partitions=12
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=6
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=10000
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=1000
num.network.threads=2
num.io.threads=4
log.cleaner.dedupe.buffer.size=4194304

authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS;User:admin;User:alice
sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512,PLAIN
listener.name.sasl_ssl.plain.sasl.jaas.config=$plain_jaas
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=$scram_jaas
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=$scram_jaas
ssl.keystore.type=PEM
ssl.keystore.location=$run/tls/broker-keystore.pem
listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER
listener.name.oauth.oauthbearer.sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="admin";
listener.name.reauth.sasl.enabled.mechanisms=SCRAM-SHA-512,PLAIN
listener.name.reauth.plain.sasl.jaas.config=$plain_jaas
listener.name.reauth.scram-sha-512.sasl.jaas.config=$scram_jaas
listener.name.reauth.plain.connections.max.reauth.ms=$REAUTH_MS
listener.name.reauth.scram-sha-512.connections.max.reauth.ms=$REAUTH_MS
EOF
}

start_broker() {
    local n=$1
    if [ -f "$run/broker$n.pid" ] && kill -0 "$(cat "$run/broker$n.pid")" 2>/dev/null; then
        say "broker $n runs already"
        return
    fi
    # setsid: the broker outlives the shell that started it, and a Ctrl-C
    # in that shell's terminal does not reach it.
    # shellcheck disable=SC2086
    setsid "$java" $HEAP_OPTS -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -Djava.awt.headless=true \
        -Dlog4j2.configurationFile="$run/log4j2.properties" \
        -cp "$lib/*" kafka.Kafka "$run/broker$n.properties" \
        >>"$run/broker$n.log" 2>&1 </dev/null &
    echo $! >"$run/broker$n.pid"
}

stop_broker() {
    local n=$1 signal=$2 pid
    [ -f "$run/broker$n.pid" ] || return 0
    pid=$(cat "$run/broker$n.pid")
    if kill -0 "$pid" 2>/dev/null; then
        kill "-$signal" "$pid" 2>/dev/null || true
        # A clean shutdown moves the broker's leaders away first: allow 60 s.
        for _ in $(seq 600); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            say "broker $n did not stop within 60 s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$run/broker$n.pid"
}

# Waits until the cluster's Metadata lists three brokers.
wait_for_brokers() {
    local deadline=$((SECONDS + ${1:-120})) out
    while :; do
        out=$("$bin/kafka-broker-api-versions" --bootstrap-server "$bootstrap" 2>/dev/null || true)
        if [ "$(grep -c '(id: [0-9]* rack' <<<"$out")" -ge 3 ]; then
            return 0
        fi
        for n in 1 2 3; do
            if ! kill -0 "$(cat "$run/broker$n.pid")" 2>/dev/null; then
                # Its errors, not the shutdown lines that follow them.
                grep -E '( ERROR |Exception|Caused by)' "$run/broker$n.log" | head -n 20 >&2 ||
                    tail -n 20 "$run/broker$n.log" >&2
                say "broker $n exited (log: $run/broker$n.log)"
                return 2
            fi
        done
        [ $SECONDS -lt "$deadline" ] || die "the cluster did not list 3 brokers in time (logs: $run/broker*.log)"
        sleep 1
    done
}

# Starts the cluster; a broker that exits while the cluster forms (a port
# taken after all, say) makes it try once more on other ports.
start() {
    command -v openssl >/dev/null || die "openssl is not installed"
    install
    local attempt status
    for attempt in 1 2; do
        status=0
        # A command of its own, so that `set -e` holds inside it (a
        # function called before `||` runs without it).
        "$0" start-once || status=$?
        [ "$status" -eq 2 ] || return "$status"
        [ "$attempt" -eq 2 ] || say "starting again on other ports"
    done
    stop_all
    die "the cluster did not start (logs: $run/broker*.log)"
}

start_once() {
    stop_all
    rm -rf "$run"
    mkdir -p "$run"
    local ports
    read -r -a ports <<<"$(free_ports 15)"
    plain=() sasl_ssl=() oauth=() reauth=() controller=()
    for n in 1 2 3; do
        local i=$(((n - 1) * 5))
        plain[$n]=${ports[$i]}
        sasl_ssl[$n]=${ports[$((i + 1))]}
        oauth[$n]=${ports[$((i + 2))]}
        reauth[$n]=${ports[$((i + 3))]}
        controller[$n]=${ports[$((i + 4))]}
    done
    voters="1@127.0.0.1:${controller[1]},2@127.0.0.1:${controller[2]},3@127.0.0.1:${controller[3]}"
    bootstrap="127.0.0.1:${plain[1]},127.0.0.1:${plain[2]},127.0.0.1:${plain[3]}"
    make_tls
    cat >"$run/log4j2.properties" <<'EOF'
status = error
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.request.name = kafka.request.logger
logger.request.level = WARN
EOF
    local cluster_id
    cluster_id=$("$bin/kafka-storage" random-uuid)
    local scram=()
    for user in admin alice restricted; do
        for mech in SCRAM-SHA-256 SCRAM-SHA-512; do
            scram+=(--add-scram "$mech=[name=$user,password=$user-secret]")
        done
    done
    # Share groups (KIP-932) where the release has them.
    local features=()
    if "$bin/kafka-storage" feature-dependencies --feature share.version=1 >/dev/null 2>&1; then
        features=(--feature share.version=1)
    fi
    for n in 1 2 3; do
        write_config "$n"
        "$bin/kafka-storage" format --cluster-id "$cluster_id" --config "$run/broker$n.properties" \
            "${scram[@]}" "${features[@]}" >"$run/format$n.log" 2>&1 ||
            { cat "$run/format$n.log" >&2; die "formatting broker $n failed"; }
    done
    say "starting 3 brokers (Apache Kafka $KAFKA_VERSION) on $bootstrap"
    for n in 1 2 3; do start_broker "$n"; done
    wait_for_brokers 180 || return
    # The restricted user: read and describe topics and groups named allowed-*.
    "$bin/kafka-acls" --bootstrap-server "$bootstrap" --add --allow-principal User:restricted \
        --operation Read --operation Describe --topic allowed- --group allowed- \
        --resource-pattern-type prefixed >"$run/acls.log" 2>&1 ||
        { cat "$run/acls.log" >&2; die "setting the ACLs failed"; }
    write_env
    say "ready: $bootstrap (eval \"\$(scripts/kafka.sh env)\" for the rest)"
}

write_env() {
    local b_ssl="localhost:${sasl_ssl[1]},localhost:${sasl_ssl[2]},localhost:${sasl_ssl[3]}"
    local b_oauth="127.0.0.1:${oauth[1]},127.0.0.1:${oauth[2]},127.0.0.1:${oauth[3]}"
    local b_reauth="127.0.0.1:${reauth[1]},127.0.0.1:${reauth[2]},127.0.0.1:${reauth[3]}"
    cat >"$run/env" <<EOF
# The test cluster of scripts/kafka.sh (Apache Kafka $KAFKA_VERSION).
export LAZYKAFKA_KAFKA_VERSION=$KAFKA_VERSION
export LAZYKAFKA_KAFKA_BOOTSTRAP=$bootstrap
export LAZYKAFKA_KAFKA_SASL_SSL_BOOTSTRAP=$b_ssl
export LAZYKAFKA_KAFKA_OAUTH_BOOTSTRAP=$b_oauth
export LAZYKAFKA_KAFKA_REAUTH_BOOTSTRAP=$b_reauth
export LAZYKAFKA_KAFKA_REAUTH_MS=$REAUTH_MS
export LAZYKAFKA_KAFKA_CA=$run/tls/ca.pem
export LAZYKAFKA_KAFKA_BROKERS="1=127.0.0.1:${plain[1]} 2=127.0.0.1:${plain[2]} 3=127.0.0.1:${plain[3]}"
export LAZYKAFKA_KAFKA_BIN=$bin
export LAZYKAFKA_KAFKA_PEER=$bin/java-peer
export LAZYKAFKA_KAFKA_SCRIPT=$root/scripts/kafka.sh
export LAZYKAFKA_KAFKA_RUN_DIR=$run
EOF
}

stop_all() {
    local any=
    for n in 1 2 3; do
        if [ -f "$run/broker$n.pid" ]; then any=1; fi
    done
    [ -n "$any" ] || return 0
    say "stopping the cluster"
    # All at once: one by one, the last ones wait for a quorum that is gone.
    for n in 1 2 3; do
        if [ -f "$run/broker$n.pid" ]; then kill -TERM "$(cat "$run/broker$n.pid")" 2>/dev/null || true; fi
    done
    for n in 1 2 3; do stop_broker "$n" TERM; done
}

node() {
    case "${1:-}" in 1 | 2 | 3) ;; *) die "a broker is 1, 2 or 3" ;; esac
    [ -f "$run/broker$1.properties" ] || die "no cluster: scripts/kafka.sh start"
}

case "${1:-}" in
install) install ;;
start) start ;;
start-once) start_once ;; # one attempt of `start` (its retry loop calls it)
stop) stop_all ;;
env)
    [ -f "$run/env" ] || die "no cluster: scripts/kafka.sh start"
    cat "$run/env"
    ;;
status)
    for n in 1 2 3; do
        if [ -f "$run/broker$n.pid" ] && kill -0 "$(cat "$run/broker$n.pid")" 2>/dev/null; then
            echo "broker $n: running (pid $(cat "$run/broker$n.pid"))"
        else
            echo "broker $n: stopped"
        fi
    done
    ;;
kill) node "${2:-}"; stop_broker "$2" KILL ;;
shutdown) node "${2:-}"; stop_broker "$2" TERM ;;
restart) node "${2:-}"; start_broker "$2" ;;
diagnose)
    node "${2:-}"
    if [ -f "$run/broker$2.pid" ] && kill -0 "$(cat "$run/broker$2.pid")" 2>/dev/null; then
        echo "broker $2: running (pid $(cat "$run/broker$2.pid"))"
    else
        echo "broker $2: not running"
    fi
    echo "--- its last errors and warnings ($run/broker$2.log) ---"
    grep -E '( ERROR | WARN |Exception|Caused by)' "$run/broker$2.log" | tail -n 20 || true
    echo "--- its last lines ---"
    tail -n 15 "$run/broker$2.log" || true
    ;;
peer) shift; install >/dev/null; exec "$bin/java-peer" "$@" ;;
tool) shift; install >/dev/null; exec "$bin/kafka-run-class" "$@" ;;
*)
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
