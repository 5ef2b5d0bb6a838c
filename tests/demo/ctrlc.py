#!/usr/bin/env python3
"""tests/demo/ctrlc.py — `make demo` ended by Ctrl-C in a real terminal.

Runs `make demo` in a pseudo-terminal (the child's controlling terminal,
as a person's shell would have), waits for the banner, types Ctrl-C (the
byte 0x03: the terminal driver sends SIGINT to its foreground process
group, as it does for a person) and checks:

  - make exits 0 and says nothing of an "Interrupt" or "***";
  - the demo's summary is printed, with every line a timed run prints
    (trades, contracts, invoices, ledger check), then "stopped";
  - the terminal is as it was: its settings (stty -g) unchanged and the
    shell's process group its foreground group again;
  - nothing of the demo runs on: no process whose command line names the
    demo's folder or its PostgreSQL cluster, no postmaster.pid left;
  - a second `make demo` started meanwhile is refused and says why.

Usage: ctrlc.py ROOT OUTDIR. Prints "ok ..."/"not ok ..." lines and last
"N passed, M failed". The demo stops by itself after RAMEX_DEMO_SECONDS
(set here) should Ctrl-C not reach it, and the whole run is bounded.
"""

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time

ROOT, OUT = sys.argv[1], sys.argv[2]
BANNER = b'Ctrl-C stops everything.'
SUMMARY = [r'demo: after \d+s: (at least )?\d+ trades', r'demo:   contracts: (at least )?\d+',
           r'demo:   usage reports: (at least )?\d+', r'demo:   invoices: (at least )?\d+',
           r'demo:   ledger check: ', r'demo: stopped; logs are in var/demo/']

passed = failed = 0


def check(name, ok, detail=''):
    global passed, failed
    if ok:
        passed += 1
        print(f'ok {name}')
    else:
        failed += 1
        print(f'not ok {name}: {detail}')


def read_until(fd, buf, done, limit):
    """Reads the pty into buf until done(buf) or limit seconds; False on EOF."""
    end = time.monotonic() + limit
    while not done(buf) and time.monotonic() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if not r:
            continue
        try:
            d = os.read(fd, 65536)
        except OSError:  # EIO: every writer of the terminal has gone
            return False
        if not d:
            return False
        buf += d
    return True


def demo_procs(cluster):
    """The processes whose command line names the demo's folder or cluster."""
    names = [os.path.join(ROOT, 'var/demo')] + ([cluster] if cluster else [])
    ps = subprocess.run(['ps', '-eo', 'pid=,args='], capture_output=True, text=True).stdout
    return [line.strip() for line in ps.splitlines() if any(n in line for n in names)]


env = {k: v for k, v in os.environ.items() if k not in ('MAKEFLAGS', 'MFLAGS', 'MAKELEVEL', 'MAKEOVERRIDES')}
env.update(RAMEX_DEMO_SECONDS='180', RAMEX_DEMO_PORT='0', RAMEX_DEMO_AGENTS='2', TERM='dumb',
           RAMEX_DEMO_SUMMARY_PAGES='1', RAMEX_DEMO_SUMMARY_LIMIT='1')

# The child: a shell in the terminal, as a person's, that reports the
# terminal's settings and its foreground group before and after make.
script = ('report() { echo "TTY$1 $(stty -g) PGRP=$(ps -o pgid= -p $$ | tr -d \' \') '
          'FG=$(ps -o tpgid= -p $$ | tr -d \' \')"; }; '
          'report 0; make --no-print-directory demo; rc=$?; echo "MAKE_RC=$rc"; report 1')
t0 = time.monotonic()
pid, fd = pty.fork()
if pid == 0:
    os.chdir(ROOT)
    os.execvpe('bash', ['bash', '-c', script], env)

buf = bytearray()
read_until(fd, buf, lambda b: BANNER in b, 300)
banner_s = time.monotonic() - t0
saw_banner = BANNER in buf
check('the demo printed its banner', saw_banner, f'no banner after {banner_s:.0f} s')
cluster = ''
try:
    cluster = os.path.realpath(os.path.join(ROOT, 'var/demo/pg/cluster'))
