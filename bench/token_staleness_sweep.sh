#!/usr/bin/env bash
# What staleness and the off-policy correction cost on the token workload,
# at equal updates: examples/arithmetic-tokens.toml (GRPO on "17+25=", the
# token MoE transformer, rewards scored in the explorer) from a supervised
# start (INIT: from scratch no sampled answer is ever right, so GRPO has
# nothing to learn), with `[run] max_staleness` set to each bound and
# `[learner] correction` decoupled or none, seeds 1..N, each run stopped
# once the learner has published UPDATES versions (`[run.stop]
# max_updates`). The learner as the example has it: lr 3e-4, one epoch,
# gradient norm 1, 64 rows (8 tasks x 8 samples) per update (the script
# checks that the file still says so). Per run: the fraction answered right
# over the last 100 episodes (sampled), the last pass@1 the
# evaluator reported (greedy, 256 tasks, every 50 versions) and its
# version, the mean of its evaluations in the run's last fifth, the
# learner's histogram of trained tokens by lag (a segment's
# tokens count at its newest token's lag), segments dropped whole and
# generated tokens masked as past the bound.
#   SHAPE=wide     4 explorers of 64 rows: the learner falls behind and the
#                  lag reaches the bound
#   SHAPE=default  2 explorers of 64 rows
# usage: INIT=W bench/token_staleness_sweep.sh OUT_DIR   (env: SHAPE, BOUNDS, SEEDS, UPDATES;
#        REPORT_ONLY=1: summarise the runs already in OUT_DIR again, launching none)
#   W: build/tools/rlx sft --config examples/arithmetic-tokens.toml --fresh --steps 3000 --out W
# Writes OUT_DIR/sweep.jsonl, OUT_DIR/table.md and, with gnuplot,
# OUT_DIR/staleness.png and OUT_DIR/lag.png.
set -euo pipefail
source "$(dirname "$0")/common.sh"
out=${1:?usage: bench/token_staleness_sweep.sh OUT_DIR}
shape=${SHAPE:-wide}
bounds=${BOUNDS:-0 1 2 4 8 16}
seeds=${SEEDS:-1 2 3}
updates=${UPDATES:-1000}
init=$(realpath "${INIT:?INIT: the supervised start (see the header)}")
mkdir -p "$out"
out=$(realpath "$out")
: > "$out/sweep.jsonl"
base=examples/arithmetic-tokens.toml
for bound in $bounds; do for corr in decoupled none; do for s in $seeds; do
  d="$out/$shape-$bound-$corr-$s"
  if [[ -z "${REPORT_ONLY:-}" ]]; then
    rm -rf "$d"; mkdir -p "$d"
    explorers=$([[ "$shape" == wide ]] && echo 4 || echo 2)
    sed -e "s/^seed = .*/seed = $s/" -e "s#^log_dir = .*#log_dir = \"$d\"#" \
        -e "s/^max_staleness = .*/max_staleness = $bound/" \
        -e "s/^stop = .*/stop = { mean_return = 2.0, max_env_steps = 1_000_000_000, max_seconds = 1800.0, max_updates = $updates }/" \
        -e "s#^init = .*#init = \"$init\"#" -e "s/^correction = .*/correction = \"$corr\"/" \
        -e "s/^explorers = .*/explorers = $explorers/" "$base" > "$d/c.toml"
    for want in "correction = \"$corr\"" "max_updates = $updates" "init = \"$init\"" "explorers = $explorers" \
                "lr = 3e-4" "epochs = 1" "eval_tasks = 256" "eval_every = 50" "envs_per_explorer = 64"; do
      grep -q "$want" "$d/c.toml" || { echo "$base: the edit to \"$want\" did not apply" >&2; exit 1; }
    done
    build/tools/rlx launch "$d/c.toml" > "$d/out.txt" 2>&1 || [[ $? == 3 ]]  # 3: the update budget
  fi
  python3 - "$d/metrics.jsonl" "$shape" "$bound" "$corr" "$s" >> "$out/sweep.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
m = lines[-1]; shape, bound, corr, seed = sys.argv[2:6]
ev = [l for l in lines if "pass_at_1" in l]
# Every evaluation from the last fifth of the run (distinct versions), averaged: less noise than the last one alone.
late = {l["eval_version"]: l["pass_at_1"] for l in ev if l["eval_version"] >= 0.8 * m["policy_version"]}
h = m["lag_histogram"]; lag = sum(i * n for i, n in enumerate(h)) / max(1, sum(h))
print(json.dumps(dict(shape=shape, bound=int(bound), corr=corr, seed=int(seed), version=m["policy_version"],
                      ret=m["mean_return"], pass_at_1=ev[-1]["pass_at_1"] if ev else None,
                      eval_version=ev[-1]["eval_version"] if ev else None,
                      late_pass_at_1=sum(late.values()) / len(late) if late else None, late_evals=len(late), time=m["time_s"], lag=lag, lag_histogram=h,
                      stale=m["segments_dropped_stale"], received=m["segments_received"],
                      stale_tokens=m["stale_tokens"], policy_tokens=m["policy_tokens"])))
