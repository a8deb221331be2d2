//! An MR's on-demand paging counters, read where `rdma statistic mr` reads them: from the RDMA
//! core's netlink interface (the driver's `page_faults` and `page_fault_groups`, mlx5's names).
//! Read between measurements, never inside one.

use std::cell::RefCell;
use std::io;

use ibv::{Context, Mr};
use rdma_nl::Nldev;

use crate::err;

/// What the benchmark reads of an MR.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MrStats {
    /// Pages the device asked for (page requests, or ODP faults).
    pub page_faults: u64,
    /// The page request groups they went out in.
    pub page_fault_groups: u64,
}

/// The RDMA core's view of one device's MRs.
pub(crate) struct MrCounters {
    nl: RefCell<Nldev>,
    dev: u32,
    name: String,
}

impl MrCounters {
    /// For the MRs of `ctx`'s device.
    pub(crate) fn of(ctx: &Context) -> io::Result<Self> {
        let name = ctx.name();
        let mut nl = Nldev::open().map_err(|e| err(format!("RDMA netlink socket: {e}")))?;
        let dev = nl.device_index(&name)?;
        Ok(Self {
            nl: RefCell::new(nl),
            dev,
            name,
        })
    }

    /// `mr`'s counters now.
    pub(crate) fn read(&self, mr: &Mr) -> io::Result<MrStats> {
        let mut nl = self.nl.borrow_mut();
        let mrn = nl.mr_number(self.dev, mr.rkey())?;
        let c = nl.mr_counters(self.dev, mrn)?;
        let get = |name: &str| {
            c.get(name).ok_or_else(|| {
                err(format!(
                    "{}'s MR {mrn} has no {name} counter: on-demand paging counters are pfnic's \
                     (and mlx5's)",
                    self.name
                ))
            })
        };
        Ok(MrStats {
            page_faults: get("page_faults")?,
            page_fault_groups: get("page_fault_groups")?,
        })
    }
}
