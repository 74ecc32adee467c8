#!/usr/bin/env python3
"""Summarises replay/results/x2 (validate outputs + replay summaries): per-plan makespan error and
the communication-alone bandwidth ratios. Usage: x2_table.py [RESULTS_DIR] [--rows]
Bad input (no such folder, no x2-*.validate.json in it, an unreadable or malformed file): one line
"x2_table: <file>: <what>" on stderr, exit 2."""
import glob, json, os, sys

R = next((a for a in sys.argv[1:] if not a.startswith('--')), 'replay/results/x2')


def _one_line(exc_type, exc, tb):
    # Anything not caught below (a file that decodes badly, a zero time, a missing sibling run):
    # one line, exit 2, never a traceback.
    print(f'x2_table: {R}: {exc_type.__name__}: {exc}', file=sys.stderr)
    sys.stderr.flush()
    os._exit(2)


sys.excepthook = _one_line


def fail(msg):
    print(f'x2_table: {msg}', file=sys.stderr)
    sys.exit(2)


def load(f):
    try:
        t = open(f).read()
    except OSError as e:
        fail(f'{f}: {e.strerror}')
    if '{' not in t:
        fail(f'{f}: no JSON object')
    try:
        return json.loads(t[t.index('{'):])  # NCCL may print its version line before the JSON
    except ValueError as e:
        fail(f'{f}: not JSON ({e})')


if not os.path.isdir(R):
    fail(f'{R}: no such folder')
rows = {}
for f in sorted(glob.glob(f'{R}/x2-*.validate.json')):
    n = os.path.basename(f)[3:-len('.validate.json')]
    summary = f'{R}/traces/{n}.summary.json'
    v, s = load(f), load(summary)
    try:
        L = v['layers'][0]
        rows[n] = dict(meas_ms=L['measured_s'] * 1e3, sim_ms=L['simulated_s'] * 1e3,
                       err=v['makespan_max_error'] * 100, mape=v['mape'] * 100,
                       staged=v.get('host_staged_achieved_GBps', 0))
    except (KeyError, IndexError, TypeError) as e:
        fail(f'{f}: not a validate report (missing {e})')
    try:
        rows[n]['gb'] = s['bytes_verified'] / 1e9 / (s['warmup'] + s['iterations'])
    except (KeyError, TypeError, ZeroDivisionError) as e:
        fail(f'{summary}: not a replay summary (missing {e})')
if '--rows' in sys.argv:
    print('| run | measured ms | simulated ms | makespan error | transfer MAPE | GB verified / iteration |')
    print('|---|---:|---:|---:|---:|---:|')
    for n, r in rows.items():
        print(f"| {n} | {r['meas_ms']:.3f} | {r['sim_ms']:.3f} | {r['err']:.2f}% | {r['mape']:.1f}% | {r['gb']:.3f} |")
if not rows:
    fail(f'{R}: no x2-*.validate.json files')
plans = [r['err'] for n, r in rows.items() if '.comm.' not in n and 'smoke' not in n]
comm = [r['err'] for n, r in rows.items() if '.comm.' in n]
if plans:
    print(f'{len(plans)} plans: makespan error max {max(plans):.2f}%, mean {sum(plans)/len(plans):.2f}%, '
          f'over 3%: {sum(x > 3 for x in plans)}, over 10%: {sum(x > 10 for x in plans)}')
if comm:
    print(f'{len(comm)} communication-alone runs: max {max(comm):.2f}%, mean {sum(comm)/len(comm):.2f}%')
print('| model, mask | needed GB | CE direct (NVLink) ms, GB/s | CE host-staged | NCCL P2P | NCCL no P2P | '
      'CE direct / NCCL P2P | CE staged / NCCL no P2P |')
print('|---|---:|---:|---:|---:|---:|---:|---:|')
for cfg in ['hunyuan-sta', 'hunyuan-radial', 'wan14b-sta', 'wan14b-radial']:
    if f'{cfg}.comm.ce_p2p' not in rows: continue
    g = rows[f'{cfg}.comm.ce_p2p']['gb']
    t = {k: rows[f'{cfg}.comm.{k}']['meas_ms'] for k in ['ce_p2p', 'ce_staged', 'nccl_p2p', 'nccl_nop2p']}
    f = lambda k: f"{t[k]:.3f}, {g / t[k] * 1e3:.0f}"
    print(f"| {cfg} | {g:.3f} | {f('ce_p2p')} | {f('ce_staged')} | {f('nccl_p2p')} | {f('nccl_nop2p')} | "
          f"{t['nccl_p2p'] / t['ce_p2p']:.2f}x | {t['nccl_nop2p'] / t['ce_staged']:.2f}x |")
