#!/usr/bin/env bash
# Issue 24 item 8's measurement: RL from a supervised start against the
# same time of continued supervised training from the same checkpoint,
# one seed at a time, each measured the same way (greedy, the same
# held-out and fresh training tasks: the evaluator's first EVAL_TASKS of
# each split).
#   RL:  `rlx launch` on CONFIG with [policy] init = INIT, [run] seed = s,
#        max_seconds = MINUTES x 60, evaluations every EVAL_EVERY versions.
#   SFT: `rlx sft --config CONFIG --init INIT --seconds MINUTES x 60` with
#        seed 100 + s (transcripts the start's own run did not draw; the
#        optimizer starts afresh), SFT_BATCH transcripts, SFT_DRILLS
#        drills and SFT_RECOVERIES recovery drills a step (the start's own
#        recipe), evaluations every SFT_EVAL_EVERY steps.
# Each evaluation is placed at the time its weights existed: for RL the
# first metrics line whose policy_version reached the evaluated version,
# for SFT the training time when the checkpoint was taken.
# usage: INIT=W CONFIG=C bench/agent_rl_vs_sft.sh OUT_DIR
#   env: SEEDS ("1 2 3"), MINUTES (30), EVAL_TASKS (32), EVAL_EVERY (60),
#        SFT_EVAL_EVERY (100), SFT_BATCH (2), SFT_DRILLS (30), SFT_RECOVERIES (0);
#        FINAL_EVAL_TASKS (0): N > 0 also evaluates each arm's end weights alike on
#        N held-out + N fresh training tasks (RL: its newest learner checkpoint),
#        into OUT_DIR/{rl,sft}-s/final.txt, unless that file is there already;
#        REPORT_ONLY=1: summarise the runs already in OUT_DIR, launching none;
#        ARMS ("rl sft"): the arms to run here ("rl": the RL arm alone; "lora": RL
#        training adapters alone, [policy.lora] = LORA over the start as a frozen
#        base, [learner] lr = LORA_LR, into OUT_DIR/lora-s);
#        LORA ('{ rank = 16, alpha = 32, targets = ["qkv", "o_proj", "experts"] }'), LORA_LR (5e-4);
#        JOIN: points.tsv files of earlier sessions (committed under
#        docs/figures/), whose (arm, seed) pairs join this run's in the table
#        and the curve (a pair measured here may not be joined too), and the
#        end weights in the finals.tsv beside each, if there is one.
#   C: a workspace config (run.env = "tokens:workspace"), e.g. examples/agent.toml
#      with the wide policy of docs/BENCHMARKS.md; W: `rlx sft --config C ... --out W`.
# Writes OUT_DIR/points.tsv (arm, seed, minutes, held-out pass@1 and tests
# passed, fresh training pass@1 and tests passed), OUT_DIR/finals.tsv (the
# end weights, joined ones too), OUT_DIR/table.md and, with gnuplot,
# OUT_DIR/curve.png.
set -euo pipefail
out=${1:?usage: INIT=W CONFIG=C bench/agent_rl_vs_sft.sh OUT_DIR}
init=$(realpath "${INIT:?INIT: the supervised start (see the header)}")
config=$(realpath "${CONFIG:?CONFIG: the workspace config (see the header)}")
seeds=${SEEDS-1 2 3}  # empty: none run here (with JOIN, a table of earlier seeds)
arms=${ARMS:-rl sft}
lora=${LORA:-'{ rank = 16, alpha = 32, targets = ["qkv", "o_proj", "experts"] }'}
lora_lr=${LORA_LR:-5e-4}
minutes=${MINUTES:-30}
eval_tasks=${EVAL_TASKS:-32}
eval_every=${EVAL_EVERY:-60}
sft_eval_every=${SFT_EVAL_EVERY:-100}
sft_batch=${SFT_BATCH:-2}
sft_drills=${SFT_DRILLS:-30}
sft_recoveries=${SFT_RECOVERIES:-0}
final_eval_tasks=${FINAL_EVAL_TASKS:-0}
rlx=${RLX:-build/tools/rlx}
seconds=$((minutes * 60))
mkdir -p "$out"
out=$(realpath "$out")
grep -q '^env = "tokens:workspace"' "$config" || { echo "$config: not a workspace config" >&2; exit 2; }
for s in $seeds; do
  d="$out/rl-$s" e="$out/sft-$s" l="$out/lora-$s"
  if [[ -z "${REPORT_ONLY:-}" ]]; then
    for a in $arms; do
      [[ $a == rl || $a == sft || $a == lora ]] || { echo "ARMS: rl, sft, lora, not $a" >&2; exit 2; }
    done
    [[ " $arms " == *" rl "* ]] && rm -rf "$d"  # an arm run here starts afresh; the other is kept
    [[ " $arms " == *" sft "* ]] && rm -rf "$e"
    [[ " $arms " == *" lora "* ]] && rm -rf "$l"
    mkdir -p "$d" "$e"
    # The config's own folder holds its vocabulary: the edited copy names it there.
    vocab=$(sed -n 's/^tokenizer = "\([^"]*\)".*/\1/p' "$config")
    [[ "$vocab" == /* ]] || vocab="$(dirname "$config")/$vocab"
    sed -e "/^init = /d" -e "s/^seed = .*/seed = $s/" -e "s#^log_dir = .*#log_dir = \"$d\"#" \
        -e "s/^stop = .*/stop = { mean_return = 2.0, max_env_steps = 1_000_000_000, max_seconds = $seconds.0 }/" \
        -e "s/^eval_tasks = .*/eval_tasks = $eval_tasks/" -e "s/^eval_every = .*/eval_every = $eval_every/" \
        -e "s#^tokenizer = .*#tokenizer = \"$vocab\"#" -e "s#^\[policy\]#[policy]\ninit = \"$init\"#" \
        "$config" > "$d/c.toml"
    for want in "seed = $s" "max_seconds = $seconds.0" "eval_tasks = $eval_tasks" "eval_every = $eval_every" \
                "init = \"$init\"" "log_dir = \"$d\""; do
      grep -qF "$want" "$d/c.toml" || { echo "$config: the edit to \"$want\" did not apply" >&2; exit 1; }
    done
    if [[ " $arms " == *" lora "* ]]; then
      mkdir -p "$l"
      sed -e "s#^log_dir = .*#log_dir = \"$l\"#" -e "s#^init = .*#&\nlora = $lora#" -e "s/^lr = .*/lr = $lora_lr/" \
          "$d/c.toml" > "$l/c.toml"
      for want in "lora = $lora" "lr = $lora_lr" "log_dir = \"$l\""; do
        grep -qF "$want" "$l/c.toml" || { echo "$config: the edit to \"$want\" did not apply" >&2; exit 1; }
      done
      echo "seed $s: LoRA RL for $minutes min ($l)"
      "$rlx" launch "$l/c.toml" > "$l/out.txt" 2>&1 || [[ $? == 3 ]]
    fi
    if [[ " $arms " == *" rl "* ]]; then
      echo "seed $s: RL for $minutes min ($d)"
      "$rlx" launch "$d/c.toml" > "$d/out.txt" 2>&1 || [[ $? == 3 ]]  # 3: max_seconds reached
    fi
    if [[ " $arms " == *" sft "* ]]; then
      echo "seed $s: continued supervised training for $minutes min ($e)"
      "$rlx" sft --config "$d/c.toml" --init "$init" --seconds "$seconds" --steps 10000000 --batch "$sft_batch" \
        --drills "$sft_drills" --recoveries "$sft_recoveries" --seed $((100 + s)) --eval-every "$sft_eval_every" \
        --eval-tasks "$eval_tasks" --out "$e/sft.pt" > "$e/out.txt" 2>&1
    fi
  fi
  if ((final_eval_tasks > 0)); then
    for w in "$d:$d" "$e:$e/sft.pt" "$l:$l"; do  # folder:weights (a run's log_dir means its newest checkpoint)
      f="${w%%:*}/final.txt"
      [[ -s "$f" || ! -s "${w%%:*}/out.txt" ]] && continue  # done already, or an arm not run
      echo "seed $s: $(basename "${w%%:*}")'s end weights on $final_eval_tasks + $final_eval_tasks tasks ($f)"
      c="$d/c.toml"
      [[ ${w%%:*} == "$l" ]] && c="$l/c.toml"  # the adapters over the start
      "$rlx" sft --config "$c" --init "${w#*:}" --steps 0 --eval-tasks "$final_eval_tasks" > "$f.part" 2>&1
      mv "$f.part" "$f"
    done
  fi
done
python3 - "$out" "$seeds" ${JOIN:-} <<'PY'
import json, os, re, statistics, sys
out, seeds, joins = sys.argv[1], sys.argv[2].split(), sys.argv[3:]
points = []  # (arm, seed, minutes, held-out pass@1, held-out tests passed, fresh training pass@1, tests passed)
both = re.compile(r".*held-out pass@1 ([0-9.]+) \((?:mean )?tests passed ([0-9.]+).*"
                  r"fresh training tasks pass@1 ([0-9.]+) \((?:mean )?tests passed ([0-9.]+)")
def text_of(path):  # an arm's log; "" for an arm not run (ARMS)
    try:
        return open(path, errors="replace").read()  # its episodes hold sampled bytes
    except FileNotFoundError:
        return ""
for s in seeds:
    for rl in ("rl", "lora"):  # RL, and RL training adapters alone
        rl_log = text_of(f"{out}/{rl}-{s}/out.txt")
        lines = ([json.loads(l) for l in open(f"{out}/{rl}-{s}/metrics.jsonl") if l.strip().startswith("{")]
                 if rl_log else [])
        seen = {}
        for l in rl_log.splitlines():  # the evaluator's lines
            r = re.match(r".*evaluator: v(\d+) ", l)
            m = both.match(l)
            if r and m and int(r.group(1)) not in seen:
                v = int(r.group(1))
                t = next((x["time_s"] for x in lines if x["policy_version"] >= v), lines[-1]["time_s"] if lines else 0)
                seen[v] = (t,) + tuple(float(g) for g in m.groups())
        for v, (t, *scores) in sorted(seen.items()):
            points.append((rl, s, t / 60, *scores))
    text = text_of(f"{out}/sft-{s}/out.txt")
    for r in re.finditer(r"step (\d+): held-out pass@1 ([0-9.]+) \(mean tests passed ([0-9.]+)[^\n]*, (\d+) s in\n"
                         r"\s*fresh training tasks pass@1 ([0-9.]+) \(mean tests passed ([0-9.]+)", text):
        points.append(("sft", s, int(r.group(4)) / 60, float(r.group(2)), float(r.group(3)), float(r.group(5)),
                       float(r.group(6))))
for j in joins:  # an earlier session's seeds, measured the same way
    here, joined = {(p[0], p[1]) for p in points}, set()
    for n, l in enumerate(open(j), 1):
        f = l.rstrip("\n").split("\t")
        if len(f) != 7 or f[0] not in ("rl", "sft", "lora"):
            sys.exit(f"{j}:{n}: not a points line (arm, seed, minutes and four scores, tab-separated)")
        if (f[0], f[1]) in here:
            sys.exit(f"{j}:{n}: {f[0]} seed {f[1]} is already in the table: an arm's seed is measured once")
        joined.add(f[1])
        points.append((f[0], f[1], *map(float, f[2:])))
    seeds += sorted(joined - set(seeds), key=lambda s: (len(s), s))
with open(f"{out}/points.tsv", "w") as f:
    for p in points:
        f.write("%s\t%s\t%.2f\t%.4f\t%.4f\t%.4f\t%.4f\n" % p)
rows = ["| arm | seed | held-out pass@1 at the start | at the end (minute) | best | held-out tests passed, start -> end | "
        "fresh training pass@1, start -> end | fresh training tests passed, start -> end |",
        "|---|---|---|---|---|---|---|---|"]
ends = {"rl": [], "lora": [], "sft": []}
for arm in ends:
    for s in seeds:
        ps = sorted((p for p in points if p[0] == arm and p[1] == s), key=lambda p: p[2])
        if not ps:
            continue
        ends[arm].append(ps[-1][3] - ps[0][3])
        rows.append("| %s | %s | %.3f | %.3f (%.1f) | %.3f | %.3f -> %.3f | %.3f -> %.3f | %.3f -> %.3f |" %
                    (arm, s, ps[0][3], ps[-1][3], ps[-1][2], max(p[3] for p in ps), ps[0][4], ps[-1][4], ps[0][5],
                     ps[-1][5], ps[0][6], ps[-1][6]))
for arm, d in ends.items():
    if d:
        rows.append("\n%s: median change in held-out pass@1 over the run %+.3f (seeds: %s)" %
                    (arm, statistics.median(d), ", ".join("%+.3f" % x for x in d)))
finals = []  # (arm, seed, tasks a split, held-out pass@1, fresh pass@1, how episodes ended): FINAL_EVAL_TASKS
end = re.compile(r"held-out pass@1 ([0-9.]+) \(mean tests passed [0-9.]+, (\d+) tasks\)[^\n]*\n"
                 r"\s*fresh training tasks pass@1 ([0-9.]+)[^\n]*\n\s*how episodes ended, held-out: ([^;\n]*); "
                 r"fresh training: ([^\n]*)")
for arm in ("rl", "lora", "sft"):
    for s in sys.argv[2].split():
        try:
            m = end.search(open(f"{out}/{arm}-{s}/final.txt", errors="replace").read())
        except FileNotFoundError:
            continue
        if m:
            finals.append((arm, s, m.group(2), m.group(1), m.group(3),
                           "held-out: %s; fresh training: %s" % (m.group(4), m.group(5))))
for j in joins:  # the end weights of the joined seeds, from the finals.tsv beside their points.tsv
    here = {(x[0], x[1]) for x in finals}
    try:
        lines = open(os.path.join(os.path.dirname(j), "finals.tsv")).read().splitlines()
    except FileNotFoundError:
        continue
    for n, l in enumerate(lines, 1):
        f = l.split("\t")
        if len(f) != 6 or f[0] not in ("rl", "sft", "lora"):
            sys.exit(f"{j}: finals.tsv:{n}: not an end-weights line (arm, seed, tasks, two scores, how ended)")
        if (f[0], f[1]) in here:
            sys.exit(f"{j}: finals.tsv:{n}: {f[0]} seed {f[1]}'s end weights are already in the table")
        finals.append(tuple(f))
finals.sort(key=lambda x: (x[0], len(x[1]), x[1]))
with open(f"{out}/finals.tsv", "w") as f:  # like points.tsv, the joined arms too: a later JOIN reads it
    f.writelines("\t".join(x) + "\n" for x in finals)
if finals:
    rows += ["", "End weights evaluated alike (`rlx sft --init W --steps 0`):", "",
             "| arm | seed | tasks a split | held-out pass@1 | fresh training pass@1 | how episodes ended |",
             "|---|---|---|---|---|---|"] + ["| %s |" % " | ".join(x) for x in finals]
    for arm in ("rl", "lora", "sft"):
        held = [float(x[3]) for x in finals if x[0] == arm]
        if held:
            rows.append("\n%s end weights: median held-out pass@1 %.3f (seeds: %s)" %
                        (arm, statistics.median(held), ", ".join("%.3f" % h for h in held)))
open(f"{out}/table.md", "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
if command -v gnuplot >/dev/null; then
  gnuplot <<GP
set terminal pngcairo size 800,480 noenhanced
set output "$out/curve.png"
set xlabel "minutes"
set ylabel "pass@1 (greedy, $eval_tasks tasks a split)"
set yrange [0:*]
set key top left
set datafile separator "\t"
# Held-out tasks filled, fresh training tasks open; each seed's evaluations.
plot "$out/points.tsv" using 3:(strcol(1) eq "rl" ? \$4 : 1/0) with points pt 7 lc 1 title "RL, held-out", \
     "$out/points.tsv" using 3:(strcol(1) eq "sft" ? \$4 : 1/0) with points pt 5 lc 2 title "continued SFT, held-out", \
     "$out/points.tsv" using 3:(strcol(1) eq "lora" ? \$4 : 1/0) with points pt 9 lc 3 title "LoRA RL, held-out", \
     "$out/points.tsv" using 3:(strcol(1) eq "rl" ? \$6 : 1/0) with points pt 6 lc 1 title "RL, fresh training", \
     "$out/points.tsv" using 3:(strcol(1) eq "lora" ? \$6 : 1/0) with points pt 8 lc 3 title "LoRA RL, fresh training", \
     "$out/points.tsv" using 3:(strcol(1) eq "sft" ? \$6 : 1/0) with points pt 4 lc 2 title "continued SFT, fresh training"
GP
  echo "wrote $out/curve.png"
fi
