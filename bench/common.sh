# Shell helpers of the bench/*.sh scripts, sourced first: from the
# repository root, with $rlx the built command line.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rlx=$PWD/build/tools/rlx
now() { date +%s.%N; }

# Waits (polling 20 ms: a benchmark, not a test) until FILE has COUNT (1)
# lines with TEXT; prints the time. Fails after LIMIT seconds.
wait_for() {
  local file=$1 text=$2 limit=$3 count=${4:-1} start
  start=$(now)
  until [[ $(grep -cF "$text" "$file" 2> /dev/null || true) -ge $count ]]; do
    if awk -v a="$(now)" -v b="$start" -v l="$limit" 'BEGIN { exit !(a - b > l) }'; then
      echo "$(basename "$0"): '$text' not seen $count times within $limit s" >&2
      return 1
    fi
    sleep 0.02
  done
  now
}

elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f\n", a - b }'; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }

# gnuplot lines of the staleness sweeps' x axis: the bounds 0, 1, 2, 4, 8,
# 16 evenly spaced, pos(BOUND) their places.
staleness_axis='set xrange [-0.5:5.5]; set key outside below horizontal
set xtics ("0" 0, "1" 1, "2" 2, "4" 3, "8" 4, "16" 5)
pos(b) = b == 0 ? 0 : b == 1 ? 1 : b == 2 ? 2 : b == 4 ? 3 : b == 8 ? 4 : 5'
