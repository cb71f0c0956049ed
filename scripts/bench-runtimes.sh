#!/usr/bin/env bash
# lazykafka on async-std, on a multi-thread tokio runtime and on a
# current-thread one, side by side: builds `benches/compare.rs` once per
# runtime feature, then runs the three one after another, round after round
# (the order rotated each round), so that a noisy machine weighs on all
# three alike. Each run is one round of `cargo bench --bench compare`
# (lazykafka and librdkafka on the same mock); librdkafka's figures, which
# do not depend on lazykafka's runtime, show how much the machine drifted
# between runs.
#
#   scripts/bench-runtimes.sh                 # 15 rounds of 100B,10KiB,tls at scale 0.1
#   ROUNDS=5 CASES=10KiB SCALE=0.2 scripts/bench-runtimes.sh
#
# Prints, per case, lazykafka's medians (CPU per record, time to first
# record, CPU per second polling with no data) and each tokio flavour's
# ratio to async-std; every run's JSON stays in target/bench-runtimes/.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${ROUNDS:-15}
cases=${CASES:-100B,10KiB,tls}
scale=${SCALE:-0.1}
out=target/bench-runtimes
rm -rf "$out"
mkdir -p "$out"

build() {
    cargo bench --bench compare --no-run --message-format=json "$@" 2>/dev/null |
        python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "compare" and m.get("executable"):
        print(m["executable"])'
}
echo "building the bench for async-std and for tokio ..."
cp "$(build --features mock)" "$out/compare-async-std"
cp "$(build --no-default-features --features runtime-tokio,gzip,snappy,lz4,zstd,mock)" "$out/compare-tokio"

variants=(async-std tokio-multi tokio-current)
for ((round = 0; round < rounds; round++)); do
    for ((i = 0; i < ${#variants[@]}; i++)); do
        v=${variants[(round + i) % ${#variants[@]}]}
        case $v in
            async-std) bin=$out/compare-async-std flavour= ;;
            tokio-multi) bin=$out/compare-tokio flavour=multi ;;
            tokio-current) bin=$out/compare-tokio flavour=current ;;
        esac
        LAZYKAFKA_BENCH_SCALE=$scale LAZYKAFKA_BENCH_ROUNDS=1 LAZYKAFKA_BENCH_CASES=$cases \
            LAZYKAFKA_BENCH_STRACE=0 LAZYKAFKA_BENCH_TOKIO=$flavour \
            LAZYKAFKA_BENCH_OUT=$out/$v-$round.json "$bin" --bench >"$out/$v-$round.log" 2>&1 ||
            { echo "run $v $round failed: see $out/$v-$round.log"; exit 1; }
        echo "round $round: $v done"
    done
done

python3 - "$out" "$rounds" <<'EOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
variants = ["async-std", "tokio-multi", "tokio-current"]
metrics = [("cpu_us_per_record", "CPU per record, µs"),
           ("ttfr_ms", "first record, ms"),
           ("idle_cpu_ms_per_s", "idle CPU, ms/s")]
runs = {}  # (variant, client, case) -> [run]
for v in variants:
    for r in range(rounds):
        for run in json.load(open(f"{out}/{v}-{r}.json"))["runs"]:
            if run["broker"] == "mock":
                runs.setdefault((v, run["client"], run["case"]), []).append(run)
cases = sorted({case for (_, _, case) in runs})
def med(v, client, case, key):
    xs = [r[key] for r in runs.get((v, client, case), []) if r.get(key) is not None]
    return statistics.median(xs) if xs else float("nan")
print(f"\nmedians of {rounds} rounds (runtimes alternated, order rotated each round)")
print(f"{'case':<6} {'metric':<22} {'client':<10} " + " ".join(f"{v:>13}" for v in variants)
      + f" {'multi/a-s':>10} {'current/a-s':>11}")
summary = {}
for case in cases:
    for key, label in metrics:
        for client in ["lazykafka", "librdkafka"]:
            m = [med(v, client, case, key) for v in variants]
            summary[f"{case} {key} {client}"] = m
            print(f"{case:<6} {label:<22} {client:<10} " + " ".join(f"{x:>13.3f}" for x in m)
                  + f" {m[1] / m[0]:>10.2f} {m[2] / m[0]:>11.2f}")
json.dump({"rounds": rounds, "variants": variants, "medians": summary},
          open(f"{out}/summary.json", "w"), indent=1)
print(f"\nevery run: {out}/; medians: {out}/summary.json")
EOF