PY
  tail -1 "$out/sweep.jsonl"
done; done; done
python3 - "$out" "$updates" <<'PY'
import json, statistics as st, sys
out, updates = sys.argv[1], sys.argv[2]
rows = [json.loads(l) for l in open(out + "/sweep.jsonl")]
lines = ["| max_staleness | correction | pass@1, mean of the last fifth's evaluations, per seed | median | last evaluation (version), per seed | "
         "answered right, last 100 episodes, per seed | mean lag (tokens) | segments dropped stale | tokens masked stale | wall s (median) |",
         "|---|---|---|---|---|---|---|---|---|---|"]
dat = []
for b in sorted({r["bound"] for r in rows}):
    for c in ("decoupled", "none"):
        r = [x for x in rows if x["bound"] == b and x["corr"] == c]
        if not r: continue
        rets = [x["ret"] for x in r]
        stale = sum(x["stale"] for x in r) / max(1, sum(x["received"] for x in r))
        masked = sum(x["stale_tokens"] for x in r) / max(1, sum(x["policy_tokens"] for x in r))
        late = [x["late_pass_at_1"] for x in r if x.get("late_pass_at_1") is not None]
        lines.append(f"| {b} | {c} | {' / '.join('%.3f (%d)' % (x['late_pass_at_1'], x['late_evals']) for x in r if x.get('late_pass_at_1') is not None)} | "
                     f"{st.median(late) if late else float('nan'):.3f} | "
                     f"{' / '.join('%.2f (v%d)' % (x['pass_at_1'], x['eval_version']) for x in r if x['pass_at_1'] is not None)} | "
                     f"{' / '.join(f'{v:.2f}' for v in rets)} | {st.mean(x['lag'] for x in r):.2f} | {100 * stale:.0f} % | "
                     f"{100 * masked:.1f} % | {st.median(x['time'] for x in r):.0f} |")
        dat += [f"{b} {c} {x['ret']:.3f} {x['late_pass_at_1'] if x.get('late_pass_at_1') is not None else 'NaN'}" for x in r]
open(out + "/table.md", "w").write("\n".join(lines) + "\n")
open(out + "/points.dat", "w").write("\n".join(dat) + "\n")
# Lag histograms: per bound, both corrections and every seed summed, as fractions.
for b in sorted({r["bound"] for r in rows}):
    h = [0] * (b + 1)
    for x in rows:
        if x["bound"] == b:
            for i, n in enumerate(x["lag_histogram"]): h[i] += n
    total = max(1, sum(h))
    open(f"{out}/lag-{b}.dat", "w").write("\n".join(f"{i} {n / total:.4f}" for i, n in enumerate(h)) + "\n")
print("\n".join(lines))
PY
if command -v gnuplot > /dev/null; then
  gnuplot <<GP
set terminal pngcairo size 800,480 noenhanced
set output "$out/staleness.png"
set title "Token arithmetic ($shape shape): after $updates updates, by staleness bound"
set xlabel "max_staleness"; set ylabel "fraction right"
set yrange [0.2:0.7]
$staleness_axis
plot "$out/points.dat" using (pos(\$1) - 0.12):(strcol(2) eq "decoupled" ? \$3 : 1/0) with points pt 7 ps 1.2 title "decoupled: last 100 episodes", \
     "$out/points.dat" using (pos(\$1) - 0.04):(strcol(2) eq "none" ? \$3 : 1/0) with points pt 5 ps 1.2 title "none: last 100 episodes", \
     "$out/points.dat" using (pos(\$1) + 0.04):(strcol(2) eq "decoupled" ? \$4 : 1/0) with points pt 6 ps 1.2 title "decoupled: pass@1 (last fifth)", \
     "$out/points.dat" using (pos(\$1) + 0.12):(strcol(2) eq "none" ? \$4 : 1/0) with points pt 4 ps 1.2 title "none: pass@1 (last fifth)"
set output "$out/lag.png"
set title "Token arithmetic ($shape shape): trained tokens by lag, per staleness bound"
set xlabel "lag (versions)"; set ylabel "share of trained tokens"
set yrange [0:*]; set xrange [-0.5:16.5]; set xtics 1
plot for [b in "$bounds"] "$out/lag-".b.".dat" using 1:2 with linespoints title "max_staleness ".b
GP
fi
