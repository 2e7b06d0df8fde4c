#!/usr/bin/python3
"""results_check.py DIR [N] — is DIR a consistent `dflash-bench run` results directory?
Prints OK or the problems found (one line). Without N (a run that stopped: a fault, a kill):
points.done lists distinct ids, each of them has exactly one summary row, every table parses
as CSV with its header first, and rows of points not in points.done belong to at most one point
(the point being written when the run stopped, possibly cut short, even inside a quoted field or
its point_id, whose cut text is then a prefix of that point's id:
results_dir.h). With N (a
finished sweep of N points): exactly N ids, every table holds rows of those points only, whole
records (no torn line, the file ends with a newline), summary.csv one row per point and
acceptance.csv one row per (point, position)."""
import collections, csv, io, os, sys

TABLES = ('summary.csv', 'acceptance.csv', 'histogram.csv', 'requests.csv')


def main():
    d = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else None
    problems = []
    if not os.path.exists(os.path.join(d, 'points.done')):
        # a run stopped before its first point: no table may hold a row
        done_text = ''
    else:
        with open(os.path.join(d, 'points.done'), 'rb') as f:
            done_text = f.read().decode('utf-8')
    lines = done_text.split('\n')
    if n is not None and done_text and not done_text.endswith('\n'):
        problems.append('points.done: last line cut short')
    done = [l for l in lines[:-1] if l]  # a last line without its newline does not count
    if len(set(done)) != len(done):
        problems.append('points.done: an id listed twice')
    if n is not None and len(set(done)) != n:
        problems.append(f'points.done: {len(set(done))} ids, expected {n}')
    unlisted = set()
    cut_ids = []  # point_id fields of records cut short inside that field
    for t in TABLES:
        p = os.path.join(d, t)
        if not os.path.exists(p):
            if done:
                problems.append(f'{t}: missing')
            continue
        with open(p, 'rb') as f:
            raw = f.read().decode('utf-8')
        if n is not None and raw and not raw.endswith('\n'):
            problems.append(f'{t}: last record cut short')
        rows, err = [], None
        reader = csv.reader(io.StringIO(raw, newline=''), strict=True)
        try:
            for r in reader:
                rows.append(r)
        except csv.Error as e:
            err = e
        if err is not None:
            # a run that stopped may leave its last record cut inside a quoted field: the text
            # after the last whole record is that record's start (results_dir.h), so the rows
            # parsed before it stand; anything else is a table that does not parse
            if n is not None or 'unexpected end of data' not in str(err):
                problems.append(f'{t}: does not parse: {err}')
                continue
            rows.append([])  # the cut record: counts as the one that may be short
        if not rows or not rows[0] or rows[0][0] != 'schema_version':
            problems.append(f'{t}: no header')
            continue
        hdr = rows[0]
        if any(r and r[0] == 'schema_version' for r in rows[1:]):
            problems.append(f'{t}: a second header')
        body = rows[1:]
        last_may_be_cut = n is None
        for i, r in enumerate(body):
            if len(r) != len(hdr) and not (last_may_be_cut and i == len(body) - 1):
                problems.append(f'{t}: record {i + 2} has {len(r)} fields, header {len(hdr)}')
                break
        ic = hdr.index('point_id') if 'point_id' in hdr else None
        if ic is None:
            problems.append(f'{t}: no point_id column')
            continue
        ids = [r[ic] for r in body if len(r) > ic]
        if last_may_be_cut and body and ic == len(body[-1]) - 1 < len(hdr) - 1:
            # the cut record stops inside its point_id: that field is a prefix of the id being
            # written, judged once every table is read
            cut_ids.append(ids.pop())
        unlisted |= {x for x in ids if x not in done}
        if t == 'summary.csv':
            c = collections.Counter(ids)
            bad = [x for x in done if c[x] != 1]
            if bad:
                problems.append(f'summary.csv: {len(bad)} done points without exactly one row')
        if t == 'acceptance.csv' and n is not None and 'position' in hdr:
            ip = hdr.index('position')
            dup = collections.Counter((r[ic], r[ip]) for r in body if len(r) == len(hdr))
            if any(v != 1 for v in dup.values()):
                problems.append('acceptance.csv: a (point, position) row twice')
    for c in cut_ids:
        if not any(x.startswith(c) for x in unlisted | set(done)):
            unlisted.add(c)
    if n is not None and unlisted:
        problems.append(f'rows of {len(unlisted)} points not in points.done')
    if n is None and len(unlisted) > 1:
        problems.append(f'rows of {len(unlisted)} unfinished points (at most 1 allowed)')
    print('OK' if not problems else '; '.join(problems))


if __name__ == '__main__':
    main()
