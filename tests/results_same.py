#!/usr/bin/python3
"""results_same.py A B — do results directories A and B hold the same points with the same
non-timing values? Prints OK or the first differences. Rows are matched by point_id and the
table's own row key (position, accept_length, prompt_index + repetition); a column present in one
directory only (`host`, which merge adds) is ignored. Timing columns differ between any two runs
and are not compared: test_time, every *_s / *_ms / *_ms_* column, throughput_stddev, speedup and
its interval, stable, verify_cost_steps, peak_mem_mib, major_faults, the prediction ratio, the
requests in flight, the neighbours' load (other_cores, contended), and the serving rates (a closed
loop's arrival rate is its admissions': arrival_rate, arrival_cv, request_throughput, goodput,
slo_attainment)."""
import csv, os, sys

TABLES = {'summary.csv': (), 'acceptance.csv': ('position',), 'histogram.csv': ('accept_length',),
          'requests.csv': ('prompt_index', 'repetition')}
TIMING = {'test_time', 'throughput_stddev', 'speedup', 'speedup_ci_lo', 'speedup_ci_hi', 'stable',
          'verify_cost_steps', 'peak_mem_mib', 'major_faults', 'measured_over_predicted',
          'mean_in_flight', 'max_in_flight', 'other_cores', 'contended', 'arrival_rate', 'arrival_cv',
          'request_throughput', 'goodput', 'slo_attainment'}


def timing(c):
    return c in TIMING or c.endswith('_s') or c.endswith('_ms') or '_ms_' in c


def load(d, t, keys):
    with open(os.path.join(d, t), newline='') as f:
        rows = list(csv.DictReader(f))
    return {tuple(r[k] for k in ('point_id',) + keys): r for r in rows}, rows


def main():
    a, b = sys.argv[1], sys.argv[2]
    problems = []
    for t, keys in TABLES.items():
        ra, la = load(a, t, keys)
        rb, lb = load(b, t, keys)
        if len(ra) != len(la) or len(rb) != len(lb):
            problems.append(f'{t}: a row key twice')
        if set(ra) != set(rb):
            problems.append(f'{t}: rows differ: {sorted(set(ra) ^ set(rb))[:3]}')
            continue
        cols = [c for c in la[0] if c in lb[0] and not timing(c)] if la else []
        for k in sorted(ra):
            diff = [c for c in cols if ra[k][c] != rb[k][c]]
            if diff:
                problems.append(f'{t} {k}: {", ".join(f"{c} {ra[k][c]!r} vs {rb[k][c]!r}" for c in diff[:3])}')
                break
    print('OK' if not problems else '; '.join(problems[:4]))


main()
