#!/usr/bin/env python3
"""The report of scripts/trace-cold.sh.

usage: scripts/trace-report.py TRACE.TXT

Reads the guest's trace (tracefs' text: sched_switch, workqueue and
irq_handler_entry events) and prints a line per cold message, times in
microseconds from the message's first page request interrupt:

  thread   when the page request thread (irq/N-dmarM-prq) first ran
  queued   when the first and the last fault work item were queued
  start    when the first work item started
  cpus     the CPU each work item ran on, in the order they started
  end      when the last work item ended (the last page response)
  poller   the CPU the benchmark (pfnic-perf) ran on most, if seen

A message starts at a page request interrupt taken while no fault work is
queued or running. Then a summary: the median and spread of `end`, and how
many messages had their work items all on one CPU.
"""
import re
import statistics
import sys

LINE = re.compile(r"\s*(.+?)-(\d+)\s+\[(\d+)\]\s+\S+\s+([\d.]+): (\w+): (.*)")
FAULT_WORK = "iommu_sva_handle_iopf"


def events(path):
    for line in open(path, errors="replace"):
        m = LINE.match(line)
        if m:
            comm, _, cpu, t, name, args = m.groups()
            yield float(t) * 1e6, int(cpu), comm, name, args


def work_id(args):
    m = re.search(r"work struct[ =](\w+)", args)
    return m.group(1) if m else None


def messages(path):
    """Splits the trace into messages; yields each one's events."""
    pending = set()  # fault work items queued or running
    current = None
    for ev in events(path):
        t, cpu, comm, name, args = ev
        if name == "irq_handler_entry" and "prq" in args and not pending:
            if current:
                yield current
            current = []
        if current is None:
            continue
        current.append(ev)
        if FAULT_WORK in args and name == "workqueue_queue_work":
            pending.add(work_id(args))
        elif name == "workqueue_execute_end":
            pending.discard(work_id(args))
    if current:
        yield current


def summarize(msg):
    t0 = msg[0][0]
    thread = next((t for t, _, _, n, a in msg
                   if n == "sched_switch" and re.search(r"next_comm=irq/\S*dmar", a)), None)
    ours = set()
    queued, starts, ends = [], [], []
    poller = {}
    for t, cpu, comm, name, args in msg:
        if comm.startswith("pfnic-perf"):
            poller[cpu] = poller.get(cpu, 0) + 1
        if FAULT_WORK not in args and name != "workqueue_execute_end":
            continue
        w = work_id(args)
        if name == "workqueue_queue_work":
            queued.append(t)
            ours.add(w)
        elif name == "workqueue_execute_start":
            starts.append((t, cpu))
        elif name == "workqueue_execute_end" and w in ours:
            ends.append(t)
    if not starts or not ends:
        return None
    return {
        "thread": None if thread is None else thread - t0,
        "queued": (queued[0] - t0, queued[-1] - t0),
        "start": starts[0][0] - t0,
        "cpus": "".join(str(c) for _, c in starts),
        "end": max(ends) - t0,
        "poller": max(poller, key=poller.get) if poller else None,
    }


def main():
    rows = [r for r in map(summarize, messages(sys.argv[1])) if r]
    if not rows:
        print("no cold message in the trace (no page request interrupt with fault work)")
        return
    print("   msg  thread   queued (first..last)   start  cpus of the work items   end  poller")
    for i, r in enumerate(rows):
        thread = "-" if r["thread"] is None else f"{r['thread']:.0f}"
        poller = "-" if r["poller"] is None else f"cpu{r['poller']}"
        print(f"{i:6d} {thread:>7} {r['queued'][0]:8.0f}..{r['queued'][1]:<8.0f} {r['start']:9.0f}"
              f"  {r['cpus']:<22} {r['end']:6.0f}  {poller}")
    ends = sorted(r["end"] for r in rows)
    deciles = statistics.quantiles(ends, n=10) if len(ends) > 1 else [ends[0]] * 9
    one_cpu = sum(1 for r in rows if len(set(r["cpus"])) == 1)
    print(f"\n{len(rows)} messages: last work item ended {statistics.median(ends):.0f} us after the "
          f"interrupt (median; p10 {deciles[0]:.0f}, p90 {deciles[-1]:.0f}); "
          f"{one_cpu} with every work item on one CPU")


if __name__ == "__main__":
    main()
