//! pfnic guest test suite. Prints KTAP on standard output; exits non-zero if anything failed.
//!
//! usage: pfnic-test [--list] [FILTER]   (run the tests whose name contains FILTER, or one of
//! its `|`-separated parts)

#[macro_use]
mod ktap;
mod aux_devices;
mod bad_input;
mod c_programs;
mod common;
mod contexts;
mod debian_tools;
mod device;
mod dma;
mod fault_path;
mod ibv_common;
mod inject;
mod interrupts;
mod lifecycle;
mod matrix;
mod matrix_fail_nth;
mod matrix_uffd;
mod mem_modes;
mod perf_tool;
mod rdma_core;
mod rdma_core_suite;
mod security;
mod tools;
mod verbs_async;
mod verbs_common;
mod verbs_cq;
mod verbs_device;
mod verbs_dm;
mod verbs_mr;
mod verbs_odp;
mod verbs_port;
mod verbs_qp;
mod verbs_srq;
mod wire;
mod wire_netdev;

use pfnic_cli::{errln, outln};

/// The command line.
#[derive(clap::Parser)]
#[command(
    name = "pfnic-test",
    about = "The pfnic guest test suite: KTAP on standard output, exit status 1 if a test failed"
)]
struct Args {
    /// Print the tests' names, run nothing
    #[arg(long)]
    list: bool,
    /// Run only the tests whose name contains FILTER, or one of its `|`-separated parts
    filter: Option<String>,
}

fn main() {
    // Read-only tests first; the lifecycle tests unload and reload the driver.
    let all: Vec<&ktap::Test> = [
        device::TESTS,
        interrupts::TESTS,
        bad_input::TESTS,
        contexts::TESTS,
        dma::TESTS,
        verbs_device::TESTS,
        verbs_port::TESTS,
        rdma_core::TESTS,
        rdma_core_suite::TESTS,
        verbs_mr::TESTS,
        verbs_qp::TESTS,
        verbs_cq::TESTS,
        verbs_srq::TESTS,
        verbs_dm::TESTS,
        verbs_async::TESTS,
        verbs_odp::TESTS,
        mem_modes::TESTS,
        perf_tool::TESTS,
        fault_path::TESTS,
        wire::TESTS,
        wire_netdev::TESTS,
        security::TESTS,
        matrix::TESTS,
        matrix_uffd::TESTS,
        matrix_fail_nth::TESTS,
        inject::TESTS,
        c_programs::TESTS,
        debian_tools::TESTS,
        tools::TESTS,
        aux_devices::TESTS,
        lifecycle::TESTS,
    ]
    .concat();
    let args = <Args as clap::Parser>::parse();
    if args.list {
        all.iter().for_each(|t| outln!("{}", t.name));
        return;
    }
    let filter = args.filter.as_deref().unwrap_or("");
    let selected: Vec<&ktap::Test> = all
        .into_iter()
        .filter(|t| filter.split('|').any(|f| t.name.contains(f)))
        .collect();
    if selected.is_empty() {
        errln!("pfnic-test: no test matches {filter:?}");
        std::process::exit(2);
    }
    // The memory mode verbs contexts get (the driver's default, or PFNIC_MEM_MODE's).
    let mem_mode = ibv_common::mem_mode().ok().map(|m| m.name());
    let failed = ktap::run(&selected, mem_mode);
    std::process::exit(i32::from(failed > 0));
}
