// SPDX-License-Identifier: GPL-2.0

//! Statistics: the device's counters per context and device-wide, for the ioctls and debugfs.

use super::Nic;
use crate::{regs, uapi};
use kernel::{
    io::{register::Array, Io},
    prelude::*,
    sync::atomic::Relaxed,
};

/// Builds counters from a register block read in [`uapi::TranslationStats`] order.
fn translation_stats(read: impl Fn(usize) -> u32) -> uapi::TranslationStats {
    uapi::TranslationStats {
        page_requests: read(0),
        pri_success: read(1),
        pri_failed: read(2),
        atc_hits: read(3),
        atc_misses: read(4),
        invalidations: read(5),
        prq_full: read(6),
        prq_held: read(7),
        page_request_groups: read(8),
        page_request_groups_max: read(9),
        lookahead_pages: read(10),
        lookahead_used: read(11),
        lookahead_wasted: read(12),
        reserved: 0,
    }
}

/// The counters by name, in [`uapi::TranslationStats`] order: what debugfs and the RDMA
/// core's resource tracking (a user context's details) show.
pub(crate) fn translation_named(t: &uapi::TranslationStats) -> [(&'static CStr, u32); 13] {
    [
        (c"page_requests", t.page_requests),
        (c"pri_success", t.pri_success),
        (c"pri_failed", t.pri_failed),
        (c"atc_hits", t.atc_hits),
        (c"atc_misses", t.atc_misses),
        (c"invalidations", t.invalidations),
        (c"prq_full", t.prq_full),
        (c"prq_held", t.prq_held),
        (c"page_request_groups", t.page_request_groups),
        (c"page_request_groups_max", t.page_request_groups_max),
        (c"lookahead_pages", t.lookahead_pages),
        (c"lookahead_used", t.lookahead_used),
        (c"lookahead_wasted", t.lookahead_wasted),
    ]
}

/// Writes counters as `name value` pairs joined by `sep`, ending the line.
fn write_translation(
    f: &mut kernel::fmt::Formatter<'_>,
    t: &uapi::TranslationStats,
    sep: &str,
) -> kernel::fmt::Result {
    for (i, (name, value)) in translation_named(t).into_iter().enumerate() {
        let sep = if i == 0 { "" } else { sep };
        // The kernel's `Display` of a C string, through its adapter.
        write!(f, "{sep}{} {value}", kernel::fmt::Adapter(name))?;
    }
    writeln!(f)
}

impl Nic {
    /// The device's counters for context `index`, since it started.
    pub(crate) fn context_stats(&self, index: u32) -> Result<uapi::TranslationStats> {
        let _table = self.contexts.lock();
        self.with_bar(|bar| {
            bar.write_reg(regs::CTX_SELECT::zeroed().with_context(index));
            translation_stats(|i| bar.read(regs::CTX_COUNTERS::at(i)).count().get())
        })
    }

    /// Renders the statistics for debugfs (`/sys/kernel/debug/pfnicN/stats`).
    pub(crate) fn write_stats(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        let Ok(st) = self.stats() else {
            return writeln!(f, "device unbound");
        };
        writeln!(f, "contexts_active {}", st.contexts_active)?;
        writeln!(f, "contexts_stuck {}", st.contexts_stuck)?;
        writeln!(f, "objects_quarantined {}", st.objects_quarantined)?;
        writeln!(f, "contexts_created {}", st.contexts_created)?;
        writeln!(
            f,
            "contexts_stopped_by_exit {}",
            st.contexts_stopped_by_exit
        )?;
        writeln!(f, "context_failures {}", st.context_failures)?;
        writeln!(f, "interrupts {}", st.interrupts)?;
        write_translation(f, &st.translation, "\n")?;
        self.write_verbs_stats(f)?;
        write!(f, "fault_latency_us_log2")?;
        for c in st.fault_latency_us_log2 {
            write!(f, " {c}")?;
        }
        writeln!(f)?;
        write!(f, "group_pages_log2")?;
        for c in st.group_pages_log2 {
            write!(f, " {c}")?;
        }
        writeln!(f)?;
        // One line per context in use.
        let live: KVec<(u32, u32)> = {
            let table = self.contexts.lock();
            let mut v = KVec::new();
            for (i, slot) in table.slots.iter().enumerate() {
                if let Some(slot) = slot {
                    let pasid = slot.bond.as_ref().map_or(0, |bond| bond.pasid());
                    if v.push((i as u32, pasid), GFP_KERNEL).is_err() {
                        break;
                    }
                }
            }
            v
        };
        for (index, pasid) in live.iter() {
            if let Ok(t) = self.context_stats(*index) {
                write!(f, "context {index} pasid {pasid} ")?;
                write_translation(f, &t, " ")?;
            }
        }
        Ok(())
    }

    /// The answer to `PFNIC_IOCTL_QUERY_STATS`.
    pub(crate) fn stats(&self) -> Result<uapi::DeviceStats> {
        let active = self
            .contexts
            .lock()
            .slots
            .iter()
            .filter(|s| s.is_some())
            .count();
        let mut stats = uapi::DeviceStats {
            contexts_created: self.counters.contexts_created.load(Relaxed),
            contexts_stopped_by_exit: self.counters.contexts_stopped_by_exit.load(Relaxed),
            contexts_stuck: self.counters.contexts_stuck.load(Relaxed),
            objects_quarantined: self.counters.objects_quarantined.load(Relaxed),
            context_failures: self.counters.context_failures.load(Relaxed),
            interrupts: self
                .vectors
                .iter()
                .map(|v| v.interrupts.load(Relaxed))
                .sum(),
            contexts_active: u32::try_from(active).unwrap_or(u32::MAX),
            ..Default::default()
        };
        self.with_bar(|bar| {
            stats.translation =
                translation_stats(|i| bar.read(regs::COUNTERS::at(i)).count().get());
            for (i, bucket) in stats.fault_latency_us_log2.iter_mut().enumerate() {
                *bucket = bar.read(regs::STAT_FAULT_LAT::at(i)).count().get();
            }
            for (i, bucket) in stats.group_pages_log2.iter_mut().enumerate() {
                *bucket = bar.read(regs::STAT_GROUP_PAGES::at(i)).count().get();
            }
        })?;
        Ok(stats)
    }
}
