#!/usr/bin/env bash
# cli_load.sh — serving-style load end to end on the embedded pair (TAP; skips without models/):
# one `run --request-rate 40,inf --max-concurrency 4 --slo-ttft-ms --slo-tpot-ms` of ar and
# dflash2, one round (about 10 s; minutes under ASan). Checks: every rate is a row with its own ar; the measured arrival rate
# within 10% of the asked one, the gaps' CV near 1 (Poisson); ar and dflash2 saw the same
# arrival times (requests.csv); at the rate nobody is admitted before arriving and TTFT counts
# the wait; goodput <= request throughput; the closed loop's rows keep its definitions (queue 0,
# arrival = admission); the acceptance columns (three tau, conditional and unconditional rates,
# thinking) are there; -o json gives "inf" for a closed loop's rate; a bad rate is refused.
set -u

BIN=${DB_BIN:?DB_BIN not set (run through meson test)}
. "$(dirname "$0")/tap.sh"
need_models
need_results_check
make_tmp cli-load
out="$tmp/stdout"
errf="$tmp/stderr"

run run -v ar,dflash2 -B 16 --max-concurrency 4 --dataset math --max-samples 4 -n 8 --request-rate 40,inf \
    --slo-ttft-ms 200 --slo-tpot-ms 20 --min-time 0 -r 1 --warmup 0 -o json --out "$tmp/r"
ok "$rc" "run --request-rate 40,inf --max-concurrency 4 exits 0"
[ "$rc" = 0 ] || diag <"$errf"
ok "$("$PY" "$CHECK" "$tmp/r" 4 >"$tmp/check" 2>&1; echo $?)" "a consistent results directory of 4 points ($(cat "$tmp/check"))"

"$PY" - "$tmp/r" "$out" >"$tmp/py" 2>&1 <<'EOF'
import csv, json, math, os, sys
d, js = sys.argv[1], sys.argv[2]
S = list(csv.DictReader(open(os.path.join(d, 'summary.csv'))))
Q = list(csv.DictReader(open(os.path.join(d, 'requests.csv'))))
A = list(csv.DictReader(open(os.path.join(d, 'acceptance.csv'))))
def check(cond, what):
    print(('ok ' if cond else 'FAIL ') + what)
rates = sorted((r['request_rate'], r['variant']) for r in S)
check(rates == [('40', 'ar'), ('40', 'dflash2'), ('inf', 'ar'), ('inf', 'dflash2')], f'rows {rates}')
for r in S:
    f = lambda k: float(r[k]) if r[k] != '' else math.nan
    if r['request_rate'] == '40':
        check(abs(f('arrival_rate') - 40) <= 4, f"{r['variant']}: measured arrival rate {r['arrival_rate']} within 10% of 40")
        check(0.7 < f('arrival_cv') < 1.3, f"{r['variant']}: arrival gaps' CV {r['arrival_cv']} (Poisson: 1)")
        check(int(r['n_prompts']) >= 100, f"{r['variant']}: {r['n_prompts']} arrivals per round")
    else:
        check(f('queue_ms_p99') == 0, f"{r['variant']} closed loop: no queue")
    check(0 <= f('goodput') <= f('request_throughput') + 1e-9 and 0 <= f('slo_attainment') <= 1,
          f"{r['variant']} {r['request_rate']}: goodput {r['goodput']} <= {r['request_throughput']} req/s")
    check(f('slo_ttft_ms') == 200 and f('slo_tpot_ms') == 20, 'the SLOs recorded')
    check(f('input_tok_s') > 0 and f('itl_ms_p50') > 0 and f('itl_ms_p99') >= f('itl_ms_p90') >= f('itl_ms_p50'),
          f"{r['variant']}: input tok/s {r['input_tok_s']}, ITL p50/p90/p99 {r['itl_ms_p50']}/{r['itl_ms_p90']}/{r['itl_ms_p99']}")
    check(r['thinking'] == '0' and r['tau_request_mean'] != '' and r['tau_token_weighted'] != '', 'thinking and the three tau')
arr = {}
for q in Q:
    if q['request_rate'] != '40':
        continue
    arr.setdefault(q['variant'], []).append((int(q['repetition']), int(q['prompt_index']), q['t_arrival_ms']))
    ttft, first, a, adm = float(q['ttft_ms']), float(q['t_first_token_ms']), float(q['t_arrival_ms']), float(q['t_admitted_ms'])
    if adm < a - 1e-6 or abs(ttft - (first - a)) > 1e-3:
        check(False, f'request {q["prompt_index"]}: admitted {adm} before arriving {a}, or TTFT {ttft} not from the arrival')
check(all(q['t_arrival_ms'] == q['t_admitted_ms'] and q['queue_ms'] == '0' for q in Q if q['request_rate'] == 'inf'),
      'closed loop: a request arrives at its admission')
check(sorted(arr['ar']) == sorted(arr['dflash2']), 'ar and dflash2: the same arrival times, round by round')
both = [(float(a['unconditional_rate']), float(a['conditional_rate'])) for a in A
        if a['unconditional_rate'] != '' and a['conditional_rate'] != '']
check(len(both) >= 2 and all(u <= c + 1e-12 for u, c in both),
      f'acceptance.csv: unconditional <= conditional rate at every position ({len(both)} positions)')
J = json.load(open(js))
check(sorted(str(j['request_rate']) for j in J) == ['40', '40', 'inf', 'inf'], '-o json: 40 (a number) and "inf"')
EOF
while read -r verdict what; do
    ok "$([ "$verdict" = ok ]; echo $?)" "$what"
done <"$tmp/py"
grep -q . "$tmp/py" || { ok 1 "the checks ran"; diag <"$tmp/py"; }

expect_refused "--request-rate 0 is refused" "request_rate: 0 must be > 0" -- run --request-rate 0 --dry-run
done_testing
