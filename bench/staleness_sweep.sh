#!/usr/bin/env bash
# What staleness and the off-policy correction cost on CartPole, at equal
# env steps: the repository's cluster.toml with `[run] max_staleness` set
# to each bound and `[learner] correction` decoupled or none, seeds 1..N,
# each run stopped at STEPS env steps; its mean return over the last 100
# episodes then, the lag (from the learner's histogram of trained env
# steps by lag) and the share of segments dropped as stale.
#   SHAPE=wide   one segment of 32 steps x 8 envs per explorer per update
#                (as `rlx bench --only async`): the lag reaches the bound
#   SHAPE=default  the cluster.toml as it is (16-step segments)
# usage: bench/staleness_sweep.sh OUT_DIR   (env: SHAPE, BOUNDS, SEEDS, STEPS)
# Writes OUT_DIR/sweep.jsonl, OUT_DIR/table.md and, with gnuplot,
# OUT_DIR/staleness.png.
set -euo pipefail
source "$(dirname "$0")/common.sh"
out=${1:?usage: bench/staleness_sweep.sh OUT_DIR}
shape=${SHAPE:-wide}
bounds=${BOUNDS:-0 1 2 4 8 16}
seeds=${SEEDS:-1 2 3}
steps=${STEPS:-150000}
mkdir -p "$out"
out=$(realpath "$out")
: > "$out/sweep.jsonl"
base=cluster.toml
for bound in $bounds; do for corr in decoupled none; do for s in $seeds; do
  d="$out/$shape-$bound-$corr-$s"; rm -rf "$d"; mkdir -p "$d"
  sed -e "s/^seed = .*/seed = $s/" -e "s#^log_dir = .*#log_dir = \"$d\"#" \
      -e "s/^max_staleness = .*/max_staleness = $bound/" -e "s/^record = true/record = false/" \
      -e "s/^stop = .*/stop = { mean_return = 100000.0, max_env_steps = $steps, max_seconds = 600.0 }/" \
      -e "s/^correction = .*/correction = \"$corr\"/" "$base" > "$d/c.toml"
  if [[ "$shape" == wide ]]; then sed -i -e 's/^segment_steps = .*/segment_steps = 32/' -e 's/^batch_segments = .*/batch_segments = 2/' "$d/c.toml"; fi
  grep -q "^correction = \"$corr\"" "$d/c.toml" || { echo "cluster.toml has no [learner] correction line" >&2; exit 1; }
  build/tools/rlx launch "$d/c.toml" > "$d/out.txt" 2>&1 || [[ $? == 3 ]]  # 3: the step budget
  python3 - "$(tail -1 "$d/metrics.jsonl")" "$shape" "$bound" "$corr" "$s" >> "$out/sweep.jsonl" <<'PY'
import json, sys
m = json.loads(sys.argv[1]); shape, bound, corr, seed = sys.argv[2:6]
h = m["lag_histogram"]; lag = sum(i * n for i, n in enumerate(h)) / max(1, sum(h))
print(json.dumps(dict(shape=shape, bound=int(bound), corr=corr, seed=int(seed), steps=m["env_steps"], ret=m["mean_return"],
                      time=m["time_s"], lag=lag, stale=m["segments_dropped_stale"], received=m["segments_received"])))
PY
  tail -1 "$out/sweep.jsonl"
done; done; done
python3 - "$out" <<'PY'
import json, statistics as st, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(out + "/sweep.jsonl")]
lines = ["| max_staleness | correction | mean return at the budget, per seed | median | mean lag (trained steps) | segments dropped stale | wall s (median) |",
         "|---|---|---|---|---|---|---|"]
dat = []
for b in sorted({r["bound"] for r in rows}):
    for c in ("decoupled", "none"):
        r = [x for x in rows if x["bound"] == b and x["corr"] == c]
        if not r: continue
        rets = [round(x["ret"]) for x in r]
        stale = sum(x["stale"] for x in r) / max(1, sum(x["received"] for x in r))
        lines.append(f"| {b} | {c} | {' / '.join(map(str, rets))} | {st.median(rets):.0f} | {st.mean(x['lag'] for x in r):.2f} | "
                     f"{100 * stale:.0f} % | {st.median(x['time'] for x in r):.1f} |")
        dat += [f"{b} {c} {x['ret']:.1f}" for x in r]
open(out + "/table.md", "w").write("\n".join(lines) + "\n")
open(out + "/points.dat", "w").write("\n".join(dat) + "\n")
print("\n".join(lines))
PY
if command -v gnuplot > /dev/null; then
  gnuplot <<GP
set terminal pngcairo size 800,480 noenhanced
set output "$out/staleness.png"
set title "CartPole ($shape shape): mean return at $steps env steps, by staleness bound"
set xlabel "max_staleness"; set ylabel "mean return (last 100 episodes)"
set yrange [0:520]; $staleness_axis
plot "$out/points.dat" using (pos(\$1) - 0.08):(strcol(2) eq "decoupled" ? \$3 : 1/0) with points pt 7 ps 1.2 title "decoupled correction", \
     "$out/points.dat" using (pos(\$1) + 0.08):(strcol(2) eq "none" ? \$3 : 1/0) with points pt 5 ps 1.2 title "none (plain PPO)"
GP
fi