except OSError:
    pass
if saw_banner:
    # A second demo in the same tree is refused at once and leaves the
    # first alone (it destroyed the first's PostgreSQL and var/demo/:
    # the first then printed no summary, which the checks below see).
    second = subprocess.run(['make', '--no-print-directory', 'demo'], cwd=ROOT, stdin=subprocess.DEVNULL,
                            env=dict(env, RAMEX_DEMO_SECONDS='5'), capture_output=True, text=True, timeout=300)
    said = second.stdout + second.stderr
    check('a second make demo in the same tree is refused, saying why',
          second.returncode != 0 and 'another make demo runs in this tree' in said,
          f'exit {second.returncode}: {said[-300:]}')
    time.sleep(2)
    os.write(fd, b'\x03')
t1 = time.monotonic()
read_until(fd, buf, lambda b: re.search(rb'TTY1 .*FG=\d+', b), 240)
stop_s = time.monotonic() - t1
read_until(fd, buf, lambda b: False, 10)  # to EOF: the shell has exited
for _ in range(100):
    if os.waitpid(pid, os.WNOHANG)[0]:
        break
    time.sleep(0.1)
else:
    os.killpg(pid, signal.SIGKILL)  # our child's own session, nothing else
    os.waitpid(pid, 0)
text = re.sub(r'\x1b\[[0-9;]*m', '', buf.decode(errors='replace').replace('\r\n', '\n'))  # no bold
with open(os.path.join(OUT, 'demo-ctrlc.log'), 'w') as f:
    f.write(text)

m = re.search(r'MAKE_RC=(\d+)', text)
check('make exits 0 after Ctrl-C', m and m.group(1) == '0', f'make exited {m.group(1) if m else "?"}')
check('no "Interrupt" and no "***" from make', not re.search(r'Interrupt|\*\*\*', text),
      ' | '.join(line for line in text.splitlines() if re.search(r'Interrupt|\*\*\*', line)))
after = text[text.find('^C'):] if '^C' in text else text
for pat in SUMMARY:
    check(f'the summary has /{pat}/', re.search(pat, after), 'missing after Ctrl-C')
# It reads one page of one row here (RAMEX_DEMO_SUMMARY_*): a listing with
# a row has a next page, so each count is 0, or "at least 1 (not all
# read)"; it capped at 500 rows and said nothing (now it pages, to a bound
# it names when it reaches it).
for what in ('trades', 'contracts', 'usage reports', 'invoices'):
    m = re.search(r'demo: (?:after \d+s: )?(?:  )?' + ('' if what == 'trades' else what + ': ') +
                  r'(at least )?(\d+)' + (' trades' if what == 'trades' else '') + r'( \(not all read\))?', after)
    ok = m and (m.group(2) == '0' and not m.group(1) and not m.group(3) or
                m.group(2) == '1' and m.group(1) and m.group(3))
    check(f'the summary\'s {what} say when not all were read', ok, m.group(0) if m else 'no line')
tty = re.findall(r'TTY(\d) (\S+) PGRP=(\d+) FG=(\d+)', text)
d = {t[0]: t for t in tty}
check('the terminal\'s settings are as before', '0' in d and '1' in d and d['0'][1] == d['1'][1],
      f'stty -g before {d.get("0", ("", "?"))[1]} after {d.get("1", ("", "?"))[1]}')
check('the shell is the terminal\'s foreground group again', '1' in d and d['1'][2] == d['1'][3],
      f'pgrp {d.get("1", ("", "", "?"))[2]}, foreground {d.get("1", ("", "", "", "?"))[3]}')
time.sleep(1)
left = demo_procs(cluster)
check('no process of the demo runs on', not left, '; '.join(left[:5]))
pidfile = os.path.join(cluster, 'data', 'postmaster.pid') if cluster else ''
check('the demo\'s PostgreSQL is stopped', not cluster or not os.path.exists(pidfile), f'{pidfile} exists')
print(f'# banner after {banner_s:.1f} s, summary and stop {stop_s:.1f} s after Ctrl-C')
print(f'{passed} passed, {failed} failed')
