#!/usr/bin/env bash
# Mutation testing (crates.io `cargo-mutants`) of the functions behind the
# promises of docs/connections.md and docs/reliability.md: which sockets
# exist and when (cluster), when the driver wakes (every next_deadline),
# leaving the group, and the reports of unreachable brokers. Unit tests
# only (`--lib`): a mutant is a rebuild, so the whole suite per mutant is
# too slow for two cores. See docs/testing.md, "Mutation testing".
#
#   scripts/mutants.sh            # about 2 hours here; resumable
#   FRESH=1 scripts/mutants.sh    # forget earlier results first
#
# Results go to target/mutants/mutants.out/ (missed.txt, caught.txt, ...).
# A second run skips what an earlier one caught (`--iterate`).
set -euo pipefail
cd "$(dirname "$0")/.."

out=target/mutants
files=(-f 'src/cluster/*.rs' -f 'src/group/*.rs' -f 'src/fetch/*.rs' -f 'src/consumer/core/*.rs')
fns='Cluster::(retire_bootstrap|least_loaded|reap_idle|idle_deadline|open_bootstrap|poll_timeout|connection_deadline|coordinator_needed|connection_for|find_conn|coordinator_connection|leader_connection|replica_connection)'
fns+='|AddressFailures::(in_backoff|failed|count_refusal|problem|bootstrap_unreachable)'
fns+='|MetadataManager::(next_due|broker_missing)|CoordinatorLookup::next_due'
fns+='|check_route|ExponentialBackoff::delay|(Consumer)?Membership::(leave|next_deadline)'
fns+='|ConsumerCore::(poll_deadline|deadlines|next_deadline_after|want_leaders)'
re=" in ($fns)\$"

command -v cargo-mutants >/dev/null || cargo install cargo-mutants --locked
[ -n "${FRESH:-}" ] && rm -rf "$out"
mkdir -p "$out/mutants.out"
# cargo-mutants 27.1 lists its "delete field" mutants whatever --re says:
# those outside the functions above are marked as done, so that --iterate
# skips them.
cargo mutants --list "${files[@]}" --re "$re" | grep -Ev -- "$re" >>"$out/mutants.out/caught.txt" || true
touch "$out"/mutants.out/{missed,timeout,unviable}.txt
CARGO_PROFILE_DEV_DEBUG=0 CARGO_PROFILE_TEST_DEBUG=0 \
    cargo mutants "${files[@]}" --re "$re" --iterate --output "$out" \
    --timeout 120 --build-timeout 900 --features mock -- --lib
