// SPDX-License-Identifier: GPL-2.0

//! MSI-X: what each vector's handler does (the event queue, descriptor completions, the
//! self-test) and the interrupt self-test.

use super::Nic;
use crate::{regs, verbs::eq::Processed};
use kernel::{
    io::{poll::read_poll_timeout, Io},
    prelude::*,
    sync::atomic::{Acquire, Atomic, Relaxed, Release},
    time::{Delta, Instant, Monotonic},
};

/// How long a self-test interrupt may take (TCG guests on a loaded host are slow).
const SELFTEST_TIMEOUT: Delta = Delta::from_millis(2000);

/// [`Nic::selftest_vector`] when no self-test runs.
pub(super) const NO_SELFTEST: u32 = u32::MAX;

/// Per-MSI-X-vector counters, written by that vector's interrupt handler.
pub(crate) struct VectorStats {
    /// Interrupts handled.
    pub(crate) interrupts: Atomic<u64>,
    /// Self-test completions seen; a waiter watches this advance.
    pub(crate) selftests: Atomic<u64>,
    /// `SELFTEST_ECHO` read by the last self-test completion on this vector.
    pub(crate) last_echo: Atomic<u32>,
}

impl VectorStats {
    pub(super) fn new() -> Self {
        Self {
            interrupts: Atomic::new(0),
            selftests: Atomic::new(0),
            last_echo: Atomic::new(0),
        }
    }
}

/// Outcome of one interrupt self-test.
pub(crate) struct SelftestResult {
    pub(crate) echo: u32,
    pub(crate) latency: Delta,
    pub(crate) interrupts: u64,
}

impl Nic {
    /// Has the device signal `vector` and waits for that vector's handler to see it.
    ///
    /// Proves the whole path: MMIO write, device, MSI-X message through the interrupt
    /// remapping IOMMU, the handler, and the handler's read-back of device state.
    pub(crate) fn selftest(&self, vector: u32, cookie: u32) -> Result<SelftestResult> {
        let stats = self.vectors.get(vector as usize).ok_or(EINVAL)?;
        let _guard = self.selftest_lock.lock();

        let before = stats.selftests.load(Acquire);
        // Published before the trigger, so the handler of `vector` looks at `IRQ_STATUS`.
        self.selftest_vector.store(vector, Release);
        let start = Instant::<Monotonic>::now();
        let done = self
            .with_bar(|bar| {
                bar.write_reg(regs::SELFTEST_COOKIE::zeroed().with_value(cookie));
                bar.write_reg(regs::SELFTEST_TRIGGER::zeroed().with_vector(vector));
            })
            .and_then(|()| {
                read_poll_timeout(
                    || Ok(stats.selftests.load(Acquire)),
                    |seen: &u64| *seen != before,
                    Delta::from_micros(20),
                    SELFTEST_TIMEOUT,
                )
            });
        self.selftest_vector.store(NO_SELFTEST, Relaxed);
        done?;
        Ok(SelftestResult {
            latency: start.elapsed(),
            echo: stats.last_echo.load(Relaxed),
            interrupts: stats.interrupts.load(Relaxed),
        })
    }

    /// Called by the handler of `vector`: consumes the events of the event queue (vector 0),
    /// wakes the ring waiters (other vectors: descriptor completions, which have no cause bit)
    /// and, only while a self-test signals this vector, acknowledges `IRQ_STATUS`.
    pub(crate) fn handle_irq(&self, vector: usize) -> IrqOutcome {
        let Some(stats) = self.vectors.get(vector) else {
            return IrqOutcome::None;
        };
        stats.interrupts.add(1, Relaxed);
        let selftest = self.selftest_vector.load(Acquire) as usize == vector;
        let (echo, events) = self
            .with_bar(|bar| {
                // The event queue has no cause bit: its vector looks at the queue itself.
                let events = match &self.verbs {
                    Some(verbs) if vector == crate::verbs::eq::EQ_VECTOR as usize => {
                        verbs.eq.process(bar)
                    }
                    _ => Processed::default(),
                };
                if !selftest {
                    return (None, events);
                }
                let status = bar.read(regs::IRQ_STATUS);
                if status.into_raw() == 0 {
                    return (None, events);
                }
                bar.write_reg(status); // write 1 to clear what we saw
                let echo = status
                    .selftest()
                    .then(|| bar.read(regs::SELFTEST_ECHO).value().get());
                (echo, events)
            })
            .unwrap_or((None, Processed::default()));
        if vector != 0 {
            self.ring_progressed();
        }
        if let Some(eth) = &self.eth {
            if let Some(up) = events.link {
                eth.link_changed(up);
            }
            if vector == eth.vector as usize {
                eth.interrupt();
            }
        }
        if let Some(echo) = echo {
            stats.last_echo.store(echo, Relaxed);
            // Publishes `last_echo` to the waiter in `selftest`.
            stats.selftests.fetch_add(1, Release);
        }
        if events.faults {
            IrqOutcome::Faults
        } else if echo.is_some() || events.events || vector != 0 {
            // Vectors other than 0 also signal descriptor completions.
            IrqOutcome::Handled
        } else {
            IrqOutcome::None
        }
    }

    /// The thread of the event queue's interrupt: serves the page faults the handler queued
    /// ([`crate::verbs::odp`]), one at a time, until none is left.
    pub(crate) fn serve_faults(&self) {
        let Ok(verbs) = self.verbs() else { return };
        loop {
            match verbs.eq.next_fault() {
                Ok(Some(fault)) => self.serve_fault(fault),
                Ok(None) => return,
                // Events wait in the event queue for want of room: take them now.
                Err(()) => {
                    if self.with_bar(|bar| verbs.eq.process(bar)).is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// What an interrupt needs.
pub(crate) enum IrqOutcome {
    /// Nothing was pending.
    None,
    /// Handled.
    Handled,
    /// Handled, and page faults wait for the interrupt's thread.
    Faults,
}
